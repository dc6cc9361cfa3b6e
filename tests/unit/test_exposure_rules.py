"""Which runs' agents could read a real credential, before any session (run/credentials.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_atlante.hosts.names import HostName
from pytest_atlante.records import TrialRecord
from pytest_atlante.run.credentials import CODE, exposure_reason, exposure_warning, run_exposures, stand_in_only_problem
from pytest_atlante.sandbox.isolation import IsolationRecord

NAMESPACE = IsolationRecord(mode="namespace")


@pytest.mark.parametrize(("host", "env", "model", "exposed"), [
    ("claude-code", {"ANTHROPIC_API_KEY": "k"}, None, None),
    ("claude-code", {"CLAUDE_CODE_OAUTH_TOKEN": "k"}, None, None),
    ("claude-code", {}, None, None),  # the stored OAuth login: copied holding stand-ins
    ("claude-code", {"CLAUDE_CODE_USE_BEDROCK": "1", "AWS_ACCESS_KEY_ID": "a"}, None, "does not go through"),
    ("claude-code", {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_CUSTOM_HEADERS": "X-Key: v"}, None,
     "ANTHROPIC_CUSTOM_HEADERS reaches the session"),
    ("codex", {"CODEX_API_KEY": "k"}, "gpt-5.5", None),
    ("codex", {}, "gpt-5.5", "does not go through"),  # a ChatGPT login (no API-key login in this HOME)
    ("gemini-cli", {"GEMINI_API_KEY": "k"}, None, None),
    ("gemini-cli", {}, None, "does not go through"),  # Login with Google
    ("opencode", {}, "anthropic/claude-sonnet-4-5", None),
    ("opencode", {}, "openrouter/some-model", "does not go through"),
])
def test_a_provider_mode_the_proxy_stands_in_for_exposes_nothing(host: HostName, env: dict[str, str], model: str | None,
                                                                exposed: str | None, monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    reason = exposure_reason(host, {"HOME": str(tmp_path), **env}, model, confined=True)
    assert (reason is None) == (exposed is None) and (exposed is None or exposed in (reason or "")), reason
    assert exposure_reason(host, env, model, confined=False) is not None  # beside the runner, as its user


def test_stand_in_only_names_each_exposed_host_and_the_warning_counts_trials() -> None:
    exposures = run_exposures([("claude-code", None), ("gemini-cli", None)], {"ANTHROPIC_API_KEY": "k"}, NAMESPACE)
    assert list(exposures) == ["gemini-cli"]
    problem = stand_in_only_problem(exposures)
    assert problem is not None and problem.code == CODE and problem.location == "$.eval.credentials"
    assert "gemini-cli: its provider mode" in problem.message
    assert stand_in_only_problem({}) is None
    records = [TrialRecord(scenario="s", trial=i, nodeId=f"n{i}", verdict="pass", credentialExposed=exposed, variant=arm)
               for i, (exposed, arm) in enumerate([(True, "on-gemini"), (True, "on-gemini"), (False, None), (None, None)])]
    line = exposure_warning(records, exposures, {None: "claude-code", "on-gemini": "gemini-cli"})
    assert line is not None and line.startswith("atlante: warning: in 2 trial(s) the agent could read a real credential")
    assert "gemini-cli (2): its provider mode does not go through the metering proxy" in line
    assert exposure_warning(records[2:], exposures, {None: "claude-code"}) is None
