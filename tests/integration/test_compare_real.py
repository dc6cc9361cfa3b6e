"""``atlante compare`` and the regression gate on real scripted runs of the example project.

Two harness variants of the example project run ``adds-farewell`` through the pinned claude CLI and
the scripted model: the shipped harness, and one whose ``greeter-dev`` agent lost its write and
edit tools — the same script then cannot change a file, so every trial fails.  The scenario is
identical in both (same ``scenarioDigest``); only ``harnessDigest`` differs.  Four trials per side
are enough for Fisher's test to call the drop a regression (p = 2/70); the first three recorded
trials of each run, compared the same way, cannot (p = 0.1) and say how many trials would.  A third
run whose fixture changed is refused as not comparable.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import copy_example
from pytest_atlante.report.model import EvalReport, pass_rate, scenario_statistics
from pytest_atlante.suite import jsonc
from pytest_atlante.suite.build import build
from trial_helpers import EvalRun, run_eval

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(600)]

SCENARIO = "adds-farewell"
NO_WRITE_TOOLS = ["read", "bash", "glob", "grep", "skill"]


@pytest.fixture(autouse=True)
def on_path(monkeypatch: pytest.MonkeyPatch, hosts_path: Callable[[], str]) -> None:
    monkeypatch.setenv("PATH", hosts_path())


def variant(tmp_path: Path, name: str, *, trials: int, tools: list[str] | None = None, fixture_edit: bool = False) -> Path:
    (tmp_path / name).mkdir()
    root = copy_example(tmp_path / name)
    config = root / "atlante.jsonc"
    doc: dict[str, Any] = jsonc.loads(config.read_text())
    doc["eval"]["budget"]["trials"] = trials
    if tools is not None:
        doc["harness"]["agents"]["greeter-dev"]["tools"] = tools
    config.write_text(json.dumps(doc, indent=2) + "\n")
    if fixture_edit:
        readme = root / "eval/fixtures/greeter-app/README.md"
        readme.write_text(readme.read_text() + "\nA line added after the baseline run.\n")
    build(root)
    return root


def first_trials(report: EvalReport, n: int) -> EvalReport:
    """The report a run of ``n`` trials would have written: its first ``n`` recorded trials."""
    scenarios = [s.model_copy(update={"trials": s.trials[:n], "expectedTrials": n, "passRate": pass_rate(s.trials[:n]),
                                      **scenario_statistics(s.trials[:n])}) for s in report.scenarios]
    return report.model_copy(update={"scenarios": scenarios})


def compare(pytester: pytest.Pytester, base: Path, new: Path, *args: str) -> pytest.RunResult:
    return pytester.run(sys.executable, "-m", "pytest_atlante.cli", "compare", str(base), str(new), *args)


def row(result: pytest.RunResult) -> str:
    return next(line for line in result.outlines if line.startswith(SCENARIO))


def test_a_harness_that_breaks_a_scenario_regresses_and_a_changed_fixture_is_refused(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    good = variant(tmp_path, "good", trials=4)
    broken = variant(tmp_path, "broken", trials=4, tools=NO_WRITE_TOOLS)
    base: EvalRun = run_eval(pytester, good, tmp_path / "base", "--atlante-scenario", SCENARIO)
    assert base.result.ret == 0, base.output()
    base_path = base.out / "report.json"
    record = base.report.scenarios[0]
    assert record.passInterval is not None and record.passInterval.low == pytest.approx(0.5101, abs=1e-4)
    assert [p.k for p in record.passAtK] == [1, 2, 3, 4] and record.verdictCounts["pass"] == 4
    assert any(line.startswith(f"{SCENARIO} ") and "51-100%" in line for line in base.result.outlines), base.output()

    # The gate: the broken harness's run compares itself with the baseline and fails on the regression.
    new = run_eval(pytester, broken, tmp_path / "new", "--atlante-scenario", SCENARIO,
                   "--atlante-baseline", str(base_path), "--atlante-fail-on-regression")
    assert new.result.ret == 1, new.output()
    comparison = new.report.comparison
    assert comparison is not None, new.output()
    result = comparison.scenarios[0]
    assert (result.label, result.base.passed, result.new.passed, result.new.trials) == ("regressed", 4, 0, 4)
    assert result.pValueHolm == pytest.approx(2 / 70) and result.changed == ["harness"]
    assert [c.component for c in comparison.changed] == ["harness"]
    assert base.report.scenarios[0].scenarioDigest == new.report.scenarios[0].scenarioDigest
    assert any("regressed" in line for line in new.result.outlines if line.lstrip().startswith(SCENARIO))

    # The CLI on the same two reports agrees, and exits 1.
    cli = compare(pytester, base_path, new.out / "report.json")
    assert cli.ret == 1, cli.outlines + cli.errlines
    assert row(cli).split()[1:4] == ["4/4", "0/4", "-100%"] and "regressed" in row(cli)
    assert any(line.startswith("p: two-sided Fisher exact test") for line in cli.outlines), cli.outlines

    # Three trials per side (the first three each run recorded) cannot decide; the table says how many could.
    short_base, short_new = tmp_path / "base-3.json", tmp_path / "new-3.json"
    short_base.write_text(first_trials(base.report, 3).to_json())
    short_new.write_text(first_trials(new.report, 3).to_json())
    cli = compare(pytester, short_base, short_new, "--json")
    assert cli.ret == 0, cli.outlines + cli.errlines
    data = json.loads("\n".join(cli.outlines))["scenarios"][0]
    assert (data["label"], data["pValue"], data["trialsNeeded"]) == ("inconclusive", pytest.approx(0.1), 4)
    assert data["pValueTest"] == "fisher-exact-two-sided" and data["interval"]["method"] == "newcombe-hybrid-score"

    # A changed fixture changes what the scenario measures: refused (exit 2) unless allowed.
    changed = variant(tmp_path, "changed", trials=1, fixture_edit=True)
    other = run_eval(pytester, changed, tmp_path / "changed-out", "--atlante-scenario", SCENARIO)
    assert other.result.ret == 0, other.output()
    cli = compare(pytester, base_path, other.out / "report.json")
    assert cli.ret == 2 and "not-comparable" in row(cli), cli.outlines
    assert any("scenarioDigest differs" in line for line in cli.outlines)
    cli = compare(pytester, base_path, other.out / "report.json", "--allow-changed-scenarios")
    assert cli.ret == 0 and "unchanged" in row(cli), cli.outlines
