"""The scripted model's OpenAI Responses wire format (Codex): tools, turn index, actions, the wire, the meter.

The shell tools the actions become are the host's (``CODEX_TOOLS``, handed over as ``Host.shell_tools``):
the wire format alone knows none."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_atlante.hosts.codex.adapter import CodexHost
from pytest_atlante.hosts.codex.tools import CODEX_TOOLS
from pytest_atlante.hosts.registry import host_for
from pytest_atlante.provider.meter import ResponseMeter
from pytest_atlante.provider.scripted import ScriptedModelServer
from pytest_atlante.provider.wire import WIRE_FORMATS
from pytest_atlante.provider.wire.openai_responses import (
    action_call,
    patch_for_edit,
    patch_for_write,
    responses_loaded_skills,
    responses_played,
    responses_stream,
    responses_tools,
)
from pytest_atlante.provider.wire.shared import Reply, ReplyUsage, ToolCall, parse_sse
from pytest_atlante.records import Usage
from pytest_atlante.suite.script import Script

TOOLS = [
    {"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {"cmd": {}}, "required": ["cmd"]}},
    {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}},
    {"type": "web_search", "external_web_access": False},
    {"type": "namespace", "name": "multi_agent_v1", "tools": []},
]


def user(text: str) -> dict[str, object]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def test_function_and_custom_tools_are_offered_hosted_ones_are_not() -> None:
    assert [(t.name, sorted(t.properties)) for t in responses_tools({"tools": TOOLS})] == [
        ("exec_command", ["cmd"]), ("apply_patch", [])]


def test_the_turn_index_counts_model_responses_in_the_echoed_history() -> None:
    call = {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "x"}
    message = {"type": "message", "role": "assistant", "content": []}
    output = {"type": "custom_tool_call_output", "call_id": "c1", "output": "ok"}
    assert responses_played({"input": [user("AGENTS.md"), user("prompt")]}) == 0
    # one response of two items (a message and a call), then its output
    assert responses_played({"input": [user("prompt"), message, call, output]}) == 1
    assert responses_played({"input": [user("prompt"), message, call, output, call, output]}) == 2


def test_a_write_adds_a_new_file_and_replaces_an_existing_one() -> None:
    assert patch_for_write("/s/a.txt", "one\ntwo\n", None) == \
        "*** Begin Patch\n*** Add File: /s/a.txt\n+one\n+two\n*** End Patch\n"
    assert patch_for_write("/s/a.txt", "new\n", "old\n") == \
        "*** Begin Patch\n*** Update File: /s/a.txt\n@@\n-old\n+new\n*** End Patch\n"


def test_an_edit_is_computed_from_the_file_and_one_that_cannot_apply_stays_so() -> None:
    assert patch_for_edit("a", "x = 1\ny = 2\n", "= 2", "= 3", False) == \
        "*** Begin Patch\n*** Update File: a\n@@\n-x = 1\n-y = 2\n+x = 1\n+y = 3\n*** End Patch\n"
    assert patch_for_edit("a", "x\n", "absent", "y", False) == "*** Begin Patch\n*** Update File: a\n@@\n-absent\n+y\n*** End Patch\n"


def test_reads_skills_and_commands_go_through_exec_command(tmp_path: Path) -> None:
    assert action_call({"type": "read", "path": "a b.txt"}, tmp_path, CODEX_TOOLS) == ("exec_command", {"cmd": f"cat '{tmp_path}/a b.txt'"})
    assert action_call({"type": "skill", "name": "tidy"}, tmp_path, CODEX_TOOLS) == \
        ("exec_command", {"cmd": f"cat {tmp_path}/.codex/skills/tidy/SKILL.md"})
    assert action_call({"type": "bash", "command": "make", "timeout_ms": 5000}, tmp_path, CODEX_TOOLS) == \
        ("exec_command", {"cmd": "make", "yield_time_ms": 5000})
    (tmp_path / "f").write_text("old\n", encoding="utf-8")
    name, arguments = action_call({"type": "write", "path": "f", "content": "new\n"}, tmp_path, CODEX_TOOLS)
    assert name == "apply_patch" and "*** Update File:" in arguments["input"]


def test_a_skill_read_in_the_history_is_a_loaded_skill() -> None:
    body = {"input": [
        {"type": "function_call", "call_id": "c", "name": "exec_command", "arguments": json.dumps({"cmd": "cat /s/.codex/skills/tidy/SKILL.md"})},
        {"type": "function_call_output", "call_id": "c", "output": "Keep files tidy."}]}
    (skill,) = responses_loaded_skills(body, CODEX_TOOLS)
    assert (skill.call_id, skill.name, skill.text) == ("c", "tidy", "Keep files tidy.")


def test_the_stream_carries_each_item_then_the_usage_and_the_meter_reads_it() -> None:
    reply = Reply("m1", "gpt-5.5", "Writing.", (ToolCall("call_1", "apply_patch", {"input": "PATCH"}),
                                                ToolCall("call_2", "exec_command", {"cmd": "ls"})),
                  ReplyUsage(input=100, output=20, cache_read=30))
    stream = responses_stream(reply, frozenset({"apply_patch"}))
    events = [(name, json.loads(data)) for name, data in parse_sse(stream)]
    assert [name for name, _ in events] == ["response.created"] + ["response.output_item.done"] * 3 + ["response.completed"]
    items = [data["item"] for name, data in events if name == "response.output_item.done"]
    assert [i["type"] for i in items] == ["message", "custom_tool_call", "function_call"]
    assert items[1]["input"] == "PATCH" and json.loads(items[2]["arguments"]) == {"cmd": "ls"}
    assert events[-1][1]["response"]["usage"]["input_tokens"] == 130  # cached inside the input, as OpenAI counts
    meter = ResponseMeter("text/event-stream")
    meter.feed(stream)
    meter.finish()
    assert meter.reported and meter.usage == Usage(inputTokens=100, outputTokens=20, cacheReadTokens=30)


def test_the_server_plays_turns_on_the_responses_route(tmp_path: Path) -> None:
    script = Script.model_validate({"schema": "atlante/scripted-model-v1", "turns": [
        {"text": "Writing.", "actions": [{"type": "write", "path": "a.txt", "content": "x\n"}]}, {"text": "Done."}]})
    server = ScriptedModelServer(script, sandbox_root=tmp_path, shell_tools=host_for("codex").shell_tools)
    first = {"model": "gpt-5.5", "stream": True, "tools": TOOLS, "input": [user("prompt")]}
    answer = server.answer_post("/v1/responses", {"session-id": "t1"}, json.dumps(first).encode())
    assert answer.status == 200 and answer.content_type == "text/event-stream"
    item = json.loads(parse_sse(answer.payload)[2][1])["item"]
    assert item["name"] == "apply_patch" and f"*** Add File: {tmp_path.resolve()}/a.txt" in item["input"]
    second = first | {"input": [user("prompt"), item, {"type": "custom_tool_call_output", "call_id": item["call_id"], "output": "ok"}]}
    server.answer_post("/v1/responses", {"session-id": "t1"}, json.dumps(second).encode())
    records = server.requests
    assert [(r.wire, r.kind, r.turn_index, r.session_id) for r in records] == [
        ("responses", "turn", 0, "t1"), ("responses", "turn", 1, "t1")]
    assert server.turns_served == 2


def test_codex_hands_its_shell_tools_over_and_without_them_the_wire_knows_none(tmp_path: Path) -> None:
    """Codex's tool vocabulary is its host folder's: the adapter gives it (``Host.shell_tools``), and
    the table's wire format, which the proxy uses, has none — a write is then asked of a ``write``
    tool by its neutral name, which Codex does not offer, and no shell read is a loaded skill."""
    assert CodexHost().shell_tools is CODEX_TOOLS
    assert (CODEX_TOOLS.shell, CODEX_TOOLS.patch) == ("exec_command", "apply_patch")
    plain = WIRE_FORMATS["responses"]
    assert plain.for_host_tools(None) is plain
    script = Script.model_validate({"schema": "atlante/scripted-model-v1", "turns": [
        {"text": "Writing.", "actions": [{"type": "write", "path": "a.txt", "content": "x\n"}]}]})
    server = ScriptedModelServer(script, sandbox_root=tmp_path)
    request = {"model": "gpt-5.5", "stream": True, "tools": TOOLS, "input": [user("prompt")]}
    answer = server.answer_post("/v1/responses", {}, json.dumps(request).encode())
    assert json.loads(parse_sse(answer.payload)[2][1])["item"]["name"] == "write"
    assert server.requests[0].unoffered_tools == ("write",)
    read = {"input": [
        {"type": "function_call", "call_id": "c", "name": "exec_command",
         "arguments": json.dumps({"cmd": "cat /s/.codex/skills/tidy/SKILL.md"})},
        {"type": "function_call_output", "call_id": "c", "output": "Keep files tidy."}]}
    assert plain.loaded_skills(read) == ()
    assert [s.name for s in plain.for_host_tools(CODEX_TOOLS).loaded_skills(read)] == ["tidy"]
