"""Cost forecast: what a run will spend, predicted from earlier reports, before any host session.

History is every ``report.json`` under ``<project>/.atlante/eval/*/`` that a run of this user's
wrote (its seal verifies, ``report/seal.py``: never a file a trial planted) and whose host name,
model and scripted flag match the run's; within such a report a scenario's trials count when its name
matches and its ``scenarioDigest`` and ``harnessDigest`` (``digests.py``) match the run's too (a
changed scenario, fixture, script or harness is not the same experiment); a report written before
digests were recorded matches by name alone.  A scenario without matching history
is ``unknown``: it is never guessed as zero, and totals that omit it say so.

Per scenario, with ``n`` allocated trials and the history's per-trial samples:

- tokens and cost: mean = ``n`` × the per-trial mean; p95 = ``n`` × the per-trial nearest-rank p95
  (a conservative bound on the p95 of the sum: it assumes the expensive trials come together);
- wall time: each trial takes its scenario's mean duration; trials are scheduled longest first on
  ``workers`` processes (``-n``), and the forecast is the busiest process's total.

Cost is unknown for a scenario whose history never reported one (a host that emitted no cost),
even when its tokens are known.  Plain code, no pytest.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from pytest_atlante.diagnostics import Diagnostic
from pytest_atlante.report import reader
from pytest_atlante.report.model import REPORT_FILE, SCRIPTED_COST_LABEL, EvalReport, ScenarioRecord
from pytest_atlante.suite.discovery import ValidSuite
from pytest_atlante.trial.budget import allocate

# (scenarioDigest, harnessDigest) of a scenario as it is now; ``None`` where not computed.
Digests = tuple[str | None, str | None]


@dataclass(frozen=True)
class RequestedScenario:
    name: str
    trials: int        # trials requested
    sessions: int      # of which allocated a session (the rest are skipped-budget, free)
    digests: Digests = (None, None)


@dataclass(frozen=True)
class UsedReport:
    run_id: str
    path: Path
    age_s: float


@dataclass
class ScenarioForecast:
    name: str
    trials: int
    sessions: int
    samples: int = 0                     # history trials behind the numbers (0: unknown)
    tokens_mean: float | None = None
    tokens_p95: float | None = None
    cost_mean: float | None = None
    cost_p95: float | None = None
    duration_mean_s: float | None = None
    unpriced: int = 0                    # history trials with tokens but no cost (a model the price table lacks)
    cost_basis: str | None = None        # the price table the history's estimated costs came from

    @property
    def known(self) -> bool:
        return self.samples > 0


@dataclass
class Forecast:
    host: str
    model: str | None
    scripted: bool
    workers: int
    scenarios: list[ScenarioForecast] = field(default_factory=list)
    reports: list[UsedReport] = field(default_factory=list)
    unreadable: int = 0                  # report files that did not parse (skipped, counted)
    unsealed: int = 0                    # report files no run of this user's wrote (skipped, counted)
    # A variant run's forecast: each arm's own (its host, model and harness), whose rows this one holds.
    arms: list[tuple[str, Forecast]] = field(default_factory=list)

    @property
    def unknown(self) -> list[str]:
        return [s.name for s in self.scenarios if s.sessions and not s.known]

    @property
    def cost_unknown(self) -> list[str]:
        return [s.name for s in self.scenarios if s.sessions and s.cost_p95 is None]

    @property
    def sessions(self) -> int:
        return sum(s.sessions for s in self.scenarios)

    def total(self, attribute: str) -> float:
        """Sum over the scenarios where ``attribute`` is known (see ``unknown``/``cost_unknown``)."""
        values = [getattr(s, attribute) for s in self.scenarios if s.sessions]
        return float(sum(v for v in values if v is not None))

    @property
    def wall_s(self) -> float:
        durations = [s.duration_mean_s for s in self.scenarios for _ in range(s.sessions) if s.duration_mean_s is not None]
        return makespan(durations, self.workers)


def requested(suite: ValidSuite, digests: Mapping[str, Digests] | None = None) -> list[RequestedScenario]:
    """The trials a run of ``suite`` asks for, with the sessions ``maxSessions`` leaves them.

    Collection order without paths on the command line: the documents sorted by path, then each
    document's scenarios, then trials — the order ``maxSessions`` is allocated in.  ``-k``/``-m``
    are not applied (the forecast runs before collection); ``--atlante-scenario`` already was.
    """
    budget = suite.eval.budget
    entries = sorted(suite.scenarios, key=lambda e: str(e.file))
    sessions: dict[str, int] = {}
    for name, allocated in allocate([e.scenario.name for e in entries for _ in range(budget.trials)], budget.maxSessions):
        sessions[name] = sessions.get(name, 0) + int(allocated)
    return [RequestedScenario(e.scenario.name, budget.trials, sessions[e.scenario.name],
                              (digests or {}).get(e.scenario.name, (None, None))) for e in entries]


def arm_requested(suite: ValidSuite, digests: Mapping[str, Digests], harness: Mapping[str, str | None]
                  ) -> dict[str, list[RequestedScenario]]:
    """:func:`requested` for a variant run, per arm: ``maxSessions`` is allocated over the items in
    their collection order, each scenario's trials interleaved across the arms; ``harness`` gives
    each arm's harness digest (the history of the same experiment is the same arm's)."""
    budget = suite.eval.budget
    entries = sorted(suite.scenarios, key=lambda e: str(e.file))
    order = [(e.scenario.name, arm.name) for e in entries for _ in range(budget.trials) for arm in suite.arms]
    sessions: dict[tuple[str, str], int] = {}
    for key, allocated in allocate(order, budget.maxSessions):
        sessions[key] = sessions.get(key, 0) + int(allocated)
    return {arm.name: [RequestedScenario(e.scenario.name, budget.trials, sessions[(e.scenario.name, arm.name)],
                                         ((digests.get(e.scenario.name) or (None, None))[0], harness.get(arm.name)))
                       for e in entries] for arm in suite.arms}


def combined(per_arm: Sequence[tuple[str, Forecast]]) -> Forecast:
    """One forecast of a variant run: every arm's rows (``scenario [arm]``), for the totals and the cap."""
    first = per_arm[0][1]
    result = Forecast(host=first.host, model=first.model, scripted=first.scripted, workers=first.workers,
                      unreadable=max(f.unreadable for _, f in per_arm), unsealed=max(f.unsealed for _, f in per_arm),
                      arms=list(per_arm))
    used: dict[str, UsedReport] = {}
    for name, part in per_arm:
        result.scenarios += [replace(s, name=f"{s.name} [{name}]") for s in part.scenarios]
        used.update({u.run_id: u for u in part.reports})
    result.reports = sorted(used.values(), key=lambda u: u.age_s)
    return result


