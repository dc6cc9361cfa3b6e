"""Codex adapter: version, credentials, fresh CODEX_HOME, command line, stream, rollout and transcript."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from conftest import Project, config_doc
from pytest_atlante.hosts import ScriptedEndpoint, host_for
from pytest_atlante.hosts.base import (
    HOST_UNAUTHENTICATED,
    HostInfo,
    IsolationAware,
    ProviderEndpoint,
    TrialWiring,
    parse_version,
)
from pytest_atlante.hosts.codex.adapter import CodexHost, codex_home
from pytest_atlante.hosts.codex.config import SCRIPTED_CATALOG_MODEL, codex_rules, rule_patterns, user_base_url
from pytest_atlante.hosts.codex.rollout import (
    DIGEST_TYPE,
    CodexStreamMonitor,
    neutral_call,
    output_failed,
    read_rollout,
    rollout_file,
)
from pytest_atlante.hosts.policy import POLICY
from pytest_atlante.hosts.transcripts import TranscriptBuilder
from pytest_atlante.records import Usage

SAMPLES = Path(__file__).parent / "samples"
INFO = HostInfo("codex", "0.171.0", "codex-responses", "/opt/bin/codex")
HOST = host_for("codex")
ENDPOINT = ScriptedEndpoint("http://127.0.0.1:4000", "http://127.0.0.1:4000/v1")


def lines(name: str) -> list[str]:
    return (SAMPLES / name).read_text(encoding="utf-8").splitlines()


def test_the_version_is_the_second_word_of_codex_cli_s_line() -> None:
    assert parse_version("codex-cli 0.171.0\n") == (0, 171, 0)
    assert parse_version("opencode 1.2.3") is None  # only Codex's own program name is skipped


@pytest.mark.parametrize(("env", "auth", "diagnosed"), [
    ({"CODEX_API_KEY": "sk-x"}, None, False),
    ({}, {"auth_mode": "apikey", "OPENAI_API_KEY": "sk-x"}, False),
    ({}, {"auth_mode": "chatgpt", "tokens": {"access_token": "a"}}, False),
    ({}, {"auth_mode": "apikey"}, True),
    ({"OPENAI_API_KEY": "sk-x"}, None, True),  # Codex does not send it (host-facts-codex §3)
    ({}, None, True),
])
def test_credentials_are_auth_json_or_codex_api_key(tmp_path: Path, env: dict[str, str], auth: object,
                                                    diagnosed: bool) -> None:
    if auth is not None:
        (tmp_path / ".codex").mkdir()
        (tmp_path / ".codex" / "auth.json").write_text(json.dumps(auth), encoding="utf-8")
    found = HOST.credential_diagnostics(INFO, env, tmp_path, None)
    assert [d.code for d in found] == ([HOST_UNAUTHENTICATED] if diagnosed else [])


def test_a_codex_home_variable_relocates_the_stored_login(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "auth.json").write_text('{"OPENAI_API_KEY": "sk-x"}', encoding="utf-8")
    assert HOST.credential_diagnostics(INFO, {"CODEX_HOME": str(elsewhere)}, tmp_path / "home", None) == []
    assert HOST.credential_files(tmp_path, {"CODEX_HOME": str(elsewhere)}) == [elsewhere / "auth.json"]


def test_prepare_writes_a_fresh_quiet_codex_home_with_the_policy_s_rules(tmp_path: Path) -> None:
    home = tmp_path / "home"
    HOST.prepare(TrialWiring(INFO, sandbox_root=tmp_path / "sb", home=home, user_home=tmp_path / "user", parent_env={},
                 model=None, scripted=ENDPOINT))
    config = tomllib.loads((codex_home(home) / "config.toml").read_text(encoding="utf-8"))
    assert config["approval_policy"] == "never" and config["web_search"] == "disabled"
    assert config["check_for_update_on_startup"] is False
    assert config["analytics"] == {"enabled": False} and config["features"] == {"plugins": False}
    assert config["sandbox_mode"] == "workspace-write"
    assert config["sandbox_workspace_write"]["exclude_slash_tmp"] is True
    assert config["model"] == SCRIPTED_CATALOG_MODEL
    provider = config["model_providers"][config["model_provider"]]
    assert provider == {"name": "Atlante scripted model", "base_url": "http://127.0.0.1:4000/v1", "wire_api": "responses",
                        "request_max_retries": 0, "stream_max_retries": 0}
    assert "projects" not in config  # never trusted: a project's .codex/config.toml cannot apply
    rules = (codex_home(home) / "rules" / "atlante.rules").read_text(encoding="utf-8")
    assert rules == codex_rules()
    assert not (codex_home(home) / "auth.json").exists()


def test_every_denied_command_is_a_forbidden_prefix_rule() -> None:
    rules = codex_rules()
    assert [" ".join(p) for p in rule_patterns()] == list(POLICY.denied_commands)
    assert rules.count('decision = "forbidden"') == len(POLICY.denied_commands)
    assert 'prefix_rule(pattern = ["rm", "-rf"]' in rules


def test_a_real_run_copies_the_login_and_honours_the_user_s_base_url(tmp_path: Path) -> None:
    user = tmp_path / "user"
    (user / ".codex").mkdir(parents=True)
    (user / ".codex" / "auth.json").write_text('{"OPENAI_API_KEY": "sk-x"}', encoding="utf-8")
    (user / ".codex" / "config.toml").write_text('openai_base_url = "https://gateway.example/v1"\n', encoding="utf-8")
    home = tmp_path / "home"
    HOST.prepare(TrialWiring(INFO, sandbox_root=tmp_path / "sb", home=home, user_home=user, parent_env={},
                 model="gpt-5.5", scripted=None))
    config = tomllib.loads((codex_home(home) / "config.toml").read_text(encoding="utf-8"))
    assert config["openai_base_url"] == "https://gateway.example/v1" and config["model"] == "gpt-5.5"
    assert "model_providers" not in config
    assert (codex_home(home) / "auth.json").read_text(encoding="utf-8") == '{"OPENAI_API_KEY": "sk-x"}'
    assert (codex_home(home) / "auth.json").stat().st_mode & 0o077 == 0


def test_a_metered_real_run_gets_a_provider_of_its_own_at_the_proxy(tmp_path: Path) -> None:
    home = tmp_path / "home"
    HOST.prepare(TrialWiring(INFO, sandbox_root=tmp_path / "sb", home=home, user_home=tmp_path / "user", parent_env={},
                 model="gpt-5.5", scripted=None, proxy_url="http://127.0.0.1:4100"))
    config = tomllib.loads((codex_home(home) / "config.toml").read_text(encoding="utf-8"))
    assert "openai_base_url" not in config and config["model"] == "gpt-5.5"
    assert config["model_providers"] == {config["model_provider"]: {
        "name": "OpenAI through the atlante metering proxy", "base_url": "http://127.0.0.1:4100",
        "wire_api": "responses", "requires_openai_auth": True, "supports_websockets": False}}


def test_api_key_sessions_are_metered_by_the_proxy_and_a_chatgpt_login_by_the_stream(tmp_path: Path) -> None:
    user = tmp_path / "user"
    (user / ".codex").mkdir(parents=True)
    env = {"HOME": str(user)}
    assert HOST.provider_endpoint(env, None) is None  # no credential at all
    assert HOST.provider_endpoint(env | {"CODEX_API_KEY": "sk-x"}, None) == ProviderEndpoint(None, "https://api.openai.com/v1")
    (user / ".codex" / "auth.json").write_text('{"auth_mode": "chatgpt", "tokens": {"access_token": "t"}}')
    assert HOST.provider_endpoint(env, None) is None
    (user / ".codex" / "auth.json").write_text('{"auth_mode": "apikey", "OPENAI_API_KEY": "sk-x"}')
    (user / ".codex" / "config.toml").write_text('openai_base_url = "https://gateway.example/v1"\n')
    assert HOST.provider_endpoint(env, None) == ProviderEndpoint(None, "https://gateway.example/v1")


def test_openai_base_url_is_the_upstream_when_the_codex_config_names_none(tmp_path: Path) -> None:
    assert user_base_url({"OPENAI_BASE_URL": "http://gw:1/v1"}, tmp_path) == "http://gw:1/v1"
    assert user_base_url({}, tmp_path) is None


def test_the_command_closes_options_before_the_prompt_and_isolation_turns_codex_s_sandbox_off() -> None:
    argv = HOST.command(INFO, prompt="--help me", agent=None, model="gpt-5.5")
    assert argv == ["/opt/bin/codex", "exec", "--json", "--skip-git-repo-check", "--model", "gpt-5.5", "--", "--help me"]
    assert isinstance(HOST, IsolationAware)
    assert HOST.isolated_command(argv)[-4:] == ["--sandbox", "danger-full-access", "--", "--help me"]


def test_the_environment_points_codex_at_the_trial_s_home_only(tmp_path: Path) -> None:
    env = HOST.environment(INFO, base_env={"PATH": "/bin", "CODEX_HOME": "/root/.codex"},
                           parent_env={"CODEX_API_KEY": "sk-x"}, home=tmp_path, scripted=ENDPOINT)
    assert env == {"PATH": "/bin", "HOME": str(tmp_path), "CODEX_HOME": str(tmp_path / ".codex")}
    real = HOST.environment(INFO, base_env={}, parent_env={"CODEX_API_KEY": "sk-x"}, home=tmp_path, scripted=None)
    assert real["CODEX_API_KEY"] == "sk-x"


def test_fixtures_may_bring_no_codex_directory_nor_agents_skills() -> None:
    assert set(HOST.forbidden_fixture_files) == {".codex", ".agents/skills"}


# --------------------------------------------------------------------------- stream and rollout


def test_usage_comes_from_turn_completed_with_the_cached_tokens_taken_out_of_the_input() -> None:
    monitor = CodexStreamMonitor()
    for line in lines("codex-0.171.0-write-apply_patch-stream.jsonl"):
        assert monitor.cumulative_tokens is None or "turn.completed" in line
        monitor.feed(line)
    outcome = monitor.outcome()
    assert outcome.usage == Usage(inputTokens=220, outputTokens=45, cacheReadTokens=25, cacheWriteTokens=0)
    assert not outcome.is_error and monitor.thread_id == "01a232d4-9295-7a60-b4db-38edb7caae29"


@pytest.mark.parametrize(("sample", "message"), [
    ("codex-0.171.0-sigint-stream.jsonl", "the host's stream ended without turn.completed"),
    ("codex-0.171.0-http500-noretry-stream.jsonl", "We’re currently experiencing high demand, which may cause temporary errors."),
])
def test_a_turn_that_failed_or_never_completed_is_an_error(sample: str, message: str) -> None:
    monitor = CodexStreamMonitor()
    for line in lines(sample):
        monitor.feed(line)
    outcome = monitor.outcome()
    assert outcome.is_error and outcome.error_message == message and outcome.budget_unmonitored


def test_a_second_turn_completed_cannot_lower_the_count() -> None:
    monitor = CodexStreamMonitor()
    monitor.feed('{"type":"turn.completed","usage":{"input_tokens":500,"output_tokens":10}}')
    monitor.feed('{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}')
    assert monitor.cumulative_tokens == 510 and monitor.outcome().notes


def test_the_rollout_gives_the_model_and_every_item_in_order(tmp_path: Path) -> None:
    digest = read_rollout(SAMPLES / "codex-0.171.0-rollout-session.jsonl")
    assert digest is not None and digest["type"] == DIGEST_TYPE and digest["model"] == "gpt-5.5"
    assert [item["kind"] for item in digest["items"]] == ["text", "call", "output", "text"]
    assert [record["usage"]["input_tokens"] for record in digest["usage"]] == [110, 135]
    sessions = tmp_path / "sessions" / "2026" / "12" / "01"
    sessions.mkdir(parents=True)
    (sessions / "rollout-2026-12-01T18-18-41-abc.jsonl").write_text("", encoding="utf-8")
    assert rollout_file(tmp_path, "abc") == sessions / "rollout-2026-12-01T18-18-41-abc.jsonl"
    assert rollout_file(tmp_path, "other") is None


def test_the_transcript_has_one_turn_per_model_response_and_the_stream_s_totals() -> None:
    digest = read_rollout(SAMPLES / "codex-0.171.0-rollout-session.jsonl")
    stream = [*lines("codex-0.171.0-write-apply_patch-stream.jsonl"), json.dumps(digest)]
    b = TranscriptBuilder()
    HOST.transcript_events(enumerate(stream), b)
    kinds = [(e["type"], e["turn"], e.get("tool")) for e in b.events]
    assert kinds == [("usage", 1, None), ("text", 1, None), ("tool_call", 1, "write"), ("tool_result", 1, "write"),
                     ("usage", 2, None), ("text", 2, None), ("result", 2, None)]
    call = b.events[2]
    assert call["input"] == {"path": "hello.txt", "content": "hello from fake model\n"} and call["hostTool"] == "apply_patch"
    assert b.events[-1]["usage"] == {"inputTokens": 220, "outputTokens": 45, "cacheReadTokens": 25, "cacheWriteTokens": 0}


def test_without_a_rollout_the_stream_s_items_make_the_transcript() -> None:
    b = TranscriptBuilder()
    HOST.transcript_events(enumerate(lines("codex-0.171.0-failed-commands-stream.jsonl")), b)
    calls = [(e["tool"], e["input"]) for e in b.events if e["type"] == "tool_call"]
    assert calls == [("bash", {"command": "echo out; exit 3"}), ("bash", {"command": "ls /nonexistent"})]
    assert [e["isError"] for e in b.events if e["type"] == "tool_result"] == [True, True]


@pytest.mark.parametrize(("name", "raw", "expected"), [
    ("exec_command", '{"cmd": "cat /s/notes.txt"}', ("read", {"path": "/s/notes.txt"})),
    ("exec_command", '{"cmd": "sed -n \'1,200p\' .codex/skills/tidy/SKILL.md"}', ("skill", {"name": "tidy"})),
    ("exec_command", '{"cmd": "cat a b"}', ("bash", {"command": "cat a b"})),
    ("apply_patch", "*** Begin Patch\n*** Update File: a.txt\n@@\n-x\n+y\n*** End Patch\n",
     ("edit", {"path": "a.txt", "patch": "*** Begin Patch\n*** Update File: a.txt\n@@\n-x\n+y\n*** End Patch\n"})),
    ("spawn_agent", "{}", ("spawn_agent", {"input": "{}"})),
])
def test_codex_calls_map_to_neutral_tools(name: str, raw: str, expected: tuple[str, dict[str, object]]) -> None:
    assert neutral_call(name, raw) == expected


@pytest.mark.parametrize(("output", "failed"), [
    ("exec_command failed: CreateProcess { message: \"Rejected(\\\"rm\\\")\" }", True),
    ("Chunk ID: 1\nWall time: 0 seconds\nProcess exited with code 2\nOutput:\n", True),
    ("Chunk ID: 1\nWall time: 0 seconds\nProcess exited with code 0\nOutput:\n", False),
    ("Exit code: 0\nWall time: 0.2 seconds\nOutput:\nSuccess.", False),
])
def test_a_refused_or_failed_call_is_an_error_result(output: str, failed: bool) -> None:
    assert output_failed(output) is failed


def test_finalize_estimates_the_cost_from_the_price_table_and_names_it(tmp_path: Path) -> None:
    sessions = tmp_path / ".codex" / "sessions" / "2026" / "12" / "01"
    sessions.mkdir(parents=True)
    thread = "01a232d4-9295-7a60-b4db-38edb7caae29"
    (sessions / f"rollout-x-{thread}.jsonl").write_bytes((SAMPLES / "codex-0.171.0-rollout-session.jsonl").read_bytes())
    monitor = CodexStreamMonitor()
    for line in lines("codex-0.171.0-write-apply_patch-stream.jsonl"):
        monitor.feed(line)
    outcome = CodexHost().finalize(INFO, monitor, env={"CODEX_HOME": str(tmp_path / ".codex")}, cwd=tmp_path)
    assert outcome.model_identity == "gpt-5.5"
    # 220 uncached input at $5, 25 cached at $0.50, 45 output at $30 per million
    assert outcome.cost_usd == pytest.approx((220 * 5 + 25 * 0.5 + 45 * 30) / 1e6)
    assert outcome.cost_basis is not None and outcome.cost_basis.startswith("price-table v")
    assert json.loads(outcome.transcript_lines[0])["type"] == DIGEST_TYPE


def test_a_model_the_price_table_lacks_stays_unpriced(tmp_path: Path) -> None:
    monitor = CodexStreamMonitor()
    monitor.feed('{"type":"turn.completed","usage":{"input_tokens":100,"output_tokens":10}}')
    outcome = CodexHost().finalize(INFO, monitor, env={"CODEX_HOME": str(tmp_path)}, cwd=tmp_path)
    assert outcome.model_identity is None and outcome.cost_usd is None and outcome.cost_basis is None


def test_the_build_renders_skills_and_instructions_for_codex_and_warns_for_agents_and_commands(
        atlante_project: Project) -> None:
    atlante_project.write("harness/AGENTS.md", "Be brief.\n")
    atlante_project.write("harness/commands/ship.md", "---\ndescription: Ship it.\n---\nShip.\n")
    doc = config_doc("codex")
    doc["harness"] |= {"instructions": "harness/AGENTS.md", "commands": {"ship": {"file": "harness/commands/ship.md"}}}
    atlante_project.config(doc)
    atlante_project.build()
    build = atlante_project.root / ".atlante" / "build" / "codex"
    manifest = json.loads((build / "manifest.json").read_text(encoding="utf-8"))
    assert sorted(o["path"] for o in manifest["outputs"]) == [".codex/skills/tidy/SKILL.md", "AGENTS.md"]
    assert (build / "tree" / ".codex" / "skills" / "tidy" / "SKILL.md").read_text(encoding="utf-8").startswith(
        "---\nname: tidy\ndescription: Keeps files tidy.\n---\n")
    assert sorted(w.split(":")[0] for w in manifest["warnings"]) == ["harness/commands/ship.md", "harness/helper.md"]
    assert all("not rendered for codex" in w for w in manifest["warnings"])
