"""The Gemini wire format: the Generative Language API as Gemini CLI speaks it.

Gemini CLI asks ``POST /v1beta/models/{model}:streamGenerateContent?alt=sse`` (and, for its router
and side checks, ``:generateContent``), with ``contents`` (``role`` ``user``/``model``, ``parts`` of
``text``, ``functionCall`` and ``functionResponse``) and ``tools`` as ``functionDeclarations`` whose
schemas sit in ``parametersJsonSchema`` (host-facts-gemini §11).  The scripted server decides what
to answer from the request's history the same way for every wire format, so this module reads a Gemini
request into the OpenAI chat shape the server already reads (:func:`openai_view`: a ``model``
content is an assistant message, a ``functionResponse`` a tool message), and renders the server's
host-neutral :class:`~pytest_atlante.provider.wire.shared.Reply` back as Gemini's SSE chunks.

Usage as Gemini reports it: ``promptTokenCount`` includes the cached tokens
(``cachedContentTokenCount``), ``candidatesTokenCount`` is the visible output,
``thoughtsTokenCount`` the thinking; ``totalTokenCount`` is their sum (prompt + candidates +
thoughts).  The metering proxy reads it with :func:`gemini_usage_fields`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs

from pytest_atlante.provider.wire.shared import (
    CallSink,
    MessageWire,
    Reply,
    ToolCall,
    UsageReading,
    has_content,
    model_name,
    sse_event,
)

#: ``/v1beta/models/gemini-2.5-pro:streamGenerateContent`` → model and method.
ROUTE = re.compile(r"^/v1(?:beta|alpha)?/models/(?P<model>[^/:]+):(?P<method>streamGenerateContent|generateContent)$")

# Gemini's ``replace`` requires an ``instruction`` the neutral edit action has no word for.
_REQUIRED_DEFAULTS: dict[str, dict[str, str]] = {
    "replace": {"instruction": "Apply the scripted edit."},
}


def gemini_route(route: str) -> tuple[str, bool] | None:
    """``(model, streamed)`` of a Gemini model request path (without query), or None."""
    match = ROUTE.match(route)
    if match is None:
        return None
    return match.group("model"), match.group("method") == "streamGenerateContent"


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _part_says(part: object) -> bool:
    # A part is text (``thought: true`` for thinking), a function call, or another kind of content.
    part = _dict(part)
    return has_content(part.get("text")) or any(key not in ("text", "thought", "thoughtSignature") for key in part)


def _parts(content: Mapping[str, Any]) -> list[dict[str, Any]]:
    parts = content.get("parts")
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _tools(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The request's function declarations as OpenAI ``{type: function, function: {…}}`` tools."""
    tools: list[dict[str, Any]] = []
    raw = body.get("tools")
    for group in raw if isinstance(raw, list) else []:
        declarations = _dict(group).get("functionDeclarations")
        for raw_declaration in declarations if isinstance(declarations, list) else []:
            declaration = _dict(raw_declaration)
            if not isinstance(declaration.get("name"), str):
                continue
            schema = declaration.get("parametersJsonSchema", declaration.get("parameters"))
            tools.append({"type": "function", "function": {"name": declaration["name"], "parameters": _dict(schema)}})
    return tools


