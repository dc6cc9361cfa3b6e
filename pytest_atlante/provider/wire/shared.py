"""Wire formats of the scripted model: tool-call mapping and the two streaming dialects.

The scripted server (``scripted.py``) decides *what* to answer; this module decides *how it looks
on the wire*. A reply is host-neutral (:class:`Reply`: text, tool calls, usage, stop); it is
rendered either as Anthropic Messages SSE (Claude Code, OpenCode's built-in anthropic provider) or
as OpenAI chat-completions SSE (OpenCode's ``@ai-sdk/openai-compatible`` provider).

Tool arguments are derived from the JSON schema the host offers for the tool, not from the host's
name: Claude Code's ``Write`` takes ``file_path`` while OpenCode's ``write`` takes ``filePath``
whichever dialect carries it, so key names are picked from the offered ``properties``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Dialect = Literal["anthropic", "openai", "responses", "gemini"]  # responses: dialect_responses.py; gemini: dialect_gemini.py

#: Host-neutral argument → the spellings hosts use for it, in order of preference.
_ARGUMENT_SPELLINGS: dict[str, tuple[str, ...]] = {
    "path": ("file_path", "filePath", "path"),
    "content": ("content",),
    "old": ("old_string", "oldString"),
    "new": ("new_string", "newString"),
    "replace_all": ("replace_all", "replaceAll", "allow_multiple"),
    "command": ("command",),
    "description": ("description",),
    "timeout": ("timeout",),
    "name": ("skill", "name"),  # Claude Code's Skill{skill}, OpenCode's skill{name}
    "agent": ("subagent_type", "agent_name"),
    "prompt": ("prompt",),
}

#: Host-neutral tool → the names hosts offer it under, compared case-insensitively: Claude Code
#: offers its sub-agent tool as ``Agent`` (``Task`` in older releases), OpenCode as ``task``;
#: Gemini CLI has names of its own for each (host-facts-gemini §11).
_TOOL_SPELLINGS: dict[str, tuple[str, ...]] = {
    "task": ("task", "agent", "invoke_agent"),
    "write": ("write", "write_file"),
    "edit": ("edit", "replace"),
    "read": ("read", "read_file"),
    "bash": ("bash", "run_shell_command"),
    "skill": ("skill", "activate_skill"),
}
#: The skill tool's names, as a request's history calls it.
_SKILL_TOOLS = frozenset({"skill", "activate_skill"})


@dataclass(frozen=True)
class OfferedTool:
    """A tool the host put in the request's ``tools``: its name and argument schema."""

    name: str
    properties: frozenset[str]
    required: frozenset[str]


@dataclass(frozen=True)
class ToolCall:
    """One tool call the scripted model makes."""

    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ReplyUsage:
    """Token figures a reply reports; ``input`` excludes cached tokens, as Anthropic counts."""

    input: int
    output: int
    cache_read: int = 0
    cache_write: int = 0


@dataclass(frozen=True)
class Reply:
    """One complete model response, independent of dialect."""

    message_id: str
    model: str
    text: str
    tool_calls: tuple[ToolCall, ...]
    usage: ReplyUsage

    @property
    def ends_session(self) -> bool:
        return not self.tool_calls


def offered_tools(body: Mapping[str, Any], dialect: Dialect) -> tuple[OfferedTool, ...]:
    """The tools a request offers, with their argument schemas, in the request's order."""
    raw = body.get("tools")
    if not isinstance(raw, list):
        return ()
    tools: list[OfferedTool] = []
    for entry in raw:
        if not isinstance(entry, dict):
            continue
        # Anthropic: {name, input_schema}; OpenAI: {type: function, function: {name, parameters}}.
        spec = entry.get("function") if dialect == "openai" else entry
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            continue
        schema = spec.get("input_schema" if dialect == "anthropic" else "parameters")
        schema = schema if isinstance(schema, dict) else {}
        properties = schema.get("properties")
        required = schema.get("required")
        tools.append(
            OfferedTool(
                name=spec["name"],
                properties=frozenset(properties) if isinstance(properties, dict) else frozenset(),
                required=frozenset(r for r in required if isinstance(r, str))
                if isinstance(required, list)
                else frozenset(),
            )
        )
    return tuple(tools)


def find_tool(tools: Sequence[OfferedTool], wanted: str) -> OfferedTool | None:
    """The offered tool for host-neutral ``wanted``, compared case-insensitively (``Write`` ~
    ``write``; ``task`` ~ Claude Code's ``Agent``)."""
    for spelling in _TOOL_SPELLINGS.get(wanted, (wanted,)):
        for tool in tools:
            if tool.name.lower() == spelling.lower():
                return tool
    return None


def fallback_tool_name(tools: Sequence[OfferedTool], wanted: str) -> str:
    """Name to call a tool the host did not offer, in the host's own casing convention.

    Calling it anyway lets the host answer as it would to a real model (an "unavailable tool"
    error), which is what a scenario about denied tools wants to observe.
    """
    capitalised = sum(1 for t in tools if t.name[:1].isupper())
    return wanted.capitalize() if capitalised * 2 > len(tools) else wanted.lower()


