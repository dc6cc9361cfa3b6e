"""Cost forecast and ``--atlante-max-cost`` from real reports of scripted Claude Code runs.

The scripted model reports usage per turn and Claude Code prices it, so a scripted run leaves a
report with real, non-zero costs in ``.atlante/eval/``, the history the forecast reads.  One
project, two scenarios with the same task: ``priced`` gets history, ``unseen`` never does.
The forecast and the cost cap read reports, the same for every host: ``ONE_HOST`` (a host whose
stream reports a cost).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from conftest import ONE_HOST, Project, scenario_doc
from pytest_atlante.report.model import EvalReport
from pytest_atlante.run.forecast import RequestedScenario, forecast, nearest_rank_p95
from trial_helpers import write_project, write_turn

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(600)]
TURNS = [write_turn("hello.txt", "hello\n"), {"text": "Done."}]
OTHER_HOST = "opencode" if ONE_HOST != "opencode" else "claude-code"  # one whose history this run has none of


@pytest.fixture(autouse=True)
def on_path(monkeypatch: pytest.MonkeyPatch, hosts_path: Callable[[], str], private_tmp: Path) -> None:
    monkeypatch.setenv("PATH", hosts_path())


def project_with_two_scenarios(root: Path) -> Path:
    write_project(root, ONE_HOST, [], budget={"trials": 2})
    project = Project(root)
    for name in ("priced", "unseen"):
        project.scenario(scenario_doc(name), f"eval/scenarios/{name}.eval.json")
        project.script(name, TURNS)
    project.build()
    return root


def run(pytester: pytest.Pytester, project: Path, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("--atlante-eval", "--atlante-scripted", "--atlante-project", str(project),
                                         "-p", "no:cacheprovider", *args, timeout=300)


def history_reports(project: Path) -> list[EvalReport]:
    return [EvalReport.model_validate_json(p.read_text()) for p in sorted((project / ".atlante/eval").glob("*/report.json"))]


def per_trial(report: EvalReport, scenario: str) -> list[tuple[int, float]]:
    record = next(s for s in report.scenarios if s.name == scenario)
    return [(t.usage.total if t.usage else -1, t.costUsd if t.costUsd is not None else -1.0) for t in record.trials]


def test_forecast_from_real_reports_then_a_second_run_and_the_cost_cap(pytester: pytest.Pytester, tmp_path: Path) -> None:
    project = project_with_two_scenarios(tmp_path / "project")
    first = run(pytester, project, "--atlante-scenario", "priced")
    assert first.ret == 0, "\n".join(first.outlines)
    [history] = history_reports(project)
    seen = per_trial(history, "priced")
    assert len(seen) == 2 and all(tokens > 0 and cost > 0 for tokens, cost in seen)

    # The printed forecast (a dry run: exit 0, no trial, no new report); unseen is unknown.
    printed = run(pytester, project, "--atlante-forecast")
    text = "\n".join(printed.outlines)
    assert printed.ret == 0, text
    assert len(history_reports(project)) == 1
    unseen_row = next(line for line in printed.outlines if line.startswith("unseen"))
    assert unseen_row.split()[3:] == ["unknown"] * 6, unseen_row
    assert "unknown (no matching history; not counted as zero): unseen" in text
    assert f"history: {history.runId} (0 min old)" in text and "total (known scenarios only)" in text

    predicted = forecast([RequestedScenario("priced", 2, 2), RequestedScenario("unseen", 2, 2)],
                         project / ".atlante/eval", host=ONE_HOST, model=None, scripted=True, workers=1)
    priced = predicted.scenarios[0]
    assert priced.samples == 2 and predicted.unknown == ["unseen"] and predicted.scenarios[1].cost_p95 is None
    assert priced.tokens_mean is not None and priced.cost_mean is not None and priced.cost_p95 is not None
    # The forecast per trial lies within the spread of the first run's trials ...
    assert min(t for t, _ in seen) <= priced.tokens_mean / 2 <= max(t for t, _ in seen)
    assert min(c for _, c in seen) <= priced.cost_mean / 2 <= max(c for _, c in seen)
    assert priced.cost_p95 == 2 * nearest_rank_p95([c for _, c in seen])
    # ... and the second run lands inside it.
    second = run(pytester, project, "--atlante-scenario", "priced")
    assert second.ret == 0
    newest = history_reports(project)[-1]    # run ids sort by start time
    assert newest.runId != history.runId
    actual = per_trial(newest, "priced")
    assert all(min(t for t, _ in seen) <= tokens <= max(t for t, _ in seen) for tokens, _ in actual)
    assert sum(cost for _, cost in actual) <= priced.cost_p95 + 1e-9
    # Another host's history is not this run's: everything is unknown there.
    other = forecast([RequestedScenario("priced", 2, 2)], project / ".atlante/eval", host=OTHER_HOST, model=None,
                     scripted=True, workers=1, now=datetime.now(UTC))
    assert other.unknown == ["priced"] and other.reports == []

    # --atlante-max-cost below the forecast p95: refused before any session, exit 2, with the forecast.
    cap = priced.cost_p95 / 2
    refused = run(pytester, project, "--atlante-scenario", "priced", "--atlante-max-cost", f"{cap:.6f}")
    text = "\n".join(refused.outlines)
    assert refused.ret == 2, text
    assert "eval-max-cost-exceeded" in text and f"${priced.cost_p95:.4f}" in text
    assert len(history_reports(project)) == 2   # nothing ran

    # A scenario without history cannot be refused on its forecast; the cap stops it while it spends:
    # serially, the first trial reaches the cap and the second is skipped-budget.
    out = tmp_path / "capped"
    capped = run(pytester, project, "--atlante-scenario", "unseen", "--atlante-max-cost", "0.000001",
                 "--atlante-out", str(out), "-rs")
    text = "\n".join(capped.outlines)
    assert capped.ret == 1, text
    assert "no cost history for unseen" in text
    report = EvalReport.model_validate_json((out / "report.json").read_text())
    verdicts = [t.verdict for t in report.scenarios[0].trials]
    assert verdicts == ["pass", "skipped-budget"], text
    assert report.scenarios[0].trials[1].error is not None and "--atlante-max-cost 1e-06 reached" in report.scenarios[0].trials[1].error
    assert report.costCap is not None
    assert report.costCap.model_dump() == {"capUsd": 0.000001, "spentUsd": report.scenarios[0].trials[0].costUsd,
                                           "reached": True, "skippedTrials": 1, "unpricedTrials": 0}


def test_the_cost_cap_under_xdist_lets_running_trials_finish_and_starts_no_more(pytester: pytest.Pytester,
                                                                                 tmp_path: Path) -> None:
    project = project_with_two_scenarios(tmp_path / "project")
    config = json.loads((project / "atlante.jsonc").read_text())
    config["eval"]["budget"]["trials"] = 3
    (project / "atlante.jsonc").write_text(json.dumps(config))
    out = tmp_path / "out"
    result = run(pytester, project, "--atlante-scenario", "unseen", "--atlante-max-cost", "0.000001",
                 "--atlante-out", str(out), "-n", "2")
    assert result.ret == 1, "\n".join(result.outlines)
    report = EvalReport.model_validate_json((out / "report.json").read_text())
    trials = report.scenarios[0].trials
    ran = [t for t in trials if t.verdict != "skipped-budget"]
    skipped = [t for t in trials if t.verdict == "skipped-budget"]
    # Documented guarantee: at most one trial per worker runs once the cap is reachable (here every
    # trial reaches it alone), and a worker never starts a trial after its own trial reached it.
    assert len(trials) == 3 and 1 <= len(ran) <= 2 and len(skipped) == 3 - len(ran)
    assert all(t.error and t.error.startswith("--atlante-max-cost") for t in skipped)
    assert report.costCap is not None and report.costCap.reached and report.costCap.skippedTrials == len(skipped)
    assert report.costCap.spentUsd == pytest.approx(sum(t.costUsd or 0 for t in ran))
