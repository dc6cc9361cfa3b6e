"""Shards: one eval run split across CI machines, without the machines talking to each other.

Every shard collects the whole suite and allocates ``maxSessions`` over all of it (``budget.allocate``),
exactly as an unsharded run does, and only then keeps its share of the trials.  So the trials that
``maxSessions`` skips are the same whatever the split, and ``atlante report merge`` can put the
partial reports back together as one run.

The split is a pure function of the ordered trials, the scenarios' expected durations and the shard
count: every shard computes the same assignment.  A scenario's trials stay on one shard where the
balance allows it (so a shard's per-scenario statistics mean something); a scenario heavier than a
fair share, or too few scenarios for the shards, is split into consecutive halves.

``suite_digest`` names the suite (documents, budget, host, model, mode); the run group
(``--atlante-run-group``, by default the digest plus the CI's run id) names one run, so shards of
another suite or another CI run cannot be merged by mistake.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_atlante.fsutil import fingerprint
from pytest_atlante.suite.discovery import ValidSuite

# CI variables that identify one run of a pipeline (and its re-run attempt), in the order they are
# joined into the default run group.  Absent ones are skipped.
CI_RUN_VARIABLES = ("GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT", "CI_PIPELINE_ID", "BUILDKITE_BUILD_ID",
                    "BUILDKITE_RETRY_COUNT", "CIRCLE_WORKFLOW_ID", "BUILD_ID")
REPORT_GLOB = ".atlante/eval/*/report.json"

TrialRef = tuple[str, int] | tuple[str, int, str]  # (scenario name, trial number[, arm of a variant run])


@dataclass(frozen=True)
class ShardSpec:
    index: int  # 1-based
    count: int


def suite_digest(suite: ValidSuite, *, scripted: bool, digests: Mapping[str, tuple[str, str | None]] | None) -> str:
    """``sha256:<hex>`` over what decides which trials a run has and how they run.

    The eval section (host, model, budget), the scenarios in order with their display paths
    (relative, so one checkout on two machines agrees) and sources, and each scenario's
    comparability digests (document, fixture tree, script; harness — ``digests.py``).
    """
    return fingerprint({
        "eval": suite.eval.model_dump(mode="json"),
        "scripted": scripted,
        "scenarios": [{"display": e.display, "source": e.source, "scenario": e.scenario.model_dump(mode="json"),
                       "digests": list((digests or {}).get(e.scenario.name, (None, None)))}
                      for e in suite.scenarios],
    })


def default_run_group(digest: str, environ: Mapping[str, str]) -> str:
    """The digest's first 16 hex digits plus the CI run id variables that are set (``-`` joined)."""
    parts = [digest.split(":", 1)[-1][:16]]
    parts += [environ[name] for name in CI_RUN_VARIABLES if environ.get(name)]
    return "-".join(parts)


def expected_durations(project_root: Path) -> dict[str, float]:
    """Mean trial duration (ms) per scenario from the newest earlier report that ran it.

    Only whole-run reports count (unsharded or merged), never a shard's partial one: shards of the
    current run started side by side must not see each other's reports, or they could split
    differently.  Unreadable reports are ignored — this is a hint.
    """
    # Imported here: the report model is the controller's, and xdist workers import this module.
    from pytest_atlante.report import reader

    found: dict[str, tuple[str, float]] = {}
    for path in sorted(project_root.glob(REPORT_GLOB)):
        try:  # capped, no FIFO waited on, and only a report a run of this user's wrote (report/seal.py)
            report = reader.read_report(path, sealed=True)
        except reader.ReportRejected:
            continue
        if report.shard is not None:
            continue
        for scenario in report.scenarios:
            ran = [t for t in scenario.trials if t.verdict != "skipped-budget"]
            mean = scenario.meanDurationMs
            if ran and mean > 0 and (scenario.name not in found or found[scenario.name][0] < report.finishedAt):
                found[scenario.name] = (report.finishedAt, float(mean))
    return {name: mean for name, (_, mean) in found.items()}


@dataclass
class _Unit:
    trials: list[TrialRef]
    weight: float
    first: int  # position of its first trial in collection order (the deterministic tie-break)


def split(trials: Sequence[tuple[TrialRef, bool]], durations: Mapping[str, float], count: int) -> dict[TrialRef, int]:
    """Assign each ``(trial, allocated)`` (in collection order) to a shard ``1..count``.

    A trial's weight is its scenario's expected duration (the mean of the known ones for a scenario
    never run before, 1 when nothing is known: balance by count); an unallocated trial costs
    nothing.  Scenarios are the units, placed heaviest first on the least-loaded shard
    (longest-processing-time first).  The heaviest unit is halved while there are fewer units than
    shards, or while halving it shortens the slowest shard — only then is a scenario split.
    """
    known = list(durations.values())
    fallback = sum(known) / len(known) if known else 1.0
    weight = {ref: (durations.get(ref[0], fallback) if allocated else 0.0) for ref, allocated in trials}
    position = {ref: index for index, (ref, _) in enumerate(trials)}
    units: list[_Unit] = []
    for ref, _ in trials:
        if units and units[-1].trials[-1][0] == ref[0]:
            units[-1].trials.append(ref)
            units[-1].weight += weight[ref]
        else:
            units.append(_Unit([ref], weight[ref], position[ref]))
    assignment, slowest = _place(units, count)
    while True:
        splittable = [u for u in units if len(u.trials) > 1]
        if not splittable:
            return assignment
        heaviest = max(splittable, key=lambda u: (u.weight, -u.first))
        half = (len(heaviest.trials) + 1) // 2
        head, tail = heaviest.trials[:half], heaviest.trials[half:]
        candidate = [u for u in units if u is not heaviest] + [
            _Unit(head, sum(weight[r] for r in head), position[head[0]]),
            _Unit(tail, sum(weight[r] for r in tail), position[tail[0]])]
        placed, makespan = _place(candidate, count)
        if len(units) >= count and makespan >= slowest:
            return assignment
        units, assignment, slowest = candidate, placed, makespan


def _place(units: Sequence[_Unit], count: int) -> tuple[dict[TrialRef, int], float]:
    """Longest-processing-time-first placement; returns the assignment and the slowest shard's load."""
    loads = [0.0] * count
    sizes = [0] * count
    assignment: dict[TrialRef, int] = {}
    for unit in sorted(units, key=lambda u: (-u.weight, u.first)):
        # Equal loads (e.g. zero-weight skipped trials) go to the shard with fewer trials.
        target = min(range(count), key=lambda i: (loads[i], sizes[i], i))
        loads[target] += unit.weight
        sizes[target] += len(unit.trials)
        for ref in unit.trials:
            assignment[ref] = target + 1
    return assignment, max(loads)


def environ_run_group(explicit: str | None, digest: str) -> str:
    return explicit or default_run_group(digest, os.environ)


__all__ = ["ShardSpec", "default_run_group", "environ_run_group", "expected_durations", "split", "suite_digest"]
