"""The plain halves of the self-test, the forecast and the cost cap: classification, history
matching, arithmetic and the ledger workers read (the real-CLI halves are in tests/integration)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_atlante.hosts.prices import ceiling_cost
from pytest_atlante.records import CheckResult, TrialRecord, Usage, Verdict
from pytest_atlante.report import selftest
from pytest_atlante.report.model import BudgetRecord, HostIdentity, RunState, build_report, keyed, write_report
from pytest_atlante.run import costcap
from pytest_atlante.run.forecast import (
    RequestedScenario,
    _same_experiment,
    forecast,
    makespan,
    nearest_rank_p95,
    over_cap,
    table_lines,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def check(index: int, passed: bool, error: bool = False) -> CheckResult:
    return CheckResult(index=index, type="command" if error else "file-contains", passed=passed, error=error,
                       message=f"check {index} {'ok' if passed else 'not ok'}")


def trial(verdict: Verdict, *checks: CheckResult, error: str | None = None, cost: float | None = None,
          tokens: int = 0, node: str = "n", duration_ms: int = 1000, name: str = "s", number: int = 1) -> TrialRecord:
    return TrialRecord(scenario=name, trial=number, nodeId=node, verdict=verdict, checks=list(checks), error=error,
                       costUsd=cost, usage=Usage(inputTokens=tokens) if tokens else None, durationMs=duration_ms)


def classify(noop: TrialRecord, reference: TrialRecord | None) -> selftest.SelftestScenario:
    return selftest.classify("s", "eval/s.eval.json", "local", "f::s[selftest]", noop, reference)


# --------------------------------------------------------------------------- self-test


def test_a_sound_scenario_fails_untouched_and_passes_its_reference() -> None:
    result = classify(trial("fail", check(0, False), check(1, True)), trial("pass", check(0, True), check(1, True)))
    assert result.status == "sound" and result.problems == [] and selftest.diagnostics(result) == []


def test_vacuous_unsolvable_and_no_reference_name_their_checks() -> None:
    vacuous = classify(trial("pass", check(0, True)), None)
    assert [p.status for p in vacuous.problems] == ["vacuous", "no-reference"] and vacuous.status == "vacuous"
    unsolvable = classify(trial("fail", check(0, False), check(1, False)), trial("fail", check(0, True), check(1, False)))
    assert unsolvable.status == "unsolvable" and unsolvable.problems[0].checks == [1]
    [diagnostic] = selftest.diagnostics(unsolvable)
    assert (diagnostic.code, diagnostic.location, diagnostic.file) == ("eval-selftest-unsolvable", "$.checks[1]", "eval/s.eval.json")
    assert "#1 file-contains" in diagnostic.message
    assert classify(trial("fail", check(0, False)), None).status == "no-reference"


def test_an_erroring_check_is_named_in_either_trial_and_outranks_the_rest() -> None:
    in_noop = classify(trial("infra-error", check(0, False, error=True), check(1, True)), None)
    assert in_noop.status == "check-error" and in_noop.problems[0].trial == "no-op" and in_noop.problems[0].checks == [0]
    in_reference = classify(trial("fail", check(0, False)), trial("infra-error", check(0, False, error=True)))
    assert [(p.status, p.trial) for p in in_reference.problems] == [("check-error", "reference")]


def test_a_trial_that_never_reached_its_checks_is_infra_error_not_a_verdict_on_them() -> None:
    setup_failed = classify(trial("infra-error", error="setup false failed: exited 1"), None)
    assert setup_failed.status == "infra-error" and "setup false failed" in setup_failed.problems[0].message
    host_failed = classify(trial("fail", check(0, False)), trial("infra-error", check(0, False), error="host session failed"))
    assert [(p.status, p.trial) for p in host_failed.problems] == [("infra-error", "reference")]


def test_a_refused_scripted_call_is_named_with_the_hosts_answer() -> None:
    """``reference-tool-error``: the reference's checks pass, but the host refused one of its calls."""
    events: list[dict[str, Any]] = [
        {"type": "tool_call", "id": "t0", "tool": "edit", "hostTool": "Edit", "input": {"path": "README.md", "old": "a"}},
        {"type": "tool_result", "id": "t0", "tool": "edit", "isError": True,
         "text": "<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>"},
        {"type": "tool_call", "id": "t1", "tool": "write", "hostTool": "Write", "input": {"path": "hello.txt"}},
        {"type": "tool_result", "id": "t1", "tool": "write", "isError": False, "text": "File created"},
    ]
    refused = selftest.refused_calls(events)
    assert refused == ['Edit {"old": "a", "path": "README.md"}: <tool_use_error>File has not been read yet. '
                       'Read it first before writing to it.</tool_use_error>']
    result = selftest.classify("s", "eval/s.eval.json", "local", "f::s[selftest]", trial("fail", check(0, False)),
                               trial("pass", check(0, True)), refused)
    assert result.status == "reference-tool-error" and result.status not in selftest.ACCEPTABLE
    [problem] = result.problems
    assert problem.trial == "reference" and "File has not been read yet" in problem.message
    [diagnostic] = selftest.diagnostics(result)
    assert diagnostic.code == "eval-selftest-reference-tool-error" and "read action" in diagnostic.hint
    assert selftest.refused_calls(events[2:]) == []


