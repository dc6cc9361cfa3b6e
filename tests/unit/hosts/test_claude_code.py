"""Claude Code adapter: credentials, fresh settings and trust, command line, environment."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from pytest_atlante.hosts import ScriptedEndpoint, credential_env_names, host_for
from pytest_atlante.hosts.base import HostInfo, TrialWiring
from pytest_atlante.hosts.claude_code.adapter import CLOUD_MODES
from pytest_atlante.hosts.claude_code.policy import claude_settings

INFO = HostInfo("claude-code", "2.1.197", "claude-code", "/opt/bin/claude")
HOST = host_for("claude-code")
SCRIPTED = ScriptedEndpoint(anthropic_base_url="http://127.0.0.1:4321", openai_base_url="http://127.0.0.1:4321/v1")


def codes(parent_env: dict[str, str], user_home: Path) -> list[str]:
    return [d.code for d in HOST.credential_diagnostics(INFO, parent_env, user_home, None)]


def test_host_constants() -> None:
    assert (HOST.name, HOST.owned_dir) == ("claude-code", ".claude")
    assert HOST.interrupt_signal == 2


@pytest.mark.parametrize(
    "env",
    [
        {"ANTHROPIC_API_KEY": "sk"},
        {"ANTHROPIC_AUTH_TOKEN": "t"},
        {"CLAUDE_CODE_OAUTH_TOKEN": "oat"},
        {"CLAUDE_CODE_USE_BEDROCK": "1", "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "s"},
        {"CLAUDE_CODE_USE_BEDROCK": "1", "AWS_PROFILE": "dev"},
        {"CLAUDE_CODE_USE_VERTEX": "1", "ANTHROPIC_VERTEX_PROJECT_ID": "p"},
        {"CLAUDE_CODE_USE_VERTEX": "1", "GOOGLE_APPLICATION_CREDENTIALS": "/k.json"},
        {"CLAUDE_CODE_USE_FOUNDRY": "1", "ANTHROPIC_FOUNDRY_API_KEY": "k"},
    ],
)
def test_credential_variables_and_cloud_modes_count(tmp_path: Path, env: dict[str, str]) -> None:
    assert codes(env, tmp_path) == []


@pytest.mark.parametrize(
    "env",
    [{}, {"ANTHROPIC_API_KEY": ""}, {"CLAUDE_CODE_USE_BEDROCK": "1"}, {"CLAUDE_CODE_USE_VERTEX": "0", "ANTHROPIC_VERTEX_PROJECT_ID": "p"},
     {"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "s"}, {"OPENAI_API_KEY": "sk"}],
)
def test_nothing_usable_is_unauthenticated_with_login_instructions(tmp_path: Path, env: dict[str, str]) -> None:
    [diagnostic] = HOST.credential_diagnostics(INFO, env, tmp_path, None)
    assert diagnostic.code == "eval-host-unauthenticated"
    assert "claude auth login" in diagnostic.hint and "claude setup-token" in diagnostic.hint


def test_stored_login_counts_and_a_broken_file_does_not(tmp_path: Path) -> None:
    credentials = tmp_path / ".claude" / ".credentials.json"
    credentials.parent.mkdir()
    credentials.write_text("{not json")
    assert codes({}, tmp_path) == ["eval-host-unauthenticated"]
    credentials.write_text(json.dumps({"claudeAiOauth": {"accessToken": "x"}}))
    assert codes({}, tmp_path) == []


def test_claude_config_dir_login_counts(tmp_path: Path) -> None:
    config_dir = tmp_path / "cfg"
    config_dir.mkdir()
    (config_dir / ".credentials.json").write_text(json.dumps({"claudeAiOauth": {"accessToken": "x"}}))
    assert codes({"CLAUDE_CONFIG_DIR": str(config_dir)}, tmp_path / "nohome") == []


def test_prepare_writes_only_the_policy_the_trust_entry_and_the_credentials_file(tmp_path: Path) -> None:
    user_home = tmp_path / "user"
    (user_home / ".claude" / "projects").mkdir(parents=True)
    (user_home / ".claude" / ".credentials.json").write_text('{"claudeAiOauth": {"accessToken": "x"}}')
    (user_home / ".claude" / "projects" / "history.jsonl").write_text("secret session\n")
    (user_home / ".claude" / "settings.json").write_text('{"hooks": {}}')
    (user_home / ".claude.json").write_text('{"projects": {"/elsewhere": {"hasTrustDialogAccepted": true}}}')
    real_sandbox = tmp_path / "real-sandbox"
    real_sandbox.mkdir()
    sandbox = tmp_path / "link-to-sandbox"
    sandbox.symlink_to(real_sandbox)
    home = tmp_path / "home"

    HOST.prepare(TrialWiring(INFO, sandbox_root=sandbox, home=home, user_home=user_home, parent_env={}, model=None, scripted=None))

    assert json.loads((real_sandbox / ".claude" / "settings.json").read_text()) == claude_settings()
    # Trust names the realpath (a symlink path is not honoured, host-facts §4), and nothing else.
    assert json.loads((home / ".claude.json").read_text()) == {
        "projects": {str(real_sandbox.resolve()): {"hasTrustDialogAccepted": True}}
    }
    files = sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file())
    assert files == [".claude.json", ".claude/.credentials.json"]
    copied = home / ".claude" / ".credentials.json"
    assert copied.read_text() == '{"claudeAiOauth": {"accessToken": "x"}}'
    assert stat.S_IMODE(copied.stat().st_mode) == 0o600


def test_prepare_in_scripted_mode_copies_no_login(tmp_path: Path) -> None:
    user_home = tmp_path / "user"
    (user_home / ".claude").mkdir(parents=True)
    (user_home / ".claude" / ".credentials.json").write_text("{}")
    sandbox, home = tmp_path / "sandbox", tmp_path / "home"
    sandbox.mkdir()
    HOST.prepare(TrialWiring(INFO, sandbox_root=sandbox, home=home, user_home=user_home, parent_env={}, model=None, scripted=SCRIPTED))
    assert not (home / ".claude" / ".credentials.json").exists()
    assert (sandbox / ".claude" / "settings.json").is_file()


def test_prepare_overwrites_nothing_else_in_the_sandbox_claude_dir(tmp_path: Path) -> None:
    sandbox, home = tmp_path / "sandbox", tmp_path / "home"
    (sandbox / ".claude" / "agents").mkdir(parents=True)
    (sandbox / ".claude" / "agents" / "reviewer.md").write_text("agent")
    HOST.prepare(TrialWiring(INFO, sandbox_root=sandbox, home=home, user_home=tmp_path, parent_env={}, model=None, scripted=None))
    assert (sandbox / ".claude" / "agents" / "reviewer.md").read_text() == "agent"


@pytest.mark.parametrize(
    ("agent", "model", "tail"),
    [(None, None, []), ("reviewer", None, ["--agent", "reviewer"]), (None, "sonnet", ["--model", "sonnet"]),
     ("a", "m", ["--agent", "a", "--model", "m"])],
)
def test_command(agent: str | None, model: str | None, tail: list[str]) -> None:
    argv = HOST.command(INFO, prompt="Add /health", agent=agent, model=model)
    assert argv == ["/opt/bin/claude", "-p", "Add /health", "--output-format", "stream-json", "--verbose",
                    "--setting-sources", "project", *tail]


def test_environment_adds_credentials_and_quiet_switches(tmp_path: Path) -> None:
    parent = {"ANTHROPIC_API_KEY": "sk-real", "CLAUDE_CODE_USE_BEDROCK": "1", "AWS_REGION": "eu-west-1",
              "OPENAI_API_KEY": "not-for-claude", "SECRET_TOKEN": "x", "HOME": str(tmp_path / "nohome")}
    base = {"PATH": "/usr/bin", "HOME": str(tmp_path / "home"), "CLAUDE_CONFIG_DIR": "/user/cfg"}
    env = HOST.environment(INFO, base_env=base, parent_env=parent, home=tmp_path / "home", scripted=None)
    assert env["ANTHROPIC_API_KEY"] == "sk-real"
    assert env["CLAUDE_CODE_USE_BEDROCK"] == "1" and env["AWS_REGION"] == "eu-west-1"
    assert "OPENAI_API_KEY" not in env and "SECRET_TOKEN" not in env and "CLAUDE_CONFIG_DIR" not in env
    assert env["HOME"] == str(tmp_path / "home")
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1" and env["DISABLE_TELEMETRY"] == "1"


@pytest.mark.parametrize("switch, names", [
    ("CLAUDE_CODE_USE_BEDROCK", ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"]),
    ("CLAUDE_CODE_USE_VERTEX", ["GOOGLE_APPLICATION_CREDENTIALS", "ANTHROPIC_VERTEX_PROJECT_ID", "CLOUD_ML_REGION"]),
    ("CLAUDE_CODE_USE_FOUNDRY", ["AZURE_CLIENT_SECRET", "ANTHROPIC_FOUNDRY_API_KEY"]),
])
def test_cloud_variables_reach_the_host_only_in_their_mode(tmp_path: Path, switch: str, names: list[str]) -> None:
    everything = {name: f"value-of-{name}" for mode in CLOUD_MODES.values() for name in mode}
    parent = {"ANTHROPIC_API_KEY": "sk-real", "HOME": str(tmp_path / "nohome"), **everything}
    base = {"PATH": "/usr/bin", "HOME": str(tmp_path / "home")}
    plain = HOST.environment(INFO, base_env=base, parent_env=parent, home=tmp_path / "home", scripted=None)
    assert not set(everything) & set(plain), "no cloud mode selected: no cloud variable"
    chosen = HOST.environment(INFO, base_env=base, parent_env={**parent, switch: "1"}, home=tmp_path / "home", scripted=None)
    assert all(chosen[name] == f"value-of-{name}" for name in names)
    others = {name for other, mode in CLOUD_MODES.items() if other != switch for name in mode} - set(CLOUD_MODES[switch])
    assert not others & set(chosen)


def test_bedrock_profile_reads_the_users_aws_files_in_place(tmp_path: Path) -> None:
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "credentials").write_text("[dev]\n")
    parent = {"CLAUDE_CODE_USE_BEDROCK": "1", "AWS_PROFILE": "dev", "HOME": str(tmp_path)}
    env = HOST.environment(INFO, base_env={"HOME": "/h"}, parent_env=parent, home=Path("/h"), scripted=None)
    assert env["AWS_SHARED_CREDENTIALS_FILE"] == str(tmp_path / ".aws" / "credentials")
    assert "AWS_CONFIG_FILE" not in env  # there is no ~/.aws/config to point at


def test_scripted_environment_wins_over_real_credentials(tmp_path: Path) -> None:
    parent = {"ANTHROPIC_API_KEY": "sk-real", "ANTHROPIC_BASE_URL": "https://gateway.example"}
    base = {"HOME": "/h", "ANTHROPIC_BASE_URL": "https://gateway.example"}
    env = HOST.environment(INFO, base_env=base, parent_env=parent, home=Path("/h"), scripted=SCRIPTED)
    assert env["ANTHROPIC_API_KEY"] == "atlante-scripted"
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:4321"


def test_credential_env_names() -> None:
    names = credential_env_names("claude-code")
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK",
                 "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY", "ANTHROPIC_VERTEX_PROJECT_ID", "CLOUD_ML_REGION"):
        assert name in names
    assert credential_env_names("opencode") == ()


def test_the_provider_endpoint_is_the_users_base_url_or_the_api_and_none_in_cloud_modes() -> None:
    # docs/design.md §10: where the metering proxy forwards, and which modes it cannot carry
    host = host_for("claude-code")
    assert host.provider_endpoint({}, None) is not None
    assert host.provider_endpoint({}, None).upstream == "https://api.anthropic.com"  # type: ignore[union-attr]
    gateway = host.provider_endpoint({"ANTHROPIC_BASE_URL": "https://gateway.example/anthropic"}, "sonnet")
    assert gateway is not None and (gateway.variable, gateway.upstream) == ("ANTHROPIC_BASE_URL",
                                                                            "https://gateway.example/anthropic")
    for switch in CLOUD_MODES:
        assert host.provider_endpoint({switch: "1"}, None) is None
