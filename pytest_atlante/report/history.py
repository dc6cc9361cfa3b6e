"""``atlante history``: each scenario across the project's recent runs.

Read from the sealed, complete reports under ``<project>/.atlante/eval/`` (newest first, the last
``--last`` of them, 20 by default): a shard's partial report, a report with ``complete: false`` or
``interrupted: true`` and an unsealed report (one no run of this user's wrote: ``report/seal.py``)
are passed over.  Per scenario:

- its **outcome** in each run: ``pass`` when every trial that ran passed, ``fail`` when one did not,
  ``not-run`` when none ran; shown oldest to newest as one compact line (``P``, ``F``, ``-``);
- its pass rate over the window's trials, with a Wilson 95% interval (trials of all runs pooled);
- its **flip rate**: the consecutive pairs of *comparable* runs (the scenario's digest, the harness
  digest, the host version and the configured model — ``scripted`` for a scripted run — all equal,
  both runs with an outcome) whose outcomes differ, divided by the number of such pairs;
- its **change points**: where one of those four changed between two consecutive runs, and how, so
  a drop in the pass rate is tied to the change that came with it;
- a **status**: ``newly-failing`` (the latest run failed and every earlier run comparable with it,
  back to the last change point, passed: at least one), ``flaky`` (flip rate above
  :data:`FLAKY_FLIP_RATE` over at least :data:`FLAKY_MIN_PAIRS` comparable pairs), else
  ``failing``, ``passing`` or ``not-run`` by the latest outcome.  Those two come first.

Nothing here decides a run's exit status: the history informs, it never blocks.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pytest_atlante.fsutil import DIGEST_PREFIX
from pytest_atlante.records import Record, Verdict
from pytest_atlante.report import reader
from pytest_atlante.report import stats as evalstats
from pytest_atlante.report.model import REPORT_FILE, ReportSchema, Timestamp
from pytest_atlante.report.runs import run_dirs

__all__ = ["DEFAULT_WINDOW", "FLAKY_FLIP_RATE", "FLAKY_MIN_PAIRS", "History", "ScenarioHistory",
           "history_command", "render_history", "scenario_history", "sealed_complete_reports"]

DEFAULT_WINDOW = 20
#: A scenario whose outcome flips between comparable runs more often than this is ``flaky``.  A
#: scenario passing a run with probability p flips 2p(1 − p) of the time: 0.3 is crossed for p
#: between about 0.19 and 0.81, so a scenario that almost always passes (or fails) is not flaky.
FLAKY_FLIP_RATE = 0.3
#: Fewer comparable pairs than this say nothing about flakiness.
FLAKY_MIN_PAIRS = 3
HISTORY_SCHEMA: Literal["atlante/history-v1"] = "atlante/history-v1"
HISTORY_INPUT_CODE = "history-input"

Outcome = Literal["pass", "fail", "not-run"]
Status = Literal["newly-failing", "flaky", "failing", "passing", "not-run"]
_MARK: dict[Outcome, str] = {"pass": "P", "fail": "F", "not-run": "-"}
_STATUS_ORDER: dict[Status, int] = {"newly-failing": 0, "flaky": 1, "failing": 2, "passing": 3, "not-run": 4}
COMPONENTS = ("scenario", "harness", "hostVersion", "model")


# --------------------------------------------------------------------------- what history reads


class _View(BaseModel):
    """The fields of a report history needs; the rest of the (sealed) document is not validated."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class TrialView(_View):
    verdict: Verdict


class ScenarioView(_View):
    name: str
    passRate: float | None
    trials: list[TrialView]
    scenarioDigest: str | None = None
    harnessDigest: str | None = None

    def passed_and_ran(self) -> tuple[int, int]:
        ran = [t for t in self.trials if t.verdict != "skipped-budget"]
        return sum(1 for t in ran if t.verdict == "pass"), len(ran)


class HostView(_View):
    name: str
    version: str


class ShardView(_View):
    index: int
    count: int


class ReportView(_View):
    """A sealed ``report.json`` as history reads it (``reader.read_sealed_as``)."""

    schema_: ReportSchema = Field(alias="schema")
    runId: str
    startedAt: Timestamp
    complete: bool
    interrupted: bool
    scripted: bool
    model: str | None
    host: HostView | None
    shard: ShardView | None = None
    scenarios: list[ScenarioView]


def usable(report: ReportView) -> bool:
    """A report history counts: a whole run that finished (a merged report is one; a shard is not)."""
    return report.complete and not report.interrupted and report.shard is None


