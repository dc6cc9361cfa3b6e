"""The Gemini CLI adapter without the CLI: its stream reading over verbatim 0.61.0 streams
(host-facts-gemini §12, kept in samples/), its settings, policy, environment and credentials."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_atlante.hosts import host_for
from pytest_atlante.hosts.base import HOST_UNAUTHENTICATED, SCRIPTED_MODEL_ID, HostInfo, ScriptedEndpoint, TrialWiring
from pytest_atlante.hosts.gemini_cli.adapter import FORBIDDEN_FIXTURE_FILES, acknowledged_agents
from pytest_atlante.hosts.gemini_cli.policy import command_regex, gemini_denials, gemini_policy_toml
from pytest_atlante.hosts.gemini_cli.stream import GeminiStreamMonitor, transcript_events
from pytest_atlante.hosts.policy import POLICY
from pytest_atlante.hosts.prices import shipped_table
from pytest_atlante.hosts.transcripts import TranscriptBuilder
from pytest_atlante.records import Usage
from pytest_atlante.suite.discovery import fixture_diagnostics

SAMPLES = Path(__file__).parent / "samples"
HOST = host_for("gemini-cli")
INFO = HostInfo("gemini-cli", "0.61.0", "gemini-cli", "/usr/bin/gemini")
ENDPOINT = ScriptedEndpoint("http://127.0.0.1:9999", "http://127.0.0.1:9999/v1")


def monitor_of(sample: str, extra: list[str] = ()) -> GeminiStreamMonitor:  # type: ignore[assignment]
    monitor = GeminiStreamMonitor()
    for line in [*(SAMPLES / sample).read_text().splitlines(), *extra]:
        monitor.feed(line)
    return monitor


# --------------------------------------------------------------------------- stream


def test_a_successful_stream_takes_usage_and_model_from_the_result_only() -> None:
    lines = (SAMPLES / "gemini-0.61.0-write-stream.jsonl").read_text().splitlines()
    monitor = GeminiStreamMonitor()
    for line in lines[:-1]:
        monitor.feed(line)
    assert monitor.cumulative_tokens is None  # no usage before the result: the proxy meters
    monitor.feed(lines[-1])
    outcome = monitor.outcome()
    # input_tokens 245 includes cached 25; total 296 = 245 + 45 output + 6 thoughts
    assert outcome.usage == Usage(inputTokens=220, outputTokens=51, cacheReadTokens=25, cacheWriteTokens=0)
    assert outcome.model_identity == "gemini-2.5-pro-fake-001"  # the response's modelVersion
    assert (outcome.is_error, outcome.error_message, outcome.budget_unmonitored) == (False, None, False)
    assert (outcome.cost_usd, outcome.cost_basis) == (None, None)  # a model the table does not list


def test_an_interrupted_stream_is_a_failure_though_the_cli_exits_0() -> None:
    outcome = monitor_of("gemini-0.61.0-sigint-stream.jsonl").outcome()
    assert outcome.is_error and outcome.error_message == "the host's stream ended without a result event"
    assert outcome.usage is None and outcome.budget_unmonitored


@pytest.mark.parametrize(("sample", "message"), [
    ("gemini-0.61.0-http500-stream.jsonl", "scripted error"),
    ("gemini-0.61.0-empty-response-stream.jsonl", "session ended with status 'error': The model returned an empty response"),
])
def test_a_result_with_status_error_fails_the_session(sample: str, message: str) -> None:
    outcome = monitor_of(sample).outcome()
    assert outcome.is_error and message in (outcome.error_message or "")


def test_a_second_result_cannot_undo_an_error_or_lower_the_usage() -> None:
    forged = json.dumps({"type": "result", "status": "success", "stats": {"input_tokens": 1, "total_tokens": 1}})
    outcome = monitor_of("gemini-0.61.0-empty-response-stream.jsonl", [forged]).outcome()
    assert outcome.is_error and outcome.usage is not None and outcome.usage.total == 133
    assert any("second result" in note for note in outcome.notes)


def test_a_priced_model_gets_an_estimate_and_the_tables_label() -> None:
    result = {"type": "result", "status": "success", "stats": {
        "input_tokens": 1_000_000, "cached": 400_000, "output_tokens": 100_000, "total_tokens": 1_100_000,
        "models": {"gemini-2.5-flash": {}}}}
    monitor = GeminiStreamMonitor()
    monitor.feed(json.dumps(result))
    outcome = monitor.outcome()
    assert outcome.cost_usd == pytest.approx(600_000 * 0.30 / 1e6 + 400_000 * 0.03 / 1e6 + 100_000 * 2.50 / 1e6)
    assert outcome.cost_basis == shipped_table().label


def test_the_transcript_maps_gemini_tools_to_the_neutral_names() -> None:
    builder = TranscriptBuilder()
    lines = (SAMPLES / "gemini-0.61.0-write-stream.jsonl").read_text().splitlines()
    transcript_events(((i, line) for i, line in enumerate(lines)), builder)
    kinds = [(e["type"], e.get("tool")) for e in builder.events]
    assert kinds == [("text", None), ("tool_call", "write"), ("tool_result", "write"), ("text", None),
                     ("usage", None), ("result", None)]
    call = builder.events[1]
    assert call["hostTool"] == "write_file" and call["input"]["path"] == "hello.txt"
    assert [e["turn"] for e in builder.events[:4]] == [1, 1, 1, 2]
    assert builder.events[-1]["isError"] is False


def test_a_transcript_without_a_result_ends_with_a_failed_one() -> None:
    builder = TranscriptBuilder()
    lines = (SAMPLES / "gemini-0.61.0-sigint-stream.jsonl").read_text().splitlines()
    transcript_events(((i, line) for i, line in enumerate(lines)), builder)
    assert builder.events[-1]["type"] == "result" and builder.events[-1]["isError"] is True


# --------------------------------------------------------------------------- policy


def test_the_policy_rendering_denies_what_the_other_hosts_deny() -> None:
    assert gemini_denials(gemini_policy_toml()) == (frozenset(POLICY.denied_tools), frozenset(POLICY.denied_commands))


def _safe_for_gemini(pattern: str) -> bool:
    # Gemini CLI 0.61.0's isSafeRegExp: a quantified group is refused (the rule would be dropped).
    return len(pattern) <= 2048 and re.search(r"\([^)]*[*+?{].*\)[*+?{]", pattern) is None


def _denied(command: str) -> bool:
    # As the engine tests a rule: `"command":"<regex>` against the JSON of the (sub-)command's arguments.
    args = json.dumps({"command": command}, separators=(",", ":"))
    return any(re.search('"command":"' + command_regex(c), args) for c in POLICY.denied_commands)


@pytest.mark.parametrize("command", ["rm -rf x", "/bin/rm -rf x", "rm  -rf x", "/usr/bin/rm -r x", "rm\t-fr x",
                                     "sudo ls", "git  push", "dd if=a of=b", "chmod -R 777 .", "/sbin/shutdown now"])
def test_the_regex_rules_catch_what_the_prefix_rules_miss(command: str) -> None:
    assert _denied(command)


@pytest.mark.parametrize("command", ["rmdir build", "echo rm -rf", "farm -rf", "sudoedit x", "git pushd", "ddrescue a",
                                     "python3 -c 'print(1)'"])
def test_the_regex_rules_leave_other_commands_alone(command: str) -> None:
    assert not _denied(command)


def test_every_regex_passes_the_engines_safety_guard() -> None:
    assert all(_safe_for_gemini(command_regex(c)) for c in POLICY.denied_commands)


# --------------------------------------------------------------------------- settings, environment, credentials


def test_prepare_writes_fresh_settings_policy_and_agent_acknowledgments(tmp_path: Path) -> None:
    sandbox, home = tmp_path / "sandbox", tmp_path / "home"
    (sandbox / ".gemini" / "agents").mkdir(parents=True)
    (sandbox / ".gemini" / "agents" / "helper.md").write_text("---\nname: helper\n---\nbody\n")
    HOST.prepare(TrialWiring(INFO, sandbox_root=sandbox, home=home, user_home=tmp_path, parent_env={}, model=None, scripted=ENDPOINT))
    settings = json.loads((home / ".gemini" / "settings.json").read_text())
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert settings["model"]["name"] == SCRIPTED_MODEL_ID
    assert settings["general"]["maxAttempts"] == 1 and settings["advanced"]["ignoreLocalEnv"] is True
    assert settings["privacy"]["usageStatisticsEnabled"] is False and settings["telemetry"]["enabled"] is False
    assert (home / ".gemini" / "policies" / "atlante.toml").read_text() == gemini_policy_toml()
    acks = json.loads((home / ".gemini" / "acknowledgments" / "agents.json").read_text())
    assert acks == acknowledged_agents(sandbox) and list(next(iter(acks.values()))) == ["helper"]


def test_the_environment_has_no_relaunch_and_none_of_the_overriding_variables(tmp_path: Path) -> None:
    base = {"PATH": "/usr/bin", "GEMINI_MODEL": "other", "GOOGLE_GENAI_USE_VERTEXAI": "true",
            "GEMINI_CLI_TRUST_WORKSPACE": "true"}
    env = HOST.environment(INFO, base_env=base, parent_env=base, home=tmp_path, scripted=ENDPOINT)
    assert env["GEMINI_CLI_NO_RELAUNCH"] == "1" and env["GEMINI_CLI_HOME"] == str(tmp_path)
    assert env["GOOGLE_GEMINI_BASE_URL"] == "http://127.0.0.1:9999" and env["GEMINI_API_KEY"] == "atlante-scripted"
    assert not {"GEMINI_MODEL", "GOOGLE_GENAI_USE_VERTEXAI", "GEMINI_CLI_TRUST_WORKSPACE"} & set(env)


def test_the_command_is_headless_stream_json_and_trusts_the_sandbox_for_the_session() -> None:
    argv = HOST.command(INFO, prompt="Do it.", agent=None, model=None)
    assert argv[:3] == ["/usr/bin/gemini", "-p", "Do it."]
    assert {"--skip-trust", "stream-json"} <= set(argv)


def test_no_key_and_no_login_is_unauthenticated(tmp_path: Path) -> None:
    [problem] = HOST.credential_diagnostics(INFO, {}, tmp_path, None)
    assert problem.code == HOST_UNAUTHENTICATED and "GEMINI_API_KEY" in problem.message
    assert HOST.credential_diagnostics(INFO, {"GEMINI_API_KEY": "k"}, tmp_path, None) == []
    (tmp_path / ".gemini").mkdir()
    (tmp_path / ".gemini" / "oauth_creds.json").write_text("{}")
    assert len(HOST.credential_diagnostics(INFO, {}, tmp_path, None)) == 1  # an empty login is none
    (tmp_path / ".gemini" / "oauth_creds.json").write_text(json.dumps({"refresh_token": "r"}))
    assert HOST.credential_diagnostics(INFO, {}, tmp_path, None) == []


def test_a_real_session_copies_the_oauth_login_and_selects_it(tmp_path: Path) -> None:
    user, home = tmp_path / "user", tmp_path / "home"
    (user / ".gemini").mkdir(parents=True)
    (user / ".gemini" / "oauth_creds.json").write_text(json.dumps({"refresh_token": "r"}))
    HOST.prepare(TrialWiring(INFO, sandbox_root=tmp_path, home=home, user_home=user, parent_env={}, model=None, scripted=None))
    assert json.loads((home / ".gemini" / "oauth_creds.json").read_text()) == {"refresh_token": "r"}
    assert json.loads((home / ".gemini" / "settings.json").read_text())["security"]["auth"]["selectedType"] == "oauth-personal"
    assert HOST.provider_endpoint({}, None) is None  # Code Assist: metered from the stream
    assert HOST.provider_endpoint({"GEMINI_API_KEY": "k"}, None).variable == "GOOGLE_GEMINI_BASE_URL"  # type: ignore[union-attr]


@pytest.mark.parametrize("rel", sorted(FORBIDDEN_FIXTURE_FILES))
def test_fixture_files_gemini_would_load_are_rejected(tmp_path: Path, rel: str) -> None:
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x")
    problems = fixture_diagnostics(tmp_path, "gemini-cli", "scenario.eval.json")
    assert [rel in p.message or rel in p.location for p in problems] == [True]


def test_a_fixture_env_file_is_allowed_because_ignore_local_env_neutralises_it(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("GEMINI_MODEL=x\n")
    assert fixture_diagnostics(tmp_path, "gemini-cli", "scenario.eval.json") == []
