"""What every wire format shares: the neutral reply, tool-call mapping, history readers, SSE framing.

The scripted server (``provider/scripted.py``) decides *what* to answer; a wire format (one module
each in this package, listed in ``WIRE_FORMATS``) decides *how it looks on the wire*. A reply is
host-neutral (:class:`Reply`: text, tool calls, usage, stop); :class:`WireFormat` is what the
scripted model, the metering proxy and its meter ask of a format.

Tool arguments are derived from the JSON schema the host offers for the tool, not from the host's
name: Claude Code's ``Write`` takes ``file_path`` while OpenCode's ``write`` takes ``filePath``
whichever wire format carries it, so key names are picked from the offered ``properties``.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from pytest_atlante.hosts.base import ShellTools
from pytest_atlante.suite.script import BashAction, EditAction, ReadAction, SkillAction, TaskAction, WriteAction

Action = WriteAction | EditAction | ReadAction | BashAction | SkillAction | TaskAction

#: The wire formats by name (``provider/wire/__init__.py``'s table): Anthropic Messages, OpenAI chat
#: completions, OpenAI Responses, Gemini's Generative Language API.
WireName = Literal["anthropic", "openai", "responses", "gemini"]
#: The two message-list shapes the history readers below know (Gemini is read as the chat shape).
MessageShape = Literal["anthropic", "openai"]

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
    """One complete model response, independent of wire format."""

    message_id: str
    model: str
    text: str
    tool_calls: tuple[ToolCall, ...]
    usage: ReplyUsage

    @property
    def ends_session(self) -> bool:
        return not self.tool_calls


def offered_tools(body: Mapping[str, Any], shape: MessageShape) -> tuple[OfferedTool, ...]:
    """The tools a request offers, with their argument schemas, in the request's order."""
    raw = body.get("tools")
    if not isinstance(raw, list):
        return ()
    tools: list[OfferedTool] = []
    for entry in raw:
        if not isinstance(entry, dict):
            continue
        # Anthropic: {name, input_schema}; OpenAI: {type: function, function: {name, parameters}}.
        spec = entry.get("function") if shape == "openai" else entry
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            continue
        schema = spec.get("input_schema" if shape == "anthropic" else "parameters")
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
    """The text of the request's first user message (the same in both message shapes): the session's
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


def _skill_calls(message: Mapping[str, Any], shape: MessageShape) -> dict[str, str]:
    """``{call id: skill name}`` of an assistant message's skill-tool calls."""
    calls: dict[str, str] = {}
    if shape == "anthropic":
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_use" and str(block.get("name")).lower() in _SKILL_TOOLS:
                calls[str(block.get("id"))] = _skill_name(block.get("input"))
        return calls
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and str(function.get("name")).lower() in _SKILL_TOOLS:
            calls[str(call.get("id"))] = _skill_name(function.get("arguments"))
    return calls


def _answers(message: Mapping[str, Any], shape: MessageShape) -> tuple[dict[str, str], list[str]]:
    """A non-assistant message's tool results (``{call id: text}``) and its other texts."""
    content = message.get("content")
    if shape == "openai":
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


def loaded_skills(body: Mapping[str, Any], shape: MessageShape) -> tuple[LoadedSkill, ...]:
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
            pending.update(_skill_calls(message, shape))
            continue
        if not pending:
            continue
        results, texts = _answers(message, shape)
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


# --------------------------------------------------------------------------- the scripted model's actions


def neutral_arguments(action: Action, sandbox_root: Path) -> dict[str, Any]:
    """A script action's arguments in neutral names (``tool_arguments`` spells them as offered)."""
    if isinstance(action, BashAction):
        description = action.description or f"Run {action.command}"[:80]
        return {"command": action.command, "description": description, "timeout": action.timeout_ms}
    if isinstance(action, SkillAction):
        return {"name": action.name}
    if isinstance(action, TaskAction):
        description = action.description or f"Delegate to {action.agent}"
        return {"description": description, "prompt": action.prompt, "agent": action.agent}
    path = str(sandbox_root / action.path)
    if isinstance(action, WriteAction):
        return {"path": path, "content": action.content}
    if isinstance(action, EditAction):
        return {"path": path, "old": action.old, "new": action.new, "replace_all": action.replace_all or None}
    return {"path": path}


