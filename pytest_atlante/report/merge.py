"""``atlante report merge``: the shards' partial reports back into the report of one run.

The merge checks that the reports are one run (one run group, one suite digest, one shard count,
one host), that each shard ``1..N`` is there exactly once and that no trial appears twice; then
it rebuilds the report with ``report.build_report`` — the function an unsharded run uses — so
every aggregate and statistic is recomputed over all trials, never averaged from the shards'.

The result depends only on the set of inputs: reports are taken in shard order, scenarios in an
order every shard agrees with, timestamps are the earliest start and the latest finish.  Merging
in any order gives byte-identical output.

Exit status: the run's (0 every trial passed, 1 some did not, 3 a run-level error in a shard);
2 when the inputs are not shard reports of one suite and run; 3 when a shard is missing or
duplicated or a trial appears twice.
"""

from __future__ import annotations

import heapq
import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from pytest_atlante.diagnostics import Diagnostic, DiagnosticError
from pytest_atlante.fsutil import atomic_write_text
from pytest_atlante.records import TrialRecord
from pytest_atlante.report import reader
from pytest_atlante.report.arms import with_arm_comparison
from pytest_atlante.report.exitcodes import EXIT_RUN_ERROR, EXIT_VALIDATION, decide
from pytest_atlante.report.model import EvalReport, MergedShard, RunState, build_report, keyed
from pytest_atlante.report.seal import write_seal

__all__ = ["MergeError", "cmd_merge", "load_shard_reports", "merge_reports"]


class MergeError(DiagnosticError):
    """The inputs cannot be merged; ``status`` is the exit status that says why (2 or 3)."""

    def __init__(self, status: int, diagnostics: list[Diagnostic]) -> None:
        super().__init__(diagnostics)
        self.status = status


_HINT = "pass the report.json each shard wrote"


def load_shard_reports(paths: Sequence[Path]) -> list[tuple[str, EvalReport]]:
    """Read and validate every input with the report's own model; all problems at once (exit 2)."""
    loaded: list[tuple[str, EvalReport]] = []
    problems: list[Diagnostic] = []
    for path in paths:
        try:
            report = reader.read_report(path)
        except reader.ReportRejected as exc:
            problems.extend(reader.diagnostics_for(path, exc, "eval-merge-not-a-report", hint=_HINT,
                                                   unreadable_code="eval-merge-unreadable")[:1])
            continue
        if report.shard is None or report.suiteDigest is None or report.runGroup is None:
            problems.append(Diagnostic(str(path), "$.shard", "eval-merge-not-a-shard",
                                       "this report is not a shard's partial report",
                                       "merge the reports of a run started with --atlante-shard K/N"))
            continue
        loaded.append((str(path), report))
    if problems:
        raise MergeError(EXIT_VALIDATION, problems)
    return loaded


# What every shard of one run has in common: (JSON path, what it is, how to read it).
_SAME: tuple[tuple[str, str, Callable[[EvalReport], object]], ...] = (
    ("$.runGroup", "run group", lambda r: r.runGroup),
    ("$.suiteDigest", "suite digest", lambda r: r.suiteDigest),
    ("$.shard.count", "shard count", lambda r: r.shard.count if r.shard else None),
    ("$.host", "host", lambda r: r.host),
    ("$.scripted", "scripted mode", lambda r: r.scripted),
)


def _disagreements(reports: Sequence[tuple[str, EvalReport]]) -> list[Diagnostic]:
    """One diagnostic per report and field that differs from the value most reports share."""
    problems = []
    for location, what, read in _SAME:
        values = {path: str(read(report)) for path, report in reports}
        if len(set(values.values())) < 2:
            continue
        tally = sorted((-list(values.values()).count(v), v) for v in set(values.values()))
        common = tally[0][1]
        problems += [Diagnostic(path, location, "eval-merge-mixed", f"{what} {value!r} differs from {common!r} of the "
                                "other shard report(s)", "merge only the shards of one run of one suite")
                     for path, value in sorted(values.items()) if value != common]
    return problems


