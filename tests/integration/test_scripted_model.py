"""The scripted model server: script validation, both wire dialects, and the real CLIs driven by it.

The first sections talk HTTP to a live server and parse its streams back; the ``hosts`` section runs
the pinned ``claude`` and ``opencode`` binaries against it and checks effects on disk and the token
figures each host reports.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_atlante.diagnostics import DiagnosticError
from pytest_atlante.hosts.claude_code.adapter import scripted_env as claude_scripted_env
from pytest_atlante.hosts.opencode.adapter import scripted_provider_config
from pytest_atlante.provider.scripted import (
    DEFAULT_USAGE,
    EXHAUSTED_REPLY_TEXT,
    SIDE_REPLY_TEXT,
    ScriptedModelServer,
)
from pytest_atlante.provider.wire.shared import parse_sse, sse_event
from pytest_atlante.suite.script import Script, ScriptError, load_script

REPO = Path(__file__).resolve().parents[2]
CLAUDE = REPO / "hosts-npm/node_modules/.bin/claude"
OPENCODE = REPO / "hosts-npm/node_modules/.bin/opencode"
CLI_TIMEOUT_S = 120

# write → edit → bash, then a closing text turn; distinct usage per turn so sums are checkable.
THREE_EFFECTS = {
    "schema": "atlante/scripted-model-v1",
    "turns": [
        {"text": "I'll add the module.",
         "actions": [{"type": "write", "path": "src/health.py", "content": "STATUS = 'draft'\n"}],
         "usage": {"input": 1200, "output": 300}},
        {"text": "Now fix the status.",
         "actions": [{"type": "edit", "path": "src/health.py", "old": "'draft'", "new": "'ok'"}],
         "usage": {"input": 1500, "output": 200, "cache_read": 50, "cache_write": 70}},
        {"text": "Recording the run.",
         "actions": [{"type": "bash", "command": "echo ran > bash-proof.txt"}],
         "usage": {"input": 1700, "output": 100}},
        {"text": "Done.", "usage": {"input": 1800, "output": 10}},
    ],
}


def write_script(tmp_path: Path, document: Any, name: str = "script.json") -> Path:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def script_of(document: dict[str, Any]) -> Script:
    return Script.model_validate(document)


# --------------------------------------------------------------------------- script documents


def diagnostics_of(tmp_path: Path, document: Any) -> list[tuple[str, str, str]]:
    with pytest.raises(ScriptError) as caught:
        load_script(write_script(tmp_path, document))
    assert isinstance(caught.value, DiagnosticError)
    return [(d.location, d.code, d.message) for d in caught.value.diagnostics]


def test_valid_jsonc_script_loads(tmp_path: Path) -> None:
    text = """// comments and trailing commas are allowed
    {"schema": "atlante/scripted-model-v1",
     "turns": [
       {"text": "hi", "actions": [{"type": "bash", "command": "true", "timeout_ms": 5000},],},
       {"text": "bye"},
     ],}"""
    script = load_script(write_script(tmp_path, text, "s.jsonc"))
    assert [t.text for t in script.turns] == ["hi", "bye"]
    assert script.turns[0].actions[0].type == "bash"


def test_unknown_action_type_is_reported_at_its_json_path(tmp_path: Path) -> None:
    found = diagnostics_of(tmp_path, {"schema": "atlante/scripted-model-v1", "turns": [
        {"actions": [{"type": "write", "path": "a", "content": ""}, {"type": "delete", "path": "b"}]}]})
    assert len(found) == 1
    location, code, message = found[0]
    assert (location, code) == ("$.turns[0].actions[1]", "eval-script-invalid")
    assert "'delete'" in message


def test_missing_field_path_omits_the_union_tag(tmp_path: Path) -> None:
    found = diagnostics_of(tmp_path, {"schema": "atlante/scripted-model-v1", "turns": [
        {"text": "x"}, {"actions": [{"type": "edit", "path": "a", "old": "o"}]}]})
    assert found == [("$.turns[1].actions[0].new", "eval-script-invalid", "Field required")]


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    found = diagnostics_of(tmp_path, {"schema": "atlante/scripted-model-v2", "turns": [
        {"text": "x", "usage": {"input": "12", "output": 1}, "extra": 1},
        {},
        {"error": {"status": 500}, "text": "no"},
        {"empty": True, "text": "no"},
        {"actions": [{"type": "write", "path": "/etc/passwd", "content": ""},
                     {"type": "read", "path": "../outside"},
                     {"type": "bash", "command": "x", "timeout_ms": 0}]},
    ]})
    locations = [location for location, _, _ in found]
    assert locations == [
        "$.schema",
        "$.turns[0].usage.input",
        "$.turns[0].extra",
        "$.turns[1]",
        "$.turns[2]",
        "$.turns[3]",
        "$.turns[4].actions[0].path",
        "$.turns[4].actions[1].path",
        "$.turns[4].actions[2].timeout_ms",
    ]
    messages = dict((loc, msg) for loc, _, msg in found)
    assert "absolute" in messages["$.turns[4].actions[0].path"]
    assert "'..'" in messages["$.turns[4].actions[1].path"]
    assert messages["$.turns[1]"] == "a turn needs 'text', 'actions', 'error' or 'empty'"
    assert messages["$.turns[3]"] == "a turn with 'empty' answers with no text and no tool calls: drop text and actions"


def test_syntax_error_and_duplicate_key_and_missing_file(tmp_path: Path) -> None:
    assert diagnostics_of(tmp_path, '{"schema": 1,\n "turns": ]}')[0][0] == "line 2, column 11"
    duplicate = diagnostics_of(tmp_path, '{"schema": "atlante/scripted-model-v1",\n  "schema": "x", "turns": []}')
    assert duplicate[0] == ("line 2, column 3", "eval-script-invalid", "duplicate key 'schema'")
    with pytest.raises(ScriptError) as caught:
        load_script(tmp_path / "absent.json")
    assert caught.value.diagnostics[0].code == "eval-script-invalid"


# --------------------------------------------------------------------------- SSE framing


def test_sse_event_round_trips() -> None:
    stream = sse_event({"a": "line1\nline2"}, "message_start") + sse_event("[DONE]")
    assert parse_sse(stream) == [("message_start", '{"a":"line1\\nline2"}'), (None, "[DONE]")]


# --------------------------------------------------------------------------- the server over HTTP


ANTHROPIC_TOOLS = [
    {"name": "Write", "input_schema": {"properties": {"file_path": {}, "content": {}}, "required": ["file_path", "content"]}},
    {"name": "Edit", "input_schema": {"properties": {"file_path": {}, "old_string": {}, "new_string": {}, "replace_all": {}}}},
    {"name": "Bash", "input_schema": {"properties": {"command": {}, "timeout": {}, "description": {}}}},
    {"name": "Read", "input_schema": {"properties": {"file_path": {}}}},
]
OPENAI_TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"properties": {p: {} for p in props}}}}
    for name, props in [("write", ["filePath", "content"]), ("edit", ["filePath", "oldString", "newString", "replaceAll"]),
                        ("bash", ["command", "timeout", "workdir"]), ("read", ["filePath"])]
]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(script_of(THREE_EFFECTS), sandbox_root=tmp_path) as running:
        yield running


def post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[int, str, bytes]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read()


def history(assistant_messages: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for _ in range(assistant_messages):
        messages += [{"role": "assistant", "content": "..."}, {"role": "user", "content": "result"}]
    return messages


def anthropic_turn(server: ScriptedModelServer, assistant_messages: int, **extra: Any) -> list[tuple[str | None, dict[str, Any]]]:
    body = {"model": "claude-x", "stream": True, "tools": ANTHROPIC_TOOLS, "messages": history(assistant_messages), **extra}
    status, content_type, payload = post(server.anthropic_base_url + "/v1/messages?beta=true", body,
                                         {"X-Claude-Code-Session-Id": "s1"})
    assert (status, content_type) == (200, "text/event-stream")
    return [(event, json.loads(data)) for event, data in parse_sse(payload)]


def test_anthropic_stream_plays_the_turn_named_by_the_assistant_count(server: ScriptedModelServer, tmp_path: Path) -> None:
    events = anthropic_turn(server, 1)
    assert [e for e, _ in events] == [
        "message_start",
        "content_block_start", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop",
    ]
    assert all(data["type"] == event for event, data in events)
    start = events[0][1]["message"]
    assert start["model"] == "claude-x"
    assert start["usage"] | {"output_tokens": 0} == {
        "input_tokens": 1500, "cache_read_input_tokens": 50, "cache_creation_input_tokens": 70, "output_tokens": 0}
    assert events[2][1]["delta"] == {"type": "text_delta", "text": "Now fix the status."}
    tool = events[4][1]["content_block"]
    assert (tool["type"], tool["name"]) == ("tool_use", "Edit")
    arguments = json.loads(events[5][1]["delta"]["partial_json"])
    assert arguments == {"file_path": str(tmp_path.resolve() / "src/health.py"), "old_string": "'draft'", "new_string": "'ok'"}
    assert events[7][1]["delta"]["stop_reason"] == "tool_use"
    assert events[7][1]["usage"] == {"output_tokens": 200}
    record = server.requests[-1]
    assert (record.kind, record.turn_index, record.wire, record.session_id) == ("turn", 1, "anthropic", "s1")
    assert record.tool_calls == ("Edit",) and record.tools_offered == ("Write", "Edit", "Bash", "Read")


def test_retries_replay_a_turn_and_count_once(server: ScriptedModelServer) -> None:
    first = anthropic_turn(server, 0)
    again = anthropic_turn(server, 0)
    assert first[1:] == again[1:]  # only the message id differs
    assert server.turns_served == 1
    anthropic_turn(server, 3)
    assert server.turns_served == 2
    assert [r.turn_index for r in server.requests] == [0, 0, 3]


def test_last_turn_ends_and_exhausted_script_replies_without_tools(server: ScriptedModelServer) -> None:
    final = anthropic_turn(server, 3)
    assert final[-2][1]["delta"]["stop_reason"] == "end_turn"
    assert final[-2][1]["usage"] == {"output_tokens": 10}
    after = anthropic_turn(server, 4)
    assert [e for e, _ in after].count("content_block_start") == 1
    assert after[2][1]["delta"]["text"] == EXHAUSTED_REPLY_TEXT
    assert after[0][1]["message"]["usage"]["input_tokens"] == 0
    assert server.requests[-1].kind == "exhausted"
    assert server.turns_served == 1


def test_bash_description_and_missing_tool_fallback(tmp_path: Path) -> None:
    script = script_of({"schema": "atlante/scripted-model-v1", "turns": [
        {"actions": [{"type": "bash", "command": "make"}, {"type": "write", "path": "x", "content": "y"}]}]})
    with ScriptedModelServer(script, sandbox_root=tmp_path) as running:
        # Only Bash offered, in a different case: matched case-insensitively; write is unoffered.
        body = {"model": "m", "stream": True, "messages": history(0),
                "tools": [{"name": "BASH", "input_schema": {"properties": {"command": {}, "description": {}}}}]}
        _, _, payload = post(running.anthropic_base_url + "/v1/messages", body)
        blocks = [json.loads(d) for e, d in parse_sse(payload) if e == "content_block_start"]
        deltas = [json.loads(d) for e, d in parse_sse(payload) if e == "content_block_delta"]
    assert [b["content_block"]["name"] for b in blocks] == ["BASH", "Write"]
    assert json.loads(deltas[0]["delta"]["partial_json"]) == {"command": "make", "description": "Run make"}
    assert running.requests[0].unoffered_tools == ("write",)


def test_side_requests_do_not_consume_turns(server: ScriptedModelServer) -> None:
    body = {"model": "m", "stream": True, "messages": history(0), "stream_options": {"include_usage": True}}
    _, _, payload = post(server.openai_base_url + "/chat/completions", body)
    chunks = [json.loads(d) for _, d in parse_sse(payload)[:-1]]
    assert chunks[0]["choices"][0]["delta"]["content"] == SIDE_REPLY_TEXT
    assert chunks[-1]["usage"]["total_tokens"] == 0
    assert server.requests[-1].kind == "side" and server.turns_served == 0


def test_openai_stream_chunks_tool_calls_usage_and_done(server: ScriptedModelServer, tmp_path: Path) -> None:
    body = {"model": "scripted-model", "stream": True, "tools": OPENAI_TOOLS, "messages": history(1),
            "stream_options": {"include_usage": True}}
    status, content_type, payload = post(server.openai_base_url + "/chat/completions", body, {"x-session-id": "ses_1"})
    assert (status, content_type) == (200, "text/event-stream")
    frames = parse_sse(payload)
    assert frames[-1] == (None, "[DONE]")
    chunks = [json.loads(d) for _, d in frames[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": "Now fix the status."}
    (call,) = chunks[1]["choices"][0]["delta"]["tool_calls"]
    assert call["function"]["name"] == "edit" and call["id"].startswith("call_")
    assert json.loads(call["function"]["arguments"]) == {
        "filePath": str(tmp_path.resolve() / "src/health.py"), "oldString": "'draft'", "newString": "'ok'"}
    assert chunks[2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[3]["choices"] == []
    assert chunks[3]["usage"] == {"prompt_tokens": 1550, "completion_tokens": 200, "total_tokens": 1750,
                                  "prompt_tokens_details": {"cached_tokens": 50}}
    assert server.requests[-1].session_id == "ses_1"


def test_openai_without_include_usage_and_final_stop(server: ScriptedModelServer) -> None:
    body = {"model": "m", "stream": True, "tools": OPENAI_TOOLS, "messages": history(3)}
    _, _, payload = post(server.openai_base_url + "/chat/completions", body)
    chunks = [json.loads(d) for _, d in parse_sse(payload)[:-1]]
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None, "stop"]


def test_non_streaming_requests_get_whole_messages(server: ScriptedModelServer) -> None:
    _, content_type, payload = post(server.anthropic_base_url + "/v1/messages",
                                    {"model": "m", "tools": ANTHROPIC_TOOLS, "messages": history(2)})
    message = json.loads(payload)
    assert content_type == "application/json"
    assert [b["type"] for b in message["content"]] == ["text", "tool_use"]
    assert message["content"][1]["input"]["command"] == "echo ran > bash-proof.txt"
    assert message["usage"]["output_tokens"] == 100
    _, _, payload = post(server.openai_base_url + "/chat/completions",
                         {"model": "m", "tools": OPENAI_TOOLS, "messages": history(0)})
    completion = json.loads(payload)
    assert completion["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "write"
    assert completion["usage"]["completion_tokens"] == 300


def test_error_turns_and_default_usage(tmp_path: Path) -> None:
    script = script_of({"schema": "atlante/scripted-model-v1",
                        "turns": [{"text": "plain"}, {"error": {"status": 529, "message": "overloaded"}}]})
    with ScriptedModelServer(script, sandbox_root=tmp_path) as running:
        events = anthropic_turn(running, 0)
        status, _, payload = post(running.anthropic_base_url + "/v1/messages",
                                  {"model": "m", "stream": True, "tools": ANTHROPIC_TOOLS, "messages": history(1)})
        assert (status, json.loads(payload)["error"]["message"]) == (529, "overloaded")
        status, _, payload = post(running.openai_base_url + "/chat/completions",
                                  {"model": "m", "stream": True, "tools": OPENAI_TOOLS, "messages": history(1)})
        assert (status, json.loads(payload)["error"]["message"]) == (529, "overloaded")
    assert events[0][1]["message"]["usage"]["input_tokens"] == DEFAULT_USAGE.input
    assert events[-2][1]["usage"]["output_tokens"] == DEFAULT_USAGE.output
    assert [(r.kind, r.turn_index, r.status) for r in running.requests] == [("turn", 0, 200), ("turn", 1, 529), ("turn", 1, 529)]
    assert running.turns_served == 2


def test_health_models_unknown_routes_and_stop(tmp_path: Path) -> None:
    running = ScriptedModelServer(script_of(THREE_EFFECTS), sandbox_root=tmp_path)
    running.start()
    base = running.anthropic_base_url
    assert urllib.request.urlopen(urllib.request.Request(base + "/", method="HEAD"), timeout=5).status == 200
    assert urllib.request.urlopen(base + "/", timeout=5).status == 200
    models = json.loads(urllib.request.urlopen(running.openai_base_url + "/models", timeout=5).read())
    assert models["data"][0]["id"] == "scripted-model"
    assert post(base + "/v1/embeddings", {})[0] == 404
    assert json.loads(post(base + "/v1/messages/count_tokens", {"messages": []})[2]) == {"input_tokens": 0}
    status, _, _ = post(base + "/v1/messages", {})
    assert status == 200 and running.requests[-1].kind == "side"
    assert [r.kind for r in running.requests] == ["other", "other", "other", "rejected", "other", "side"]
    assert running.turns_served == 0
    running.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(base + "/", timeout=2)
    running.stop()  # idempotent


def test_host_wiring_helpers(server: ScriptedModelServer) -> None:
    env = claude_scripted_env(server.endpoint)
    assert env["ANTHROPIC_BASE_URL"] == f"http://127.0.0.1:{server.port}"
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "1" and env["ANTHROPIC_API_KEY"] == "atlante-scripted"
    config = scripted_provider_config(server.endpoint)
    assert config["model"] == config["small_model"] == "atlante-scripted/scripted-model"
    provider = config["provider"]["atlante-scripted"]
    assert provider["npm"] == "@ai-sdk/openai-compatible"  # bundled; a version would npm-install
    assert provider["options"]["baseURL"] == f"http://127.0.0.1:{server.port}/v1"
    assert provider["models"]["scripted-model"]["cost"]["input"] > 0


# --------------------------------------------------------------------------- real CLIs


def run_cli(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run a host CLI in its own process group; on timeout kill the whole group and fail."""
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        out, err = process.communicate(timeout=CLI_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        pytest.fail(f"{argv[0]} timed out after {CLI_TIMEOUT_S}s; stderr tail: {err[-2000:]}")
    return subprocess.CompletedProcess(argv, process.returncode, out, err)


def events_of(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def base_env(home: Path) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8"}


def assert_three_effects(sandbox: Path) -> None:
    assert (sandbox / "src/health.py").read_text() == "STATUS = 'ok'\n"
    assert (sandbox / "bash-proof.txt").read_text() == "ran\n"


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    sandbox, home = tmp_path / "sandbox", tmp_path / "home"
    sandbox.mkdir()
    home.mkdir()
    return sandbox, home


def claude_run(sandbox: Path, home: Path, server: ScriptedModelServer) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    assert CLAUDE.exists(), f"pinned claude missing at {CLAUDE}: install hosts-npm"
    (home / ".claude.json").write_text(json.dumps({"projects": {str(sandbox.resolve()): {"hasTrustDialogAccepted": True}}}))
    (sandbox / ".claude").mkdir(exist_ok=True)
    (sandbox / ".claude/settings.json").write_text(json.dumps({"permissions": {"allow": ["Write", "Edit", "Read", "Bash"]}}))
    result = run_cli([str(CLAUDE), "-p", "Add a health module", "--output-format", "stream-json", "--verbose",
                      "--setting-sources", "project"], sandbox, {**base_env(home), **claude_scripted_env(server.endpoint)})
    return result, events_of(result.stdout)


@pytest.mark.hosts
def test_claude_code_plays_the_script(dirs: tuple[Path, Path]) -> None:
    sandbox, home = dirs
    with ScriptedModelServer(script_of(THREE_EFFECTS), sandbox_root=sandbox) as server:
        result, events = claude_run(sandbox, home, server)
    assert result.returncode == 0, result.stderr
    assert_three_effects(sandbox)
    (final,) = [e for e in events if e["type"] == "result"]
    assert (final["is_error"], final["num_turns"], final["result"]) == (False, 4, "Done.")
    # Claude sums message_start input/cache figures and message_delta output over all requests.
    assert {k: final["usage"][k] for k in ("input_tokens", "output_tokens", "cache_read_input_tokens",
                                             "cache_creation_input_tokens")} == {
        "input_tokens": 1200 + 1500 + 1700 + 1800, "output_tokens": 300 + 200 + 100 + 10,
        "cache_read_input_tokens": 50, "cache_creation_input_tokens": 70}
    assert final["total_cost_usd"] > 0
    tools_used = [b["name"] for e in events if e["type"] == "assistant"
                  for b in e["message"]["content"] if b["type"] == "tool_use"]
    assert tools_used == ["Write", "Edit", "Bash"]
    model_requests = [r for r in server.requests if r.wire == "anthropic"]
    assert [(r.kind, r.turn_index, r.tool_calls) for r in model_requests] == [
        ("turn", 0, ("Write",)), ("turn", 1, ("Edit",)), ("turn", 2, ("Bash",)), ("turn", 3, ())]
    assert {"Write", "Edit", "Bash", "Read"} <= set(model_requests[0].tools_offered)
    assert server.turns_served == 4


@pytest.mark.hosts
def test_claude_code_error_turn_is_retried_once_then_reported(dirs: tuple[Path, Path]) -> None:
    sandbox, home = dirs
    script = script_of({"schema": "atlante/scripted-model-v1", "turns": [
        {"actions": [{"type": "write", "path": "before-error.txt", "content": "x"}]},
        {"error": {"status": 500, "message": "scripted outage"}}]})
    with ScriptedModelServer(script, sandbox_root=sandbox) as server:
        _result, events = claude_run(sandbox, home, server)
    (final,) = [e for e in events if e["type"] == "result"]
    assert (final["is_error"], final["api_error_status"]) == (True, 500)
    assert "scripted outage" in final["result"]
    assert (sandbox / "before-error.txt").read_text() == "x"
    # CLAUDE_CODE_MAX_RETRIES=1: the error turn is requested twice but played as one turn.
    assert [(r.turn_index, r.status) for r in server.requests if r.wire] == [(0, 200), (1, 500), (1, 500)]
    assert server.turns_served == 2


OPENCODE_ENV = {"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_SHARE": "1",
                "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_CLAUDE_CODE": "1"}


@pytest.mark.hosts
@pytest.mark.parametrize("wiring", ["openai-compatible", "anthropic-gateway"])
def test_opencode_plays_the_script(dirs: tuple[Path, Path], wiring: str) -> None:
    """Both ways OpenCode can reach the scripted model: the custom provider block (OpenAI dialect)
    and its built-in anthropic provider behind ``ANTHROPIC_BASE_URL`` (host-facts "Gateways")."""
    sandbox, home = dirs
    assert OPENCODE.exists(), f"pinned opencode missing at {OPENCODE}: install hosts-npm"
    with ScriptedModelServer(script_of(THREE_EFFECTS), sandbox_root=sandbox) as server:
        config: dict[str, Any] = {"$schema": "https://opencode.ai/config.json", "autoupdate": False, "share": "disabled",
                                  "permission": {"edit": "allow", "bash": "allow"}}
        env = {**base_env(home), **OPENCODE_ENV}
        if wiring == "openai-compatible":
            config.update(scripted_provider_config(server.endpoint))
        else:
            config.update(model="anthropic/claude-sonnet-4-5", small_model="anthropic/claude-sonnet-4-5")
            env["ANTHROPIC_BASE_URL"] = server.anthropic_base_url + "/v1"
            auth = home / ".local/share/opencode/auth.json"
            auth.parent.mkdir(parents=True)
            auth.write_text(json.dumps({"anthropic": {"type": "api", "key": "atlante-scripted"}}))
        (sandbox / "opencode.json").write_text(json.dumps(config, indent=2))
        result = run_cli([str(OPENCODE), "run", "--format", "json", "Add a health module"], sandbox, env)
    assert result.returncode == 0, result.stderr
    events = events_of(result.stdout)
    assert not [e for e in events if e["type"] == "error"]
    assert_three_effects(sandbox)
    steps = [e["part"] for e in events if e["type"] == "step_finish"]
    assert [s["reason"] for s in steps] == ["tool-calls", "tool-calls", "tool-calls", "stop"]
    # OpenCode reports prompt tokens minus cached as input; over OpenAI the server adds cache_read
    # back into prompt_tokens. Cache writes exist only in the Anthropic dialect.
    cache_write = 70 if wiring == "anthropic-gateway" else 0
    assert [(s["tokens"]["input"], s["tokens"]["output"], s["tokens"]["cache"]["read"], s["tokens"]["cache"]["write"])
            for s in steps] == [(1200, 300, 0, 0), (1500, 200, 50, cache_write), (1700, 100, 0, 0), (1800, 10, 0, 0)]
    assert all(s["cost"] > 0 for s in steps)
    tools_used = [e["part"]["tool"] for e in events if e["type"] == "tool_use"]
    assert tools_used == ["write", "edit", "bash"]
    dialect = "openai" if wiring == "openai-compatible" else "anthropic"
    model_requests = [r for r in server.requests if r.wire]
    assert {r.wire for r in model_requests} == {dialect}
    # The turns come in order (each needs the answer to the one before); the title request runs
    # beside them, so where it falls among them is OpenCode's scheduling (under load: after turn 0).
    assert [(r.kind, r.turn_index) for r in model_requests if r.kind != "side"] == [
        ("turn", 0), ("turn", 1), ("turn", 2), ("turn", 3)]
    assert [r.kind for r in model_requests].count("side") == 1
    assert server.turns_served == 4
