"""run/github.py without a run: when it acts, and how a workflow command is escaped."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from pytest_atlante.records import CheckResult
from pytest_atlante.run.github import enabled, error_commands, escape_data, escape_property
from test_report import report_of, trial


def test_only_github_actions_itself_and_never_when_switched_off() -> None:
    assert enabled({"GITHUB_ACTIONS": "true"}, False)
    assert not enabled({"GITHUB_ACTIONS": "true"}, True)
    for env in ({}, {"CI": "true"}, {"GITLAB_CI": "true", "CI": "true"}, {"GITHUB_ACTIONS": "1"},
                {"GITHUB_ACTIONS": "false"}, {"GITHUB_STEP_SUMMARY": "/tmp/x"}):
        assert not enabled(env, False), env


def test_a_message_can_never_start_another_workflow_command() -> None:
    hostile = "fine%0A\n::add-mask::x\r\n::error::forged"
    assert "\n" not in escape_data(hostile) and "\r" not in escape_data(hostile)
    assert escape_data("100%\n") == "100%25%0A"
    assert escape_property("a:b,c\n") == "a%3Ab%2Cc%0A"


def test_one_command_per_trial_that_did_not_pass_at_the_scenario_line(tmp_path: Path) -> None:
    failed = CheckResult(index=0, type="command", passed=False, message="exit 1\n::error::forged")
    report = report_of([trial("alpha", 1, "pass", checks=[CheckResult(index=0, type="command", passed=True, message="ok")]),
                        trial("alpha", 2, "fail", checks=[failed]), trial("beta", 1, "timeout")])
    doc = tmp_path / "eval" / "a.eval.json"
    entries = [SimpleNamespace(scenario=SimpleNamespace(name="alpha"), file=doc, line=7)]
    commands = error_commands(report, cast(Any, entries), {"GITHUB_WORKSPACE": str(tmp_path)}, tmp_path)
    assert commands == [
        "::error file=eval/a.eval.json,line=7,title=alpha trial 2%3A fail::trial 2: fail: check 1 (command): "
        "exit 1%0A::error::forged",
        "::error title=beta trial 1%3A timeout::trial 1: timeout",   # no document known: no file or line
    ]