def _check_shards(reports: Sequence[tuple[str, EvalReport]]) -> None:
    """Each shard 1..N exactly once; exit 3 naming the missing or duplicated shard."""
    count = reports[0][1].shard.count if reports[0][1].shard else 0
    seen: dict[int, list[str]] = {}
    for path, report in reports:
        assert report.shard is not None
        seen.setdefault(report.shard.index, []).append(path)
    problems = [Diagnostic(", ".join(sorted(paths)), "$.shard.index", "eval-merge-duplicate-shard",
                           f"shard {index}/{count} is given {len(paths)} times", "pass each shard's report once")
                for index, paths in sorted(seen.items()) if len(paths) > 1]
    problems += [Diagnostic("", "", "eval-merge-missing-shard", f"shard {index}/{count} is missing",
                            f"add the report of the run's shard {index}/{count} (e.g. its CI artifact)")
                 for index in range(1, count + 1) if index not in seen]
    if problems:
        raise MergeError(EXIT_RUN_ERROR, problems)


def _relocated(trial: TrialRecord, report_dir: Path, out_dir: Path | None) -> TrialRecord:
    """Transcript paths are relative to the report's directory: make them relative to the merged one's."""
    if out_dir is None or (trial.transcript is None and trial.hostStream is None):
        return trial

    def move(rel: str | None) -> str | None:
        return None if rel is None else Path(os.path.relpath(report_dir / rel, out_dir)).as_posix()

    return trial.model_copy(update={"transcript": move(trial.transcript), "hostStream": move(trial.hostStream)})


def _trials(reports: Sequence[tuple[str, EvalReport]], out_dir: Path | None) -> list[TrialRecord]:
    owner: dict[tuple[str, int, str | None], str] = {}
    trials: list[TrialRecord] = []
    problems: list[Diagnostic] = []
    for path, report in reports:
        for scenario in report.scenarios:
            for trial in scenario.trials:
                key = (trial.scenario, trial.trial, trial.variant)
                if key in owner:
                    arm = f" ({trial.variant})" if trial.variant is not None else ""
                    problems.append(Diagnostic(path, f"$.scenarios[{scenario.name!r}]", "eval-merge-duplicate-trial",
                                               f"{trial.scenario} trial {trial.trial}{arm} is also in {owner[key]}",
                                               "the shards split differently: rerun them with one atlante version "
                                               "and the same earlier reports (or none) in .atlante/eval/"))
                else:
                    owner[key] = path
                    trials.append(_relocated(trial, Path(path).parent, out_dir))
    if problems:
        raise MergeError(EXIT_RUN_ERROR, problems)
    return trials


Digests = dict[str, tuple[str, str | None]]


