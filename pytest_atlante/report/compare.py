"""``atlante compare``: did a harness change make a scenario better, worse, or can we not tell?

Two eval reports in, one ``Comparison`` out (``statrecords.py``), used by the CLI and by the
``--atlante-baseline`` gate of an eval run alike.  Per scenario present in both runs: the pass
counts, the difference of pass rates with Newcombe's interval, Fisher's exact p-value, Holm's
correction across the compared scenarios, and a label.  ``docs/statistics.md`` explains each.

A scenario is compared only when it measured the same thing in both runs: a differing
``scenarioDigest`` (document, fixture or script changed) makes it ``not-comparable`` unless the
caller allows changed scenarios.  What else differs between the runs (harness, host, model) is
listed, not refused — it is usually the very change being evaluated.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pytest_atlante.diagnostics import Diagnostic, DiagnosticError
from pytest_atlante.fsutil import DIGEST_PREFIX
from pytest_atlante.report import stats as evalstats
from pytest_atlante.report.model import EvalReport, ScenarioRecord, mean_duration, passed_and_ran, trigger_counts
from pytest_atlante.report.reader import load_report
from pytest_atlante.report.statrecords import (
    LABELS,
    Comparison,
    ComponentChange,
    Deltas,
    DifferenceInterval,
    Label,
    ScenarioComparison,
    SideCounts,
    TriggerComparison,
    UseCounts,
)

COMPARE_INPUT_CODE = "eval-compare-input"
EXIT_OK = 0
EXIT_REGRESSED = 1
EXIT_INVALID = 2
SIGNIFICANCE = evalstats.ALPHA
NO_DIGESTS_NOTE = ("{side} report has no comparability digests (written before pytest-atlante recorded them): "
                   "that the scenarios are defined alike is assumed, not verified")


def _per_trial(total: float | None, ran: int) -> float | None:
    return None if total is None or ran == 0 else total / ran


def _deltas(base: ScenarioRecord, new: ScenarioRecord) -> Deltas:
    (_, base_ran), (_, new_ran) = passed_and_ran(base.trials), passed_and_ran(new.trials)

    def delta(b: float | None, n: float | None) -> float | None:
        return None if b is None or n is None else n - b

    return Deltas(
        tokensPerTrial=delta(_per_trial(base.totals.tokens, base_ran), _per_trial(new.totals.tokens, new_ran)),
        costUsdPerTrial=delta(_per_trial(base.totals.costUsd, base_ran), _per_trial(new.totals.costUsd, new_ran)),
        meanDurationMs=delta(mean_duration(base.trials) if base_ran else None, mean_duration(new.trials) if new_ran else None),
    )


def _run_changes(base: EvalReport, new: EvalReport) -> list[ComponentChange]:
    def host(report: EvalReport) -> tuple[str | None, str | None]:
        return (report.host.name, report.host.version) if report.host else (None, None)

    pairs = [
        ("host", host(base)[0], host(new)[0]),
        ("hostVersion", host(base)[1], host(new)[1]),
        ("model", base.model, new.model),
        ("modelVersion", base.modelVersion, new.modelVersion),
        ("requestedModel", base.requestedModel, new.requestedModel),   # scripted runs: the name asked for
        ("scripted", str(base.scripted).lower(), str(new.scripted).lower()),
        ("harness", base.suite.harnessDigest if base.suite else None, new.suite.harnessDigest if new.suite else None),
        ("atlanteVersion", base.atlanteVersion, new.atlanteVersion),
    ]
    # A digest missing on one side (an older report) is unknown, not different: the notes say so.
    return [ComponentChange(component=name, base=b, new=n) for name, b, n in pairs
            if b != n and not (name == "harness" and (b is None or n is None))]


def _scenario(base: ScenarioRecord, new: ScenarioRecord, allow_changed: bool) -> ScenarioComparison:
    (c_base, n_base), (c_new, n_new) = passed_and_ran(base.trials), passed_and_ran(new.trials)
    result = ScenarioComparison(name=base.name, label="inconclusive", base=SideCounts(passed=c_base, trials=n_base),
                                new=SideCounts(passed=c_new, trials=n_new), deltas=_deltas(base, new))
    changed, notes = [], []
    if base.scenarioDigest and new.scenarioDigest and base.scenarioDigest != new.scenarioDigest:
        changed.append("scenario")
        notes.append("scenarioDigest differs: the document, fixture tree or script changed between the runs")
    if base.harnessDigest and new.harnessDigest and base.harnessDigest != new.harnessDigest:
        changed.append("harness")
    for side, record in (("base", base), ("new", new)):
        if record.unreliable:
            notes.append(f"{side} has infra-error trials: its pass rate undercounts what the harness can do")
    if "scenario" in changed and not allow_changed:
        return result.model_copy(update={"label": "not-comparable", "changed": changed, "notes": notes})
    if n_base == 0 or n_new == 0:
        notes.append("no trial ran on the " + ("base" if n_base == 0 else "new") + " side")
        return result.model_copy(update={"label": "not-comparable", "changed": changed, "notes": notes})
    interval = evalstats.newcombe_difference(c_new, n_new, c_base, n_base)
    assert interval is not None  # both sides ran trials
    return result.model_copy(update={
        "difference": c_new / n_new - c_base / n_base,
        "interval": DifferenceInterval(low=interval.low, high=interval.high),
        "pValue": evalstats.fisher_two_sided(c_new, n_new, c_base, n_base),
        "pValueTest": "fisher-exact-two-sided",
        "changed": changed,
        "notes": notes,
    })


def _label(result: ScenarioComparison, adjusted: float, tested: int) -> ScenarioComparison:
    """The label from the Holm-adjusted p-value; for an inconclusive difference, the trials per side
    that would detect it at α / ``tested`` — Holm's first, strictest step, so the figure holds
    whichever rank the scenario's p-value would take among the ``tested`` ones."""
    assert result.difference is not None
    update: dict[str, object] = {"pValueHolm": adjusted}
    if adjusted < SIGNIFICANCE:
        update["label"] = "improved" if result.difference > 0 else "regressed"
    elif result.difference == 0:
        update["label"] = "unchanged"
    else:
        p_new, p_base = result.new.passed / result.new.trials, result.base.passed / result.base.trials
        needed = evalstats.trials_needed(p_new, p_base, alpha=SIGNIFICANCE / tested)
        update["label"] = "inconclusive"
        update["trialsNeeded"] = needed
        if needed is None:
            update["trialsNeededExceeds"] = evalstats.MAX_TRIALS_NEEDED
    return result.model_copy(update=update)