# --------------------------------------------------------------------------- the wire format's interface


@dataclass(frozen=True)
class UsageReading:
    """The usage one JSON document of a response states, in the report's field names and raw (the
    meter bounds each value and keeps the largest): ``final_output``: the output count replaces
    the one read so far (Anthropic's ``message_delta`` over ``message_start``'s placeholder);
    ``reported``: a usage object was there; ``cost``: a price the provider stated."""

    fields: Mapping[str, object]
    reported: bool = True
    final_output: bool = False
    cost: object = None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def cached_apart(total: object, cached: object) -> dict[str, object]:
    """Input counts that hold the cached tokens (OpenAI chat, Responses) as the report counts them:
    apart, as Anthropic does."""
    whole = total if isinstance(total, int) and not isinstance(total, bool) and total >= 0 else 0
    kept = cached if isinstance(cached, int) and not isinstance(cached, bool) and cached >= 0 else 0
    return {"inputTokens": max(whole - kept, 0), "cacheReadTokens": kept}


#: A route pattern that matches nothing (a format without routes of that kind).
NO_ROUTE = re.compile(r"(?!)")
#: The model list of the APIs under ``/v1`` (Anthropic's, OpenAI's): ``GET /v1/models``, one model's entry.
V1_MODEL_LIST = re.compile(r"^(?:/v1)?/models(?:/[^/:]+)?$")

CallKey = tuple[str, object]


#: Characters of a model name kept (a provider's names are short; a longer one is junk).
MAX_MODEL_CHARS = 200


def model_name(value: object) -> str | None:
    """A model name a response states, trimmed and bounded; None: not a name."""
    return value.strip()[:MAX_MODEL_CHARS] if isinstance(value, str) and value.strip() else None


def has_content(value: object) -> bool:
    """A response field that holds something (a blank string holds nothing)."""
    return bool(value) and (not isinstance(value, str) or bool(value.strip()))


class CallSink(Protocol):
    """Where a format puts the tool calls of a served response as it reads them (the metering
    proxy's ``provider/served.py`` ``ToolCallReader``): a whole call, or a streamed call assembled
    over several events under a key of the format's own (its name and the call's index)."""

    def add(self, call_id: object, name: object, arguments: Mapping[str, Any] | None) -> None:
        """A whole call; ``arguments`` None: they could not be read."""

    def add_json(self, call_id: object, name: object, text: object) -> None:
        """A whole call whose arguments are JSON text."""

    def add_text(self, call_id: object, name: object, field: str, text: object) -> None:
        """A whole call whose free-form text is its one argument, kept under ``field`` (too long
        or not text: its arguments could not be read)."""

    def begin(self, key: CallKey, call_id: object, name: object) -> None:
        """A streamed call starts under ``key``."""

    def extend(self, key: CallKey, text: object) -> None:
        """More argument text of the call open under ``key`` (none open: ignored)."""

    def merge(self, key: CallKey, call_id: object, name: object, text: object) -> None:
        """A stream that opens a call implicitly: open ``key`` unless open, take its id and name
        when given, extend its arguments (a chat stream's call has no closing event)."""

    def end(self, key: CallKey) -> None:
        """The call under ``key`` is complete."""


