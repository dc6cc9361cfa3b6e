"""The eval report: its models, the per-scenario aggregation, and the atomic writer.

Only the controller builds the report, from the ``TrialRecord`` each trial produced (in serial and
xdist runs alike), and writes it once as ``<out>/report.json``.  The report is also the document a
pack may publish; ``provenance.py`` reads it back with these same models, so every invariant the
writer guarantees (pass rates in 0..1, finite non-negative durations, UTC timestamps) is declared
on the models rather than only followed by the code that fills them.

Sandbox paths never reach the report: the trial engine calls :func:`scrub_paths` with the trial's
own roots, and :func:`build_report` runs a second, pattern-based pass over every free-text field
as a backstop, so a path the engine did not know about (a nested tool's temp dir) is still removed.
"""

from __future__ import annotations

import math
import os
import secrets
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import ConfigDict, Field, JsonValue, field_validator

from pytest_atlante import __version__
from pytest_atlante.diagnostics import Diagnostic
from pytest_atlante.fsutil import atomic_write_bytes, atomic_write_text, fingerprint, read_capped
from pytest_atlante.hosts.base import SCRIPTED_MODEL_ID
from pytest_atlante.hosts.names import HostDialect, HostName
from pytest_atlante.records import CheckResult, OmitsUnsetArm, Record, TrialRecord, Verdict, cap_diff, iso_utc, tail
from pytest_atlante.report import stats as evalstats
from pytest_atlante.report.seal import write_seal
from pytest_atlante.report.statrecords import (
    Comparison,
    Lift,
    NoiseFloor,
    PassAtK,
    RateInterval,
    SuiteStats,
    TriggerKind,
    TriggerRate,
    UsedSplit,
    Wanted,
)
from pytest_atlante.sandbox.isolation import IsolationRecord
from pytest_atlante.sandbox.redact import redact_sandbox_paths

if TYPE_CHECKING:
    from pytest_atlante.trial.runner import TrialKey

# The largest report any reader here accepts.  The project's own reports stay far below it
# (changedPaths, diffs and output tails are capped); one this size still parses well within the
# 250 MiB the runner is allowed.
MAX_REPORT_BYTES = 32 * 1024 * 1024
ReportSchema = Literal["atlante/eval-report-v1"]
REPORT_SCHEMA: ReportSchema = "atlante/eval-report-v1"
REPORT_FILE = "report.json"
ALL_VERDICTS: tuple[Verdict, ...] = (
    "pass",
    "fail",
    "timeout",
    "budget-exceeded",
    "infra-error",
    "skipped-budget",
)
# ``2026-11-30T08:36:55.123Z``: the only timestamp shape the report uses, so readers (and the
# provenance view) never meet offsets, naive times or locale-dependent formats.
TIMESTAMP_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?Z$"
# A bare release version (``2.1.197``, ``1.0.0-beta.1``, ``0.2.0.dev3``), never the decorated
# ``--version`` banner (``2.1.197 (Claude Code)``): readers compare and display it as is.
VERSION_PATTERN = r"^\d{1,9}(?:\.\d{1,9}){1,3}(?:[-+.]?[0-9A-Za-z]{1,20}(?:[.+-][0-9A-Za-z]{1,20}){0,4})?$"

NonNegativeInt = Annotated[int, Field(ge=0)]
NonNegativeFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Timestamp = Annotated[str, Field(pattern=TIMESTAMP_PATTERN)]
Version = Annotated[str, Field(pattern=VERSION_PATTERN, max_length=64)]


class HostIdentity(Record):
    name: HostName
    version: Version
    dialect: HostDialect


class BudgetRecord(Record):
    trials: NonNegativeInt
    timeoutMs: NonNegativeInt
    maxSessions: NonNegativeInt
    maxTokens: NonNegativeInt


class CostCapRecord(Record):
    """``--atlante-max-cost``: the cap, the spend the run recorded, and what the cap skipped."""

    capUsd: NonNegativeFloat
    spentUsd: NonNegativeFloat
    reached: bool
    skippedTrials: NonNegativeInt = 0     # trials recorded skipped-budget because of the cap
    unpricedTrials: NonNegativeInt = 0    # trials that ran but whose host reported no cost


