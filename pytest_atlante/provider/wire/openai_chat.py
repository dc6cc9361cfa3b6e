"""The OpenAI chat-completions wire format (``POST /v1/chat/completions``): OpenCode's openai-compatible provider."""

from __future__ import annotations

import json
import re
import time
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
    cached_apart,
    has_content,
    model_name,
    sse_event,
)


def _openai_usage(usage: ReplyUsage) -> dict[str, Any]:
    # OpenAI counts cached tokens inside prompt_tokens; OpenCode subtracts them again, so the
    # host reports ``input`` exactly as scripted. Cache writes have no OpenAI field.
    prompt = usage.input + usage.cache_read
    return {
        "prompt_tokens": prompt,
        "completion_tokens": usage.output,
        "total_tokens": prompt + usage.output,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read},
    }


def _openai_tool_calls(reply: Reply) -> list[dict[str, Any]]:
    return [
        {
            "index": index,
            "id": call.call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
        }
        for index, call in enumerate(reply.tool_calls)
    ]


def openai_stream(reply: Reply, created: int, include_usage: bool) -> bytes:
    """The reply as an OpenAI chat-completions chunk stream, ending with ``data: [DONE]``."""

    def chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
        body = {
            "id": reply.message_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": reply.model,
            "choices": choices,
            **extra,
        }
        return sse_event(body)

    out = [chunk([{"index": 0, "delta": {"role": "assistant", "content": reply.text}, "finish_reason": None}])]
    if reply.tool_calls:
        out.append(chunk([{"index": 0, "delta": {"tool_calls": _openai_tool_calls(reply)}, "finish_reason": None}]))
    finish = "stop" if reply.ends_session else "tool_calls"
    out.append(chunk([{"index": 0, "delta": {}, "finish_reason": finish}]))
    if include_usage:
        out.append(chunk([], usage=_openai_usage(reply.usage)))
    out.append(sse_event("[DONE]"))
    return b"".join(out)


def openai_completion(reply: Reply, created: int) -> dict[str, Any]:
    """The reply as a non-streaming chat-completions response body."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.tool_calls:
        message["tool_calls"] = [
            {key: value for key, value in call.items() if key != "index"} for call in _openai_tool_calls(reply)
        ]
    return {
        "id": reply.message_id,
        "object": "chat.completion",
        "created": created,
        "model": reply.model,
        "choices": [{"index": 0, "message": message, "finish_reason": "stop" if reply.ends_session else "tool_calls"}],
        "usage": _openai_usage(reply.usage),
    }


def openai_error(status: int, message: str) -> dict[str, Any]:
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return {"error": {"message": message, "type": kind, "code": None}}


class OpenAIChat(MessageWire):
    name = "openai"
    shape = "openai"
    call_prefix = "call_scripted"
    routes = ("/v1/chat/completions",)
    suffixes = ("/completions",)
    proxied_calls = re.compile(r"^(?:/v1)?/chat/completions$")
    model_lists = V1_MODEL_LIST

    def render(self, reply: Reply, stream: bool, body: Mapping[str, Any]) -> tuple[str, bytes]:
        created = int(time.time())
        if stream:
            options = body.get("stream_options")
            include_usage = isinstance(options, dict) and options.get("include_usage") is True
            return "text/event-stream", openai_stream(reply, created, include_usage)
        return "application/json", json.dumps(openai_completion(reply, created)).encode()

    def error(self, status: int, message: str) -> dict[str, Any]:
        return openai_error(status, message)

    def read_usage(self, body: Mapping[str, Any]) -> UsageReading | None:
        usage = body.get("usage")
        if not isinstance(usage, Mapping):
            return None
        # Cached tokens are inside prompt_tokens; gateways such as OpenRouter price the request themselves.
        fields = cached_apart(usage.get("prompt_tokens"), _mapping(usage.get("prompt_tokens_details")).get("cached_tokens"))
        return UsageReading({**fields, "outputTokens": usage.get("completion_tokens")}, cost=usage.get("cost"))

    def says_something(self, body: Mapping[str, Any]) -> bool | None:
        # A choice's whole message or a stream chunk's delta: text, reasoning or a tool call.
        choices = body.get("choices")
        for raw in choices if isinstance(choices, list) else []:
            choice = _mapping(raw)
            message = {**_mapping(choice.get("message")), **_mapping(choice.get("delta"))}
            if any(has_content(message.get(key)) for key in ("content", "tool_calls", "reasoning_content", "reasoning")):
                return True
        return None  # nothing here: another format may read the document

    def served_model(self, body: Mapping[str, Any]) -> str | None:
        return model_name(body.get("model"))  # a whole completion and every chunk of a stream

    def read_calls(self, body: Mapping[str, Any], calls: CallSink) -> bool:
        choices = body.get("choices")
        if not isinstance(choices, list):
            return False
        for raw in choices:
            choice = _mapping(raw)
            for call in _mapping(choice.get("message")).get("tool_calls") or []:
                function = _mapping(_mapping(call).get("function"))
                calls.add_json(_mapping(call).get("id"), function.get("name"), str(function.get("arguments") or ""))
            for delta_call in _mapping(choice.get("delta")).get("tool_calls") or []:
                call = _mapping(delta_call)
                function = _mapping(call.get("function"))
                calls.merge(("openai", call.get("index")), call.get("id"), function.get("name"), function.get("arguments"))
        return True


WIRE = OpenAIChat()
