"""Whole eval trials through the real Codex CLI (0.171.0) and the scripted model's Responses dialect.

Codex specifics proven here (docs/hosts.md "Codex"): every host-neutral action runs through the
real ``codex exec --json`` (write and edit as ``apply_patch``, read and bash as ``exec_command``);
the transcript is built from the session's rollout, so it has one turn per model response and the
commands Codex's rules refused (which its ``--json`` stream leaves out); the policy's rules stop a
destructive command in the spellings Codex can parse and miss the ones its facts say they miss;
credentials are ``auth.json`` or ``CODEX_API_KEY``, and a run without them stops before any trial;
a fixture that brings ``.codex/`` is rejected before the trial.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_atlante.hosts.base import SCRIPTED_MODEL_ID
from pytest_atlante.hosts.registry import host_for
from pytest_atlante.provider.scripted import ScriptedModelServer
from pytest_atlante.suite.script import load_script
from spelling_matrix import make_dirs, stopped_spellings, transcript_events
from trial_helpers import (
    ALL_CHECKS_PASS,
    DONE,
    HostName,
    TrialCase,
    assert_clean_run,
    bash_turn,
    expected_table,
    outcome_table,
    run_eval,
    run_without_credentials,
    write_project,
)

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(600)]

HOST: HostName = "codex"


@pytest.fixture
def no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("CODEX_", "OPENAI_", "ANTHROPIC_")):
            monkeypatch.delenv(name)


EVERY_ACTION = TrialCase(
    name="every-action",
    turns=[
        {"text": "Writing.", "actions": [{"type": "write", "path": "notes.txt", "content": "one\ntwo\n"}]},
        {"text": "Editing.", "actions": [{"type": "edit", "path": "notes.txt", "old": "two", "new": "three"}]},
        {"text": "Reading.", "actions": [{"type": "read", "path": "notes.txt"}]},
        bash_turn("echo hi > bashed.txt"),
        bash_turn("rm -r victim", text="Removing."),
        DONE,
    ],
    checks=[{"type": "file-contains", "path": "notes.txt", "pattern": "\\Aone\nthree\n\\Z", "regex": True},
            {"type": "file-contains", "path": "bashed.txt", "pattern": "hi"},
            {"type": "file-exists", "path": "victim/keep.txt"},
            {"type": "tool-used", "tool": "write", "min": 1, "max": 1},
            {"type": "tool-used", "tool": "edit", "min": 1, "max": 1},
            {"type": "tool-used", "tool": "read", "min": 1, "max": 1},
            {"type": "tool-used", "tool": "bash", "inputMatches": "^rm -r victim$", "min": 1}],
    verdict="pass", outcomes=("pass",) * 7, setup=make_dirs("victim"), version="0.2",
)


@pytest.mark.usefixtures("on_path")
def test_every_action_runs_through_codex_and_the_transcript_shows_the_refused_command(
        pytester: pytest.Pytester, tmp_path: Path, private_tmp: Path) -> None:
    project = write_project(tmp_path / "project", HOST, [EVERY_ACTION])
    run = run_eval(pytester, project, tmp_path / "out")
    assert run.result.ret == 0, run.output()
    assert_clean_run(run, private_tmp)
    assert outcome_table(run, [EVERY_ACTION]) == expected_table([EVERY_ACTION])
    host = run.report.host
    assert host is not None and (host.name, host.version, host.dialect) == ("codex", "0.171.0", "codex-responses")
    trial = run.trial(EVERY_ACTION.name)
    assert trial.requestedModel == "gpt-5.5" and trial.scriptedTurns == 6 and trial.meteredBy == "proxy"
    assert trial.modelIdentity == SCRIPTED_MODEL_ID
    # The scripted default usage (100 in, 20 out) six times: the proxy and the stream agree.
    assert trial.usage is not None and (trial.usage.inputTokens, trial.usage.outputTokens) == (600, 120)
    assert trial.meteringDisagreement is None
    assert trial.costUsd == pytest.approx((600 * 5 + 120 * 30) / 1e6) and trial.costBasis is not None
    assert trial.transcript is not None
    events = transcript_events(run.out, trial.transcript)
    calls = [(e["turn"], e["tool"], e["hostTool"]) for e in events if e["type"] == "tool_call"]
    assert calls == [(1, "write", "apply_patch"), (2, "edit", "apply_patch"), (3, "read", "exec_command"),
                     (4, "bash", "exec_command"), (5, "bash", "exec_command")]
    refused = [e for e in events if e["type"] == "tool_result" and e["turn"] == 5]
    assert len(refused) == 1 and refused[0]["isError"] and "rejected" in refused[0]["text"]
    assert events[-1]["type"] == "result" and events[-1]["turns"] == 6
    # The stream itself has no item for the refused command (host-facts-codex §3): it came from the rollout.
    stream = (run.out / trial.hostStream).read_text(encoding="utf-8")
    assert "rm -r victim" not in "".join(line for line in stream.splitlines() if '"command_execution"' in line)


@pytest.mark.usefixtures("on_path")
def test_the_policy_matrix_of_spellings(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """What Codex's rules stop, spelling by spelling (docs/hosts.md "Containment per host"): it
    matches rules on the words of a command it can parse, so the redirection, the nested shell and
    ``sudo`` behind a redirection slip past the tool layer; under namespace isolation they can
    still change only the sandbox."""
    assert stopped_spellings(pytester, tmp_path, HOST) == {
        "bare": True, "arguments": True, "chain": True, "pipe": True, "absolute": True,
        "redirection": False, "nested-shell": False, "sudo": False, "chmod": True,
    }


@pytest.mark.usefixtures("on_path", "no_provider_env")
def test_unauthenticated_run_stops_before_any_trial(pytester: pytest.Pytester, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch, private_tmp: Path) -> None:
    # Codex does not use OPENAI_API_KEY: no credential
    run = run_without_credentials(pytester, tmp_path, monkeypatch, private_tmp, HOST,
                                  env={"OPENAI_API_KEY": "sk-not-sent-by-codex"})
    assert "CODEX_API_KEY" in run.output()


GATEWAY_CASE = TrialCase(name="through-a-gateway", turns=[bash_turn("echo hello > hello.txt"), DONE],
                         checks=[{"type": "file-contains", "path": "hello.txt", "pattern": "hello"}],
                         verdict="pass", outcomes=("pass",))


@pytest.mark.usefixtures("on_path", "no_provider_env")
def test_codex_api_key_and_openai_base_url_reach_the_user_s_endpoint(
        pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, private_tmp: Path) -> None:
    """A real run: CODEX_API_KEY passes the credential check and is sent; OPENAI_BASE_URL (which Codex
    itself ignores) becomes the built-in provider's ``openai_base_url``, here a loopback gateway."""
    project = write_project(tmp_path / "project", HOST, [GATEWAY_CASE], model="gpt-5.5")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CODEX_API_KEY", "sk-codex-gateway-77d1")
    script = load_script(project / "eval" / "scenarios" / "scripted" / f"{GATEWAY_CASE.name}.json")
    with ScriptedModelServer(script, sandbox_root=tmp_path, shell_tools=host_for(HOST).shell_tools) as gateway:
        monkeypatch.setenv("OPENAI_BASE_URL", gateway.openai_base_url)
        run = run_eval(pytester, project, tmp_path / "out", scripted=False)
        requests = gateway.requests
    assert run.result.ret == 0, run.output()
    assert_clean_run(run, private_tmp)
    assert outcome_table(run, [GATEWAY_CASE]) == expected_table([GATEWAY_CASE])
    turns = [r for r in requests if r.kind == "turn"]
    assert [r.turn_index for r in turns] == [0, 1] and {r.path for r in turns} == {"/v1/responses"}
    assert "sk-codex-gateway-77d1" not in (run.report_text or "")
    trial = run.trial(GATEWAY_CASE.name)
    assert trial.meteredBy == "proxy" and trial.modelIdentity == "gpt-5.5"


@pytest.mark.usefixtures("on_path")
@pytest.mark.parametrize("brought", [".codex/config.toml", ".agents/skills/x/SKILL.md"])
def test_a_fixture_that_brings_codex_configuration_is_rejected(pytester: pytest.Pytester, tmp_path: Path,
                                                               brought: str) -> None:
    project = write_project(tmp_path / "project", HOST, [ALL_CHECKS_PASS])
    target = project / "eval" / "fixtures" / "app" / brought
    target.parent.mkdir(parents=True)
    target.write_text("x\n", encoding="utf-8")
    run = run_eval(pytester, project, tmp_path / "out")
    assert run.result.ret == 2, run.output()
    assert "eval-fixture-invalid" in run.output() and brought.split("/", maxsplit=1)[0] in run.output()