class ScenarioTotals(Record):
    tokens: NonNegativeInt
    # ``None`` when no trial of the scenario reported a cost (the host emitted none), which is
    # different from a run that cost nothing.
    costUsd: NonNegativeFloat | None


class ScenarioRecord(OmitsUnsetArm):
    name: str
    # The arm of a variant run: one record per scenario and arm (absent without variants).
    variant: str | None = None
    file: str
    source: str
    expectedTrials: NonNegativeInt
    # ``None`` when none of the scenario's requested trials ran (-x, --sw, Ctrl-C, a crash): "not
    # run" is not a 0 % pass rate.  A scenario whose every trial was skipped-budget has 0 (reference).
    passRate: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None
    # requested trials that never ran and so have no record; the report is then not ``complete``
    notRun: NonNegativeInt = 0
    meanDurationMs: NonNegativeFloat
    p95DurationMs: NonNegativeFloat
    trials: list[TrialRecord]
    totals: ScenarioTotals
    # Statistics (docs/statistics.md) over the same trials as passRate; absent in older reports.
    passInterval: RateInterval | None = None
    passAtK: list[PassAtK] = Field(default_factory=list)
    verdictCounts: dict[Verdict, NonNegativeInt] = Field(default_factory=dict)
    unreliable: bool = False      # an infra-error trial: the pass rate undercounts the harness
    # Per skill or agent a skill-used / agent-used check names: the share of trials that used it.
    triggerRates: list[TriggerRate] = Field(default_factory=list)
    scenarioDigest: str | None = None
    harnessDigest: str | None = None


class ShardRef(Record):
    """Which part of a sharded run a partial report holds (``--atlante-shard K/N``)."""

    index: Annotated[int, Field(ge=1)]
    count: Annotated[int, Field(ge=1)]


class MergedShard(ShardRef):
    """One shard report a merged report was made from (``atlante report merge``)."""

    runId: str
    exitStatus: Annotated[int, Field(ge=0, le=3)]
    complete: bool


#: How scripted runs label their costs (docs/design.md §12): the script's tokens are real counts, the
#: cost is a price for them under the model name the host asked for — the host CLI's own, or the
#: shipped price table's estimate for a host that reports none (Codex, Gemini CLI) — never a charge.
SCRIPTED_COST_LABEL = "priced, not charged: scripted model"
#: Fewer trials than this make a 95% interval too wide to tell rates apart: said beside it (n shown).
FEW_TRIALS = 5


def scripted_note(report: EvalReport) -> str | None:
    """One line for a scripted run: who answered, and what its tokens and costs are."""
    if not report.scripted:
        return None
    # Quoted as the host gave it: an id such as claude-opus-4-8[1m] reads as one name, not a stray escape.
    asked = f' (the host asked for "{report.requestedModel}")' if report.requestedModel else ""
    return (f"scripted run: answered offline by {report.scriptedModel or SCRIPTED_MODEL_ID}{asked}; "
            f"tokens are the script's and cost $ a price for them: nothing was charged")


class SelectionRecord(Record):
    """What the run's selection was measured against: ``atlante runs`` and ``atlante view`` tell a
    run of the whole suite from a narrowed one (``report/runs.py``)."""

    # The trials the configured suite asks for (every scenario discovered, times its trials),
    # before pytest's selection narrowed them.
    suiteTrials: NonNegativeInt
    # What narrowed it, as given on the command line: "-k EXPR", "-m EXPR", "--deselect", "--lf",
    # "--atlante-scenario NAME", "--atlante-shard K/N", "paths"; empty when nothing did.
    narrowedBy: list[str] = Field(default_factory=list)


class ArmRecord(Record):
    """One arm of a variant run: what it ran (the top-level host and model are the control's)."""

    name: str
    host: HostName
    hostVersion: str | None = None
    model: str | None = None
    harnessDigest: str | None = None
    replicateOf: str | None = None


