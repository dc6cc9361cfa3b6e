"""Whole eval trials through the real OpenCode CLI (1.18.33) and the scripted model.

The same host-neutral ``TrialCase`` lists as ``test_claude_trials.py``, with ``HOST = "opencode"``.
Every test is one (or two) ``pytest --atlante-eval`` runs in a child process (pytester) with the
pinned CLI on PATH; it reads the run's ``report.json`` back through the report's own model.  An
OpenCode trial costs 5–10 s of a 2-core machine, so scenarios share runs wherever they can.

OpenCode specifics proven here (host-facts §7–§10): the model identity comes from the session
OpenCode stored (it is not in the stream); SIGINT/SIGTERM leave the bash tool's children behind, so the session
timeout test looks for survivors in /proc; the background ``npm install @opencode-ai/plugin`` must
not land in a kept sandbox's ``.opencode/``; credentials come from ``auth.json`` only, never from a
shell API-key variable, while a gateway's ``ANTHROPIC_BASE_URL`` still reaches the host.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import ONE_HOST
from pytest_atlante.hosts.base import SCRIPTED_MODEL_ID
from pytest_atlante.hosts.opencode.adapter import PROJECT_CONFIG, SCRIPTED_PROVIDER_ID
from pytest_atlante.provider.scripted import ScriptedModelServer
from pytest_atlante.sandbox.trialdir import SANDBOX_DIR_PREFIX
from pytest_atlante.suite.script import load_script
from spelling_matrix import stopped_spellings
from trial_helpers import (
    AGENT_CASE,
    ALL_CHECKS_PASS,
    DONE,
    HostName,
    TrialCase,
    assert_clean_run,
    bash_turn,
    expected_table,
    matrix_for,
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

HOST: HostName = "opencode"
VERSION = "1.18.33"
SCRIPTED_MODEL = f"{SCRIPTED_PROVIDER_ID}/{SCRIPTED_MODEL_ID}"
# A model of OpenCode's built-in ``anthropic`` provider, as a user without the scripted model names it.
ANTHROPIC_MODEL = "anthropic/claude-sonnet-4-5"


@pytest.fixture
def no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run sees no provider variable of the machine running the tests (keys, gateways)."""
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "CLAUDE_", "OPENAI_", "OPENCODE_")):
            monkeypatch.delenv(name)


# --------------------------------------------------------------------------- the check matrix


@pytest.mark.usefixtures("on_path")
def test_check_matrix_serially(pytester: pytest.Pytester, tmp_path: Path, private_tmp: Path) -> None:
    # The same matrix with -n 2, and its rows about checks alone, are host-neutral and run in
    # test_claude_trials.py (ONE_HOST).
    for run in run_matrix(pytester, tmp_path, private_tmp, HOST):
        host = run.report.host
        assert host is not None and (host.version, host.dialect) == (VERSION, "opencode-v1")
        # Every trial that ran a session knows the model its host asked for, which only the stored
        # session tells; the scripted model answered it.
        sessions = [case.name for case in matrix_for(HOST) if case.setup is None]
        assert {name: run.trial(name).requestedModel for name in sessions} == dict.fromkeys(sessions, SCRIPTED_MODEL)
        assert {name: run.trial(name).modelIdentity for name in sessions} == dict.fromkeys(sessions, SCRIPTED_MODEL_ID)
        assert (run.trial("setup-fails").modelIdentity, run.trial("setup-fails").requestedModel) == (None, None)


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


@pytest.mark.usefixtures("on_path")
def test_host_session_timeout_leaves_no_process_behind(pytester: pytest.Pytester, tmp_path: Path, private_tmp: Path) -> None:
    # OpenCode runs the bash tool in a session of its own and, killed, leaves it behind (host-facts §10):
    # both sleepers would survive as orphans of pid 1 unless the engine reaps them.  20 s: OpenCode
    # takes 2-3 s to start on a quiet machine and has taken over 10 s, under load, to reach the tool
    # call, and the test needs both sleepers running when the deadline hits.
    run_session_timeout(pytester, tmp_path, private_tmp, HOST, timeout_ms=20000)


