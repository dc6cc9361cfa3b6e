"""Report models of the statistics: intervals, pass@k, the suite summary and a comparison.

Separate from ``report.py`` so ``compare.py`` (which reads reports) and the report (which may
carry a comparison) share them without importing each other.  Every field that reaches an
``EvalReport`` is optional there, so reports written before these existed still load.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from pytest_atlante.records import Record

Rate = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
Difference = Annotated[float, Field(ge=-1, le=1, allow_inf_nan=False)]
NonNegativeInt = Annotated[int, Field(ge=0)]
Label = Literal["improved", "regressed", "unchanged", "inconclusive", "not-comparable"]
LABELS: tuple[Label, ...] = ("improved", "regressed", "unchanged", "inconclusive", "not-comparable")


class RateInterval(Record):
    low: Rate
    high: Rate
    method: Literal["wilson", "cluster-robust"]
    confidence: float = 0.95


class PassAtK(Record):
    k: Annotated[int, Field(ge=1)]
    passAtK: Rate
    passHatK: Rate


class SuiteStats(Record):
    """The run as a whole: mean of scenario pass rates (each scenario weighs the same)."""

    scenarios: NonNegativeInt          # scenarios with at least one trial that ran
    trials: NonNegativeInt             # trials that ran (skipped ones never count)
    meanPassRate: Rate | None
    passInterval: RateInterval | None  # cluster-robust; None below two scenarios
    # Fingerprint of {scenario name: scenarioDigest}: equal when every scenario is defined alike.
    scenariosDigest: str | None = None
    harnessDigest: str | None = None


TriggerKind = Literal["skill", "agent"]
# What the scenario's check wants of the skill or agent: to be used (``min`` ≥ 1), never to be used
# (``max: 0``), or neither (a band such as ``min: 0, max: 3``), which gives a rate but no direction.
Wanted = Literal["use", "no-use"]


class TriggerRate(Record):
    """How often a skill or agent that a trajectory check names was used: the share of the
    scenario's trials (that ran, with a decided count) whose session used it at least once."""

    kind: TriggerKind
    name: str
    used: NonNegativeInt
    trials: NonNegativeInt
    rate: Rate
    interval: RateInterval | None
    wanted: Wanted | None = None


class DifferenceInterval(Record):
    low: Difference
    high: Difference
    method: Literal["newcombe-hybrid-score"] = "newcombe-hybrid-score"
    confidence: float = 0.95


class SideCounts(Record):
    passed: NonNegativeInt
    trials: NonNegativeInt   # trials that ran


class UseCounts(Record):
    used: NonNegativeInt
    trials: NonNegativeInt   # trials that ran with a decided count


class Deltas(Record):
    """New minus base, per trial that ran; ``None`` when either side lacks the figure."""

    tokensPerTrial: float | None = None
    costUsdPerTrial: float | None = None
    meanDurationMs: float | None = None


class ScenarioComparison(Record):
    name: str
    label: Label
    base: SideCounts
    new: SideCounts
    difference: Difference | None = None          # p_new − p_base
    interval: DifferenceInterval | None = None
    pValue: Rate | None = None                    # the test named by pValueTest
    # Named like the interval's ``method``: which exact test gave ``pValue`` (docs/statistics.md:
    # Fisher's, not Boschloo's, and why); set whenever ``pValue`` is.
    pValueTest: Literal["fisher-exact-two-sided"] | None = None
    pValueHolm: Rate | None = None                # Holm-adjusted across compared scenarios
    trialsNeeded: Annotated[int, Field(ge=1)] | None = None  # per side, for inconclusive ones
    trialsNeededExceeds: Annotated[int, Field(ge=1)] | None = None  # set when the search limit was hit
    deltas: Deltas = Deltas()
    changed: list[str] = Field(default_factory=list)  # comparability components that differ
    notes: list[str] = Field(default_factory=list)


class TriggerComparison(Record):
    """One trigger rate of a scenario compared between the runs, tested as a pass rate is (Fisher's
    exact test, Holm across everything compared); labelled by the check's wanted direction."""

    scenario: str
    kind: TriggerKind
    name: str
    wanted: Wanted | None = None
    label: Label
    base: UseCounts
    new: UseCounts
    difference: Difference | None = None
    interval: DifferenceInterval | None = None
    pValue: Rate | None = None
    pValueTest: Literal["fisher-exact-two-sided"] | None = None
    pValueHolm: Rate | None = None
    notes: list[str] = Field(default_factory=list)


class ComponentChange(Record):
    component: str
    base: str | None
    new: str | None


class Comparison(Record):
    baseRunId: str
    newRunId: str
    allowChangedScenarios: bool = False
    changed: list[ComponentChange] = Field(default_factory=list)  # run-level components that differ
    scenarios: list[ScenarioComparison] = Field(default_factory=list)
    onlyInBase: list[str] = Field(default_factory=list)
    onlyInNew: list[str] = Field(default_factory=list)
    counts: dict[Label, NonNegativeInt] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)
    # Trigger rates of the scenarios compared (in the same Holm family as the pass rates).
    triggers: list[TriggerComparison] = Field(default_factory=list)


# --- a variant run: each arm against the control (report/arms.py, docs/statistics.md) ----------

LiftLabel = Literal["better", "worse", "inconclusive", "within-noise"]
PositiveRatio = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class RatioInterval(Record):
    low: PositiveRatio
    high: PositiveRatio
    method: Literal["robins-breslow-greenland"] = "robins-breslow-greenland"
    confidence: float = 0.95


class Lift(Record):
    """One non-control arm against the control over the whole suite, stratified by scenario."""

    variant: str
    replicateOf: str | None = None
    method: Literal["cmh-exact-conditional"] = "cmh-exact-conditional"
    scale: Literal["odds-ratio"] = "odds-ratio"
    # The Mantel–Haenszel common odds ratio; None when infinite or undefined (see docs).
    estimate: PositiveRatio | None = None
    interval: RatioInterval | None = None
    p: Rate | None = None
    # Holm across the non-replicate arms; None for a replicate (it measures the noise, not a change).
    pHolm: Rate | None = None
    # Mean over scenarios of (this arm's pass rate − the control's).
    difference: Difference | None = None
    label: LiftLabel
    trialsNeeded: Annotated[int, Field(ge=1)] | None = None
    trialsNeededExceeds: int | None = None
    scenarios: NonNegativeInt = 0   # scenarios with trials that ran in both arms
    # Per scenario against the control, exactly as `atlante compare` (trigger rates included).
    comparison: Comparison


class ScenarioDifference(Record):
    name: str
    difference: Difference


class NoiseFloor(Record):
    """What an A/A replicate of the control measured: how far two identical arms land apart."""

    variant: str
    scenarios: list[ScenarioDifference] = Field(default_factory=list)   # those whose two arms differ
    difference: Difference | None = None   # suite-level, as a lift's ``difference``


class PassCounts(Record):
    passed: NonNegativeInt
    trials: NonNegativeInt


class UsedSplit(Record):
    """A scenario with a skill-used / agent-used check, in one arm: the pass rate among trials
    that used the skill or agent and among those that did not ("did it help" vs "did it trigger")."""

    scenario: str
    variant: str
    kind: Literal["skill", "agent"]
    name: str
    used: PassCounts
    notUsed: PassCounts