def test_the_document_orders_by_collection_and_decides_the_exit_status(tmp_path: Path) -> None:
    sound = classify(trial("fail", check(0, False)), trial("pass", check(0, True))).model_copy(update={"nodeId": "b"})
    warned = classify(trial("fail", check(0, False)), None).model_copy(update={"nodeId": "a", "name": "w"})
    host = HostIdentity(name="claude-code", version="2.1.197", dialect="claude-code")
    report = selftest.build("r", NOW, host, [sound, warned], ["a", "b"], [])
    assert [s.nodeId for s in report.scenarios] == ["a", "b"] and report.ok and report.exitStatus == 0
    assert selftest.build("r", NOW, host, [sound], ["a", "b"], []).exitStatus == 1    # a result is missing
    bad = classify(trial("pass", check(0, True)), None).model_copy(update={"nodeId": "a"})
    assert selftest.build("r", NOW, host, [bad, sound], ["a", "b"], []).exitStatus == 1
    path = selftest.write(report, tmp_path)
    loaded = selftest.SelftestReport.model_validate_json(path.read_text())
    assert loaded == report and '"schema": "atlante/selftest-v1"' in path.read_text()


# --------------------------------------------------------------------------- forecast


def write_history(eval_dir: Path, run_id: str, trials: list[TrialRecord], *, host: str = "claude-code",
                  model: str | None = None, scripted: bool = True, age: timedelta = timedelta(hours=2)) -> None:
    names = sorted({t.scenario for t in trials})
    state = RunState(
        run_id=run_id, started_at=NOW - age,
        host=HostIdentity(name=host, version="1.0.0", dialect="claude-code" if host == "claude-code" else "opencode-v1"),  # type: ignore[arg-type]
        model=model, scripted=scripted, budget=BudgetRecord(trials=1, timeoutMs=1, maxSessions=1, maxTokens=1),
        records=keyed(trials))
    report = build_report(state, [(n, "f", "local", 1) for n in names], finished_at=NOW - age, complete=True, exit_status=0)
    write_report(report, eval_dir / run_id)