def _messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``contents`` as OpenAI chat messages: one per content, plus one tool message per response."""
    messages: list[dict[str, Any]] = []
    # The calls of the last model content not answered yet: a sub-agent's history carries its calls
    # without ids and its responses with ids of its own, so a response pairs with its call by name.
    unanswered: list[dict[str, Any]] = []
    raw = body.get("contents")
    for raw_content in raw if isinstance(raw, list) else []:
        content = _dict(raw_content)
        parts = _parts(content)
        texts = [str(p["text"]) for p in parts if isinstance(p.get("text"), str) and p.get("thought") is not True]
        if content.get("role") == "model":
            calls = []
            for index, part in enumerate(parts):
                call = _dict(part.get("functionCall"))
                if isinstance(call.get("name"), str):
                    calls.append({"id": str(call.get("id") or f"{call['name']}_{len(messages)}_{index}"), "type": "function",
                                  "function": {"name": call["name"], "arguments": json.dumps(call.get("args") or {})}})
            messages.append({"role": "assistant", "content": "\n".join(texts), "tool_calls": calls})
            unanswered = list(calls)
            continue
        for part in parts:
            response = _dict(part.get("functionResponse"))
            if isinstance(response.get("name"), str):
                output = _dict(response.get("response"))
                text = output.get("output", output.get("error", output))
                messages.append({"role": "tool", "tool_call_id": _answered_call(response, unanswered),
                                 "content": text if isinstance(text, str) else json.dumps(text)})
        if texts:
            messages.append({"role": "user", "content": "\n".join(texts)})
    return messages


def _answered_call(response: Mapping[str, Any], unanswered: list[dict[str, Any]]) -> str:
    """The id of the call ``response`` answers (taken off ``unanswered``): the one of its id, else
    the first of its name; a response to no known call keeps its own id."""
    by_id = [call for call in unanswered if response.get("id") and call["id"] == str(response["id"])]
    by_name = [call for call in unanswered if call["function"]["name"] == response["name"]]
    for call in by_id or by_name:
        unanswered.remove(call)
        return str(call["id"])
    return str(response.get("id") or response["name"])


def openai_view(body: Mapping[str, Any]) -> dict[str, Any]:
    """The Gemini request read as an OpenAI chat request (``messages``, ``tools``): what the
    scripted server counts turns, finds offered tools, sub-agents and loaded skills in."""
    return {"messages": _messages(body), "tools": _tools(body)}


# --------------------------------------------------------------------------- rendering


def _usage_metadata(reply: Reply) -> dict[str, int]:
    prompt = reply.usage.input + reply.usage.cache_read  # Gemini counts cached tokens inside the prompt
    return {"promptTokenCount": prompt, "candidatesTokenCount": reply.usage.output,
            "cachedContentTokenCount": reply.usage.cache_read, "totalTokenCount": prompt + reply.usage.output}


def _call_part(call: ToolCall) -> dict[str, Any]:
    arguments = {**_REQUIRED_DEFAULTS.get(call.name, {}), **call.arguments}
    return {"functionCall": {"name": call.name, "args": arguments}}


def _chunk(reply: Reply, parts: list[dict[str, Any]], *, last: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    chunk: dict[str, Any] = {"candidates": [candidate]}
    if last:
        candidate["finishReason"] = "STOP"  # Gemini ends a tool-calling turn with STOP too (§11)
        chunk["usageMetadata"] = _usage_metadata(reply)
    chunk |= {"modelVersion": reply.model, "responseId": reply.message_id}
    return chunk


def gemini_stream(reply: Reply) -> bytes:
    """The reply as ``streamGenerateContent?alt=sse`` chunks: the text first, then the calls with
    the finish reason and the usage (the shape the real API streams, host-facts-gemini §11)."""
    calls = [_call_part(call) for call in reply.tool_calls]
    chunks: list[dict[str, Any]] = []
    if reply.text and calls:
        chunks.append(_chunk(reply, [{"text": reply.text}], last=False))
        chunks.append(_chunk(reply, calls, last=True))
    else:
        # No text and no calls is a script's ``empty`` turn (every other reply says something): an
        # empty parts list, which Gemini CLI reports as the model's empty response (host-facts-gemini §11).
        chunks.append(_chunk(reply, calls or ([{"text": reply.text}] if reply.text else []), last=True))
    return b"".join(sse_event(chunk) for chunk in chunks)


def gemini_response(reply: Reply) -> dict[str, Any]:
    """The reply as one ``generateContent`` response body (an ``empty`` turn's: no parts)."""
    parts: list[dict[str, Any]] = [{"text": reply.text}] if reply.text else []
    parts += [_call_part(call) for call in reply.tool_calls]
    return _chunk(reply, parts, last=True)


def gemini_error(status: int, message: str) -> dict[str, Any]:
    """Google's error body (``google.rpc.Status``)."""
    kind = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
            429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")
    return {"error": {"code": status, "message": message, "status": kind}}


# --------------------------------------------------------------------------- metering


def gemini_usage_fields(metadata: Mapping[str, Any]) -> dict[str, object]:
    """A response's ``usageMetadata`` as the report's usage fields (raw values; the meter bounds
    them): cached tokens apart from input, thinking counted as output."""

    def count(name: str) -> int:
        value = metadata.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0

    cached = count("cachedContentTokenCount")
    return {
        "inputTokens": max(count("promptTokenCount") - cached, 0),
        "cacheReadTokens": cached,
        "outputTokens": count("candidatesTokenCount") + count("thoughtsTokenCount"),
    }


class Gemini(MessageWire):
    """Read as the chat shape (``openai_view``); the model and whether it streams are in the path."""

    name = "gemini"
    shape = "openai"
    proxied_calls = re.compile(r"^/v1(?:beta|alpha)?/models/[^/:]+:(?:generateContent|streamGenerateContent|countTokens)$")
    model_lists = re.compile(r"^/v1(?:beta|alpha)/models(?:/[^/:]+)?$")

    def refused_call(self, route: str, query: str) -> str | None:
        # Without alt=sse Gemini streams a JSON array, a framing the meter does not read: refused
        # rather than served unmetered.
        if route.endswith(":streamGenerateContent") and parse_qs(query).get("alt") != ["sse"]:
            return "a Gemini stream not framed as server-sent events (alt=sse), which is not metered"
        return None

    def served_model(self, body: Mapping[str, Any]) -> str | None:
        return model_name(body.get("modelVersion"))  # each chunk names the model that answered

    def says_something(self, body: Mapping[str, Any]) -> bool | None:
        candidates = body.get("candidates")
        for candidate in candidates if isinstance(candidates, list) else []:
            parts = _dict(_dict(candidate).get("content")).get("parts")
            if isinstance(parts, list) and any(_part_says(part) for part in parts):
                return True
        return None

    def serves(self, route: str) -> bool:
        return gemini_route(route) is not None

    def requests_tokens(self, route: str) -> bool:
        return gemini_route(route) is not None

    def request(self, route: str, body: Mapping[str, Any]) -> tuple[str | None, bool, Mapping[str, Any]]:
        model, stream = gemini_route(route) or (None, True)
        return model, stream, openai_view(body)

    def render(self, reply: Reply, stream: bool, body: Mapping[str, Any]) -> tuple[str, bytes]:
        if stream:
            return "text/event-stream", gemini_stream(reply)
        return "application/json", json.dumps(gemini_response(reply)).encode()

    def error(self, status: int, message: str) -> dict[str, Any]:
        return gemini_error(status, message)

    def read_calls(self, body: Mapping[str, Any], calls: CallSink) -> bool:
        """``functionCall`` parts, each whole in one chunk.  Gemini's API names a call by an ``id``
        only sometimes; without one the call is ``gemini-call-<part index>``: Gemini CLI's stream
        numbers its calls itself, so they are matched by tool and order, not id (``served.py``)."""
        candidates = body.get("candidates")
        if not isinstance(candidates, list):
            return False
        for candidate in candidates:
            content = candidate.get("content") if isinstance(candidate, Mapping) else None
            parts = content.get("parts") if isinstance(content, Mapping) else None
            for index, part in enumerate(parts if isinstance(parts, list) else []):
                call = part.get("functionCall") if isinstance(part, Mapping) else None
                if isinstance(call, Mapping):
                    args = call.get("args")
                    calls.add(call.get("id") or f"gemini-call-{index}", call.get("name"),
                              args if isinstance(args, Mapping) else {} if args is None else None)
        return True

    def read_usage(self, body: Mapping[str, Any]) -> UsageReading | None:
        # Each chunk of a Gemini stream states the response's counts so far: the largest is final.
        metadata = body.get("usageMetadata")
        return UsageReading(gemini_usage_fields(metadata)) if isinstance(metadata, Mapping) else None


WIRE = Gemini()