class EvalReport(OmitsUnsetArm):
    # ``schema`` would shadow a BaseModel attribute, so the field is ``schema_`` in Python and
    # ``schema`` on the wire, in both directions.
    model_config = ConfigDict(extra="forbid", serialize_by_alias=True)
    omitted_when_none = frozenset({"arms", "lift", "noiseFloor", "usedSplit"})

    schema_: ReportSchema = Field(alias="schema")
    runId: str
    startedAt: Timestamp
    finishedAt: Timestamp
    atlanteVersion: Version
    host: HostIdentity | None
    model: str | None
    modelVersion: str | None
    scripted: bool
    # Scripted runs: the model that really answered (the scripted model's id), which the trials'
    # ``modelIdentity`` and so ``modelVersion`` name too; ``requestedModel`` is the name most trials'
    # hosts asked for, and each ``costUsd`` the host's own price for the script's tokens under that
    # name: nothing was charged (docs/design.md §12).  None otherwise and in reports that predate it.
    scriptedModel: str | None = None
    requestedModel: str | None = None
    budget: BudgetRecord
    complete: bool
    interrupted: bool
    # 0-3 (report/exitcodes.py), or 5: pytest's "no tests collected", when nothing was selected.
    exitStatus: Annotated[int, Field(ge=0, le=5)]
    verdicts: dict[Verdict, NonNegativeInt]
    scenarios: list[ScenarioRecord]
    errors: list[dict[str, JsonValue]]
    costCap: CostCapRecord | None = None
    # How trials were contained beyond the tool-level policy; None in reports that predate it and
    # in runs that stopped before the probe.
    isolation: IsolationRecord | None = None
    suite: SuiteStats | None = None
    comparison: Comparison | None = None   # the --atlante-baseline gate's result
    # Sharded runs (#18): a shard's partial report has ``shard``; a merged report has ``shards``.
    # Both carry the suite's digest and the run group that ties a run's shards together.
    shard: ShardRef | None = None
    suiteDigest: str | None = None
    runGroup: str | None = None
    shards: list[MergedShard] | None = None
    # The trials pytest's selection left this run (-k, -m, --deselect, --lf, pytest-split,
    # pytest-shard, --atlante-shard); 0: nothing was selected.  None: the run stopped before
    # collection, a merged report, or an older report.
    selectedTrials: NonNegativeInt | None = None
    # The suite the selection was made from, and what narrowed it; None: the run stopped before
    # collection, a merged report, or an older report.
    selection: SelectionRecord | None = None
    # A variant run (--atlante-variants): its arms, the control first; each other arm against the
    # control over the suite; the A/A replicate's noise floor; pass rates split by use (report/arms.py).
    arms: list[ArmRecord] | None = None
    lift: list[Lift] | None = None
    noiseFloor: NoiseFloor | None = None
    usedSplit: list[UsedSplit] | None = None

    @field_validator("exitStatus")
    @classmethod
    def _known_exit_status(cls, value: int) -> int:
        if value == 4:  # pytest's usage error never writes a report
            raise ValueError("exit status 4 is not one a report states")
        return value

    @field_validator("verdicts")
    @classmethod
    def _every_verdict_counted(cls, value: dict[Verdict, int]) -> dict[Verdict, int]:
        # A fixed key set keeps consumers from confusing "absent" with "zero".
        missing = [v for v in ALL_VERDICTS if v not in value]
        if missing:
            raise ValueError(f"verdict counts are missing {', '.join(missing)}")
        return value

    def to_json(self) -> str:
        return self.model_dump_json(indent=2) + "\n"


# --- aggregation -----------------------------------------------------------------------------


def counted(trials: Sequence[TrialRecord]) -> list[TrialRecord]:
    """The trials that count towards pass rate and durations: every one that was not skipped."""
    return [t for t in trials if t.verdict != "skipped-budget"]


def pass_rate(trials: Sequence[TrialRecord]) -> float:
    """Passed / non-skipped trials; 0.0 when every trial was skipped (or there are none)."""
    ran = counted(trials)
    if not ran:
        return 0.0
    return sum(1 for t in ran if t.verdict == "pass") / len(ran)


def mean_duration(trials: Sequence[TrialRecord]) -> float:
    ran = counted(trials)
    if not ran:
        return 0.0
    return sum(t.durationMs for t in ran) / len(ran)


