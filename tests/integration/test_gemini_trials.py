"""Whole eval trials through the real Gemini CLI (0.61.0) and the scripted model's Gemini dialect.

A Gemini trial costs about 3.4 s of node start-up alone (host-facts-gemini, "Timing"), so the cases
share runs.  Gemini specifics proven here: the verdict comes from the stream's ``result`` event,
never from the exit code (0 on an interrupt); the model identity is the response's ``modelVersion``
(the key of ``result.stats.models``); usage is only in that final event.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_atlante.hosts.base import SCRIPTED_MODEL_ID
from spelling_matrix import SPELLINGS, stopped_spellings
from trial_helpers import (
    HostName,
    TrialCase,
    assert_clean_run,
    expected_table,
    matrix_for,
    outcome_table,
    run_eval,
    run_session_timeout,
    run_without_credentials,
    write_project,
)

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(600)]

HOST: HostName = "gemini-cli"
VERSION = "0.61.0"


@pytest.mark.usefixtures("on_path")
def test_check_matrix_runs_through_gemini(pytester: pytest.Pytester, tmp_path: Path, private_tmp: Path) -> None:
    # The rows about checks alone (matrix_for) are the runner's and run in test_claude_trials.py (ONE_HOST).
    cases = matrix_for(HOST)
    run = run_eval(pytester, write_project(tmp_path / "project", HOST, cases), tmp_path / "out", "-n", "2")
    assert run.result.ret == 1, run.output()
    assert_clean_run(run, private_tmp)
    host = run.report.host
    assert host is not None and (host.name, host.version, host.dialect) == (HOST, VERSION, "gemini-cli")
    assert outcome_table(run, cases) == expected_table(cases)
    sessions = [case.name for case in cases if case.setup is None]
    assert {name: run.trial(name).modelIdentity for name in sessions} == dict.fromkeys(sessions, SCRIPTED_MODEL_ID)


@pytest.mark.usefixtures("on_path")
def test_the_policy_matrix_of_spellings(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """The shared spelling matrix (docs/hosts.md "Containment per host") through a whole eval trial:
    Gemini CLI's policy engine splits the command itself and its ``commandRegex`` rules also match
    an absolute path and a nested ``bash -c``, so it stops every spelling.  More spellings (extra
    spaces, a subshell, ``git push``, ``dd``) are in test_gemini_host_real.py."""
    assert stopped_spellings(pytester, tmp_path, HOST) == dict.fromkeys(SPELLINGS, True)


@pytest.mark.usefixtures("on_path")
def test_host_session_timeout_leaves_no_process_behind(pytester: pytest.Pytester, tmp_path: Path, private_tmp: Path) -> None:
    # 20 s: Gemini CLI needs 3-4 s (more under load) before its first request.
    run = run_session_timeout(pytester, tmp_path, private_tmp, HOST, timeout_ms=20000)
    assert run.report.host is not None and run.report.host.name == HOST


@pytest.mark.usefixtures("on_path")
def test_unauthenticated_run_stops_before_any_trial(pytester: pytest.Pytester, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch, private_tmp: Path) -> None:
    run = run_without_credentials(pytester, tmp_path, monkeypatch, private_tmp, HOST, drop=("GEMINI_", "GOOGLE_"))
    assert "GEMINI_API_KEY" in run.output()


@pytest.mark.usefixtures("on_path")
def test_an_empty_model_answer_is_an_infra_error_naming_it(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """The model answers with nothing (no parts): Gemini CLI says so in an ``error`` event, ends with
    ``result.status: "error"`` and exits 0.  The metering proxy saw the empty answer, so it does not
    vouch for the model against the stream: the trial is ``infra-error`` although its check holds."""
    case = TrialCase(name="model-answers-nothing", turns=[{"empty": True}],
                     checks=[{"type": "file-absent", "path": "hello.txt"}], verdict="infra-error", outcomes=None)
    run = run_eval(pytester, write_project(tmp_path / "project", HOST, [case]), tmp_path / "out")
    trial = run.trial(case.name)
    assert trial.verdict == "infra-error", run.output()
    assert trial.error is not None and "empty response" in trial.error
    assert "the provider answered 1 model request with an empty response" in trial.error, trial.error
