"""A variant run's answer: each arm against the control, per scenario and over the suite.

Per scenario the comparison is exactly ``atlante compare`` (``compare.compare_reports``) between two
views of the one report — the control's scenario records and the arm's — so differences,
Newcombe intervals, Fisher p-values, Holm across that arm's scenarios and trigger rates mean what
they mean there.  Over the suite each arm gets a ``Lift`` (``stratified.py``: the
Cochran–Mantel–Haenszel common odds ratio with its exact conditional test), Holm across the arms
that are not replicates, and a label.  An A/A replicate of the control sets the ``noiseFloor``: an
arm whose suite-level difference is no larger than the replicate's is ``within-noise``, whatever
its p-value (docs/statistics.md, "Comparing variants").

Computed from the report alone, so a merged report and an older report read back give the same
answer as the run that wrote it.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_atlante.report import stats as evalstats
from pytest_atlante.report import stratified
from pytest_atlante.report.compare import SIGNIFICANCE, compare_reports
from pytest_atlante.report.model import (
    ArmRecord,
    EvalReport,
    HostIdentity,
    ScenarioRecord,
    counted,
    suite_statistics,
)
from pytest_atlante.report.statrecords import (
    Comparison,
    Lift,
    LiftLabel,
    NoiseFloor,
    PassCounts,
    RatioInterval,
    ScenarioDifference,
    UsedSplit,
)
from pytest_atlante.report.stratified import Stratum

__all__ = ["arm_view", "lift_lines", "with_arm_comparison"]


def arm_view(report: EvalReport, arm: ArmRecord) -> EvalReport:
    """The report as if only ``arm`` had run: its scenario records, host, model and suite line."""
    scenarios = [s for s in report.scenarios if s.variant == arm.name]
    host = report.host
    if host is None or host.name != arm.host or host.version != arm.hostVersion:
        # Only the name and version are compared (compare._run_changes); no dialect is known here.
        host = HostIdentity.model_construct(name=arm.host, version=arm.hostVersion, dialect=None)
    return report.model_copy(update={"scenarios": scenarios, "host": host, "model": arm.model,
                                     "suite": suite_statistics(scenarios), "arms": None, "lift": None,
                                     "noiseFloor": None, "usedSplit": None, "comparison": None})


def _strata(comparison: Comparison) -> list[Stratum]:
    return [Stratum(c.new.passed, c.new.trials, c.base.passed, c.base.trials)
            for c in comparison.scenarios if c.label != "not-comparable"]


def _lift(arm: ArmRecord, comparison: Comparison) -> Lift:
    strata = _strata(comparison)
    estimate = stratified.mantel_haenszel(strata)
    interval = stratified.rbg_interval(strata)
    return Lift(
        variant=arm.name, replicateOf=arm.replicateOf, label="inconclusive", comparison=comparison,
        estimate=estimate if estimate is not None and estimate != float("inf") else None,
        interval=None if interval is None else RatioInterval(low=interval.low, high=interval.high),
        p=stratified.exact_conditional_p(strata), difference=stratified.mean_difference(strata),
        scenarios=sum(1 for s in strata if s.informative))


def _labelled(lift: Lift, adjusted: float | None, tested: int, noise: NoiseFloor | None) -> Lift:
    """better / worse by the Holm-adjusted p and the side of the null; within-noise when the
    suite-level difference is no larger than the A/A replicate's; else inconclusive, with the trials
    per arm and scenario that would settle it at Holm's strictest step (α / ``tested``)."""
    update: dict[str, object] = {"pHolm": adjusted}
    label: LiftLabel = "inconclusive"
    if lift.replicateOf is not None:
        label = "within-noise"   # two runs of one harness: the noise itself
    elif (noise is not None and noise.difference is not None and lift.difference is not None
          and abs(lift.difference) <= abs(noise.difference)):
        label = "within-noise"
    elif adjusted is not None and adjusted < SIGNIFICANCE:
        strata = _strata(lift.comparison)
        label = "better" if stratified.direction(strata) > 0 else "worse"
    else:
        rates = [(s.passed / s.trials, s.control_passed / s.control_trials)
                 for s in _strata(lift.comparison) if s.informative]
        needed = stratified.trials_needed(rates, alpha=SIGNIFICANCE / max(tested, 1))
        update["trialsNeeded"] = needed
        if needed is None and rates and any(p1 != p0 for p1, p0 in rates):
            update["trialsNeededExceeds"] = evalstats.MAX_TRIALS_NEEDED
    update["label"] = label
    return lift.model_copy(update=update)


def _noise_floor(lifts: Sequence[Lift], control: str) -> NoiseFloor | None:
    """The first replicate of the control (in the configuration's order) sets the floor."""
    replicate = next((lift for lift in lifts if lift.replicateOf == control), None)
    if replicate is None:
        return None
    differing = [ScenarioDifference(name=c.name, difference=c.difference)
                 for c in replicate.comparison.scenarios if c.difference]
    return NoiseFloor(variant=replicate.variant, scenarios=differing, difference=replicate.difference)