def p95_duration(trials: Sequence[TrialRecord]) -> float:
    """Nearest-rank p95: the ceil(0.95 * n)-th smallest duration of the non-skipped trials.

    Nearest-rank always names a duration that was actually observed (no interpolation), so with
    the small trial counts of an eval (3 by default) the p95 is simply the slowest trial.
    """
    durations = sorted(t.durationMs for t in counted(trials))
    if not durations:
        return 0.0
    rank = math.ceil(0.95 * len(durations))
    return float(durations[rank - 1])


def verdict_counts(trials: Sequence[TrialRecord]) -> dict[Verdict, int]:
    seen = Counter(t.verdict for t in trials)
    return {v: seen.get(v, 0) for v in ALL_VERDICTS}


def most_frequent_model(trials: Sequence[TrialRecord], *, requested: bool = False) -> str | None:
    """The model identity most trials observed (``requested``: the name most trials' hosts asked for,
    scripted runs); ties go to the one seen first in trial order."""
    names = [t.requestedModel if requested else t.modelIdentity for t in trials]
    seen = Counter(name for name in names if name)
    if not seen:
        return None
    best = max(seen.values())
    return next(name for name in names if name and seen[name] == best)


def passed_and_ran(trials: Sequence[TrialRecord]) -> tuple[int, int]:
    """(passed, ran): the counts every statistic of a scenario is computed from."""
    ran = counted(trials)
    return sum(1 for t in ran if t.verdict == "pass"), len(ran)


def wanted_use(minimum: int, maximum: int | None) -> Wanted | None:
    """The direction a counting check wants: used (``min`` ≥ 1), never used (``max: 0``), or neither."""
    if minimum >= 1:
        return "use"
    return "no-use" if maximum == 0 else None


def trigger_counts(trials: Sequence[TrialRecord]) -> dict[tuple[TriggerKind, str], tuple[int, int, Wanted | None]]:
    """``(kind, name) → (trials that used it, trials with a decided count, wanted)`` over the trials
    that ran, from their skill-used / agent-used check results (the first such check per trial and
    name counts: two checks on one name count the same events)."""
    found: dict[tuple[TriggerKind, str], tuple[int, int, Wanted | None]] = {}
    for trial in counted(trials):
        seen: set[tuple[TriggerKind, str]] = set()
        for check in trial.checks:
            count = check.count
            if count is None or count.kind not in ("skill", "agent"):  # trigger rates: skills and agents
                continue
            key: tuple[TriggerKind, str] = (count.kind, count.name)
            if key in seen:
                continue
            seen.add(key)
            used, ran, wanted = found.get(key, (0, 0, wanted_use(count.min, count.max)))
            found[key] = (used + (count.uses > 0), ran + 1, wanted)
    return found


def trigger_rates(trials: Sequence[TrialRecord]) -> list[TriggerRate]:
    rates = []
    for (kind, name), (used, ran, wanted) in sorted(trigger_counts(trials).items()):
        interval = evalstats.wilson(used, ran)
        rates.append(TriggerRate(
            kind=kind, name=name, used=used, trials=ran, rate=used / ran, wanted=wanted,
            interval=None if interval is None else RateInterval(low=interval.low, high=interval.high, method="wilson")))
    return rates


def scenario_statistics(trials: Sequence[TrialRecord]) -> dict[str, Any]:
    """The statistics fields of one ``ScenarioRecord``: interval, pass@k for k = 1..n, counts."""
    c, n = passed_and_ran(trials)
    interval = evalstats.wilson(c, n)
    counts = verdict_counts(trials)
    return {
        "passInterval": None if interval is None else RateInterval(low=interval.low, high=interval.high, method="wilson"),
        "passAtK": [PassAtK(k=k, passAtK=evalstats.pass_at_k(c, n, k), passHatK=evalstats.pass_hat_k(c, n, k))
                    for k in range(1, n + 1)],
        "verdictCounts": counts,
        "unreliable": counts["infra-error"] > 0,
        "triggerRates": trigger_rates(trials),
    }


