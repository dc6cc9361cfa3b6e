"""Whole eval trials through the real Claude Code CLI (2.1.197) and the scripted model.

Every test here is one (or two) ``pytest --atlante-eval --atlante-scripted`` runs in a child
process (pytester), with the pinned CLI on PATH; it reads the run's ``report.json`` back through
the report's own model.  Several scenarios share a run to keep the file's runtime modest: each
Claude trial costs a few seconds of a 2-core machine.

The scenarios are ``TrialCase``s (``trial_helpers``): host-neutral, so an OpenCode matrix can run
the same lists with ``HOST = "opencode"``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trial_helpers import (
    run_hiding_and_secrets,
    AGENT_CASE,
    AGENT_SENTINEL,
    ALL_CHECKS_PASS,
    CHECK_SLEEP_MARKER,
    DONE,
    MATRIX,
    HostName,
    TrialCase,
    assert_clean_run,
    assert_junit_first_lines,
    assert_matrix_evidence,
    bash_turn,
    expected_table,
    logged_requests,
    new_marker,
    normalise,
    outcome_table,
    processes_with,
    run_eval,
    session_timeout_case,
    system_text,
    with_request_log,
    write_project,
)

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(600)]

HOST: HostName = "claude-code"


@pytest.mark.usefixtures("on_path")
def test_check_matrix_is_the_same_serially_and_with_two_workers(pytester: pytest.Pytester, tmp_path: Path,
                                                                private_tmp: Path) -> None:
    project = write_project(tmp_path / "project", HOST, MATRIX)
    junit = tmp_path / "junit.xml"

    serial = run_eval(pytester, project, tmp_path / "out-serial", f"--junitxml={junit}")
    parallel = run_eval(pytester, project, tmp_path / "out-parallel", "-n", "2")

    for run in (serial, parallel):
        assert run.result.ret == 1, run.output()
        assert_clean_run(run, private_tmp)
        assert run.report.complete and run.report.host is not None and run.report.host.version == "2.1.197"
        assert outcome_table(run, MATRIX) == expected_table(MATRIX)
        assert_matrix_evidence(run)
    assert normalise(serial.report) == normalise(parallel.report)
    assert processes_with(CHECK_SLEEP_MARKER) == []

    assert_junit_first_lines(junit, serial)


# --------------------------------------------------------------------------- host session timeout


@pytest.mark.usefixtures("on_path")
def test_host_session_timeout_leaves_no_process_behind(pytester: pytest.Pytester, tmp_path: Path, private_tmp: Path) -> None:
    marker = new_marker()
    case = session_timeout_case(marker, timeout_ms=8000)
    project = write_project(tmp_path / "project", HOST, [case])

    run = run_eval(pytester, project, tmp_path / "out")

    assert run.result.ret == 1, run.output()
    assert outcome_table(run, [case]) == expected_table([case])
    trial = run.trial(case.name)
    assert trial.error == "host session exceeded timeoutMs=8000"
    # Both sleepers really ran (each made its flag file) when the deadline hit ...
    assert trial.changedPaths == ["detached.txt", "sleeping.txt"]
    # ... and neither sleeper, nor the shell around it, outlived the trial.
    assert processes_with(marker) == []
    assert_clean_run(run, private_tmp)


# --------------------------------------------------------------------------- agents


@pytest.mark.usefixtures("on_path")
def test_task_agent_runs_the_built_agent(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        private_tmp: Path) -> None:
    cases = [AGENT_CASE, ALL_CHECKS_PASS]
    project = write_project(tmp_path / "project", HOST, cases)
    log_dir = tmp_path / "requests"
    plugin_args = with_request_log(monkeypatch, log_dir)

    run = run_eval(pytester, project, tmp_path / "out", *plugin_args)

    assert run.result.ret == 0, run.output()
    assert_clean_run(run, private_tmp)
    assert outcome_table(run, cases) == expected_table(cases)
    requests = logged_requests(log_dir)
    turns = {trial: [r for r in logged if r["kind"] == "turn"] for trial, logged in requests.items()}
    assert set(turns) == {"uses-helper-agent-1", "writes-hello-1"}
    # With task.agent every model turn runs under the built agent's body (.claude/agents/helper.md);
    # without it, the body is nowhere in the system prompt.
    assert turns["uses-helper-agent-1"] and all(AGENT_SENTINEL in system_text(r) for r in turns["uses-helper-agent-1"])
    assert turns["writes-hello-1"] and not any(AGENT_SENTINEL in system_text(r) for r in turns["writes-hello-1"])


# --------------------------------------------------------------------------- containment of evidence


SECRETS = TrialCase(
    name="environment-stays-private",
    turns=[bash_turn("env > env.txt"), DONE],
    checks=[
        {"type": "file-exists", "path": "env.txt"},
        # The scripted credential reaches the host's tool shell; the parent's own key does not.
        {"type": "file-contains", "path": "env.txt", "pattern": "(?m)^ANTHROPIC_API_KEY=atlante-scripted$", "regex": True},
        {"type": "file-contains", "path": "env.txt", "pattern": "parent-ke[y]", "regex": True},
        # The parent's secret reaches neither the tool shell nor a check command ("[t]": the
        # pattern itself must not spell the secret, or the report would carry it in the message).
        {"type": "file-contains", "path": "env.txt", "pattern": "s3cr3[t]", "regex": True},
        {"type": "command", "run": ["env"], "outputMatches": "s3cr3[t]"},
        # Checks see no credential at all, scripted or not.
        {"type": "command", "run": ["env"], "outputMatches": "ANTHROPIC_API_KEY|atlante-scripted|parent-ke[y]"},
        {"type": "command", "run": ["env"], "outputMatches": "(?m)^HOME="},
    ],
    verdict="fail",
    outcomes=("pass", "pass", "fail", "fail", "fail", "fail", "pass"),
)


@pytest.mark.usefixtures("on_path")
def test_agents_cannot_hide_changes_or_read_secrets(pytester: pytest.Pytester, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch, private_tmp: Path) -> None:
    run_hiding_and_secrets(pytester, tmp_path, monkeypatch, private_tmp, HOST, SECRETS)


# --------------------------------------------------------------------------- no credentials


@pytest.mark.usefixtures("on_path")
def test_unauthenticated_run_stops_before_any_trial(pytester: pytest.Pytester, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch, private_tmp: Path) -> None:
    project = write_project(tmp_path / "project", HOST, [ALL_CHECKS_PASS])
    empty_home = tmp_path / "home"
    empty_home.mkdir()
    monkeypatch.setenv("HOME", str(empty_home))
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "CLAUDE_")):
            monkeypatch.delenv(name)

    run = run_eval(pytester, project, tmp_path / "out", scripted=False)

    assert run.result.ret == 3, run.output()
    assert "eval-host-unauthenticated" in run.output()
    report = run.report
    assert report.exitStatus == 3 and not report.complete
    assert [e["code"] for e in report.errors] == ["eval-host-unauthenticated"]
    assert all(s.trials == [] for s in report.scenarios) and sum(report.verdicts.values()) == 0
    assert_clean_run(run, private_tmp)  # no sandbox was even made
