"""The scripted model's Gemini wire format and the metering proxy's reading of Gemini usage, without a CLI:
requests shaped as Gemini CLI 0.61.0 sends them (docs/host-facts-gemini.md §11)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_atlante.provider.meter import ResponseMeter
from pytest_atlante.provider.proxy import _is_model_request
from pytest_atlante.provider.scripted import ScriptedModelServer
from pytest_atlante.provider.wire.gemini import gemini_route, gemini_stream, openai_view
from pytest_atlante.provider.wire.shared import Reply, ReplyUsage, ToolCall, loaded_skills, parse_sse
from pytest_atlante.records import Usage
from pytest_atlante.suite.script import Script

PATH = "/v1beta/models/scripted-model:streamGenerateContent?alt=sse"
TOOLS = [{"functionDeclarations": [
    {"name": "write_file", "parametersJsonSchema": {"type": "object", "properties": {"file_path": {}, "content": {}}}},
    {"name": "replace", "parametersJsonSchema": {"type": "object", "required": ["file_path", "instruction", "old_string", "new_string"],
                                                 "properties": {"file_path": {}, "instruction": {}, "old_string": {},
                                                                "new_string": {}, "allow_multiple": {}}}},
    {"name": "run_shell_command", "parametersJsonSchema": {"type": "object", "properties": {"command": {}, "description": {}}}},
    {"name": "activate_skill", "parametersJsonSchema": {"type": "object", "properties": {"name": {}}}},
]}]
PROMPT = {"role": "user", "parts": [{"text": "<session_context>\n…\n</session_context>"}, {"text": "Do the task."}]}


def model_turn(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"role": "model", "parts": [{"text": "Working."}, {"functionCall": {"id": call_id, "name": name, "args": args},
                                                              "thoughtSignature": "skip_thought_signature_validator"}]}


def response(name: str, output: str, call_id: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"functionResponse": {"id": call_id, "name": name, "response": {"output": output}}}]}


def chunks(payload: bytes) -> list[dict[str, Any]]:
    return [json.loads(data) for _, data in parse_sse(payload)]


def test_routes_name_the_model_and_whether_it_streams() -> None:
    assert gemini_route("/v1beta/models/gemini-2.5-pro:streamGenerateContent") == ("gemini-2.5-pro", True)
    assert gemini_route("/v1beta/models/gemini-3.5-flash-lite:generateContent") == ("gemini-3.5-flash-lite", False)
    assert gemini_route("/v1/messages") is None
    assert _is_model_request("POST", PATH) and not _is_model_request("GET", PATH)


def test_the_openai_view_counts_model_contents_as_assistant_turns_with_their_calls_and_results() -> None:
    body = {"contents": [PROMPT, model_turn("activate_skill", {"name": "tidy"}, "c1"),
                         response("activate_skill", "<activated_skill>BODY</activated_skill>", "c1")], "tools": TOOLS}
    view = openai_view(body)
    assert [m["role"] for m in view["messages"]] == ["user", "assistant", "tool"]
    assert view["messages"][0]["content"].endswith("Do the task.")
    assert view["messages"][1]["tool_calls"][0]["id"] == "c1" and view["messages"][2]["tool_call_id"] == "c1"
    assert [t["function"]["name"] for t in view["tools"]] == ["write_file", "replace", "run_shell_command", "activate_skill"]


def test_a_sub_agents_response_with_an_id_of_its_own_answers_its_call_by_name() -> None:
    # A sub-agent's history (0.61.0): its calls carry no id, its responses one the CLI made up.
    call = model_turn("activate_skill", {"name": "tidy"}, "")
    body = {"contents": [PROMPT, call, response("activate_skill", "<activated_skill>BODY</activated_skill>", "7d6c#0-0")],
            "tools": TOOLS}
    assistant, answer = openai_view(body)["messages"][1:]
    assert answer["tool_call_id"] == assistant["tool_calls"][0]["id"]
    assert loaded_skills(openai_view(body), "openai")[0].text == "<activated_skill>BODY</activated_skill>"
    # A response to no call of the last model content keeps its own id (nothing is paired twice).
    body["contents"].append(response("activate_skill", "again", "other"))
    assert openai_view(body)["messages"][-1]["tool_call_id"] == "other"


def test_the_reply_streams_text_then_calls_with_the_finish_reason_and_gemini_usage() -> None:
    reply = Reply("rid", "scripted-model", "Editing.", (ToolCall("x", "replace", {"file_path": "a", "old_string": "o",
                                                                                   "new_string": "n"}),),
                  ReplyUsage(input=100, output=20, cache_read=10))
    first, last = chunks(gemini_stream(reply))
    assert first["candidates"][0]["content"]["parts"] == [{"text": "Editing."}]
    call = last["candidates"][0]["content"]["parts"][0]["functionCall"]
    assert call["name"] == "replace" and call["args"]["instruction"]  # required by Gemini's replace
    assert last["candidates"][0]["finishReason"] == "STOP" and last["modelVersion"] == "scripted-model"
    assert last["usageMetadata"] == {"promptTokenCount": 110, "candidatesTokenCount": 20, "cachedContentTokenCount": 10,
                                     "totalTokenCount": 130}
    meter = ResponseMeter("text/event-stream")
    meter.feed(gemini_stream(reply))
    meter.finish()
    assert meter.reported and meter.usage == Usage(inputTokens=100, outputTokens=20, cacheReadTokens=10, cacheWriteTokens=0)


def test_the_meter_counts_thoughts_as_output() -> None:
    meter = ResponseMeter("application/json")
    meter.feed(json.dumps({"usageMetadata": {"promptTokenCount": 50, "candidatesTokenCount": 5, "thoughtsTokenCount": 7}}).encode())
    meter.finish()
    assert meter.usage == Usage(inputTokens=50, outputTokens=12, cacheReadTokens=0, cacheWriteTokens=0)


def test_the_server_plays_turns_by_the_number_of_model_contents(tmp_path: Path) -> None:
    script = Script.model_validate({"schema": "atlante/scripted-model-v1", "turns": [
        {"text": "Editing.", "actions": [{"type": "edit", "path": "a.txt", "old": "x", "new": "y", "replace_all": True}]},
        {"text": "Running.", "actions": [{"type": "bash", "command": "ls"}]},
        {"error": {"status": 503, "message": "scripted outage"}}]})
    server = ScriptedModelServer(script, sandbox_root=tmp_path)
    first = server.answer_post(PATH, {}, json.dumps({"contents": [PROMPT], "tools": TOOLS}).encode())
    call = chunks(first.payload)[-1]["candidates"][0]["content"]["parts"][0]["functionCall"]
    assert call["name"] == "replace"
    assert call["args"] == {"instruction": "Apply the scripted edit.", "file_path": str(tmp_path.resolve() / "a.txt"),
                            "old_string": "x", "new_string": "y", "allow_multiple": True}
    history = [PROMPT, model_turn("replace", call["args"], "c1"), response("replace", "ok", "c1")]
    second = server.answer_post(PATH, {}, json.dumps({"contents": history, "tools": TOOLS}).encode())
    assert chunks(second.payload)[-1]["candidates"][0]["content"]["parts"][0]["functionCall"]["name"] == "run_shell_command"
    history += [model_turn("run_shell_command", {"command": "ls"}, "c2"), response("run_shell_command", "a.txt", "c2")]
    third = server.answer_post(PATH, {}, json.dumps({"contents": history, "tools": TOOLS}).encode())
    assert third.status == 503 and json.loads(third.payload)["error"]["status"] == "UNAVAILABLE"
    records = server.requests
    assert [(r.wire, r.kind, r.turn_index, r.model) for r in records] == [("gemini", "turn", i, "scripted-model") for i in range(3)]
    assert records[0].body is not None and "contents" in records[0].body  # the request as sent, not the view