def over_cap(predicted: Forecast, cap: float) -> Diagnostic | None:
    """``eval-max-cost-exceeded`` when the forecast p95 cost (of the scenarios with history) exceeds ``cap``."""
    p95 = predicted.total("cost_p95")
    if p95 <= cap:
        return None
    unknown = f" (plus {len(predicted.cost_unknown)} scenario(s) of unknown cost)" if predicted.cost_unknown else ""
    unpriced = sum(s.unpriced for s in predicted.scenarios if s.sessions)
    unknown += f" ({unpriced} unpriced history trial(s) not counted)" if unpriced else ""
    return Diagnostic("", "--atlante-max-cost", "eval-max-cost-exceeded",
                      f"the forecast p95 cost ${p95:.4f}{unknown} exceeds the cap ${cap:g} "
                      f"({predicted.sessions} session(s), history of {len(predicted.reports)} report(s))",
                      "raise --atlante-max-cost, lower budget.trials or maxSessions, or narrow the run with "
                      "--atlante-scenario; --atlante-forecast shows the whole forecast")


def nearest_rank_p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[math.ceil(0.95 * len(ordered)) - 1]


def makespan(durations: Sequence[float], workers: int) -> float:
    """Longest-processing-time-first schedule on ``workers`` processes: the busiest one's total."""
    loads = [0.0] * max(1, workers)
    heapq.heapify(loads)
    for duration in sorted(durations, reverse=True):
        heapq.heappush(loads, heapq.heappop(loads) + duration)
    return max(loads)


def _same_experiment(record: ScenarioRecord, digests: Digests) -> bool:
    # Digests are compared only where both the history and the present carry them.
    recorded = (getattr(record, "scenarioDigest", None), getattr(record, "harnessDigest", None))
    return all(old is None or new is None or old == new for old, new in zip(recorded, digests, strict=True))