def tool_arguments(tool: OfferedTool | None, neutral: Mapping[str, Any]) -> dict[str, Any]:
    """Spell host-neutral arguments the way ``tool``'s schema names them.

    ``neutral`` maps neutral names (``path``, ``old``, …) to values; ``None`` values are dropped.
    Without a schema (tool not offered, or schema-less) the first spelling is used.
    """
    arguments: dict[str, Any] = {}
    for neutral_name, value in neutral.items():
        if value is None:
            continue
        spellings = _ARGUMENT_SPELLINGS[neutral_name]
        if tool is None or not tool.properties:
            arguments[spellings[0]] = value
            continue
        for spelling in spellings:
            if spelling in tool.properties:
                arguments[spelling] = value
                break
    return arguments


# --------------------------------------------------------------------------- reading the history


@dataclass(frozen=True)
class LoadedSkill:
    """A skill call found in a request's history and what the host sent back for it: the tool's
    result and the text the host added beside it (Claude Code puts the SKILL.md body in a text
    block of the same user message, OpenCode in the tool result itself; host-facts §5, §8)."""

    call_id: str
    name: str
    text: str


def _text_of(content: object) -> str:
    """A string, or the ``text`` of each text block / part of a content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def _messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = body.get("messages")
    return [m for m in raw if isinstance(m, dict)] if isinstance(raw, list) else []


def first_user_text(body: Mapping[str, Any]) -> str:
    """The text of the request's first user message (the same in both dialects): the session's
    prompt, or, for a sub-agent, the prompt its parent delegated with."""
    for message in _messages(body):
        if message.get("role") == "user":
            return _text_of(message.get("content"))
    return ""


def _skill_name(arguments: object) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return ""
    if not isinstance(arguments, dict):
        return ""
    for key in _ARGUMENT_SPELLINGS["name"]:
        if isinstance(arguments.get(key), str):
            return str(arguments[key])
    return ""


def _skill_calls(message: Mapping[str, Any], dialect: Dialect) -> dict[str, str]:
    """``{call id: skill name}`` of an assistant message's skill-tool calls."""
    calls: dict[str, str] = {}
    if dialect == "anthropic":
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_use" and str(block.get("name")).lower() in _SKILL_TOOLS:
                calls[str(block.get("id"))] = _skill_name(block.get("input"))
        return calls
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and str(function.get("name")).lower() in _SKILL_TOOLS:
            calls[str(call.get("id"))] = _skill_name(function.get("arguments"))
    return calls


def _answers(message: Mapping[str, Any], dialect: Dialect) -> tuple[dict[str, str], list[str]]:
    """A non-assistant message's tool results (``{call id: text}``) and its other texts."""
    content = message.get("content")
    if dialect == "openai":
        if message.get("role") == "tool":
            return {str(message.get("tool_call_id")): _text_of(content)}, []
        return {}, [_text_of(content)] if message.get("role") == "user" else []
    results: dict[str, str] = {}
    texts: list[str] = []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            results[str(block.get("tool_use_id"))] = _text_of(block.get("content"))
        elif isinstance(block, dict) and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif isinstance(block, str):
            texts.append(block)
    return results, texts


def loaded_skills(body: Mapping[str, Any], dialect: Dialect) -> tuple[LoadedSkill, ...]:
    """Every skill call in the request's history with what the host answered it with: the call's
    result plus the other texts between it and the next assistant message."""
    loaded: list[LoadedSkill] = []
    pending: dict[str, str] = {}
    answered: dict[str, list[str]] = {}

    def settle() -> None:
        for call_id, name in pending.items():
            loaded.append(LoadedSkill(call_id, name, "\n".join(answered.get(call_id, []))))
        pending.clear()
        answered.clear()

    for message in _messages(body):
        if message.get("role") == "assistant":
            settle()
            pending.update(_skill_calls(message, dialect))
            continue
        if not pending:
            continue
        results, texts = _answers(message, dialect)
        for call_id in pending:
            if call_id in results or call_id in answered:
                answered.setdefault(call_id, []).extend(([results[call_id]] if call_id in results else []) + texts)
    settle()
    return tuple(loaded)


# --------------------------------------------------------------------------- SSE framing


def sse_event(data: Mapping[str, Any] | str, event: str | None = None) -> bytes:
    """One server-sent event. JSON payloads are compact and on one line, so no ``data:`` splits."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def parse_sse(stream: bytes) -> list[tuple[str | None, str]]:
    """Split an SSE byte stream back into ``(event, data)`` pairs (used by tests and debugging)."""
    events: list[tuple[str | None, str]] = []
    for block in stream.decode().split("\n\n"):
        if not block.strip():
            continue
        event: str | None = None
        data: list[str] = []
        for line in block.split("\n"):
            if line.startswith("event:"):
                event = line[len("event:") :].strip()
            elif line.startswith("data:"):
                data.append(line[len("data:") :].lstrip(" "))
        events.append((event, "\n".join(data)))
    return events


# --------------------------------------------------------------------------- Anthropic Messages


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


# --------------------------------------------------------------------------- OpenAI chat completions


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