def suite_statistics(records: Sequence[ScenarioRecord]) -> SuiteStats:
    counts = [passed_and_ran(r.trials) for r in records]
    estimate = evalstats.clustered_mean(counts)
    interval = None if estimate is None else estimate.interval
    digests = {r.name: r.scenarioDigest for r in records}
    harness = {r.harnessDigest for r in records}
    return SuiteStats(
        scenarios=sum(1 for _, n in counts if n),
        trials=sum(n for _, n in counts),
        meanPassRate=None if estimate is None else estimate.mean,
        passInterval=None if interval is None else RateInterval(low=interval.low, high=interval.high, method="cluster-robust"),
        scenariosDigest=fingerprint(digests) if records and None not in digests.values() else None,
        harnessDigest=harness.pop() if len(harness) == 1 else None,
    )


def scenario_totals(trials: Sequence[TrialRecord]) -> ScenarioTotals:
    # A non-finite cost from a misbehaving host stream is unknown, not a poisoned total.
    costs = [t.costUsd for t in trials if t.costUsd is not None and math.isfinite(t.costUsd)]
    return ScenarioTotals(
        tokens=sum(t.usage.total for t in trials if t.usage is not None),
        costUsd=sum(costs) if costs else None,
    )


# --- path scrubbing --------------------------------------------------------------------------


def _clean_text(text: str | None) -> str | None:
    return None if text is None else redact_sandbox_paths(text)


def _sanitise_check(check: CheckResult) -> CheckResult:
    output = _clean_text(check.output)
    return check.model_copy(
        update={
            "message": redact_sandbox_paths(check.message),
            "output": None if output is None else tail(output),
        }
    )


def _sanitise_trial(trial: TrialRecord) -> TrialRecord:
    """Enforce the report's evidence contract whatever the engine handed over.

    Skipped trials carry no duration, checks or diff; diffs are capped at 20,000 characters and
    command output keeps its last 2,000; free text loses any sandbox path.
    """
    if trial.verdict == "skipped-budget":
        return trial.model_copy(
            update={
                "durationMs": 0,
                "hostDurationMs": 0,
                "checks": [],
                "diff": None,
                "diffTruncated": False,
                "changedPaths": [],
                "changedPathsTotal": None,
                "error": _clean_text(trial.error),
            }
        )
    diff, truncated = (None, False) if trial.diff is None else cap_diff(redact_sandbox_paths(trial.diff))
    return trial.model_copy(
        update={
            "checks": [_sanitise_check(c) for c in trial.checks],
            "diff": diff,
            "diffTruncated": trial.diffTruncated or truncated,
            "changedPaths": [redact_sandbox_paths(p) for p in trial.changedPaths],
            "error": _clean_text(trial.error),
        }
    )


def _sanitise_error(error: dict[str, JsonValue]) -> dict[str, JsonValue]:
    return {k: redact_sandbox_paths(v) if isinstance(v, str) else v for k, v in error.items()}


# --- building and writing --------------------------------------------------------------------


def new_run_id(now: datetime) -> str:
    """``20261130T083655Z-1a2b3c``: sorts by start time, and the random tail keeps two runs that
    start in the same second (two CI jobs sharing a checkout) from sharing a directory."""
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


# (name, file, source, expected trials) of one requested scenario, in collection order.
ScenarioRow = tuple[str, str, str, int]


