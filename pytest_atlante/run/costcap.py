"""``--atlante-max-cost``: the spend a run has recorded, and how its trials learn the cap was reached.

The controller records each trial's ``costUsd`` as the trial's report arrives and publishes the
recorded costs (by node id) in the run's temp directory (``$TMPDIR/atlante-eval-<run-id>/spent.json``,
beside the trial sandboxes).  Just before a trial starts, its process adds up the published costs and
the costs of the trials it ran itself (in a serial run the controller is that process and reads its
own records): once that spend is at or above the cap, the trial is recorded ``skipped-budget``
without a session.

What is guaranteed (and documented in the README):

- serial: a trial starts only while the spend of every finished trial is below the cap, so the run
  stops after the one trial that reaches it;
- ``-n N``: no trial starts once the spend recorded by the controller, plus the spend of the trials
  its own worker finished, is at or above the cap.  Trials already running on other workers then
  finish and their cost is recorded (so the run can exceed the cap by what up to N-1 running trials
  spend), and a worker may start one more trial while another worker's report that reaches the cap
  is still on its way to the controller (milliseconds).  Workers must share the controller's temp
  directory (local ``-n``; remote xdist gateways are not covered).

A trial whose host reported no cost adds nothing to the spend; the report counts such trials as
``unpricedTrials`` so a cap that saw only part of the spend says so.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping

from pytest_atlante.fsutil import atomic_write_text
from pytest_atlante.records import TrialRecord
from pytest_atlante.report.model import CostCapRecord
from pytest_atlante.sandbox.trialdir import run_dir

SPENT_FILE = "spent.json"


def costs(records: Iterable[TrialRecord]) -> dict[str, float]:
    """The recorded cost of every trial that ran and reported one, by node id."""
    return {r.nodeId: r.costUsd for r in records
            if r.verdict != "skipped-budget" and r.costUsd is not None and math.isfinite(r.costUsd)}


def spent(records: Iterable[TrialRecord]) -> tuple[float, int]:
    """(recorded spend in USD, trials that ran but reported no cost)."""
    total, unpriced = 0.0, 0
    for record in records:
        if record.verdict == "skipped-budget":
            continue
        if record.costUsd is None or not math.isfinite(record.costUsd):
            unpriced += 1
        else:
            total += record.costUsd
    return total, unpriced


def publish(run_id: str, recorded: Mapping[str, float]) -> None:
    directory = run_dir(run_id)
    directory.mkdir(mode=0o700, exist_ok=True)
    atomic_write_text(directory / SPENT_FILE, json.dumps(dict(recorded)))


def published(run_id: str) -> dict[str, float]:
    """The costs the controller last published (none before the first trial finished)."""
    try:
        loaded = json.loads((run_dir(run_id) / SPENT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(loaded, dict):
        return {}
    return {str(k): float(v) for k, v in loaded.items() if isinstance(v, (int, float))}


def spend_before_trial(run_id: str, own: Iterable[TrialRecord]) -> float:
    """A worker's view of the run's spend: published costs and its own trials' (each counted once)."""
    return sum({**published(run_id), **costs(own)}.values())


def skipped_record(base: TrialRecord, cap: float, amount: float) -> TrialRecord:
    return base.model_copy(update={"verdict": "skipped-budget",
                                   "error": f"--atlante-max-cost {cap:g} reached: ${amount:.4f} recorded before this trial started"})


def summary(cap: float, records: Iterable[TrialRecord]) -> CostCapRecord:
    listed = list(records)
    amount, unpriced = spent(listed)
    skipped = sum(1 for r in listed if r.verdict == "skipped-budget" and r.error is not None and r.error.startswith("--atlante-max-cost"))
    return CostCapRecord(capUsd=cap, spentUsd=amount, reached=amount >= cap, skippedTrials=skipped, unpricedTrials=unpriced)