def load_history(eval_dir: Path, *, host: str, model: str | None, scripted: bool,
                 now: datetime) -> tuple[list[tuple[UsedReport, EvalReport]], int, int]:
    """Matching reports under ``eval_dir`` (newest first), the number of unreadable ones and of
    unsealed ones: only a report a run of this user's wrote counts (``report/seal.py``), never a
    file a trial planted there."""
    found: list[tuple[UsedReport, EvalReport]] = []
    unreadable = unsealed = 0
    paths = sorted(eval_dir.glob(f"*/{REPORT_FILE}")) if eval_dir.is_dir() else []
    for path in paths:
        try:
            report = reader.read_report(path, sealed=True)
        except reader.ReportRejected as exc:
            if exc.code == "report-unsealed":
                unsealed += 1
            else:
                unreadable += 1
            continue
        if report.host is None or report.host.name != host or report.model != model or report.scripted != scripted:
            continue
        finished = datetime.strptime(report.finishedAt[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
        found.append((UsedReport(report.runId, path, max(0.0, (now - finished).total_seconds())), report))
    found.sort(key=lambda pair: pair[0].age_s)
    return found, unreadable, unsealed


def forecast(requested: Sequence[RequestedScenario], eval_dir: Path, *, host: str, model: str | None, scripted: bool,
             workers: int, now: datetime | None = None) -> Forecast:
    now = now or datetime.now(UTC)
    history, unreadable, unsealed = load_history(eval_dir, host=host, model=model, scripted=scripted, now=now)
    result = Forecast(host=host, model=model, scripted=scripted, workers=workers, unreadable=unreadable,
                      unsealed=unsealed)
    used: dict[str, UsedReport] = {}
    for wanted in requested:
        tokens: list[float] = []
        costs: list[float] = []
        durations: list[float] = []
        unpriced, basis = 0, None
        for used_report, report in history:
            for record in report.scenarios:
                if record.name != wanted.name or not _same_experiment(record, wanted.digests):
                    continue
                ran = [t for t in record.trials if t.verdict != "skipped-budget" and not t.interrupted]
                if ran:
                    used[used_report.run_id] = used_report
                for trial in ran:
                    durations.append(trial.durationMs / 1000)
                    if trial.usage is not None:
                        tokens.append(float(trial.usage.total))
                    if trial.costUsd is not None and math.isfinite(trial.costUsd):
                        costs.append(trial.costUsd)
                        basis = trial.costBasis or basis
                    elif trial.usage is not None:
                        unpriced += 1
        entry = ScenarioForecast(wanted.name, wanted.trials, wanted.sessions, samples=len(durations),
                                 unpriced=unpriced, cost_basis=basis)
        n = wanted.sessions
        if durations:
            entry.duration_mean_s = sum(durations) / len(durations)
        if tokens:
            entry.tokens_mean = n * sum(tokens) / len(tokens)
            entry.tokens_p95 = n * nearest_rank_p95(tokens)
        if costs:
            entry.cost_mean = n * sum(costs) / len(costs)
            entry.cost_p95 = n * nearest_rank_p95(costs)
        result.scenarios.append(entry)
    result.reports = sorted(used.values(), key=lambda u: u.age_s)
    return result


def _age(seconds: float) -> str:
    if seconds < 3600:
        return f"{int(seconds // 60)} min"
    if seconds < 86400 * 2:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.0f} days"


def _num(value: float | None, digits: int) -> str:
    return "unknown" if value is None else f"{value:.{digits}f}"


def table_lines(result: Forecast) -> list[str]:
    """The printed forecast: one row per scenario, totals, and the reports it was built from."""
    lines = [f"atlante forecast: {result.sessions} session(s) on {result.host}, model {result.model or '(host default)'}"
             f"{', scripted' if result.scripted else ''}, {result.workers} process(es)",
             f"{'scenario':<32} {'trials':>6} {'sessions':>8} {'history':>8} {'tokens':>10} {'tokens p95':>10} "
             f"{'cost $':>9} {'cost p95 $':>10} {'mean s':>7}"]
    for s in result.scenarios:
        history = str(s.samples) if s.known else "unknown"
        lines.append(f"{s.name[:32]:<32} {s.trials:>6} {s.sessions:>8} {history:>8} {_num(s.tokens_mean, 0):>10} "
                     f"{_num(s.tokens_p95, 0):>10} {_num(s.cost_mean, 4):>9} {_num(s.cost_p95, 4):>10} "
                     f"{_num(s.duration_mean_s, 1):>7}")
    partial = " (known scenarios only)" if result.unknown or result.cost_unknown else ""
    lines.append(f"total{partial}: tokens {result.total('tokens_mean'):.0f} (p95 {result.total('tokens_p95'):.0f}), "
                 f"cost ${result.total('cost_mean'):.4f} (p95 ${result.total('cost_p95'):.4f}), "
                 f"wall time {result.wall_s:.1f} s")
    if result.scripted:
        lines.append(f"scripted: tokens are the scripts', cost $ {SCRIPTED_COST_LABEL}")
    if result.unknown:
        lines.append("unknown (no matching history; not counted as zero): " + ", ".join(result.unknown))
    cost_only = [n for n in result.cost_unknown if n not in result.unknown]
    if cost_only:
        lines.append("cost unknown (history reported no cost): " + ", ".join(cost_only))
    unpriced = [f"{s.name} ({s.unpriced})" for s in result.scenarios if s.sessions and s.unpriced]
    if unpriced:
        lines.append("unpriced history trials (tokens but no cost: the host reports none and the price table lacks "
                     "the model; not counted as zero): " + ", ".join(unpriced))
    bases = sorted({s.cost_basis for s in result.scenarios if s.sessions and s.cost_basis})
    if bases:
        lines.append(f"cost $ is an estimate from {', '.join(bases)} (the host reports tokens only)")
    for name, part in result.arms:
        lines.append(f"arm {name} ({part.host}, model {part.model or '(host default)'}): {part.sessions} session(s), "
                     f"cost ${part.total('cost_mean'):.4f} (p95 ${part.total('cost_p95'):.4f})"
                     + (" (known scenarios only)" if part.cost_unknown else ""))
    if result.reports:
        lines.append("history: " + ", ".join(f"{u.run_id} ({_age(u.age_s)} old)" for u in result.reports))
    else:
        lines.append("history: no matching report in .atlante/eval/ (host, model and scripted flag must match)")
    if result.unreadable:
        lines.append(f"skipped {result.unreadable} unreadable report(s)")
    if result.unsealed:
        lines.append(f"skipped {result.unsealed} report(s) no run of yours wrote (no valid seal)")
    return lines