def _triggers(base: ScenarioRecord, new: ScenarioRecord) -> list[TriggerComparison]:
    """The trigger rates both runs measured for a comparable scenario, each with its test."""
    base_counts, new_counts = trigger_counts(base.trials), trigger_counts(new.trials)
    found = []
    for key in sorted(set(base_counts) & set(new_counts)):
        (u_base, n_base, _), (u_new, n_new, wanted) = base_counts[key], new_counts[key]
        interval = evalstats.newcombe_difference(u_new, n_new, u_base, n_base)
        assert interval is not None  # a count exists only for a trial that ran
        found.append(TriggerComparison(
            scenario=new.name, kind=key[0], name=key[1], wanted=wanted, label="inconclusive",
            base=UseCounts(used=u_base, trials=n_base), new=UseCounts(used=u_new, trials=n_new),
            difference=u_new / n_new - u_base / n_base, interval=DifferenceInterval(low=interval.low, high=interval.high),
            pValue=evalstats.fisher_two_sided(u_new, n_new, u_base, n_base), pValueTest="fisher-exact-two-sided"))
    return found


def _trigger_label(result: TriggerComparison, adjusted: float) -> TriggerComparison:
    """Improved or regressed by the check's wanted direction (more use is better for ``use``, less
    for ``no-use``); a significant change of a rate with no wanted direction stays inconclusive."""
    assert result.difference is not None
    label: Label = "inconclusive"
    notes = list(result.notes)
    if adjusted < SIGNIFICANCE and result.wanted is not None:
        better = result.difference > 0 if result.wanted == "use" else result.difference < 0
        label = "improved" if better else "regressed"
    elif adjusted < SIGNIFICANCE:
        notes.append("the rate changed, but the check wants neither use nor no use (a min/max band)")
    elif result.difference == 0:
        label = "unchanged"
    return result.model_copy(update={"pValueHolm": adjusted, "label": label, "notes": notes})


