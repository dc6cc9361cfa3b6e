"""``--atlante-max-cost``: the spend a run has recorded, and how its trials learn the cap was reached.

The controller records each trial's ``costUsd`` as the trial's report arrives and publishes the
recorded costs (by node id) in the run's temp directory (``$TMPDIR/atlante-eval-<run-id>/spent.json``,
beside the trial sandboxes).  Just before a trial starts, its process adds up the published costs and
the costs of the trials it ran itself (in a serial run the controller is that process and reads its
own records, never the file): once that spend is at or above the cap, the trial is recorded
``skipped-budget`` without a session.

The ledger is a file a trial can write with isolation off (under namespace isolation ``$TMPDIR`` is a
private mount), so nothing a trial writes there counts (docs/integrity.md, "The cost-cap ledger"):
every publication carries an HMAC-SHA256 keyed by a random per-run key the controller makes and
hands to its workers in ``workerinput`` (never in an environment or a file), and a sequence number.
A reader uses a publication only when its MAC verifies and its sequence is not older than one it
already used; anything else (a forged spend, an old publication copied back, a FIFO, junk) leaves
it with what it knew.  The controller and its workers of a capped run make themselves undumpable
(:func:`undumpable`, ``PR_SET_DUMPABLE`` 0) so that a process of the same user cannot read the key
out of their memory through ``/proc/<pid>/mem``.

What is guaranteed (and documented in docs/reference.md):

- serial: a trial starts only while the spend of every finished trial is below the cap, so the run
  stops after the one trial that reaches it;
- ``-n N``: no trial starts once the spend recorded by the controller, plus the spend of the trials
  its own worker finished, is at or above the cap.  Trials already running on other workers then
  finish and their cost is recorded (so the run can exceed the cap by what up to N-1 running trials
  spend), and a worker may start one more trial while another worker's report that reaches the cap
  is still on its way to the controller (milliseconds) — or while a trial has removed the ledger,
  until the controller publishes again.  Workers must share the controller's temp directory (local
  ``-n``; remote xdist gateways are not covered).

A trial whose cost cannot be established (its host reported none, or named a model the price table
does not list) counts its tokens at the most expensive listed model (:func:`charged`), never as
free; the report still counts such trials as ``unpricedTrials``.  Only a trial with no counted
token adds nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import hmac
import json
import math
import secrets
import sys
from collections.abc import Iterable, Mapping

from pytest_atlante.fsutil import UnreadableFile, atomic_write_text, read_capped
from pytest_atlante.hosts.prices import ceiling_cost
from pytest_atlante.records import TrialRecord
from pytest_atlante.report.model import CostCapRecord
from pytest_atlante.sandbox.trialdir import run_dir

SPENT_FILE = "spent.json"


def charged(record: TrialRecord) -> float | None:
    """What a trial that ran counts against the cap: its recorded cost; without one, its metered
    tokens at the most expensive listed model (``hosts/prices.ceiling_cost``: a trial whose model
    cannot be priced — an unlisted model, or one the agent named in a file it can rewrite — is never
    free); None only when it used no counted token."""
    if record.costUsd is not None and math.isfinite(record.costUsd):
        return record.costUsd
    usage = record.usage
    if usage is None or usage.total <= 0:
        return None
    return ceiling_cost(usage.inputTokens + usage.cacheReadTokens, usage.cacheReadTokens, usage.outputTokens)[0]


def costs(records: Iterable[TrialRecord]) -> dict[str, float]:
    """What every trial that ran counts against the cap (:func:`charged`), by node id."""
    return {r.nodeId: cost for r in records if r.verdict != "skipped-budget" and (cost := charged(r)) is not None}


def spent(records: Iterable[TrialRecord]) -> tuple[float, int]:
    """(spend counted against the cap in USD, trials that ran but reported no cost)."""
    total, unpriced = 0.0, 0
    for record in records:
        if record.verdict == "skipped-budget":
            continue
        if record.costUsd is None or not math.isfinite(record.costUsd):
            unpriced += 1
        total += charged(record) or 0.0
    return total, unpriced


# A ledger is a handful of node ids and costs; a bigger file is not one.
_MAX_LEDGER_BYTES = 4 << 20
_PR_SET_DUMPABLE = 4


class Ledger:
    """The controller's published spend, as the controller writes it and as a worker reads it."""

    def __init__(self, run_id: str, key: bytes) -> None:
        self.run_id = run_id
        self.key = key
        self._sequence = 0            # the controller: last written; a worker: last accepted
        self._known: dict[str, float] = {}

    @classmethod
    def new(cls, run_id: str) -> Ledger:
        """The controller's ledger, with a fresh key (its workers get ``key`` in ``workerinput``)."""
        return cls(run_id, secrets.token_bytes(32))

    def publish(self, recorded: Mapping[str, float]) -> None:
        self._sequence += 1
        body = json.dumps({"run": self.run_id, "sequence": self._sequence, "costs": dict(recorded)})
        directory = run_dir(self.run_id)
        # A trial that put a directory or a read-only file in the way stops this publication only:
        # workers keep the last authentic one, and the controller decides from its own records.
        with contextlib.suppress(OSError):
            directory.mkdir(mode=0o700, exist_ok=True)
            atomic_write_text(directory / SPENT_FILE, json.dumps({"mac": self._mac(body), "body": body}))

    def published(self) -> dict[str, float]:
        """The costs the controller last published: the newest authentic publication this reader
        has seen (none before the first trial finished)."""
        body = self._authentic_body()
        if body is not None and body.get("run") == self.run_id:
            sequence, recorded = body.get("sequence"), body.get("costs")
            if isinstance(sequence, int) and sequence >= self._sequence and isinstance(recorded, dict):
                self._sequence = sequence
                self._known = {str(k): float(v) for k, v in recorded.items()
                               if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0}
        return dict(self._known)

    def spend_before_trial(self, own: Iterable[TrialRecord]) -> float:
        """A worker's view of the run's spend: published costs and its own trials' (each counted once)."""
        return sum({**self.published(), **costs(own)}.values())

    def _mac(self, body: str) -> str:
        return hmac.new(self.key, body.encode("utf-8"), hashlib.sha256).hexdigest()

    def _authentic_body(self) -> dict[str, object] | None:
        try:
            document = json.loads(read_capped(run_dir(self.run_id) / SPENT_FILE, _MAX_LEDGER_BYTES, follow_symlinks=False))
            mac, body = document["mac"], document["body"]
            if not (isinstance(mac, str) and isinstance(body, str) and hmac.compare_digest(mac, self._mac(body))):
                return None
            parsed = json.loads(body)
        except (UnreadableFile, ValueError, TypeError, KeyError, RecursionError):
            return None
        return parsed if isinstance(parsed, dict) else None


def undumpable() -> None:
    """Make this process undumpable, so another process of the user (a trial's agent, with
    isolation off) cannot read its memory (the ledger key) through ``/proc/<pid>/mem`` or ptrace.
    Linux only; elsewhere, and where ``prctl`` fails, a no-op (docs/integrity.md says so)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        return


def skipped_record(base: TrialRecord, cap: float, amount: float) -> TrialRecord:
    return base.model_copy(update={"verdict": "skipped-budget",
                                   "error": f"--atlante-max-cost {cap:g} reached: ${amount:.4f} recorded before this trial started"})


def summary(cap: float, records: Iterable[TrialRecord]) -> CostCapRecord:
    listed = list(records)
    amount, unpriced = spent(listed)
    skipped = sum(1 for r in listed if r.verdict == "skipped-budget" and r.error is not None and r.error.startswith("--atlante-max-cost"))
    return CostCapRecord(capUsd=cap, spentUsd=amount, reached=amount >= cap, skippedTrials=skipped, unpricedTrials=unpriced)