def used_split(scenarios: Sequence[ScenarioRecord]) -> list[UsedSplit]:
    """Per scenario, arm and skill or agent a skill-used / agent-used check counts: passes among
    the trials that used it and among those that did not (trials whose count was decided)."""
    found = []
    for record in scenarios:
        tallies: dict[tuple[str, str], list[int]] = {}
        for trial in counted(record.trials):
            seen: set[tuple[str, str]] = set()
            for check in trial.checks:
                count = check.count
                if count is None or count.kind not in ("skill", "agent") or (count.kind, count.name) in seen:
                    continue
                seen.add((count.kind, count.name))
                tally = tallies.setdefault((count.kind, count.name), [0, 0, 0, 0])
                offset = 0 if count.uses > 0 else 2
                tally[offset] += trial.verdict == "pass"
                tally[offset + 1] += 1
        for (kind, name), (used_pass, used, unused_pass, unused) in sorted(tallies.items()):
            assert kind in ("skill", "agent")
            found.append(UsedSplit(scenario=record.name, variant=record.variant or "", kind=kind, name=name,  # type: ignore[arg-type]
                                   used=PassCounts(passed=used_pass, trials=used),
                                   notUsed=PassCounts(passed=unused_pass, trials=unused)))
    return found


def with_arm_comparison(report: EvalReport) -> EvalReport:
    """The report with ``lift``, ``noiseFloor`` and ``usedSplit`` (unchanged without arms)."""
    if not report.arms or len(report.arms) < 2:
        return report
    control = report.arms[0]
    base = arm_view(report, control)
    lifts = [_lift(arm, compare_reports(base, arm_view(report, arm))) for arm in report.arms[1:]]
    noise = _noise_floor(lifts, control.name)
    family = [i for i, lift in enumerate(lifts) if lift.replicateOf is None and lift.p is not None]
    adjusted = dict(zip(family, evalstats.holm([lifts[i].p or 0.0 for i in family]), strict=True))
    lifts = [_labelled(lift, adjusted.get(i), len(family), noise) for i, lift in enumerate(lifts)]
    return report.model_copy(update={"lift": lifts, "noiseFloor": noise, "usedSplit": used_split(report.scenarios)})


# --- rendering (the terminal summary; the view shows the same table) ---------------------------


def _ratio(lift: Lift) -> str:
    if lift.estimate is None:
        return "inf" if lift.difference and lift.difference > 0 else "-"
    return f"{lift.estimate:.2f}"


def _ratio_interval(lift: Lift) -> str:
    return "-" if lift.interval is None else f"[{lift.interval.low:.2f}, {lift.interval.high:.2f}]"


def _lift_note(lift: Lift) -> str:
    if lift.replicateOf is not None:
        return f"A/A replicate of {lift.replicateOf}"
    if lift.trialsNeeded is not None:
        return f"~{lift.trialsNeeded} trials/arm/scenario for 80% power"
    if lift.trialsNeededExceeds is not None:
        return f"> {lift.trialsNeededExceeds} trials/arm/scenario for 80% power"
    return ""


def lift_lines(report: EvalReport) -> list[str]:
    """The lift table: each arm against the control over the suite, then the noise floor and each
    arm's per-scenario labels (``atlante compare``'s, Holm across that arm's scenarios)."""
    if not report.lift:
        return []

    def p(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}" if value >= 0.001 else f"{value:.0e}"

    lines = ["lift against the control (stratified by scenario: CMH common odds ratio, exact conditional test, "
             "Holm across arms):",
             f"{'arm':<20} {'diff':>6} {'odds ratio':>10} {'95% CI':>14} {'p':>6} {'p Holm':>6}  {'label':<13} note"]
    for lift in report.lift:
        diff = "-" if lift.difference is None else (f"{lift.difference * 100:+.0f}%" if lift.difference else "0%")
        lines.append(f"{lift.variant[:20]:<20} {diff:>6} {_ratio(lift):>10} {_ratio_interval(lift):>14} {p(lift.p):>6} "
                     f"{p(lift.pHolm):>6}  {lift.label:<13} {_lift_note(lift)}".rstrip())
    noise = report.noiseFloor
    if noise is not None:
        differing = ", ".join(f"{s.name} {s.difference * 100:+.0f}%" for s in noise.scenarios) or "no scenario"
        suite = "-" if noise.difference is None else f"{noise.difference * 100:+.0f}%"
        lines.append(f"noise floor ({noise.variant}, an A/A run of the control): suite {suite}; differing: {differing}")
    for lift in report.lift:
        counts = lift.comparison.counts
        labelled = ", ".join(f"{n} {label}" for label, n in counts.items() if n)
        lines.append(f"{lift.variant}: per scenario against the control: {labelled or 'nothing compared'}"
                     + "".join(f"; {s.name} {s.label}" for s in lift.comparison.scenarios
                               if s.label in ("improved", "regressed")))
    return lines