def compare_reports(base: EvalReport, new: EvalReport, *, allow_changed: bool = False) -> Comparison:
    new_by_name = {s.name: s for s in new.scenarios}
    base_names = {s.name for s in base.scenarios}
    results = [_scenario(s, new_by_name[s.name], allow_changed) for s in base.scenarios if s.name in new_by_name]
    comparable = {r.name for r in results if r.label != "not-comparable"}
    triggers = [t for s in base.scenarios if s.name in comparable for t in _triggers(s, new_by_name[s.name])]
    # One Holm family: every pass-rate test and every trigger-rate test of the comparison.
    tested = [i for i, r in enumerate(results) if r.pValue is not None]
    family = [results[i].pValue or 0.0 for i in tested] + [t.pValue or 0.0 for t in triggers]
    adjusted = evalstats.holm(family)
    for i, p in zip(tested, adjusted[:len(tested)], strict=True):
        results[i] = _label(results[i], p, len(family))
    triggers = [_trigger_label(t, p) for t, p in zip(triggers, adjusted[len(tested):], strict=True)]
    notes = []
    for side, report in (("BASE", base), ("NEW", new)):
        if any(s.scenarioDigest is None for s in report.scenarios):
            notes.append(NO_DIGESTS_NOTE.format(side=side))
    if not results:
        notes.append("the two runs have no scenario in common")
    counts = {label: sum(1 for r in results if r.label == label) for label in LABELS}
    return Comparison(
        baseRunId=base.runId, newRunId=new.runId, allowChangedScenarios=allow_changed,
        changed=_run_changes(base, new), scenarios=results,
        onlyInBase=[s.name for s in base.scenarios if s.name not in new_by_name],
        onlyInNew=[s.name for s in new.scenarios if s.name not in base_names],
        counts=counts, notes=notes, triggers=triggers,
    )


def exit_status(comparison: Comparison) -> int:
    """1 when a scenario's pass rate or a trigger rate regressed; else 2 when any could not be compared (or none was); else 0.

    A regression is a finding and wins; an incomparable scenario means the input must be fixed
    (or ``--allow-changed-scenarios`` given) before "no regression" can be claimed.
    """
    if comparison.counts.get("regressed", 0) or any(t.label == "regressed" for t in comparison.triggers):
        return EXIT_REGRESSED
    if comparison.counts.get("not-comparable", 0) or not comparison.scenarios:
        return EXIT_INVALID
    return EXIT_OK


# --- rendering -------------------------------------------------------------------------------


def _pct(value: float) -> str:
    return f"{value * 100:+.0f}%" if value else "0%"


def _ci(result: ScenarioComparison) -> str:
    if result.interval is None:
        return "-"
    return f"[{result.interval.low * 100:+.0f}%, {result.interval.high * 100:+.0f}%]"


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _verdict_note(result: ScenarioComparison) -> str:
    if result.label == "inconclusive":
        if result.trialsNeeded is not None:
            return f"~{result.trialsNeeded} trials/side for 80% power"
        return f"> {result.trialsNeededExceeds} trials/side for 80% power"
    return ""


def _short(value: str | None) -> str:
    """Digests shortened to 12 hex digits, like a short git id; other values as they are."""
    if value is None:
        return "-"
    return value[: len(DIGEST_PREFIX) + 12] if value.startswith(DIGEST_PREFIX) else value