def sealed_complete_reports(project_root: Path, limit: int | None = None) -> list[ReportView]:
    """The project's sealed, complete run reports, newest first, at most ``limit`` of them.

    The run folders as ``atlante runs`` lists them (``runs.run_dirs``: real directories, newest
    first), each ``report.json`` read narrow: only reports whose seal verifies (``reader.read_sealed_as``),
    and only :func:`usable` ones; a report that cannot be read is passed over like an unsealed one.
    It stops reading once it has ``limit`` reports, so the default window reads 20 files."""
    reports: list[ReportView] = []
    for directory in run_dirs(project_root):
        if limit is not None and len(reports) >= limit:
            break
        try:
            report = reader.read_sealed_as(directory / REPORT_FILE, ReportView)
        except reader.ReportRejected:
            continue
        if usable(report):
            reports.append(report)
    return reports


# --------------------------------------------------------------------------- the history models


class RunPoint(Record):
    runId: str
    startedAt: str
    outcome: Outcome
    passed: int
    trials: int


class Change(Record):
    component: str
    before: str | None
    after: str | None


class ChangePoint(Record):
    runId: str            # the first run after the change
    previousRunId: str
    changed: list[Change]


class Interval(Record):
    low: float
    high: float
    method: Literal["wilson"] = "wilson"


class ScenarioHistory(Record):
    name: str
    status: Status
    verdicts: str                 # oldest to newest: P pass, F fail, - not run
    runs: list[RunPoint]          # oldest to newest
    passed: int
    trials: int
    passRate: float | None
    passInterval: Interval | None
    flips: int
    comparablePairs: int
    flipRate: float | None
    changePoints: list[ChangePoint]


class History(Record):
    schema_: Literal["atlante/history-v1"]
    window: int
    runs: int                     # reports read (sealed, complete), at most ``window``
    flakyThreshold: float
    flakyMinPairs: int
    scenarios: list[ScenarioHistory]

    def to_json(self) -> str:
        return json.dumps({"schema": self.schema_, **self.model_dump(exclude={"schema_"})}, indent=2)


# --------------------------------------------------------------------------- computing


@dataclass(frozen=True)
class _Seen:
    report: ReportView
    record: ScenarioView

    def components(self) -> dict[str, str | None]:
        host = self.report.host
        return {"scenario": self.record.scenarioDigest, "harness": self.record.harnessDigest,
                "hostVersion": f"{host.name} {host.version}" if host else None,
                "model": "scripted" if self.report.scripted else (self.report.model or "host default")}

    def outcome(self) -> Outcome:
        passed, ran = self.record.passed_and_ran()
        if self.record.passRate is None or ran == 0:
            return "not-run"
        return "pass" if passed == ran else "fail"


def _short(value: str | None) -> str | None:
    return value[: len(DIGEST_PREFIX) + 12] if value and value.startswith(DIGEST_PREFIX) else value


def _changes(before: _Seen, after: _Seen) -> list[Change]:
    old, new = before.components(), after.components()
    # An unknown digest (an older report) is not a change: nothing says it differs.
    return [Change(component=k, before=_short(old[k]), after=_short(new[k])) for k in COMPONENTS
            if old[k] != new[k] and not (k in ("scenario", "harness") and (old[k] is None or new[k] is None))]


def scenario_history(name: str, seen: Sequence[_Seen]) -> ScenarioHistory:
    """One scenario over the runs that list it, ``seen`` oldest first."""
    outcomes = [s.outcome() for s in seen]
    changes = [_changes(a, b) for a, b in pairwise(seen)]
    pairs = [(a, b) for (a, b), changed in zip(pairwise(outcomes), changes, strict=True)
             if not changed and "not-run" not in (a, b)]
    flips = sum(1 for a, b in pairs if a != b)
    counts = [s.record.passed_and_ran() for s in seen]
    passed, trials = sum(c for c, _ in counts), sum(n for _, n in counts)
    interval = evalstats.wilson(passed, trials)
    flip_rate = flips / len(pairs) if pairs else None
    return ScenarioHistory(
        name=name, status=_status(outcomes, changes, flip_rate, len(pairs)),
        verdicts="".join(_MARK[o] for o in outcomes),
        runs=[RunPoint(runId=s.report.runId, startedAt=s.report.startedAt, outcome=o, passed=c, trials=n)
              for s, o, (c, n) in zip(seen, outcomes, counts, strict=True)],
        passed=passed, trials=trials, passRate=passed / trials if trials else None,
        passInterval=None if interval is None else Interval(low=interval.low, high=interval.high),
        flips=flips, comparablePairs=len(pairs), flipRate=flip_rate,
        changePoints=[ChangePoint(runId=b.report.runId, previousRunId=a.report.runId, changed=changed)
                      for (a, b), changed in zip(pairwise(seen), changes, strict=True) if changed])