class WireFormat(ABC):
    """One model API as the scripted model serves it and the metering proxy recognises it.

    ``routes``: the exact paths the scripted model answers in this format; ``suffixes``: how the
    proxy recognises a model request in it on any provider's path; ``proxied_calls`` and
    ``model_lists``: the metering proxy's allowlist for it (``provider/routes.py``, docs/design.md
    §10), matched on the path after the trial's key relative to the base URL the host was given,
    its model calls (``POST``) and its model list (``GET``/``HEAD``).
    """

    name: WireName
    call_prefix = "call_scripted"
    routes: tuple[str, ...] = ()
    suffixes: tuple[str, ...] = ()
    proxied_calls: re.Pattern[str] = NO_ROUTE
    model_lists: re.Pattern[str] = NO_ROUTE

    def refused_call(self, route: str, query: str) -> str | None:
        """Why the proxy refuses a ``POST`` on one of this format's ``proxied_calls`` after all
        (``query``: the request's query string); None: it forwards it."""
        return None

    def says_something(self, body: Mapping[str, Any]) -> bool | None:
        """Whether this JSON document of a response (a whole body or one SSE event) holds text,
        thinking or a tool call; None: not a document this format decides on (the meter asks the
        formats in the table's order, and the first answer counts)."""
        return None

    def served_model(self, body: Mapping[str, Any]) -> str | None:
        """The model this JSON document of a response says answered, if it is one of this format's
        documents that names it (the meter asks the formats in the table's order)."""
        return None

    def read_calls(self, body: Mapping[str, Any], calls: CallSink) -> bool:
        """Put the tool calls this JSON document of a response holds into ``calls``; False: not one
        of this format's documents (the reader asks the formats in the table's order, and the
        first that reads a document is the only one)."""
        return False

    def serves(self, route: str) -> bool:
        return route in self.routes

    def requests_tokens(self, route: str) -> bool:
        """A model request the proxy meters (not a token count): the route ends as this format's do."""
        return route.endswith(self.suffixes)

    def request(self, route: str, body: Mapping[str, Any]) -> tuple[str | None, bool, Mapping[str, Any]]:
        """(the model the request names, whether it streams, the body as the readers below take it)."""
        model = body.get("model")
        return model if isinstance(model, str) else None, body.get("stream") is True, body

    def side_answer(self, route: str) -> bytes | None:
        """The whole answer to a request on ``route`` that asks for no turn (a token count), if any."""
        return None

    def for_host_tools(self, shell_tools: ShellTools | None) -> WireFormat:
        """This format as the scripted model plays it for a host that names its own shell tools
        (``Host.shell_tools``); a format whose hosts offer file tools ignores them."""
        return self

    @abstractmethod
    def offered_tools(self, body: Mapping[str, Any]) -> tuple[OfferedTool, ...]: ...

    @abstractmethod
    def assistant_turns(self, body: Mapping[str, Any]) -> int:
        """How many assistant turns the request's history holds: the index of the turn to play."""

    @abstractmethod
    def first_user_text(self, body: Mapping[str, Any]) -> str: ...

    @abstractmethod
    def loaded_skills(self, body: Mapping[str, Any]) -> tuple[LoadedSkill, ...]: ...

    def tool_calls(self, actions: Sequence[Action], tools: tuple[OfferedTool, ...], call_tag: str,
                   sandbox_root: Path) -> tuple[tuple[ToolCall, ...], tuple[str, ...]]:
        """A turn's actions as calls of the offered tools, and the actions no offered tool serves."""
        calls: list[ToolCall] = []
        unoffered: list[str] = []
        for index, action in enumerate(actions):
            tool = find_tool(tools, action.type)
            if tool is None:
                unoffered.append(action.type)
            name = tool.name if tool is not None else fallback_tool_name(tools, action.type)
            arguments = tool_arguments(tool, neutral_arguments(action, sandbox_root))
            calls.append(ToolCall(f"{self.call_prefix}_{call_tag}_a{index}", name, arguments))
        return tuple(calls), tuple(unoffered)

    def read_usage(self, body: Mapping[str, Any]) -> UsageReading | None:
        """The usage this JSON document of a response states, when it is one of this format's
        documents that carries usage (the meter asks each format in the table's order); None: not one."""
        return None

    @abstractmethod
    def render(self, reply: Reply, stream: bool, body: Mapping[str, Any]) -> tuple[str, bytes]:
        """(content type, payload) of ``reply`` in this format."""

    @abstractmethod
    def error(self, status: int, message: str) -> dict[str, Any]: ...


class MessageWire(WireFormat):
    """A format whose history is a ``messages`` list (Anthropic Messages, OpenAI chat; Gemini read as chat)."""

    shape: MessageShape

    def offered_tools(self, body: Mapping[str, Any]) -> tuple[OfferedTool, ...]:
        return offered_tools(body, self.shape)

    def assistant_turns(self, body: Mapping[str, Any]) -> int:
        return sum(1 for message in _messages(body) if message.get("role") == "assistant")

    def first_user_text(self, body: Mapping[str, Any]) -> str:
        return first_user_text(body)

    def loaded_skills(self, body: Mapping[str, Any]) -> tuple[LoadedSkill, ...]:
        return loaded_skills(body, self.shape)