def _signed(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


# How the table names each test (the JSON carries the key, as ``pValueTest``).
P_VALUE_TESTS = {"fisher-exact-two-sided": "two-sided Fisher exact test (conditional on both margins, as "
                                           "scipy.stats.fisher_exact; not Boschloo's: docs/statistics.md)"}


def render(comparison: Comparison, base_label: str = "BASE", new_label: str = "NEW") -> list[str]:
    """The terminal table; the same lines follow an eval run given ``--atlante-baseline``."""
    lines = [f"{base_label}: run {comparison.baseRunId}   {new_label}: run {comparison.newRunId}"]
    for change in comparison.changed:
        lines.append(f"changed between the runs: {change.component}: {_short(change.base)} -> {_short(change.new)}")
    lines.append(f"{'scenario':<28} {'base':>5} {'new':>5} {'diff':>6} {'95% CI (new-base)':>18} "
                 f"{'p':>6} {'p Holm':>6}  {'label':<14} note")
    for r in comparison.scenarios:
        base, new = f"{r.base.passed}/{r.base.trials}", f"{r.new.passed}/{r.new.trials}"
        diff = "-" if r.difference is None else _pct(r.difference)
        note = _verdict_note(r)
        lines.append(f"{r.name[:28]:<28} {base:>5} {new:>5} {diff:>6} {_ci(r):>18} "
                     f"{_p(r.pValue):>6} {_p(r.pValueHolm):>6}  {r.label:<14} {note}".rstrip())
    lines.append(f"{'per trial, new - base':<28} {'tokens':>9} {'cost $':>9} {'mean s':>8}  changed")
    for r in comparison.scenarios:
        d = r.deltas
        seconds = None if d.meanDurationMs is None else d.meanDurationMs / 1000
        lines.append(f"{r.name[:28]:<28} {_signed(d.tokensPerTrial, '+9.0f'):>9} {_signed(d.costUsdPerTrial, '+9.4f'):>9} "
                     f"{_signed(seconds, '+8.1f'):>8}  {', '.join(r.changed) or '-'}")
    if comparison.triggers:
        lines.append(f"{'trigger rate (scenario: skill or agent)':<40} {'base':>5} {'new':>5} {'diff':>6} "
                     f"{'95% CI (new-base)':>18} {'p':>6} {'p Holm':>6}  {'label':<14} wanted")
    for t in comparison.triggers:
        subject = f"{t.scenario}: {t.kind} {t.name}"
        base, new = f"{t.base.used}/{t.base.trials}", f"{t.new.used}/{t.new.trials}"
        diff = "-" if t.difference is None else _pct(t.difference)
        ci = "-" if t.interval is None else f"[{t.interval.low * 100:+.0f}%, {t.interval.high * 100:+.0f}%]"
        lines.append(f"{subject[:40]:<40} {base:>5} {new:>5} {diff:>6} {ci:>18} {_p(t.pValue):>6} "
                     f"{_p(t.pValueHolm):>6}  {t.label:<14} {t.wanted or '-'}")
    for name in comparison.onlyInBase:
        lines.append(f"only in {base_label}: {name}")
    for name in comparison.onlyInNew:
        lines.append(f"only in {new_label}: {name}")
    if any(r.pValueTest for r in comparison.scenarios):
        lines.append(f"p: {P_VALUE_TESTS['fisher-exact-two-sided']}; p Holm: Holm's step-down adjustment "
                     "of those p-values across everything compared (pass rates and trigger rates); "
                     "CI: Newcombe's hybrid score interval")
    lines.extend(f"note: {note}" for note in comparison.notes)
    for r in comparison.scenarios:
        lines.extend(f"note: {r.name}: {note}" for note in r.notes)
    for t in comparison.triggers:
        lines.extend(f"note: {t.scenario}: {t.kind} {t.name}: {note}" for note in t.notes)
    counts = ", ".join(f"{n} {label}" for label, n in comparison.counts.items() if n)
    trigger_labels = ", ".join(f"{n} {label}" for label in LABELS
                               if (n := sum(1 for t in comparison.triggers if t.label == label)))
    lines.append(f"summary: {counts or 'no scenario compared'}"
                 + (f"; trigger rates: {trigger_labels}" if trigger_labels else ""))
    return lines


def compare_command(base_path: Path, new_path: Path, *, as_json: bool, allow_changed: bool) -> int:
    problems: list[Diagnostic] = []
    reports: list[EvalReport] = []
    for path in (base_path, new_path):
        try:
            reports.append(load_report(path, COMPARE_INPUT_CODE))
        except DiagnosticError as exc:
            problems.extend(exc.diagnostics)
    if problems:
        raise DiagnosticError(problems)
    comparison = compare_reports(reports[0], reports[1], allow_changed=allow_changed)
    if as_json:
        print(comparison.model_dump_json(indent=2))
    else:
        print("\n".join(render(comparison)))
    return exit_status(comparison)


def failed_gate(comparison: Comparison) -> Sequence[str]:
    """Names of the scenarios that make ``--atlante-fail-on-regression`` fail the run."""
    return ([r.name for r in comparison.scenarios if r.label == "regressed"]
            + [f"{t.scenario} ({t.kind} {t.name} trigger rate)" for t in comparison.triggers if t.label == "regressed"])