def test_forecast_uses_only_matching_history_and_never_guesses_zero(tmp_path: Path) -> None:
    eval_dir = tmp_path / ".atlante/eval"
    write_history(eval_dir, "r1", [trial("pass", cost=0.01, tokens=100, duration_ms=2000, number=1),
                                   trial("pass", cost=0.03, tokens=300, duration_ms=4000, number=2),
                                   trial("skipped-budget", number=3)])
    write_history(eval_dir, "r2", [trial("pass", cost=9.0, tokens=9000)], host="opencode")
    write_history(eval_dir, "r3", [trial("pass", cost=9.0, tokens=9000)], model="other/model")
    write_history(eval_dir, "r4", [trial("pass", cost=9.0, tokens=9000)], scripted=False)
    (eval_dir / "broken").mkdir()
    (eval_dir / "broken/report.json").write_text("{")
    result = forecast([RequestedScenario("s", 3, 2), RequestedScenario("new", 3, 3)], eval_dir, host="claude-code",
                      model=None, scripted=True, workers=2, now=NOW)
    known, unknown = result.scenarios
    assert (known.samples, known.tokens_mean, known.tokens_p95) == (2, 400.0, 600.0)   # 2 sessions x (200, p95 300)
    assert known.cost_mean == pytest.approx(0.04) and known.cost_p95 == pytest.approx(0.06)
    assert known.duration_mean_s == 3.0
    assert unknown.samples == 0 and unknown.cost_p95 is None and result.unknown == ["new"]
    assert [u.run_id for u in result.reports] == ["r1"] and result.unreadable == 1
    lines = table_lines(result)
    assert any(line.startswith("new") and line.split()[3:] == ["unknown"] * 6 for line in lines)
    assert "unknown (no matching history; not counted as zero): new" in lines
    assert "history: r1 (2.0 h old)" in lines and result.wall_s == 3.0   # two 3 s trials on two processes


def test_a_scenario_whose_history_reported_no_cost_has_unknown_cost(tmp_path: Path) -> None:
    eval_dir = tmp_path / ".atlante/eval"
    write_history(eval_dir, "r1", [trial("pass", tokens=100)])
    result = forecast([RequestedScenario("s", 1, 1)], eval_dir, host="claude-code", model=None, scripted=True,
                      workers=1, now=NOW)
    assert result.unknown == [] and result.cost_unknown == ["s"] and result.scenarios[0].tokens_mean == 100.0
    assert "cost unknown (history reported no cost): s" in table_lines(result)


def test_p95_makespan_and_digest_matching() -> None:
    assert nearest_rank_p95([5.0, 1.0, 3.0]) == 5.0 and nearest_rank_p95(list(map(float, range(1, 21)))) == 19.0
    assert makespan([4.0, 3.0, 3.0, 2.0], 2) == 6.0 and makespan([1.0, 2.0], 1) == 3.0 and makespan([], 2) == 0.0
    record: Any = SimpleNamespace(scenarioDigest="a", harnessDigest="h")
    assert _same_experiment(record, ("a", "h")) and _same_experiment(record, (None, None))
    assert not _same_experiment(record, ("b", "h")) and not _same_experiment(record, ("a", "x"))
    older: Any = SimpleNamespace()   # a report written before digests existed
    assert _same_experiment(older, ("a", "h"))


# --------------------------------------------------------------------------- cost cap


def test_the_cap_ledger_counts_each_trial_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    records = [trial("pass", cost=0.5, node="a"), trial("fail", node="b"), trial("skipped-budget", node="c")]
    assert costcap.spent(records) == (0.5, 1)
    controller = costcap.Ledger.new("run-1")
    worker = costcap.Ledger("run-1", controller.key)
    assert worker.published() == {}
    controller.publish(costcap.costs(records))
    own = [trial("pass", cost=0.5, node="a"), trial("pass", cost=0.25, node="d")]
    assert worker.spend_before_trial(own) == 0.75     # "a" is both published and own
    skipped = costcap.skipped_record(trial("pass", node="e"), 0.5, 0.75)
    summary = costcap.summary(0.5, [*records, skipped])
    assert (summary.reached, summary.skippedTrials, summary.unpricedTrials, summary.spentUsd) == (True, 1, 1, 0.5)


def test_a_trial_whose_cost_cannot_be_established_counts_at_the_dearest_listed_model() -> None:
    # An unpriced trial with metered tokens is never free under the cap (issue 38: a rewritten rollout
    # naming an unlisted model made the trial invisible to --atlante-max-cost).
    unpriced = trial("pass", tokens=1_000_000, node="u")
    ceiling, _ = ceiling_cost(1_000_000, 0, 0)
    assert costcap.charged(unpriced) == pytest.approx(ceiling) and ceiling > 0
    assert costcap.charged(trial("pass", node="none")) is None  # no counted token: nothing to charge
    assert costcap.charged(trial("pass", cost=0.01, tokens=1_000_000)) == 0.01  # a cost of its own wins
    assert costcap.costs([unpriced]) == {"u": pytest.approx(ceiling)}
    total, unpriced_count = costcap.spent([unpriced, trial("pass", cost=0.5, node="a")])
    assert (total, unpriced_count) == (pytest.approx(ceiling + 0.5), 1)