def _scenarios(reports: Sequence[tuple[str, EvalReport]]) -> tuple[list[tuple[str, str, str, int]], Digests]:
    """The union of the shards' scenarios, in an order consistent with every shard's own order,
    and their comparability digests.

    Each shard lists its scenarios in collection order, so the lists are subsequences of the
    suite's order; a topological merge recovers it (ties, which no shard orders, by file and name).
    """
    meta: dict[str, tuple[str, str, str | None, str | None]] = {}
    expected: dict[str, int] = {}
    arm_meta: dict[tuple[str, str], str | None] = {}
    after: dict[str, set[str]] = {}
    before_count: dict[str, int] = {}
    for path, report in reports:
        previous: str | None = None
        for scenario in report.scenarios:
            name = scenario.name
            # A variant run's arms share the scenario but not the harness: the digest is the arm's.
            harness = scenario.harnessDigest if scenario.variant is None else None
            mine = (scenario.file, scenario.source, scenario.scenarioDigest, harness)
            if scenario.variant is not None and arm_meta.setdefault((name, scenario.variant), scenario.harnessDigest) \
                    != scenario.harnessDigest:
                mine = (*mine[:3], "mixed")
            if meta.setdefault(name, mine) != mine:
                raise MergeError(EXIT_VALIDATION, [Diagnostic(
                    path, f"$.scenarios[{name!r}]", "eval-merge-mixed",
                    f"scenario {name} differs in file, source or digests from another shard's",
                    "merge only the shards of one suite")])
            expected[name] = expected.get(name, 0) + scenario.expectedTrials
            before_count.setdefault(name, 0)
            if previous == name:
                continue   # the next arm of the same scenario
            if previous is not None and name not in after.setdefault(previous, set()):
                after[previous].add(name)
                before_count[name] += 1
            previous = name
    ready = [(meta[n][0], n) for n, c in before_count.items() if c == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        _, name = heapq.heappop(ready)
        order.append(name)
        for follower in after.get(name, ()):
            before_count[follower] -= 1
            if before_count[follower] == 0:
                heapq.heappush(ready, (meta[follower][0], follower))
    if len(order) != len(meta):  # shards disagree on the order: not one suite's collection
        order += sorted(set(meta) - set(order), key=lambda n: (meta[n][0], n))
    digests = {n: (scenario_digest, harness) for n, (_, _, scenario_digest, harness) in meta.items()
               if scenario_digest is not None}
    return [(n, meta[n][0], meta[n][1], expected[n]) for n in order], digests


def _moment(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def merge_reports(inputs: Sequence[tuple[str, EvalReport]], out_dir: Path | None = None) -> EvalReport:
    """One report from the shard reports of one run (raises :class:`MergeError`).

    With ``out_dir`` (where the merged report goes) each trial's transcript paths are rewritten to
    stay valid from there; the shards' transcript files are not copied.
    """
    if not inputs:
        raise MergeError(EXIT_VALIDATION, [Diagnostic("", "", "eval-merge-no-input", "no shard report given",
                                                      "atlante report merge SHARD_REPORT... -o report.json")])
    mixed = _disagreements(inputs)
    if mixed:
        raise MergeError(EXIT_VALIDATION, mixed)
    reports = sorted(inputs, key=lambda pair: (pair[1].shard.index if pair[1].shard else 0, pair[0]))
    _check_shards(reports)
    trials = _trials(reports, out_dir)
    first = reports[0][1]
    errors = [error for _, report in reports for error in report.errors]
    interrupted = any(r.interrupted for _, r in reports)
    scenarios, digests = _scenarios(reports)
    arm_expected: dict[tuple[str, str], int] | None = None
    if first.arms:
        arm_expected = {}
        for _, report in reports:
            for record in report.scenarios:
                key = (record.name, record.variant or "")
                arm_expected[key] = arm_expected.get(key, 0) + record.expectedTrials
    status = decide(validation_failed=False, run_level_error=bool(errors) or interrupted,
                    verdicts=[t.verdict for t in trials])
    state = RunState(
        run_id=first.runGroup or "", started_at=min(_moment(r.startedAt) for _, r in reports), scripted=first.scripted,
        host=first.host, model=first.model, budget=first.budget, records=keyed(trials), reported_errors=errors,
        interrupted=interrupted, digests=digests,
        # Isolation is stated only when every shard ran its trials the same way.
        isolation=first.isolation if len({str(r.isolation) for _, r in reports}) == 1 else None,
        suite_digest=first.suiteDigest, run_group=first.runGroup, arms=first.arms, arm_expected=arm_expected,
        shards=[MergedShard(index=r.shard.index, count=r.shard.count, runId=r.runId, exitStatus=r.exitStatus,
                            complete=r.complete) for _, r in reports if r.shard is not None],
    )
    return with_arm_comparison(build_report(state, scenarios, finished_at=max(_moment(r.finishedAt) for _, r in reports),
                                            complete=all(r.complete for _, r in reports), exit_status=status))


def cmd_merge(paths: Sequence[Path], out: Path) -> int:
    """The CLI: merge, write ``out`` atomically, print one summary line, exit with the run's status."""
    try:
        report = merge_reports(load_shard_reports(paths), out.resolve().parent)
    except MergeError as exc:
        for problem in sorted(set(exc.diagnostics)):
            print(problem.render(), file=sys.stderr)
        return exc.status
    text = report.to_json()
    atomic_write_text(out, text)
    # The user chose the shards it merges: the merged report is theirs, sealed like a run's
    # (the durations of the next --atlante-shard come from it).
    write_seal(out, text.encode("utf-8", "surrogateescape"))
    counts = ", ".join(f"{n} {v}" for v, n in report.verdicts.items() if n)
    shards = len(report.shards or [])
    print(f"atlante: merged {shards} shard(s) of run group {report.runGroup}: {counts or 'no trials'}; "
          f"exit status {report.exitStatus}; report: {out}")
    return report.exitStatus
