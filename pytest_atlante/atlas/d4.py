"""Strict parser for the D4 ``concurrent-query-receipt-v1`` (the concurrency correctness matrix).

The reference lists the rejections but not the shape; the shape is our design, documented in
``docs/atlas-query.md``.  Correctness gates: one snapshot (generation + graph fingerprint) for
every run, unique request ids, every issued request accounted for (failed runs included), outcome
and digest agreeing, direct/worker parity, every reader lease released, an idle final pool,
complete worktree and fallback identity, and a matrix covering all four B5 load profiles and all
seven outcomes.  ``measurements`` are recorded and bounded only by their type (unsigned 64-bit):
no value of them can fail validation, so the matrix never hides a performance threshold.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pytest_atlante.atlas.context import LOAD_PROFILES, LoadProfile
from pytest_atlante.atlas.query_loading import parse_model, read_bytes
from pytest_atlante.diagnostics import Diagnostic, DiagnosticError

CONCURRENT_RECEIPT_SCHEMA = "agent-spec/atlas-eval/concurrent-query-receipt-v1"
PREFIX = "atlas-d4"
U64_MAX = 2**64 - 1
# Outcomes that carry an answer (and so a result digest) versus outcomes that carry an error code.
ANSWER_OUTCOMES: tuple[str, ...] = ("ok", "truncated", "degraded", "stale")
ERROR_OUTCOMES: tuple[str, ...] = ("cancelled", "timed-out", "failed")
Outcome = Literal["ok", "truncated", "degraded", "stale", "cancelled", "timed-out", "failed"]
ServingMode = Literal["direct", "worker"]
_HEX64 = r"^[0-9a-f]{64}$"
_HINT = "fix the field to match concurrent-query-receipt-v1 (see docs/atlas-query.md)"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Snapshot(_Strict):
    generation: int = Field(ge=0)
    graph_fingerprint: str = Field(pattern=_HEX64)


class WorktreeIdentity(_Strict):
    """Optional fields on purpose: a missing one is reported as incomplete identity, not a type error."""

    root_id: str | None = None
    head: str | None = None
    dirty_digest: str | None = None


class FallbackIdentity(_Strict):
    from_mode: ServingMode | None = None
    to_mode: ServingMode | None = None
    reason: str | None = None
    worker_id: str | None = None


class ReaderLease(_Strict):
    acquired: bool
    released: bool


class Measurements(_Strict):
    queue_wait_us: int = Field(ge=0, le=U64_MAX)
    service_time_us: int = Field(ge=0, le=U64_MAX)
    heartbeat_lag_us: int = Field(ge=0, le=U64_MAX)
    response_bytes: int = Field(ge=0, le=U64_MAX)
    cpu_us: int = Field(ge=0, le=U64_MAX)
    rss_bytes: int = Field(ge=0, le=U64_MAX)


class Run(_Strict):
    request_id: str = Field(min_length=1)
    serving_mode: ServingMode
    load_profile: LoadProfile
    parity_key: str | None = None
    outcome: Outcome
    generation: int = Field(ge=0)
    graph_fingerprint: str = Field(pattern=_HEX64)
    result_digest: str | None = Field(default=None, pattern=_HEX64)
    error_code: str | None = None
    reader_lease: ReaderLease
    fallback: FallbackIdentity | None = None
    measurements: Measurements


class FinalPool(_Strict):
    state: Literal["idle", "busy", "draining"]
    active_workers: int = Field(ge=0)
    queued_requests: int = Field(ge=0)
    leased_readers: int = Field(ge=0)


class ConcurrentQueryReceipt(_Strict):
    schema_: Literal["agent-spec/atlas-eval/concurrent-query-receipt-v1"] = Field(alias="schema")
    snapshot: Snapshot
    worktree: WorktreeIdentity
    issued_requests: int = Field(ge=0)
    runs: list[Run]
    final_pool: FinalPool


class _Found:
    def __init__(self, file: str) -> None:
        self.file = file
        self.items: list[Diagnostic] = []

    def add(self, location: str, code: str, message: str, hint: str) -> None:
        self.items.append(Diagnostic(self.file, location, f"{PREFIX}-{code}", message, hint))


def _identity_gaps(identity: BaseModel) -> list[str]:
    return [name for name, value in identity if value is None or value == ""]


def _run_rules(out: _Found, receipt: ConcurrentQueryReceipt) -> None:
    seen: dict[str, int] = {}
    snap = receipt.snapshot
    for index, run in enumerate(receipt.runs):
        at = f"$.runs[{index}]"
        if run.request_id in seen:
            out.add(f"{at}.request_id", "duplicate-request",
                    f"request id {run.request_id!r} already used by $.runs[{seen[run.request_id]}]",
                    "every request in the matrix needs its own id")
        seen.setdefault(run.request_id, index)
        if (run.generation, run.graph_fingerprint) != (snap.generation, snap.graph_fingerprint):
            out.add(at, "mixed-snapshot",
                    f"run saw generation {run.generation} / {run.graph_fingerprint[:12]}…, "
                    f"the receipt's snapshot is {snap.generation} / {snap.graph_fingerprint[:12]}…",
                    "every run of one matrix must read the same pinned snapshot")
        answered = run.outcome in ANSWER_OUTCOMES
        if answered != (run.result_digest is not None) or answered == bool(run.error_code):
            want = "a result_digest and no error_code" if answered else "an error_code and no result_digest"
            out.add(at, "outcome-digest", f"outcome {run.outcome!r} requires {want}",
                    "answers carry a digest; cancelled, timed-out and failed runs carry an error code")
        if run.reader_lease.acquired and not run.reader_lease.released:
            out.add(f"{at}.reader_lease", "reader-lease", f"request {run.request_id!r} kept its reader lease",
                    "a finished request must release its snapshot reader lease")
        if run.fallback is not None and (gaps := _identity_gaps(run.fallback)):
            out.add(f"{at}.fallback", "incomplete-identity", "fallback identity lacks " + ", ".join(gaps),
                    "record from_mode, to_mode, reason and worker_id for every fallback")


def _parity_rules(out: _Found, receipt: ConcurrentQueryReceipt) -> None:
    groups: dict[str, list[Run]] = {}
    for run in receipt.runs:
        if run.parity_key is not None:
            groups.setdefault(run.parity_key, []).append(run)
    for key, runs in groups.items():
        modes = {r.serving_mode for r in runs}
        answers = {(r.outcome, r.result_digest) for r in runs}
        if modes != {"direct", "worker"} or len(answers) != 1:
            out.add("$.runs", "parity",
                    f"parity group {key!r} lacks a direct or worker run, or their outcome/digest differ",
                    "direct and worker serving must return the same typed outcome and digest")


def _matrix_rules(out: _Found, receipt: ConcurrentQueryReceipt) -> None:
    if receipt.issued_requests != len(receipt.runs):
        out.add("$.runs", "missing-runs",
                f"{receipt.issued_requests} requests were issued but {len(receipt.runs)} runs are recorded",
                "record every issued request, failed ones included")
    profiles = {r.load_profile for r in receipt.runs}
    if missing := [p for p in LOAD_PROFILES if p not in profiles]:
        out.add("$.runs", "matrix-incomplete", "no run under load profile(s) " + ", ".join(missing),
                "cover all four B5 load profiles")
    outcomes = {r.outcome for r in receipt.runs}
    if missing := [o for o in ANSWER_OUTCOMES + ERROR_OUTCOMES if o not in outcomes]:
        out.add("$.runs", "matrix-incomplete", "no run with outcome(s) " + ", ".join(missing),
                "cover all seven query outcomes")
    pool = receipt.final_pool
    if pool.state != "idle" or pool.active_workers or pool.queued_requests or pool.leased_readers:
        out.add("$.final_pool", "pool-not-idle",
                f"final pool is {pool.state} with {pool.active_workers} worker(s), "
                f"{pool.queued_requests} queued, {pool.leased_readers} leased reader(s)",
                "the matrix must end with an idle pool: no workers, queue or leases left")
    if gaps := _identity_gaps(receipt.worktree):
        out.add("$.worktree", "incomplete-identity", "worktree identity lacks " + ", ".join(gaps),
                "record root_id, head and dirty_digest")


def receipt_problems(receipt: ConcurrentQueryReceipt, file: str) -> list[Diagnostic]:
    out = _Found(file)
    _run_rules(out, receipt)
    _parity_rules(out, receipt)
    _matrix_rules(out, receipt)
    return out.items


def validate_concurrent_receipt(path: Path) -> ConcurrentQueryReceipt:
    """Parse and gate a D4 receipt; raise ``DiagnosticError`` with every violation found."""
    receipt = parse_model(read_bytes(path, PREFIX), ConcurrentQueryReceipt, str(path), PREFIX, _HINT)
    if problems := receipt_problems(receipt, str(path)):
        raise DiagnosticError(problems)
    return receipt
