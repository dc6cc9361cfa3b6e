"""The Anthropic Messages wire format (``POST /v1/messages``): Claude Code, OpenCode's built-in anthropic provider."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pytest_atlante.provider.wire.shared import (
    V1_MODEL_LIST,
    CallSink,
    MessageWire,
    Reply,
    ReplyUsage,
    UsageReading,
    _mapping,
    has_content,
    model_name,
    sse_event,
)


def _anthropic_usage(usage: ReplyUsage, output_tokens: int) -> dict[str, int]:
    return {
        "input_tokens": usage.input,
        "cache_creation_input_tokens": usage.cache_write,
        "cache_read_input_tokens": usage.cache_read,
        "output_tokens": output_tokens,
    }


def _anthropic_blocks(reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.text:
        blocks.append({"type": "text", "text": reply.text})
    for call in reply.tool_calls:
        blocks.append({"type": "tool_use", "id": call.call_id, "name": call.name, "input": call.arguments})
    return blocks


def anthropic_stream(reply: Reply) -> bytes:
    """The reply as an Anthropic Messages event stream (``stream: true``)."""
    stop_reason = "end_turn" if reply.ends_session else "tool_use"
    start = {
        "type": "message_start",
        "message": {
            "id": reply.message_id,
            "type": "message",
            "role": "assistant",
            "model": reply.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            # Like the real API: message_start carries the input side, output is final later.
            "usage": _anthropic_usage(reply.usage, 1),
        },
    }
    out = [sse_event(start, "message_start")]
    for index, block in enumerate(_anthropic_blocks(reply)):
        if block["type"] == "text":
            opening: dict[str, Any] = {"type": "text", "text": ""}
            delta: dict[str, Any] = {"type": "text_delta", "text": block["text"]}
        else:
            opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        out.append(sse_event({"type": "content_block_start", "index": index, "content_block": opening}, "content_block_start"))
        out.append(sse_event({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta"))
        out.append(sse_event({"type": "content_block_stop", "index": index}, "content_block_stop"))
    out.append(
        sse_event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": reply.usage.output},
            },
            "message_delta",
        )
    )
    out.append(sse_event({"type": "message_stop"}, "message_stop"))
    return b"".join(out)


def anthropic_message(reply: Reply) -> dict[str, Any]:
    """The reply as a non-streaming Anthropic Messages response body."""
    return {
        "id": reply.message_id,
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": _anthropic_blocks(reply),
        "stop_reason": "end_turn" if reply.ends_session else "tool_use",
        "stop_sequence": None,
        "usage": _anthropic_usage(reply.usage, reply.usage.output),
    }


def anthropic_error(status: int, message: str) -> dict[str, Any]:
    kind = "api_error" if status >= 500 else "invalid_request_error"
    return {"type": "error", "error": {"type": kind, "message": message}}


class AnthropicMessages(MessageWire):
    name = "anthropic"
    shape = "anthropic"
    call_prefix = "toolu_scripted"
    routes = ("/v1/messages", "/v1/messages/count_tokens")
    suffixes = ("/messages",)
    # A token count spends nothing; the proxy forwards it as it forwards the model call.
    proxied_calls = re.compile(r"^(?:/v1)?/messages(?:/count_tokens)?$")
    model_lists = V1_MODEL_LIST

    def side_answer(self, route: str) -> bytes | None:
        return b'{"input_tokens": 0}' if route.endswith("/count_tokens") else None

    def render(self, reply: Reply, stream: bool, body: Mapping[str, Any]) -> tuple[str, bytes]:
        if stream:
            return "text/event-stream", anthropic_stream(reply)
        return "application/json", json.dumps(anthropic_message(reply)).encode()

    def error(self, status: int, message: str) -> dict[str, Any]:
        return anthropic_error(status, message)

    def read_usage(self, body: Mapping[str, Any]) -> UsageReading | None:
        kind = body.get("type")
        if kind not in ("message_start", "message", "message_delta"):
            return None
        # message_delta states the message's cumulative counts: its output replaces message_start's 1.
        usage = _mapping(_mapping(body.get("message") if kind == "message_start" else body).get("usage"))
        if not usage:
            return UsageReading({}, reported=False)
        return UsageReading({"inputTokens": usage.get("input_tokens"), "cacheReadTokens": usage.get("cache_read_input_tokens"),
                             "cacheWriteTokens": usage.get("cache_creation_input_tokens"),
                             "outputTokens": usage.get("output_tokens")}, final_output=kind == "message_delta")

    def says_something(self, body: Mapping[str, Any]) -> bool | None:
        kind = body.get("type")
        if kind == "content_block_start":
            return True  # a block only exists to carry content
        return has_content(body.get("content")) if kind == "message" else None

    def served_model(self, body: Mapping[str, Any]) -> str | None:
        # message_start names it in its message; a whole (non-streamed) message names it itself.
        return model_name(body.get("model")) or model_name(_mapping(body.get("message")).get("model"))

    def read_calls(self, body: Mapping[str, Any], calls: CallSink) -> bool:
        kind = body.get("type")
        key = ("anthropic", body.get("index"))
        if kind == "message":
            content = body.get("content")
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    calls.add(block.get("id"), block.get("name"), _mapping(block.get("input")))
        elif kind == "content_block_start":
            block = _mapping(body.get("content_block"))
            if block.get("type") == "tool_use":
                calls.begin(key, block.get("id"), block.get("name"))
        elif kind == "content_block_delta":
            delta = _mapping(body.get("delta"))
            if delta.get("type") == "input_json_delta":
                calls.extend(key, delta.get("partial_json"))
        elif kind == "content_block_stop":
            calls.end(key)
        else:
            return False
        return True


WIRE = AnthropicMessages()