def _status(outcomes: Sequence[Outcome], changes: Sequence[list[Change]], flip_rate: float | None, pairs: int) -> Status:
    latest = outcomes[-1]
    if latest == "fail":
        earlier: list[Outcome] = []
        for index in range(len(outcomes) - 2, -1, -1):   # back to the last change point
            if changes[index]:
                break
            earlier.append(outcomes[index])
        ran = [o for o in earlier if o != "not-run"]
        if ran and all(o == "pass" for o in ran):
            return "newly-failing"
    if flip_rate is not None and pairs >= FLAKY_MIN_PAIRS and flip_rate > FLAKY_FLIP_RATE:
        return "flaky"
    return {"fail": "failing", "pass": "passing", "not-run": "not-run"}[latest]  # type: ignore[return-value]


def build_history(reports: Sequence[ReportView], window: int, names: Iterable[str] = ()) -> History:
    """The history of ``names`` (every scenario of the reports when empty) over ``reports`` (newest first)."""
    oldest_first = list(reversed(reports))
    by_name: dict[str, list[_Seen]] = {}
    for report in oldest_first:
        for record in report.scenarios:
            by_name.setdefault(record.name, []).append(_Seen(report, record))
    wanted = list(names)
    # The newest run's order first, then scenarios only older runs had.
    order = list(dict.fromkeys([r.name for report in reports for r in report.scenarios]))
    chosen = [n for n in order if not wanted or n in wanted]
    found = [scenario_history(n, by_name[n]) for n in chosen]
    found.sort(key=lambda h: _STATUS_ORDER[h.status])   # stable: report order within a status
    return History(schema_=HISTORY_SCHEMA, window=window, runs=len(reports), flakyThreshold=FLAKY_FLIP_RATE,
                   flakyMinPairs=FLAKY_MIN_PAIRS, scenarios=found)


def history_beside(report_path: Path, window: int = DEFAULT_WINDOW) -> dict[str, ScenarioHistory]:
    """Per scenario, its history when ``report_path`` is a run of a project
    (``<project>/.atlante/eval/<run-id>/report.json``) with at least two usable runs; else nothing."""
    run_dir = report_path.resolve().parent
    if run_dir.parent.name != "eval" or run_dir.parent.parent.name != ".atlante":
        return {}
    reports = sealed_complete_reports(run_dir.parent.parent.parent, window)
    if len(reports) < 2:
        return {}
    return {h.name: h for h in build_history(reports, window).scenarios}


# --------------------------------------------------------------------------- the command


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def render_history(history: History) -> list[str]:
    if not history.scenarios:
        return [f"no sealed complete report under .atlante/eval/ (read {history.runs}): run `atlante eval` first"]
    lines = [f"{'scenario':<28} {'status':<13} {'runs (oldest -> newest)':<24} {'pass':>5} {'95% CI':>9} "
             f"{'flips':>7} {'flip rate':>9}"]
    for h in history.scenarios:
        interval = "-" if h.passInterval is None else f"{h.passInterval.low:.0%}-{h.passInterval.high:.0%}"
        verdicts = h.verdicts if len(h.verdicts) <= 24 else "…" + h.verdicts[-23:]
        lines.append(f"{h.name[:28]:<28} {h.status:<13} {verdicts:<24} {_pct(h.passRate):>5} {interval:>9} "
                     f"{f'{h.flips}/{h.comparablePairs}':>7} {_pct(h.flipRate):>9}")
    for h in history.scenarios:
        for point in h.changePoints:
            what = ", ".join(f"{c.component} {c.before or '-'} -> {c.after or '-'}" for c in point.changed)
            lines.append(f"change: {h.name}: at run {point.runId}: {what}")
    lines.append(f"{history.runs} run(s) read (sealed, complete; window {history.window}); flaky: flip rate above "
                 f"{history.flakyThreshold:.0%} over at least {history.flakyMinPairs} comparable pairs "
                 f"(same scenario, harness, host version and model)")
    return lines


def history_command(project_root: Path, names: Sequence[str], window: int, as_json: bool) -> int:
    """``atlante history``: exit 0 (the history informs, never blocks); 2 for a scenario no run has."""
    from pytest_atlante.diagnostics import Diagnostic, DiagnosticError

    if window < 1:
        raise DiagnosticError([Diagnostic("--last", "", HISTORY_INPUT_CODE, f"--last {window}: the window must be 1 or more runs",
                                          "pass --last N with N >= 1 (default 20)")])
    reports = sealed_complete_reports(project_root, window)
    known = {r.name for report in reports for r in report.scenarios}
    missing = [n for n in names if n not in known]
    if missing and reports:
        raise DiagnosticError([Diagnostic(n, "", HISTORY_INPUT_CODE, f"no run in the window has a scenario named {n!r}",
                                          "name a scenario of the suite (see `atlante history` without arguments)")
                               for n in missing])
    history = build_history(reports, window, names)
    print(history.to_json() if as_json else "\n".join(render_history(history)))
    return 0