# --------------------------------------------------------------------------- agents, kept sandboxes


@pytest.mark.usefixtures("on_path")
def test_task_agent_runs_the_built_agent_and_kept_sandboxes_hold_no_npm_install(
        pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, private_tmp: Path) -> None:
    # The built .opencode/agents/helper.md becomes the system prompt of the agent trial.
    cases = [AGENT_CASE, ALL_CHECKS_PASS]
    run = run_agent_cases(pytester, tmp_path, monkeypatch, HOST, "--atlante-keep")

    # --atlante-keep leaves each trial's sandbox: the built agent is there, OpenCode's background
    # `npm install @opencode-ai/plugin` is not (the closed loopback registry stopped it).
    (run_dir,) = private_tmp.glob(f"{SANDBOX_DIR_PREFIX}*")
    for case in cases:
        owned = run_dir / f"{case.name}-1" / "sandbox" / ".opencode"
        assert (owned / "agents" / "helper.md").is_file(), sorted(p.name for p in owned.iterdir())
        assert (owned / PROJECT_CONFIG.removeprefix(".opencode/")).is_file()
        assert not (owned / "node_modules").exists() and not (owned / "package.json").exists(), \
            sorted(p.name for p in owned.iterdir())
        assert run.trial(case.name).requestedModel == SCRIPTED_MODEL


# --------------------------------------------------------------------------- containment of evidence


SECRETS = TrialCase(
    name="environment-stays-private",
    turns=[bash_turn("env > env.txt"), DONE],
    checks=[
        {"type": "file-exists", "path": "env.txt"},
        # The tool shell runs with the trial's private HOME (".../home", never the user's) ...
        {"type": "file-contains", "path": "env.txt", "pattern": "(?m)^HOME=/.*/home$", "regex": True},
        # ... and with no credential: the scripted provider's key lives in the generated config, the
        # parent's key is dropped.  ("[t]", "[y]", "[d]": a pattern must not spell what it looks
        # for, or the report would carry it in the check's message.)
        {"type": "file-contains", "path": "env.txt", "pattern": "atlante-scripte[d]|parent-ke[y]", "regex": True},
        {"type": "file-contains", "path": "env.txt", "pattern": "s3cr3[t]", "regex": True},
        {"type": "command", "run": ["env"], "outputMatches": "s3cr3[t]"},
        {"type": "command", "run": ["env"], "outputMatches": "ANTHROPIC_API_KEY|atlante-scripte[d]|parent-ke[y]"},
        {"type": "command", "run": ["env"], "outputMatches": "(?m)^HOME="},
    ],
    verdict="fail",
    outcomes=("pass", "pass", "fail", "fail", "fail", "fail", "pass"),
)


@pytest.mark.usefixtures("on_path")
def test_agents_cannot_read_secrets(pytester: pytest.Pytester, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch, private_tmp: Path) -> None:
    # Hiding changes from git is seen by the sandbox diff, the same on every host: that half runs in
    # test_claude_trials.py (ONE_HOST).
    run_hiding_and_secrets(pytester, tmp_path, monkeypatch, private_tmp, HOST, SECRETS)


# --------------------------------------------------------------------------- the policy's spellings