@dataclass
class RunState:
    """One run as its report is made from it: the value the controller fills while the run goes.

    The controller starts it (run id, start time, scripted mode), adds the requested trials after
    collection (``expected``, the final selection, with ``collected``), every trial that started (``started``) and every record that
    arrives (``records``), the run-level problems (``errors``) and, at the end, what the report
    states of the run (host, model, budget, isolation, digests, the shard).  ``evalrun.finish_report``
    and ``build_report`` read it; ``atlante report merge`` builds one from the shards' reports.
    """

    run_id: str
    started_at: datetime
    scripted: bool = False
    host: HostIdentity | None = None
    model: str | None = None
    budget: BudgetRecord | None = None
    expected: dict[str, TrialKey] = field(default_factory=dict)  # node id → requested trial, collection order
    # ``expected`` is the final selection (pytest's collection finished): an empty one means that
    # nothing was selected, not that the run stopped before collection.
    collected: bool = False
    started: dict[str, TrialKey] = field(default_factory=dict)   # node id → trial whose setup finished
    records: dict[str, TrialRecord] = field(default_factory=dict)  # node id (or any unique key) → record
    errors: list[Diagnostic] = field(default_factory=list)       # run-level problems of this run
    reported_errors: list[dict[str, JsonValue]] = field(default_factory=list)  # as earlier reports wrote them
    interrupted: bool = False
    digests: dict[str, tuple[str, str | None]] | None = None    # per scenario, after validation
    # A variant run's arms, the control first (each with its harness digest); None without variants.
    arms: list[ArmRecord] | None = None
    # A merged variant run: requested trials per (scenario, arm), as the shards' reports state them.
    arm_expected: dict[tuple[str, str], int] | None = None
    isolation: IsolationRecord | None = None
    shard: ShardRef | None = None
    suite_digest: str | None = None
    run_group: str | None = None
    shards: list[MergedShard] | None = None                     # a merged report's inputs
    selection: SelectionRecord | None = None                   # set with ``expected``

    def finished(self) -> list[TrialRecord]:
        """The records in collection order, then any record of a trial nobody expected."""
        return ([self.records[n] for n in self.expected if n in self.records]
                + [r for n, r in self.records.items() if n not in self.expected])


def keyed(trials: Iterable[TrialRecord]) -> dict[str, TrialRecord]:
    """``RunState.records`` from a list of trials (a merge, a test): keyed by position, so none is lost."""
    return {str(index): trial for index, trial in enumerate(trials)}


def build_report(state: RunState, scenarios: Sequence[ScenarioRow], *, finished_at: datetime, complete: bool,
                 exit_status: int, cost_cap: CostCapRecord | None = None) -> EvalReport:
    """Aggregate the run's trial records into the report.

    ``scenarios`` lists ``(name, file, source, expected_trials)`` in collection order; trials are
    grouped under their scenario by name and ordered by trial number.  A trial naming a scenario
    that is not listed is a bug in the caller, reported as ``ValueError`` rather than dropped.
    ``state.digests`` maps a scenario name to its ``(scenarioDigest, harnessDigest)``.
    """
    if state.budget is None:
        raise ValueError("a report states the run's budget: RunState.budget is not set")
    trials = state.finished()
    digests = state.digests
    names = [name for name, _, _, _ in scenarios]
    duplicates = sorted(n for n, count in Counter(names).items() if count > 1)
    if duplicates:
        raise ValueError(f"scenario names listed more than once: {', '.join(duplicates)}")
    orphans = sorted({t.scenario for t in trials} - set(names))
    if orphans:
        raise ValueError(f"trial records for unlisted scenarios: {', '.join(orphans)}")

    arms: list[ArmRecord | None] = list(state.arms) if state.arms else [None]
    names_of_arms = {arm.name for arm in arms if arm is not None}
    strays = sorted({t.variant for t in trials if t.variant is not None} - names_of_arms)
    if strays or (state.arms and any(t.variant is None for t in trials)):
        raise ValueError(f"trial records of arms the run does not have: {', '.join(map(str, strays)) or 'none'}")
    by_scenario: dict[tuple[str, str | None], list[TrialRecord]] = {}
    for trial in trials:
        by_scenario.setdefault((trial.scenario, trial.variant), []).append(_sanitise_trial(trial))
    # A variant run requests each scenario's trials per arm.
    per_arm = Counter((key.scenario, key.variant) for key in state.expected.values())
    records: list[ScenarioRecord] = []
    for name, file, source, expected in scenarios:
        for arm in arms:
            mine = sorted(by_scenario.get((name, arm.name if arm else None), []), key=lambda t: t.trial)
            scenario_digest, harness_digest = (digests or {}).get(name, (None, None))
            if arm is not None:
                requested = per_arm.get((name, arm.name)) or (len(mine) if state.expected else expected)
                if state.arm_expected is not None:
                    requested = state.arm_expected.get((name, arm.name), 0)
                if not requested:
                    continue   # selection left this arm no trial of the scenario
                expected_here, harness_digest = requested, arm.harnessDigest
            else:
                expected_here = expected
            records.append(_scenario_record(name, file, source, expected_here, mine, scenario_digest, harness_digest,
                                            arm.name if arm else None))
    ordered = [t for record in records for t in record.trials]
    control = [r for r in records if r.variant in (None, arms[0].name if arms[0] else None)]
    errors = [e.to_json() for e in state.errors] + state.reported_errors
    return EvalReport(
        schema=REPORT_SCHEMA,
        runId=state.run_id,
        startedAt=iso_utc(state.started_at),
        finishedAt=iso_utc(finished_at),
        atlanteVersion=__version__,
        host=state.host,
        model=state.model,
        modelVersion=most_frequent_model(ordered),
        scripted=state.scripted,
        scriptedModel=SCRIPTED_MODEL_ID if state.scripted else None,
        requestedModel=most_frequent_model(ordered, requested=True) if state.scripted else None,
        budget=state.budget,
        complete=complete and not state.interrupted,
        interrupted=state.interrupted,
        exitStatus=exit_status,
        verdicts=verdict_counts(ordered),
        scenarios=records,
        errors=[_sanitise_error(dict(e)) for e in errors],
        costCap=cost_cap,
        suite=suite_statistics(control),
        isolation=state.isolation,
        shard=state.shard,
        suiteDigest=state.suite_digest,
        runGroup=state.run_group,
        shards=None if state.shards is None else list(state.shards),
        selectedTrials=len(state.expected) if state.collected else None,
        selection=state.selection if state.collected else None,
        arms=state.arms,
    )


