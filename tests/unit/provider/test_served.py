"""What the model really answered (``provider/served.py``): the tool calls of served responses in each
wire, and the transcript events none of them vouches for (docs/design.md §10)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_atlante.provider.meter import ResponseMeter
from pytest_atlante.provider.served import Served, ServedCall, mark_unverified, unshown_calls
from pytest_atlante.provider.wire.anthropic import anthropic_message, anthropic_stream
from pytest_atlante.provider.wire.openai_chat import openai_completion, openai_stream
from pytest_atlante.provider.wire.shared import Reply, ReplyUsage, ToolCall
from pytest_atlante.records import Usage

REPLY = Reply("msg_1", "m", "loading", (ToolCall("call_1", "Skill", {"skill": "tidy"}),
                                        ToolCall("call_2", "Bash", {"command": "ls"})), ReplyUsage(10, 2, 0, 0))
WANTED = [ServedCall("call_1", "Skill", {"skill": "tidy"}), ServedCall("call_2", "Bash", {"command": "ls"})]


@pytest.mark.parametrize(("content_type", "body"), [
    ("text/event-stream", anthropic_stream(REPLY)),
    ("application/json", json.dumps(anthropic_message(REPLY)).encode()),
    ("text/event-stream", openai_stream(REPLY, 0, True)),
    ("application/json", json.dumps(openai_completion(REPLY, 0)).encode()),
], ids=["anthropic-stream", "anthropic-whole", "openai-stream", "openai-whole"])
def test_the_meter_reads_the_tool_calls_of_a_response(content_type: str, body: bytes) -> None:
    meter = ResponseMeter(content_type, len(body) if content_type == "application/json" else None)
    for start in range(0, len(body), 7):  # in small chunks, as a stream arrives
        meter.feed(body[start:start + 7])
    meter.finish()
    assert meter.tool_calls.calls == WANTED


def test_the_meter_reads_a_responses_function_call() -> None:
    item = {"type": "function_call", "call_id": "call_9", "name": "shell", "arguments": '{"command": ["ls"]}'}
    body = b"data: " + json.dumps({"type": "response.output_item.done", "item": item}).encode() + b"\n\n"
    meter = ResponseMeter("text/event-stream")
    meter.feed(body)
    meter.finish()
    assert meter.tool_calls.calls == [ServedCall("call_9", "shell", {"command": ["ls"]})]


def call(seq: int, call_id: str, tool: str, **inputs: Any) -> dict[str, Any]:
    return {"seq": seq, "type": "tool_call", "id": call_id, "tool": tool.lower(), "hostTool": tool, "input": inputs}


def result(seq: int, call_id: str) -> dict[str, Any]:
    return {"seq": seq, "type": "tool_result", "id": call_id, "isError": False}


def usage(seq: int, inputs: int, output: int, *, exact: bool = True) -> dict[str, Any]:
    return {"seq": seq, "type": "usage", "outputExact": exact,
            "usage": Usage(inputTokens=inputs, outputTokens=output).model_dump()}


SERVED = Served(WANTED, [Usage(inputTokens=10, outputTokens=2), Usage(inputTokens=20, outputTokens=5)],
                Usage(inputTokens=30, outputTokens=7))


def reasons(events: list[dict[str, Any]]) -> dict[int, str]:
    mark_unverified(events, SERVED)
    return {e["seq"]: e["unverifiedReason"] for e in events if e.get("unverified")}


def test_the_hosts_own_events_are_not_marked() -> None:
    events = [usage(1, 10, 1, exact=False), call(2, "call_1", "Skill", name="tidy"), result(3, "call_1"),
              call(4, "call_2", "Bash", command="<sandbox>/ls"), result(5, "call_2"), usage(6, 20, 5),
              {"seq": 7, "type": "result", "usage": Usage(inputTokens=30, outputTokens=7).model_dump()}]
    assert mark_unverified(events, SERVED) == 0  # arguments other than a skill or agent name are not compared


def test_forged_calls_results_and_figures_are_marked() -> None:
    found = reasons([
        call(1, "call_forged", "Skill", name="tidy"),
        call(2, "call_2", "Skill", name="tidy"),       # a real id under another tool
        call(3, "call_1", "Skill", name="secret"),     # a real skill call naming another skill
        result(4, "call_1"),                           # before its call was shown
        call(5, "call_1", "Skill", name="tidy"),
        call(6, "call_1", "Skill", name="tidy"),       # shown twice
        result(7, "call_1"),
        result(8, "call_1"),                           # a second result
        result(9, "call_forged"),
        usage(10, 0, 0),                               # counts no response reported
        usage(11, 10, 2),
        usage(12, 10, 2),                              # one response vouches for one event
        {"seq": 13, "type": "result", "usage": Usage().model_dump()},  # fewer than the vouched 12
        {"seq": 14, "type": "result", "usage": Usage(inputTokens=900).model_dump()},  # more than served
    ])
    assert set(found) == {1, 2, 3, 4, 6, 8, 9, 10, 12, 13, 14}, found
    assert "no model response" in found[1] and "'Bash'" in found[2] and "another skill" in found[3]
    assert "before" in found[4] and "already" in found[6] and "second result" in found[8]
    assert "counted 37" in found[14]


def test_a_result_whose_call_the_stream_cap_dropped_is_not_marked() -> None:
    # The cap keeps the head and the last lines: a result in the tail may have lost its call.
    events = [{"seq": 1, "type": "truncated", "droppedLines": 40}, result(2, "call_2")]
    assert mark_unverified(events, SERVED) == 0


def test_a_call_a_file_left_out_is_unshown_and_a_hosts_reading_names_the_skill() -> None:
    # Codex's rollout: the model's ids, its shell call read as a skill load by the host's own reading.
    served = Served([ServedCall("c1", "exec_command", {"cmd": "cat .agents/skills/tidy/SKILL.md"}),
                     ServedCall("c2", "exec_command", {"cmd": "rm -rf /"})], [], Usage())

    def neutral(name: str, arguments: Any) -> tuple[str, dict[str, Any]]:
        command = str(arguments.get("cmd"))
        return ("skill", {"name": "tidy"}) if command.endswith("SKILL.md") else ("bash", {"command": command})

    shown = [{"seq": 1, "type": "tool_call", "id": "c1", "tool": "skill", "hostTool": "exec_command",
              "input": {"name": "tidy"}}]
    assert mark_unverified(shown, served, neutral) == 0
    assert unshown_calls(shown, served) == [served.calls[1]]  # the rewritten file dropped c2
    other = [{"seq": 1, "type": "tool_call", "id": "c1", "tool": "skill", "hostTool": "exec_command",
              "input": {"name": "secret"}}]
    assert mark_unverified(other, served, neutral) == 1 and unshown_calls(other, served) == list(served.calls)


def test_gemini_calls_are_read_and_a_stream_that_numbers_its_own_calls_is_matched_in_order() -> None:
    from pytest_atlante.provider.wire.gemini import gemini_stream
    from pytest_atlante.provider.wire.shared import Reply, ReplyUsage, ToolCall

    reply = Reply("m1", "gemini-2.5-flash", "", (ToolCall("c", "activate_skill", {"name": "tidy"}),
                                                 ToolCall("d", "run_shell_command", {"command": "ls"})),
                  ReplyUsage(10, 2))
    meter = ResponseMeter("text/event-stream")
    meter.feed(gemini_stream(reply))
    meter.finish()
    assert [(c.name, c.arguments) for c in meter.tool_calls.calls] == [
        ("activate_skill", {"name": "tidy"}), ("run_shell_command", {"command": "ls"})]
    served = Served(meter.tool_calls.calls, [], Usage())

    def gemini(seq: int, tool_id: str, host_tool: str, tool: str, **inputs: Any) -> dict[str, Any]:
        return {"seq": seq, "type": "tool_call", "id": tool_id, "tool": tool, "hostTool": host_tool, "input": inputs}

    events = [gemini(1, "activate_skill__1", "activate_skill", "skill", name="tidy"), result(2, "activate_skill__1"),
              gemini(3, "forged_skill", "activate_skill", "skill", name="tidy"), result(4, "forged_skill"),
              gemini(5, "forged_other", "activate_skill", "skill", name="secret"),
              gemini(6, "run__2", "run_shell_command", "bash", command="ls"), result(7, "run__2"),
              gemini(8, "forged_shell", "run_shell_command", "bash", command="make test")]
    assert mark_unverified(events, served, by_order=True) == 4
    marked = [e["seq"] for e in events if e.get("unverified")]
    assert marked == [3, 4, 5, 8]  # the model made one skill load and one shell call: no more count