@pytest.mark.usefixtures("on_path")
def test_the_policy_matrix_of_spellings(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """What OpenCode's shell globs stop, spelling by spelling (docs/hosts.md "Containment per
    host"): it matches each command of a chain or pipe, with or without a redirection, against the
    ``"X"``/``"X *"`` globs and an absolute path (``/bin/rm``) against ``"*/X"``/``"*/X *"``; a command
    inside ``bash -c '…'`` matches no deny glob, takes effect, and under namespace isolation can
    change only the sandbox."""
    assert stopped_spellings(pytester, tmp_path, HOST) == {
        "bare": True, "arguments": True, "chain": True, "pipe": True, "absolute": True,
        "redirection": True, "nested-shell": False, "sudo": True, "chmod": True,
    }


# --------------------------------------------------------------------------- credentials


def stored_login(home: Path, provider: str, key: str) -> None:
    """``auth.json`` as ``opencode auth login`` leaves it (host-facts §8 "Auth")."""
    store = home / ".local" / "share" / "opencode"
    store.mkdir(parents=True)
    (store / "auth.json").write_text(json.dumps({provider: {"type": "api", "key": key}}), encoding="utf-8")


@pytest.mark.usefixtures("on_path", "no_provider_env")
@pytest.mark.parametrize("shell_key", [None, "ANTHROPIC_API_KEY"], ids=["nothing", "shell-api-key-only"])
def test_unauthenticated_run_stops_before_any_trial(pytester: pytest.Pytester, tmp_path: Path, shell_key: str | None,
                                                    monkeypatch: pytest.MonkeyPatch, private_tmp: Path) -> None:
    # A shell API-key variable is not a stored OpenCode login: eval never reads it (the trial's
    # environment drops it), so it must not pass the credential check either.
    overrides = {"model": ANTHROPIC_MODEL} if shell_key else {}
    run = run_without_credentials(pytester, tmp_path, monkeypatch, private_tmp, HOST,
                                  env={shell_key: "sk-ant-shell-only"} if shell_key else None, **overrides)
    assert "auth.json" in run.output() and ("'anthropic'" in run.output()) == bool(shell_key)


GATEWAY_KEY = "gateway-key-5e02"
GATEWAY_CASE = TrialCase(
    name="through-a-gateway",
    turns=[bash_turn("echo hello > hello.txt"), DONE],
    checks=[{"type": "file-contains", "path": "hello.txt", "pattern": "hello"}],
    verdict="pass",
    outcomes=("pass",),
)


@pytest.mark.usefixtures("on_path", "no_provider_env")
def test_stored_login_passes_the_credential_check_and_reaches_a_gateway(
        pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, private_tmp: Path) -> None:
    """A real (not ``--atlante-scripted``) run with a stored ``anthropic`` login: the credential check
    passes and the trial runs against the user's provider.  That provider is a loopback "gateway"
    (host-facts "Gateways": OpenCode's built-in ``anthropic`` provider honours ``ANTHROPIC_BASE_URL``)
    served by a scripted-model server this test owns, so no request leaves the machine."""
    project = write_project(tmp_path / "project", HOST, [GATEWAY_CASE], model=ANTHROPIC_MODEL)
    home = tmp_path / "home"
    stored_login(home, "anthropic", GATEWAY_KEY)
    monkeypatch.setenv("HOME", str(home))
    script = load_script(project / "eval" / "scenarios" / "scripted" / f"{GATEWAY_CASE.name}.json")
    # Bash actions only: their paths are relative to the host's cwd, so the server needs no sandbox root.
    with ScriptedModelServer(script, sandbox_root=tmp_path) as gateway:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", f"{gateway.anthropic_base_url}/v1")
        run = run_eval(pytester, project, tmp_path / "out", scripted=False)
        requests = gateway.requests

    assert run.result.ret == 0, run.output()
    assert "unauthenticated" not in run.output()
    assert_clean_run(run, private_tmp)
    report = run.report
    assert not report.scripted and report.model == ANTHROPIC_MODEL and report.errors == []
    assert outcome_table(run, [GATEWAY_CASE]) == expected_table([GATEWAY_CASE])
    trial = run.trial(GATEWAY_CASE.name)
    assert trial.modelIdentity == ANTHROPIC_MODEL and trial.scriptedTurns is None
    # The host spoke Anthropic Messages to the gateway and played the whole script.
    turns = [r for r in requests if r.kind == "turn"]
    assert [r.turn_index for r in turns] == [0, 1]
    assert {(r.wire, r.path, r.model) for r in turns} == {("anthropic", "/v1/messages", ANTHROPIC_MODEL.split("/", 1)[1])}