def _scenario_record(name: str, file: str, source: str, expected: int, mine: list[TrialRecord],
                     scenario_digest: str | None, harness_digest: str | None, variant: str | None) -> ScenarioRecord:
    return ScenarioRecord(
        name=name,
        variant=variant,
        file=file,
        source=source,
        expectedTrials=expected,
        passRate=pass_rate(mine) if mine else None,
        notRun=max(expected - len(mine), 0),
        meanDurationMs=mean_duration(mine),
        p95DurationMs=p95_duration(mine),
        trials=mine,
        totals=scenario_totals(mine),
        scenarioDigest=scenario_digest,
        harnessDigest=harness_digest,
        **scenario_statistics(mine),
    )


def write_report(report: EvalReport, out_dir: Path) -> Path:
    """Write ``<out_dir>/report.json`` atomically and return its path.

    The JSON text is produced in full before the file is touched, and the write goes through a
    temp file and a rename, so a failure at any point leaves the previous report intact.
    """
    text = report.to_json()
    path = out_dir / REPORT_FILE
    atomic_write_text(path, text)
    # What the readers that pick reports up by themselves (forecast, shards, view) require.
    write_seal(path, text.encode("utf-8", "surrogateescape"))
    return path


GITIGNORE_LIMIT = 1024 * 1024


def ensure_gitignore(atlante_dir: Path) -> None:
    """Make ``<atlante_dir>/.gitignore`` ignore ``eval/``, keeping every other line as it was.

    Idempotent: an existing ``eval/`` or ``/eval/`` line is left alone.  Only the default output
    location calls this; a custom ``--out`` never edits the project's ignore file.
    """
    path = atlante_dir / ".gitignore"
    # Bytes, not read_text(): universal newlines would silently turn a CRLF file into LF, and
    # surrogateescape carries any non-UTF-8 byte of the user's file through unchanged.
    # read_capped: a FIFO or directory planted at the path is an error, never a hang.
    existing = read_capped(path, GITIGNORE_LIMIT).decode("utf-8", "surrogateescape") if os.path.lexists(path) else ""
    if any(line.strip() in ("eval/", "/eval/") for line in existing.splitlines()):
        return
    newline = "\r\n" if "\r\n" in existing else "\n"
    if existing and not existing.endswith(("\n", "\r")):
        existing += newline
    atomic_write_bytes(path, (existing + "eval/" + newline).encode("utf-8", "surrogateescape"))
