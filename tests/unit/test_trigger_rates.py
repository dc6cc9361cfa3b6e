"""Trigger rates: per scenario, the share of trials that used each skill or agent a counting check
names, with its Wilson interval; compared between runs with Fisher's exact test and Holm across
everything compared.  The figures are cross-checked against scipy and statsmodels, as the pass-rate
statistics are (test_evalstats.py)."""

from __future__ import annotations

from typing import Literal

import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

from pytest_atlante.records import CheckResult, CountRecord, TrialRecord, Verdict
from pytest_atlante.report.compare import compare_reports, exit_status, failed_gate, render
from pytest_atlante.report.model import EvalReport
from test_compare import BASE_DIGESTS
from test_report import report_of, trial

Kind = Literal["skill", "agent", "tool"]


def counting(index: int, kind: Kind, name: str, uses: int, minimum: int = 1, maximum: int | None = None) -> CheckResult:
    passed = uses >= minimum and (maximum is None or uses <= maximum)
    return CheckResult(index=index, type=f"{kind}-used", passed=passed, message="counted",
                       count=CountRecord(kind=kind, name=name, uses=uses, min=minimum, max=maximum))


def trigger_trial(scenario: str, n: int, uses: dict[str, int], verdict: Verdict = "pass",
                  no_use: bool = False) -> TrialRecord:
    """A trial of a trigger scenario: one skill-used check per skill (``max: 0`` when ``no_use``)
    plus a tool-used check, which never makes a trigger rate."""
    checks = [counting(i, "skill", name, count, 0 if no_use else 1, 0 if no_use else None)
              for i, (name, count) in enumerate(uses.items())]
    checks.append(counting(len(checks), "tool", "bash", 3))
    return trial(scenario, n, verdict, checks=checks)


def run_with(used: dict[str, list[int]], run_id: str = "20250601T083655Z-abcdef", extra: list[TrialRecord] | None = None,
             no_use: frozenset[str] = frozenset()) -> EvalReport:
    trials = [trigger_trial(name, i + 1, {"pdf": count}, no_use=name in no_use)
              for name, counts in used.items() for i, count in enumerate(counts)]
    return report_of(trials + (extra or []), digests=BASE_DIGESTS, run_id=run_id)


def test_a_scenario_reports_the_share_of_trials_that_used_the_skill_with_wilsons_interval() -> None:
    report = run_with({"alpha": [1, 0, 2, 0, 1]})
    [rate] = report.scenarios[0].triggerRates
    assert (rate.kind, rate.name, rate.used, rate.trials, rate.wanted) == ("skill", "pdf", 3, 5, "use")
    assert rate.rate == pytest.approx(0.6)
    low, high = proportion_confint(3, 5, alpha=0.05, method="wilson")
    assert rate.interval is not None and rate.interval.method == "wilson"
    assert (rate.interval.low, rate.interval.high) == pytest.approx((low, high))


def test_trials_that_did_not_run_or_could_not_count_are_not_in_the_rate() -> None:
    undecided = trial("alpha", 4, "infra-error", checks=[
        CheckResult(index=0, type="skill-used", passed=False, error=True, message="no transcript")])
    skipped = trial("alpha", 5, "skipped-budget")
    report = run_with({"alpha": [1, 1, 0]}, extra=[undecided, skipped])
    [rate] = report.scenarios[0].triggerRates
    assert (rate.used, rate.trials) == (2, 3)


def test_a_should_not_trigger_check_reports_its_direction() -> None:
    report = run_with({"alpha": [0, 0, 1]}, no_use=frozenset({"alpha"}))
    [rate] = report.scenarios[0].triggerRates
    assert (rate.used, rate.trials, rate.wanted) == (1, 3, "no-use")


def test_a_scenario_without_counting_checks_has_no_trigger_rates() -> None:
    report = report_of([trial("alpha", 1, "pass"), trial("alpha", 2, "fail")])
    assert report.scenarios[0].triggerRates == []


def test_trigger_rates_are_compared_with_fishers_test_and_one_holm_family() -> None:
    base = run_with({"alpha": [1] * 10, "beta": [1] * 6, "gamma": [0] * 8},
                    no_use=frozenset({"gamma"}))
    new = run_with({"alpha": [0] * 10, "beta": [1, 0, 1, 1, 0, 1], "gamma": [1] * 8}, run_id="r2",
                   no_use=frozenset({"gamma"}))
    comparison = compare_reports(base, new)
    triggers = {t.scenario: t for t in comparison.triggers}
    assert set(triggers) == {"alpha", "beta", "gamma"}
    for t, (u_base, n_base, u_new, n_new) in ((triggers["alpha"], (10, 10, 0, 10)), (triggers["beta"], (6, 6, 4, 6)),
                                              (triggers["gamma"], (0, 8, 8, 8))):
        assert (t.base.used, t.base.trials, t.new.used, t.new.trials) == (u_base, n_base, u_new, n_new)
        expected = stats.fisher_exact([[u_new, n_new - u_new], [u_base, n_base - u_base]]).pvalue
        assert t.pValue == pytest.approx(expected) and t.pValueTest == "fisher-exact-two-sided"
    # Holm runs over the scenarios' pass-rate tests and the trigger-rate tests together.
    family = [s.pValue for s in comparison.scenarios] + [t.pValue for t in comparison.triggers]
    assert None not in family
    holm = multipletests(family, alpha=0.05, method="holm")[1]
    assert [s.pValueHolm for s in comparison.scenarios] + [t.pValueHolm for t in comparison.triggers] == \
        pytest.approx(list(holm))
    # Labels follow the check's direction: fewer uses regress a should-trigger skill, more uses a
    # should-not-trigger one.
    assert triggers["alpha"].label == "regressed" and triggers["gamma"].label == "regressed"
    assert triggers["beta"].label == "inconclusive"
    assert exit_status(comparison) == 1
    assert failed_gate(comparison) == ["alpha (skill pdf trigger rate)", "gamma (skill pdf trigger rate)"]
    table = "\n".join(render(comparison))
    assert "trigger rate" in table and "alpha: skill pdf" in table and "trigger rates: 2 regressed, 1 inconclusive" in table


def test_fewer_uses_of_a_should_not_trigger_skill_is_an_improvement() -> None:
    base = run_with({"alpha": [1] * 8}, no_use=frozenset({"alpha"}))
    new = run_with({"alpha": [0] * 8}, run_id="r2", no_use=frozenset({"alpha"}))
    [t] = compare_reports(base, new).triggers
    assert t.label == "improved" and t.difference == -1.0


def test_trigger_rates_of_a_not_comparable_scenario_are_not_compared() -> None:
    base = run_with({"alpha": [1] * 3})
    changed = dict(BASE_DIGESTS, alpha=("sha256:a2", "sha256:h1"))
    new = report_of([trigger_trial("alpha", i + 1, {"pdf": 0}) for i in range(3)], digests=changed, run_id="r2")
    comparison = compare_reports(base, new)
    assert comparison.scenarios[0].label == "not-comparable" and comparison.triggers == []
