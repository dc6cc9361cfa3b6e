"""Report statistics and ``atlante compare`` on hand-built reports: labels, Holm, digests, exit
statuses, diagnostics for bad input, and reports written before the statistics existed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_atlante.cli import main
from pytest_atlante.records import Usage, Verdict
from pytest_atlante.report import stats as evalstats
from pytest_atlante.report.compare import compare_reports, exit_status, render
from pytest_atlante.report.model import EvalReport
from test_report import report_of, trial

BASE_DIGESTS = {"alpha": ("sha256:a1", "sha256:h1"), "beta": ("sha256:b1", "sha256:h1"), "gamma": ("sha256:g1", "sha256:h1")}
# Fields this change added: a report written before it has none of them.
NEW_SCENARIO_FIELDS = ("passInterval", "passAtK", "verdictCounts", "unreliable", "scenarioDigest", "harnessDigest")


def run_of(outcomes: dict[str, list[Verdict]], digests: dict[str, tuple[str, str | None]] | None = None,
           run_id: str = "20250601T083655Z-abcdef", tokens: int = 100) -> EvalReport:
    trials = [trial(name, i + 1, v, ms=1000, usage=Usage(inputTokens=tokens)) for name, vs in outcomes.items()
              for i, v in enumerate(vs)]
    return report_of(trials, digests=digests or BASE_DIGESTS, run_id=run_id)


def test_scenario_statistics_in_the_report() -> None:
    report = run_of({"alpha": ["pass", "pass", "fail"], "beta": ["infra-error", "skipped-budget", "pass"]})
    alpha, beta = report.scenarios
    wilson = evalstats.wilson(2, 3)
    assert wilson is not None and alpha.passInterval is not None
    assert (alpha.passInterval.low, alpha.passInterval.high, alpha.passInterval.method) == (wilson.low, wilson.high, "wilson")
    assert [(p.k, p.passAtK, p.passHatK) for p in alpha.passAtK] == [
        (1, pytest.approx(2 / 3), pytest.approx(2 / 3)), (2, 1.0, pytest.approx(1 / 3)), (3, 1.0, 0.0)]
    assert alpha.verdictCounts["pass"] == 2 and alpha.verdictCounts["fail"] == 1 and not alpha.unreliable
    # The skipped trial counts nowhere (as in passRate); the infra-error makes the scenario unreliable.
    assert len(beta.passAtK) == 2 and beta.unreliable and beta.verdictCounts["skipped-budget"] == 1
    assert (alpha.scenarioDigest, alpha.harnessDigest) == BASE_DIGESTS["alpha"]
    suite = report.suite
    assert suite is not None and suite.scenarios == 2 and suite.trials == 5
    assert suite.meanPassRate == pytest.approx((2 / 3 + 1 / 2) / 2)
    assert suite.passInterval is not None and suite.passInterval.method == "cluster-robust"
    assert suite.harnessDigest == "sha256:h1" and suite.scenariosDigest and suite.scenariosDigest.startswith("sha256:")


def test_labels_holm_and_trials_needed() -> None:
    base = run_of({"alpha": ["pass"] * 10, "beta": ["pass"] * 3, "gamma": ["fail", "pass", "fail"]})
    new = run_of({"alpha": ["fail"] * 10, "beta": ["fail"] * 3, "gamma": ["pass", "fail", "fail"]}, run_id="r2")
    comparison = compare_reports(base, new)
    by_name = {r.name: r for r in comparison.scenarios}
    alpha, beta, gamma = by_name["alpha"], by_name["beta"], by_name["gamma"]
    assert alpha.label == "regressed" and alpha.difference == -1.0
    assert alpha.pValue == pytest.approx(evalstats.fisher_two_sided(0, 10, 10, 10))
    # trials needed at α/3 (three scenarios tested): 4/4 vs 0/4 gives p ≈ 0.029 > 0.0167, 5/5 vs 0/5 ≈ 0.0079
    assert beta.label == "inconclusive" and beta.pValue == pytest.approx(0.1) and beta.trialsNeeded == 5
    assert gamma.label == "unchanged" and gamma.trialsNeeded is None
    # Holm over the three tested scenarios, in input order.
    raw = [alpha.pValue, beta.pValue, gamma.pValue]
    assert [alpha.pValueHolm, beta.pValueHolm, gamma.pValueHolm] == pytest.approx(evalstats.holm(raw))  # type: ignore[arg-type]
    assert comparison.counts["regressed"] == 1 and exit_status(comparison) == 1
    assert comparison.changed == []
    # Which exact test gave each p-value, as the interval names its method.
    assert [r.pValueTest for r in (alpha, beta, gamma)] == ["fisher-exact-two-sided"] * 3
    assert alpha.interval is not None and alpha.interval.method == "newcombe-hybrid-score"
    table = "\n".join(render(comparison))
    assert "p: two-sided Fisher exact test" in table and "not Boschloo's" in table and "Holm's step-down" in table


def test_a_comparison_without_p_values_names_no_test() -> None:
    comparison = compare_reports(run_of({"alpha": ["pass"]}), run_of({"alpha": ["skipped-budget"]}, run_id="r2"))
    assert comparison.scenarios[0].pValueTest is None
    assert not any(line.startswith("p: ") for line in render(comparison))


def test_improvement_exits_zero() -> None:
    comparison = compare_reports(run_of({"alpha": ["fail"] * 6}), run_of({"alpha": ["pass"] * 6}, run_id="r2"))
    assert comparison.scenarios[0].label == "improved" and exit_status(comparison) == 0


def test_changed_scenario_is_not_comparable_unless_allowed() -> None:
    base = run_of({"alpha": ["pass"] * 3, "beta": ["pass"] * 3})
    changed = dict(BASE_DIGESTS, alpha=("sha256:a2", "sha256:h2"), beta=("sha256:b1", "sha256:h2"))
    new = run_of({"alpha": ["pass"] * 3, "beta": ["pass"] * 3}, digests=changed, run_id="r2")
    refused = compare_reports(base, new)
    alpha, beta = refused.scenarios
    assert alpha.label == "not-comparable" and alpha.pValue is None and alpha.changed == ["scenario", "harness"]
    assert beta.label == "unchanged" and beta.changed == ["harness"]
    assert [c.component for c in refused.changed] == ["harness"]
    assert exit_status(refused) == 2
    allowed = compare_reports(base, new, allow_changed=True)
    assert allowed.scenarios[0].label == "unchanged" and "scenario" in allowed.scenarios[0].changed
    assert exit_status(allowed) == 0


def test_unmatched_scenarios_and_no_common_scenario() -> None:
    comparison = compare_reports(run_of({"alpha": ["pass"]}), run_of({"beta": ["pass"]}, run_id="r2"))
    assert comparison.onlyInBase == ["alpha"] and comparison.onlyInNew == ["beta"]
    assert exit_status(comparison) == 2 and "no scenario in common" in comparison.notes[-1]


def test_a_side_without_trials_that_ran_is_not_comparable() -> None:
    comparison = compare_reports(run_of({"alpha": ["pass"]}), run_of({"alpha": ["skipped-budget"]}, run_id="r2"))
    assert comparison.scenarios[0].label == "not-comparable"
    assert "no trial ran on the new side" in comparison.scenarios[0].notes


def test_deltas_are_per_trial() -> None:
    base = run_of({"alpha": ["pass"] * 2}, tokens=100)
    new = run_of({"alpha": ["pass"] * 4}, tokens=250, run_id="r2")
    deltas = compare_reports(base, new).scenarios[0].deltas
    assert deltas.tokensPerTrial == 150 and deltas.meanDurationMs == 0 and deltas.costUsdPerTrial is None


def old_report_text(report: EvalReport) -> str:
    data = json.loads(report.to_json())
    for key in ("suite", "comparison"):
        data.pop(key)
    for scenario in data["scenarios"]:
        for key in NEW_SCENARIO_FIELDS:
            scenario.pop(key)
    return json.dumps(data)


def test_old_reports_load_and_compare_with_a_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "old.json"
    old.write_text(old_report_text(run_of({"alpha": ["pass"] * 3})))
    loaded = EvalReport.model_validate_json(old.read_text())
    assert loaded.suite is None and loaded.scenarios[0].passInterval is None and loaded.scenarios[0].passAtK == []
    new = tmp_path / "new.json"
    new.write_text(run_of({"alpha": ["pass", "fail", "pass"]}, run_id="r2").to_json())
    assert main(["compare", str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert "note: BASE report has no comparability digests" in out and "inconclusive" in out
    assert "changed between the runs" not in out  # unknown is not different


def write(path: Path, report: EvalReport) -> str:
    path.write_text(report.to_json())
    return str(path)


def test_cli_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write(tmp_path / "a.json", run_of({"alpha": ["pass"] * 5}))
    new = write(tmp_path / "b.json", run_of({"alpha": ["fail"] * 5}, run_id="r2"))
    assert main(["compare", base, new, "--json"]) == 1
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert data["scenarios"][0]["label"] == "regressed" and data["counts"]["regressed"] == 1
    assert data["scenarios"][0]["interval"]["method"] == "newcombe-hybrid-score"


def test_cli_table_is_readable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write(tmp_path / "a.json", run_of({"alpha": ["pass"] * 3}))
    new = write(tmp_path / "b.json", run_of({"alpha": ["fail"] * 3}, run_id="r2"))
    assert main(["compare", base, new]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("scenario"))
    row = next(line for line in lines if line.startswith("alpha"))
    assert row.split()[:4] == ["alpha", "3/3", "0/3", "-100%"] and "inconclusive" in row and "~4 trials/side" in row
    # columns line up: the label starts where its header does
    assert row.index("inconclusive") == header.index("label")


@pytest.mark.parametrize(("content", "expected"), [
    (None, "cannot read the report"),
    ("{not json", "not valid JSON"),
    ('{"schema": "atlante/eval-report-v1"}', "at $.runId: Field required"),
    (b"\xff\xfe", "not UTF-8"),
])
def test_cli_bad_input_is_a_diagnostic(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | bytes | None,
                                       expected: str) -> None:
    bad = tmp_path / "bad.json"
    if isinstance(content, bytes):
        bad.write_bytes(content)
    elif content is not None:
        bad.write_text(content)
    good = write(tmp_path / "good.json", run_of({"alpha": ["pass"]}))
    assert main(["compare", good, str(bad)]) == 2
    err = capsys.readouterr().err
    assert "eval-compare-input: " + str(bad) in err and expected in err and "Traceback" not in err


def test_render_lists_run_level_changes() -> None:
    base = run_of({"alpha": ["pass"]})
    new = run_of({"alpha": ["pass"]}, run_id="r2").model_copy(update={"model": "other-model"})
    lines = render(compare_reports(base, new))
    assert "changed between the runs: model: - -> other-model" in lines


def test_terminal_summary_shows_interval_pass_at_n_and_the_comparison(tmp_path: Path) -> None:
    from pytest_atlante.run.evalrun import summary_lines

    base = run_of({"alpha": ["pass"] * 5, "beta": ["pass", "infra-error", "fail"]})
    new = run_of({"alpha": ["fail"] * 5, "beta": ["pass", "pass", "pass"]}, run_id="r2")
    lines = summary_lines(new.model_copy(update={"comparison": compare_reports(base, new)}), tmp_path / "report.json")
    header = lines[0]
    alpha = next(line for line in lines if line.startswith("alpha"))
    assert alpha.split()[1:6] == ["5", "0%", "0-43%", "0%", "0%"]
    assert alpha.index("0-43%") + len("0-43%") == header.index("95% CI") + len("95% CI")  # right-aligned under its header
    suite = next(line for line in lines if line.startswith("suite:"))
    assert "mean pass rate 50% over 2 scenarios, 8 trials" in suite and "clustered by scenario" in suite
    assert any(line.strip().startswith("alpha") and "regressed" in line for line in lines[lines.index("compared with the baseline (--atlante-baseline):"):])
    # an infra-error in the baseline's beta is flagged in the comparison's notes
    assert any("base has infra-error trials" in line for line in lines)


def test_terminal_summary_flags_unreliable_scenarios(tmp_path: Path) -> None:
    from pytest_atlante.run.evalrun import summary_lines

    lines = summary_lines(run_of({"alpha": ["pass"] * 2, "beta": ["pass", "infra-error", "fail"]}), tmp_path / "report.json")
    assert next(line for line in lines if line.startswith("beta")).split()[2] == "33%!"
    assert next(line for line in lines if line.startswith("alpha")).split()[2] == "100%"
    assert any(line.startswith("!: the scenario had infra-error trials") for line in lines)