# --------------------------------------------------------------------------- options, no host needed


def test_a_forecast_needs_no_host_cli_and_exits_0(pytester: pytest.Pytester, atlante_project: Any,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")   # neither claude nor git: a dry run never starts them
    result = pytester.runpytest_inprocess("--atlante-eval", "--atlante-forecast", "--atlante-project",
                                          str(atlante_project.root), "-p", "no:cacheprovider")
    assert result.ret == 0
    assert "unknown (no matching history; not counted as zero): writes-hello" in result.outlines
    assert not (atlante_project.root / ".atlante/eval").exists()


@pytest.mark.parametrize("value", ["-1", "nan", "lots"])
def test_a_bad_cost_cap_is_a_usage_error(pytester: pytest.Pytester, value: str) -> None:
    result = pytester.runpytest_inprocess("--atlante-eval", f"--atlante-max-cost={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--atlante-max-cost" in "\n".join(result.errlines)


@pytest.mark.parametrize("option", ["--atlante-selftest", "--atlante-forecast", "--atlante-max-cost=1"])
def test_the_new_options_need_an_eval_run(pytester: pytest.Pytester, option: str) -> None:
    result = pytester.runpytest_inprocess(option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "need --atlante-eval" in "\n".join(result.errlines)


def test_the_forecast_allocates_sessions_in_collection_order_and_refuses_over_the_cap(atlante_project: Any,
                                                                                    tmp_path: Path) -> None:
    from conftest import config_doc, scenario_doc
    from pytest_atlante.run.forecast import over_cap, requested
    from pytest_atlante.suite.discovery import discover

    atlante_project.config(config_doc(budget={"trials": 2, "maxSessions": 3}))
    atlante_project.scenario(scenario_doc("b-second"), "eval/scenarios/b.eval.json")
    atlante_project.scenario(scenario_doc("a-first"), "eval/scenarios/a.eval.json")
    atlante_project.scenario(scenario_doc("c-third"), "eval/scenarios/c.eval.json")
    (atlante_project.root / "eval/scenarios/main.eval.json").unlink()
    suite = discover(atlante_project.root)
    assert [(r.name, r.trials, r.sessions) for r in requested(suite)] == [("a-first", 2, 2), ("b-second", 2, 1), ("c-third", 2, 0)]

    eval_dir = tmp_path / "history"
    write_history(eval_dir, "r1", [trial("pass", cost=0.5, tokens=10, name="a-first")])
    predicted = forecast(requested(suite), eval_dir, host="claude-code", model=None, scripted=True, workers=1, now=NOW)
    assert over_cap(predicted, 1.0) is None     # 2 sessions x $0.5; b-second's cost is unknown, not zero
    problem = over_cap(predicted, 0.99)
    assert problem is not None and problem.code == "eval-max-cost-exceeded"
    assert "$1.0000 (plus 1 scenario(s) of unknown cost) exceeds the cap $0.99" in problem.message


def test_history_of_a_changed_scenario_or_harness_is_not_used(tmp_path: Path) -> None:
    eval_dir = tmp_path / ".atlante/eval"
    state = RunState(
        run_id="r1", started_at=NOW, host=HostIdentity(name="claude-code", version="1.0.0", dialect="claude-code"),
        model=None, scripted=True, budget=BudgetRecord(trials=1, timeoutMs=1, maxSessions=1, maxTokens=1),
        records=keyed([trial("pass", cost=0.5, tokens=10)]), digests={"s": ("sha256:a", "sha256:h")})
    report = build_report(state, [("s", "f", "local", 1)], finished_at=NOW, complete=True, exit_status=0)
    write_report(report, eval_dir / "r1")

    def known(digests: tuple[str | None, str | None]) -> bool:
        found = forecast([RequestedScenario("s", 1, 1, digests)], eval_dir, host="claude-code", model=None,
                         scripted=True, workers=1, now=NOW)
        return found.scenarios[0].known

    assert known(("sha256:a", "sha256:h")) and known((None, None))
    assert not known(("sha256:b", "sha256:h")) and not known(("sha256:a", "sha256:x"))


def test_the_summary_prints_each_selftest_diagnostic_once() -> None:
    """A failing scenario's diagnostics are in its failure report already; the summary adds them only
    for a passing scenario, or for all when pytest shows no failure reports (--tb=no)."""
    from pytest_atlante.run.plan import SelftestPlan

    vacuous = classify(trial("pass", check(0, True)), None)
    no_reference = selftest.classify("n", "eval/n.eval.json", "local", "f::n[selftest]", trial("fail", check(0, False)), None)
    plan = SelftestPlan()
    plan.selftest = selftest.build("r", NOW, None, [vacuous, no_reference], [], [])
    codes = {d.code for d in selftest.diagnostics(vacuous)}
    assert codes and no_reference.status in selftest.ACCEPTABLE

    def printed(shown: bool) -> str:
        lines = plan.summary([], [], failures_shown=shown)
        assert lines is not None
        return "\n".join(text for text, _ in lines)

    with_failures = printed(True)
    assert "eval-selftest-vacuous" not in with_failures and "eval-selftest-no-reference: eval/n.eval.json" in with_failures
    assert "eval-selftest-vacuous" in printed(False)


def test_a_ledger_a_trial_wrote_is_never_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 26: with isolation off a trial rewrote spent.json and later trials were skipped-budget."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    controller = costcap.Ledger.new("run-1")
    worker = costcap.Ledger("run-1", controller.key)
    ledger = costcap.run_dir("run-1") / costcap.SPENT_FILE
    controller.publish({"a": 0.5})
    first = ledger.read_bytes()
    controller.publish({"a": 0.5, "b": 0.25})
    assert worker.published() == {"a": 0.5, "b": 0.25}
    plain = '{"a": 1000}'
    forged_body = json.dumps({"run": "run-1", "sequence": 99, "costs": {"x": 1000.0}})
    for forged in (plain.encode(), json.dumps({"mac": "0" * 64, "body": forged_body}).encode(), first, b"\xff" * 10):
        ledger.write_bytes(forged)  # made up, MAC'd with a guessed key, an older publication copied back, junk
        assert worker.published() == {"a": 0.5, "b": 0.25}, forged
    ledger.unlink()
    os.mkfifo(ledger)  # never waited on
    assert worker.published() == {"a": 0.5, "b": 0.25}
    ledger.unlink()
    controller.publish({"a": 0.5, "b": 0.25, "c": 0.125})  # the next real publication is used again
    assert worker.spend_before_trial([]) == 0.875


def test_unpriced_history_trials_and_an_estimated_cost_are_named(tmp_path: Path) -> None:
    eval_dir = tmp_path / ".atlante/eval"
    estimated = trial("pass", tokens=100, cost=0.01).model_copy(update={"costBasis": "price-table v1 (2026-12-02)"})
    write_history(eval_dir, "r1", [estimated, trial("pass", tokens=100, number=2)])
    result = forecast([RequestedScenario("s", 1, 1)], eval_dir, host="claude-code", model=None, scripted=True,
                      workers=1, now=NOW)
    assert result.scenarios[0].unpriced == 1 and result.scenarios[0].cost_p95 == pytest.approx(0.01)
    lines = table_lines(result)
    assert any(line.startswith("unpriced history trials") and line.endswith(": s (1)") for line in lines)
    assert "cost $ is an estimate from price-table v1 (2026-12-02) (the host reports tokens only)" in lines
    refused = over_cap(result, 0.001)
    assert refused is not None and "(1 unpriced history trial(s) not counted)" in refused.message
