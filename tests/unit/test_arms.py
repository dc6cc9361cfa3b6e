"""The variant run's report: scenario records per arm, the lift's labels, the noise floor and the
used/not-used split, built from trial records alone (``report/arms.py``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from pytest_atlante.records import CheckResult, CountRecord, TrialRecord
from pytest_atlante.report import stratified
from pytest_atlante.report.arms import lift_lines, with_arm_comparison
from pytest_atlante.report.model import ArmRecord, BudgetRecord, EvalReport, RunState, build_report, keyed
from pytest_atlante.report.stratified import Stratum

NOW = datetime(2026, 12, 6, tzinfo=UTC)
SCENARIOS = ("a", "b", "c", "d")


def trials(arm: str, scenario: str, passes: int, n: int, used: int | None = None) -> list[TrialRecord]:
    """``n`` trials of ``scenario`` in ``arm``, the first ``passes`` passing; with ``used``, the
    first ``used`` trials used the skill ``s`` (a skill-used check counted it)."""
    found = []
    for i in range(n):
        checks: list[Any] = []
        if used is not None:
            count = CountRecord(kind="skill", name="s", uses=1 if i < used else 0, min=1, max=None)
            checks.append(CheckResult(index=0, type="skill-used", passed=i < passes, message="m", count=count))
        else:
            checks.append(CheckResult(index=0, type="file-exists", passed=i < passes, message="m"))
        found.append(TrialRecord(scenario=scenario, trial=i + 1, nodeId=f"x::{scenario}[{arm}:trial-{i + 1}]",
                                 verdict="pass" if i < passes else "fail", variant=arm, checks=checks))
    return found


def report_of(arms: list[ArmRecord], counts: dict[str, dict[str, int]], n: int = 4, **used: int) -> EvalReport:
    records = [t for arm in arms for s in SCENARIOS
               for t in trials(arm.name, s, counts[arm.name].get(s, n), n, used.get(f"{arm.name}_{s}"))]
    state = RunState(run_id="r", started_at=NOW, budget=BudgetRecord(trials=n, timeoutMs=1, maxSessions=99, maxTokens=1),
                     records=keyed(records), arms=arms)
    base = build_report(state, [(s, f"{s}.json", "local", n) for s in SCENARIOS], finished_at=NOW,
                        complete=True, exit_status=1)
    return with_arm_comparison(EvalReport.model_validate_json(base.to_json()))


CONTROL = ArmRecord(name="control", host="claude-code", harnessDigest="sha256:aa")
WORSE = ArmRecord(name="worse", host="claude-code", harnessDigest="sha256:bb")
SLIGHT = ArmRecord(name="slight", host="codex", hostVersion="0.9", harnessDigest="sha256:aa")
AGAIN = ArmRecord(name="again", host="claude-code", harnessDigest="sha256:aa", replicateOf="control")


def test_scenario_records_per_arm_and_the_suite_line_is_the_controls() -> None:
    report = report_of([CONTROL, WORSE], {"control": {}, "worse": {"a": 0, "b": 0}})
    assert [(s.name, s.variant, s.passRate, s.expectedTrials) for s in report.scenarios[:2]] == [
        ("a", "control", 1.0, 4), ("a", "worse", 0.0, 4)]
    assert report.suite is not None and report.suite.meanPassRate == 1.0 and report.suite.trials == 16
    lift = report.lift[0] if report.lift else None
    assert lift is not None and lift.label == "worse" and lift.difference == -0.5
    assert lift.p == pytest.approx(stratified.exact_conditional_p([Stratum(0, 4, 4, 4)] * 2 + [Stratum(4, 4, 4, 4)] * 2))
    assert [s.label for s in lift.comparison.scenarios] == ["inconclusive", "inconclusive", "unchanged", "unchanged"]
    assert [c.component for c in lift.comparison.changed] == ["harness"]


def test_holm_across_arms_and_the_noise_floor_overrides_the_p_value() -> None:
    counts = {"control": {"a": 4, "b": 4, "c": 0, "d": 0}, "worse": {"a": 0, "b": 0, "c": 0, "d": 0},
              "slight": {"a": 4, "b": 3, "c": 0, "d": 0}, "again": {"a": 4, "b": 2, "c": 0, "d": 0}}
    report = report_of([CONTROL, WORSE, SLIGHT, AGAIN], counts)
    lift = {entry.variant: entry for entry in report.lift or []}
    ps = [lift["worse"].p or 0.0, lift["slight"].p or 0.0]
    assert lift["worse"].pHolm == pytest.approx(min(1.0, 2 * min(ps)))   # Holm over the two non-replicates
    assert lift["again"].pHolm is None and lift["again"].label == "within-noise"
    assert report.noiseFloor is not None and report.noiseFloor.difference == pytest.approx(-0.125)
    assert [(s.name, s.difference) for s in report.noiseFloor.scenarios] == [("b", -0.5)]
    # |-1/16| <= |-1/8|: within the noise, whatever the test says; -1/2 is beyond it.
    assert lift["slight"].label == "within-noise" and lift["worse"].label == "worse"
    assert [c.component for c in lift["slight"].comparison.changed] == ["host", "hostVersion"]
    text = "\n".join(lift_lines(report))
    assert "noise floor (again, an A/A run of the control): suite -12%; differing: b -50%" in text
    assert "slight" in text and "A/A replicate of control" in text


def test_an_inconclusive_arm_says_how_many_trials_would_settle_it() -> None:
    report = report_of([CONTROL, WORSE], {"control": {}, "worse": {"a": 3}}, n=4)
    lift = (report.lift or [])[0]
    assert lift.label == "inconclusive" and lift.trialsNeeded is not None and lift.trialsNeeded > 4


def test_the_used_split_tells_helping_from_triggering() -> None:
    report = report_of([CONTROL, WORSE], {"control": {"a": 3}, "worse": {"a": 1}}, control_a=3, worse_a=1)
    split = {(u.scenario, u.variant): (u.used.passed, u.used.trials, u.notUsed.passed, u.notUsed.trials)
             for u in report.usedSplit or []}
    assert split == {("a", "control"): (3, 3, 0, 1), ("a", "worse"): (1, 1, 0, 3)}


def test_a_report_without_arms_is_left_alone() -> None:
    state = RunState(run_id="r", started_at=NOW, budget=BudgetRecord(trials=1, timeoutMs=1, maxSessions=1, maxTokens=1),
                     records=keyed([TrialRecord(scenario="a", trial=1, nodeId="x", verdict="pass",
                                                checks=[CheckResult(index=0, type="file-exists", passed=True, message="m")])]))
    report = build_report(state, [("a", "a.json", "local", 1)], finished_at=NOW, complete=True, exit_status=0)
    assert with_arm_comparison(report) is report
    assert "variant" not in report.to_json() and '"arms"' not in report.to_json() and '"lift"' not in report.to_json()


def test_the_view_shows_the_lift_table_and_each_arms_rows(tmp_path: Any) -> None:
    import json

    from pytest_atlante.report.view import render

    report = report_of([CONTROL, WORSE, AGAIN], {"control": {}, "worse": {"a": 0, "b": 0}, "again": {}})
    page = render(json.loads(report.to_json()), tmp_path)
    section = page.split('<h2 id="lift">', 1)[1].split("<h2", 1)[0]
    assert '<th scope="row">worse</th><td><span class="chip fail">worse</span></td><td>-50 pts</td>' in section
    assert "A/A replicate of control" in section and "Noise floor, from again" in section
    assert ">a [worse]</a>" in page and ">a [control]</a>" in page
    # Untrusted text is escaped there as everywhere in the view.
    hostile = json.loads(report.to_json())
    hostile["lift"][0]["variant"] = "<script>x</script>"
    assert "<script>x</script>" not in render(hostile, tmp_path).split('<h2 id="lift">', 1)[1].split("<h2", 1)[0]
