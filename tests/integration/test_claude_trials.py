"""Whole eval trials through the real Claude Code CLI (2.1.197) and the scripted model.

A smoke subset (pass, fail, session timeout, unauthenticated; token abort in test_budgets_real)
also runs on the newest Claude Code release (``hosts-npm-newest``, the ``claude_release`` fixture).

Every test here is one (or two) ``pytest --atlante-eval --atlante-scripted`` runs in a child
process (pytester), with the pinned CLI on PATH; it reads the run's ``report.json`` back through
the report's own model.  Several scenarios share a run to keep the file's runtime modest: each
Claude trial costs a few seconds of a 2-core machine.

The scenarios are ``TrialCase``s (``trial_helpers``): host-neutral, so an OpenCode matrix can run
the same lists with ``HOST = "opencode"``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ONE_HOST
from spelling_matrix import stopped_spellings
from trial_helpers import (
    ALL_CHECKS_FAIL,
    ALL_CHECKS_PASS,
    DONE,
    HostName,
    TrialCase,
    assert_clean_run,
    bash_turn,
    expected_table,
    outcome_table,
    run_agent_cases,
    run_eval,
    run_hiding_and_secrets,
    run_matrix,
    run_odd_names,
    run_session_timeout,
    run_without_credentials,
    write_project,
)

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(600)]

HOST: HostName = "claude-code"


@pytest.mark.usefixtures("on_path")
def test_check_matrix_is_the_same_serially_and_with_two_workers(pytester: pytest.Pytester, tmp_path: Path,
                                                                private_tmp: Path) -> None:
    serial, *_ = run_matrix(pytester, tmp_path, private_tmp, HOST)
    assert serial.report.host is not None and serial.report.host.version == "2.1.197"


# --------------------------------------------------------------------------- odd file names


@pytest.mark.usefixtures("on_path")
# Under isolation off only the sandbox's mounts differ, which the names do not reach: that variant
# is host-neutral, and runs on ONE_HOST.
@pytest.mark.parametrize("isolation", ["namespace", "off"] if HOST == ONE_HOST else ["namespace"])
def test_file_names_of_any_bytes_give_a_normal_fail_naming_them(pytester: pytest.Pytester, tmp_path: Path,
                                                                private_tmp: Path, isolation: str) -> None:
    # Issue 22 item 2: a name that is not UTF-8 used to end the whole run (INTERNALERROR, exit 3).
    run_odd_names(pytester, tmp_path, private_tmp, HOST, isolation)


# --------------------------------------------------------------------------- host session timeout


def test_host_session_timeout_leaves_no_process_behind(pytester: pytest.Pytester, tmp_path: Path, private_tmp: Path,
                                                      claude_release: str) -> None:
    # 15 s: both sleepers must be running when the deadline hits; Claude Code reaches its first tool
    # call in 1-2 s on a quiet machine, several times that on a loaded one.
    run = run_session_timeout(pytester, tmp_path, private_tmp, HOST, timeout_ms=15000)
    assert run.report.host is not None and run.report.host.version == claude_release


@pytest.mark.parametrize("claude_release", ["newest"], indirect=True)  # the pinned release runs the whole matrix above
def test_pass_and_fail_on_the_newest_release(pytester: pytest.Pytester, tmp_path: Path, private_tmp: Path,
                                            claude_release: str) -> None:
    cases = [ALL_CHECKS_PASS, ALL_CHECKS_FAIL]
    run = run_eval(pytester, write_project(tmp_path / "project", HOST, cases), tmp_path / "out")
    assert run.result.ret == 1, run.output()
    assert outcome_table(run, cases) == expected_table(cases)
    assert run.report.host is not None and run.report.host.version == claude_release
    assert_clean_run(run, private_tmp)


# --------------------------------------------------------------------------- agents


@pytest.mark.usefixtures("on_path")
def test_task_agent_runs_the_built_agent(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        private_tmp: Path) -> None:
    # The built .claude/agents/helper.md drives every turn of the agent trial.
    run = run_agent_cases(pytester, tmp_path, monkeypatch, HOST)
    assert_clean_run(run, private_tmp)


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


# --------------------------------------------------------------------------- the policy's spellings


@pytest.mark.usefixtures("on_path")
def test_the_policy_matrix_of_spellings(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """What Claude Code's ``Bash(X:*)`` deny rules stop, spelling by spelling (docs/hosts.md
    "Containment per host"): it splits chains and pipes and sees past a redirection and ``sudo``; a
    prefix rule does not match an absolute path (``/bin/rm``), so the policy adds one per system
    command directory; a command inside ``bash -c '…'`` takes effect, and under namespace isolation
    can change only the sandbox."""
    assert stopped_spellings(pytester, tmp_path, HOST) == {
        "bare": True, "arguments": True, "chain": True, "pipe": True, "absolute": True,
        "redirection": True, "nested-shell": False, "sudo": True, "chmod": True,
    }


# --------------------------------------------------------------------------- no credentials


@pytest.mark.usefixtures("claude_release")
def test_unauthenticated_run_stops_before_any_trial(pytester: pytest.Pytester, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch, private_tmp: Path) -> None:
    run_without_credentials(pytester, tmp_path, monkeypatch, private_tmp, HOST, drop=("ANTHROPIC_", "CLAUDE_"))
