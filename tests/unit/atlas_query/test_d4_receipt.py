"""concurrent-query-receipt-v1: each correctness gate rejects on its own; measurements never gate."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from atlas_query_builders import codes_at, diagnostics_of, write_json
from pytest_atlante.atlas.d4 import U64_MAX, validate_concurrent_receipt

EXAMPLE = Path(__file__).resolve().parents[3] / "example_project/benchmarks/atlas/concurrent-query-receipt-v1.json"
BASE: dict[str, Any] = json.loads(EXAMPLE.read_text())


def _validate(tmp_path: Path, doc: dict[str, Any]) -> object:
    return validate_concurrent_receipt(write_json(tmp_path / "d4.json", doc))


def _edit(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    change(doc)
    return doc


def _index(outcome: str) -> int:
    return next(i for i, r in enumerate(BASE["runs"]) if r["outcome"] == outcome)


def test_checked_in_receipt_is_valid_and_complete() -> None:
    receipt = validate_concurrent_receipt(EXAMPLE)
    assert {r.load_profile for r in receipt.runs} == {"idle", "steady", "burst", "saturated"}
    assert len({r.outcome for r in receipt.runs}) == 7


def test_measurements_at_u64_max_still_pass(tmp_path: Path) -> None:
    def maximise(doc: dict[str, Any]) -> None:
        for run in doc["runs"]:
            run["measurements"] = dict.fromkeys(run["measurements"], U64_MAX)
    receipt: Any = _validate(tmp_path, _edit(maximise))
    assert all(r.measurements.rss_bytes == 2**64 - 1 for r in receipt.runs)


def _drop_outcome(outcome: str) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        doc["runs"] = [r for r in doc["runs"] if r["outcome"] != outcome]
        doc["issued_requests"] = len(doc["runs"])
    return change


def _drop_profile(doc: dict[str, Any]) -> None:
    doc["runs"] = [r for r in doc["runs"] if r["load_profile"] != "burst"]
    doc["issued_requests"] = len(doc["runs"])


OK = _index("ok")
FAILED = _index("failed")
CANCELLED = _index("cancelled")
CASES: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    ("unknown-field", lambda d: d["runs"][0].update(note="x"), "atlas-d4-unknown-field", "$.runs[0].note"),
    ("unknown-measurement", lambda d: d["runs"][1]["measurements"].update(gpu_us=1),
     "atlas-d4-unknown-field", "$.runs[1].measurements.gpu_us"),
    ("wrong-schema", lambda d: d.update(schema="agent-spec/atlas-eval/concurrent-query-receipt-v0"),
     "atlas-d4-invalid", "$.schema"),
    ("measurement-above-u64", lambda d: d["runs"][0]["measurements"].update(cpu_us=U64_MAX + 1),
     "atlas-d4-invalid", "$.runs[0].measurements.cpu_us"),
    ("duplicate-request-id", lambda d: d["runs"][3].update(request_id=d["runs"][0]["request_id"]),
     "atlas-d4-duplicate-request", "$.runs[3].request_id"),
    ("mixed-generation", lambda d: d["runs"][2].update(generation=8), "atlas-d4-mixed-snapshot", "$.runs[2]"),
    ("mixed-fingerprint", lambda d: d["runs"][4].update(graph_fingerprint="0" * 64),
     "atlas-d4-mixed-snapshot", "$.runs[4]"),
    ("missing-failed-run", lambda d: d["runs"].pop(FAILED), "atlas-d4-missing-runs", "$.runs"),
    ("answer-without-digest", lambda d: d["runs"][OK].update(result_digest=None),
     "atlas-d4-outcome-digest", f"$.runs[{OK}]"),
    ("answer-with-error-code", lambda d: d["runs"][OK].update(error_code="x"),
     "atlas-d4-outcome-digest", f"$.runs[{OK}]"),
    ("failure-with-digest", lambda d: d["runs"][FAILED].update(result_digest="1" * 64),
     "atlas-d4-outcome-digest", f"$.runs[{FAILED}]"),
    ("failure-without-error-code", lambda d: d["runs"][FAILED].update(error_code=None),
     "atlas-d4-outcome-digest", f"$.runs[{FAILED}]"),
    ("retained-reader-lease", lambda d: d["runs"][OK]["reader_lease"].update(released=False),
     "atlas-d4-reader-lease", f"$.runs[{OK}].reader_lease"),
    ("pool-busy", lambda d: d["final_pool"].update(state="busy"), "atlas-d4-pool-not-idle", "$.final_pool"),
    ("pool-leased-reader", lambda d: d["final_pool"].update(leased_readers=1),
     "atlas-d4-pool-not-idle", "$.final_pool"),
    ("pool-queued", lambda d: d["final_pool"].update(queued_requests=2), "atlas-d4-pool-not-idle", "$.final_pool"),
    ("worktree-head-missing", lambda d: d["worktree"].pop("head"), "atlas-d4-incomplete-identity", "$.worktree"),
    ("worktree-root-empty", lambda d: d["worktree"].update(root_id=""),
     "atlas-d4-incomplete-identity", "$.worktree"),
    ("fallback-reason-missing", lambda d: d["runs"][-1]["fallback"].pop("reason"),
     "atlas-d4-incomplete-identity", f"$.runs[{len(BASE['runs']) - 1}].fallback"),
    ("profile-missing", _drop_profile, "atlas-d4-matrix-incomplete", "$.runs"),
    ("outcome-missing", _drop_outcome("stale"), "atlas-d4-matrix-incomplete", "$.runs"),
    ("parity-digest-differs", lambda d: d["runs"][OK].update(result_digest="2" * 64), "atlas-d4-parity", "$.runs"),
    ("parity-mode-missing", lambda d: d["runs"][OK + 1].update(parity_key=None), "atlas-d4-parity", "$.runs"),
]


@pytest.mark.parametrize(("change", "code", "location"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rejection(tmp_path: Path, change: Callable[[dict[str, Any]], None], code: str, location: str) -> None:
    found = codes_at(diagnostics_of(lambda: _validate(tmp_path, _edit(change))))
    assert (code, location) in found, found


def test_cancelled_run_may_hold_no_lease() -> None:
    assert BASE["runs"][CANCELLED]["reader_lease"] == {"acquired": False, "released": False}


def test_missing_file_is_unreadable(tmp_path: Path) -> None:
    diags = diagnostics_of(lambda: validate_concurrent_receipt(tmp_path / "none.json"))
    assert [d.code for d in diags] == ["atlas-d4-unreadable"]
