"""The OpenAI Responses wire format (``POST /v1/responses``; the Codex CLI speaks it).

A host on this wire may offer no write, edit or read tool, only a shell tool (a command, ``{cmd}``)
and a *custom* (freeform) patch tool whose input is patch text (Codex: ``exec_command`` and
``apply_patch``, host-facts-codex §3).  Such a host names those tools itself (``hosts.base.ShellTools``,
handed to the scripted model by the trial engine: :meth:`OpenAIResponses.for_host_tools`); this
module knows no host.  With them the host-neutral actions become:

- ``write`` → a patch that adds the file, or replaces its whole content when it exists;
- ``edit`` → a patch replacing the file's lines with the edited ones, computed from the file as it
  is when the request arrives (the server runs beside the sandbox); an ``old`` text the file does
  not hold gives a patch that cannot apply, so the host reports the failed edit as the other hosts do;
- ``read`` → the shell's ``cat <path>``; ``skill`` → ``cat`` of the skill's ``SKILL.md`` where the
  host keeps it (no skill tool: the model reads the file itself); ``bash`` → the shell tool;
- ``task`` has no such tool (Codex's sub-agents hide behind ``tool_search``): it is called anyway,
  and the host answers as it would a real model's unknown call.

Without shell tools (a host that gives none) the actions are matched to the offered tools by their
neutral names, as on the other formats.

Codex keeps no server-side state (``store: false``): every request carries the whole history, with
the items the server sent echoed back, so the turn to play is the number of model responses already
in ``input`` — a run of consecutive model-side items (message, function or custom tool call) is one.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_atlante.hosts.base import ShellTools
from pytest_atlante.provider.wire.shared import (
    V1_MODEL_LIST,
    Action,
    CallSink,
    LoadedSkill,
    OfferedTool,
    Reply,
    ReplyUsage,
    ToolCall,
    UsageReading,
    WireFormat,
    _mapping,
    cached_apart,
    has_content,
    model_name,
    sse_event,
)

#: The argument key of a custom tool call as :class:`ToolCall` carries it (its freeform ``input``).
CUSTOM_INPUT = "input"

_MODEL_SIDE = frozenset({"function_call", "custom_tool_call", "reasoning", "local_shell_call"})


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _items(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = body.get("input")
    return [item for item in raw if isinstance(item, dict)] if isinstance(raw, list) else []


def responses_tools(body: Mapping[str, Any]) -> tuple[OfferedTool, ...]:
    """The function and custom tools a request offers (hosted tools and namespaces are skipped)."""
    tools: list[OfferedTool] = []
    raw = body.get("tools")
    for entry in raw if isinstance(raw, list) else []:
        if not isinstance(entry, dict) or entry.get("type") not in ("function", "custom"):
            continue
        if not isinstance(entry.get("name"), str):
            continue
        schema = _dict(entry.get("parameters"))
        properties = schema.get("properties")
        required = schema.get("required")
        tools.append(OfferedTool(
            name=entry["name"],
            properties=frozenset(properties) if isinstance(properties, dict) else frozenset(),
            required=frozenset(r for r in required if isinstance(r, str)) if isinstance(required, list) else frozenset(),
        ))
    return tuple(tools)


def custom_tools(body: Mapping[str, Any]) -> frozenset[str]:
    """Names of the offered tools that take freeform input (``apply_patch``) instead of JSON."""
    raw = body.get("tools")
    return frozenset(str(e.get("name")) for e in (raw if isinstance(raw, list) else [])
                     if isinstance(e, dict) and e.get("type") == "custom")


def _model_side(item: Mapping[str, Any]) -> bool:
    return item.get("type") in _MODEL_SIDE or (item.get("type") == "message" and item.get("role") == "assistant")


def responses_played(body: Mapping[str, Any]) -> int:
    """How many model responses the request's history holds: the index of the turn to play."""
    played = 0
    previous = False
    for item in _items(body):
        current = _model_side(item)
        if current and not previous:
            played += 1
        previous = current
    return played


def first_user_text(body: Mapping[str, Any]) -> str:
    """The last user message before the first model response: the prompt (Codex puts its
    AGENTS.md and environment context in user messages before it)."""
    text = ""
    for item in _items(body):
        if _model_side(item):
            break
        if item.get("type") == "message" and item.get("role") == "user":
            parts = [_dict(p).get("text") for p in item.get("content") or []]
            text = "\n".join(p for p in parts if isinstance(p, str))
    return text


# --------------------------------------------------------------------------- actions → tool calls


def _lines(text: str) -> list[str]:
    return text.splitlines()


def patch_for_write(path: str, content: str, current: str | None) -> str:
    """Add ``path`` with ``content``, or (it exists) replace every line it has."""
    if current is None:
        body = f"*** Add File: {path}\n" + "".join(f"+{line}\n" for line in _lines(content))
    else:
        body = _whole_file_update(path, current, content)
    return f"*** Begin Patch\n{body}*** End Patch\n"


def patch_for_edit(path: str, current: str | None, old: str, new: str, replace_all: bool) -> str:
    """The edit as a patch over the file's lines; when ``old`` is not in the file, a patch that
    removes ``old``'s own lines, which cannot apply (the host reports the failure)."""
    if current is None or old not in current:
        body = f"*** Update File: {path}\n@@\n" + "".join(f"-{line}\n" for line in _lines(old) or [""]) \
            + "".join(f"+{line}\n" for line in _lines(new))
    else:
        edited = current.replace(old, new) if replace_all else current.replace(old, new, 1)
        body = _whole_file_update(path, current, edited)
    return f"*** Begin Patch\n{body}*** End Patch\n"


def _whole_file_update(path: str, current: str, content: str) -> str:
    if not current:  # nothing to remove: the file is added again with its content
        return f"*** Delete File: {path}\n*** Add File: {path}\n" + "".join(f"+{line}\n" for line in _lines(content))
    return (f"*** Update File: {path}\n@@\n" + "".join(f"-{line}\n" for line in _lines(current))
            + "".join(f"+{line}\n" for line in _lines(content)))


def _current(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def action_call(action: Mapping[str, Any], sandbox_root: Path, shell_tools: ShellTools) -> tuple[str, dict[str, Any]]:
    """One host-neutral action (its JSON form) → (the host's tool name, arguments)."""
    kind = action["type"]
    if kind in ("write", "edit"):
        target = sandbox_root / str(action["path"])
        current = _current(target)
        if kind == "write":
            patch = patch_for_write(str(target), str(action["content"]), current)
        else:
            patch = patch_for_edit(str(target), current, str(action["old"]), str(action["new"]),
                                   bool(action.get("replace_all")))
        return shell_tools.patch, {CUSTOM_INPUT: patch}
    if kind == "read":
        return shell_tools.shell, {"cmd": f"cat {shlex.quote(str(sandbox_root / str(action['path'])))}"}
    if kind == "skill":
        skill = shell_tools.skill_file(sandbox_root, str(action["name"]))
        return shell_tools.shell, {"cmd": f"cat {shlex.quote(str(skill))}"}
    if kind == "bash":
        arguments: dict[str, Any] = {"cmd": str(action["command"])}
        if action.get("timeout_ms"):
            # exec_command returns after yield_time_ms with the process still running; waiting the
            # action's whole timeout makes it a foreground command as on the other hosts.
            arguments["yield_time_ms"] = int(action["timeout_ms"])
        return shell_tools.shell, arguments
    return str(kind), {key: value for key, value in action.items() if key not in ("type", "turns")}


def responses_calls(actions: Sequence[Mapping[str, Any]], tools: Sequence[OfferedTool], call_tag: str,
                    sandbox_root: Path, shell_tools: ShellTools) -> tuple[tuple[ToolCall, ...], tuple[str, ...]]:
    """A turn's actions as calls of the host's shell tools, and the actions whose tool the request
    did not offer."""
    offered = {tool.name for tool in tools}
    calls: list[ToolCall] = []
    unoffered: list[str] = []
    for index, action in enumerate(actions):
        name, arguments = action_call(action, sandbox_root, shell_tools)
        if name not in offered:
            unoffered.append(str(action["type"]))
        calls.append(ToolCall(f"call_scripted_{call_tag}_a{index}", name, arguments))
    return tuple(calls), tuple(unoffered)


# --------------------------------------------------------------------------- history: skills loaded


def responses_loaded_skills(body: Mapping[str, Any], shell_tools: ShellTools) -> tuple[LoadedSkill, ...]:
    """Skill files read through the shell in the history (``cat …/skills/<name>/SKILL.md``), each
    with the output the host sent back for the call."""
    calls: dict[str, str] = {}
    outputs: dict[str, str] = {}
    for item in _items(body):
        if item.get("type") == "function_call" and item.get("name") == shell_tools.shell:
            try:
                command = str(_dict(json.loads(str(item.get("arguments") or "{}"))).get("cmd") or "")
            except ValueError:
                continue
            name = shell_tools.skill_read(command)
            if name is not None:
                calls[str(item.get("call_id"))] = name
        elif item.get("type") == "function_call_output":
            output = item.get("output")
            outputs[str(item.get("call_id"))] = output if isinstance(output, str) else json.dumps(output)
    return tuple(LoadedSkill(call_id, name, outputs.get(call_id, "")) for call_id, name in calls.items())


# --------------------------------------------------------------------------- the wire


def _output_items(reply: Reply, custom: frozenset[str]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.text:
        items.append({"type": "message", "id": f"{reply.message_id}_text", "role": "assistant", "status": "completed",
                      "content": [{"type": "output_text", "text": reply.text, "annotations": []}]})
    for call in reply.tool_calls:
        if call.name in custom:
            items.append({"type": "custom_tool_call", "id": f"ctc_{call.call_id}", "status": "completed",
                          "call_id": call.call_id, "name": call.name, "input": str(call.arguments.get(CUSTOM_INPUT, ""))})
        else:
            items.append({"type": "function_call", "id": f"fc_{call.call_id}", "status": "completed",
                          "call_id": call.call_id, "name": call.name, "arguments": json.dumps(call.arguments)})
    return items


def responses_usage(usage: ReplyUsage) -> dict[str, Any]:
    """OpenAI counts cached tokens inside ``input_tokens``; cache writes have no Responses field."""
    total_input = usage.input + usage.cache_read
    return {"input_tokens": total_input, "input_tokens_details": {"cached_tokens": usage.cache_read},
            "output_tokens": usage.output, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": total_input + usage.output}


def responses_stream(reply: Reply, custom: frozenset[str]) -> bytes:
    """The reply as a Responses event stream: ``response.created``, one ``response.output_item.done``
    per item, then ``response.completed`` with the usage (what Codex reads, host-facts-codex §3)."""
    items = _output_items(reply, custom)
    head = {"id": f"resp_{reply.message_id}", "object": "response", "created_at": int(time.time()), "model": reply.model}
    out = [sse_event({"type": "response.created", "response": head | {"status": "in_progress", "output": []}},
                     "response.created")]
    for index, item in enumerate(items):
        out.append(sse_event({"type": "response.output_item.done", "output_index": index, "item": item},
                             "response.output_item.done"))
    done = head | {"status": "completed", "output": items, "usage": responses_usage(reply.usage)}
    out.append(sse_event({"type": "response.completed", "response": done}, "response.completed"))
    return b"".join(out)


def responses_error(status: int, message: str) -> dict[str, Any]:
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return {"error": {"message": message, "type": kind, "code": None, "param": None}}


class OpenAIResponses(WireFormat):
    """The format; with ``shell_tools`` (a host's, :meth:`for_host_tools`) the scripted model plays
    file actions through them.  The table's instance has none: the proxy and the meter need none."""

    name = "responses"
    routes = ("/v1/responses",)
    suffixes = ("/responses",)
    # Codex's built-in provider tries a WebSocket (GET /v1/responses) first: refused, it posts.
    proxied_calls = re.compile(r"^(?:/v1)?/responses$")
    model_lists = V1_MODEL_LIST

    def __init__(self, shell_tools: ShellTools | None = None) -> None:
        self.shell_tools = shell_tools

    def for_host_tools(self, shell_tools: ShellTools | None) -> WireFormat:
        return self if shell_tools is None else OpenAIResponses(shell_tools)

    def offered_tools(self, body: Mapping[str, Any]) -> tuple[OfferedTool, ...]:
        return responses_tools(body)

    def assistant_turns(self, body: Mapping[str, Any]) -> int:
        return responses_played(body)

    def first_user_text(self, body: Mapping[str, Any]) -> str:
        return first_user_text(body)

    def loaded_skills(self, body: Mapping[str, Any]) -> tuple[LoadedSkill, ...]:
        return () if self.shell_tools is None else responses_loaded_skills(body, self.shell_tools)

    def tool_calls(self, actions: Sequence[Action], tools: tuple[OfferedTool, ...], call_tag: str,
                   sandbox_root: Path) -> tuple[tuple[ToolCall, ...], tuple[str, ...]]:
        if self.shell_tools is None:
            return super().tool_calls(actions, tools, call_tag, sandbox_root)
        return responses_calls([action.model_dump() for action in actions], tools, call_tag, sandbox_root,
                               self.shell_tools)

    def render(self, reply: Reply, stream: bool, body: Mapping[str, Any]) -> tuple[str, bytes]:
        return "text/event-stream", responses_stream(reply, custom_tools(body))  # Codex always streams (host-facts-codex §3)

    def error(self, status: int, message: str) -> dict[str, Any]:
        return responses_error(status, message)

    def read_usage(self, body: Mapping[str, Any]) -> UsageReading | None:
        if body.get("type") != "response.completed":  # the usage of the whole response (Codex)
            return None
        usage = _mapping(_mapping(body.get("response")).get("usage"))
        if not usage:
            return UsageReading({}, reported=False)
        fields = cached_apart(usage.get("input_tokens"), _mapping(usage.get("input_tokens_details")).get("cached_tokens"))
        return UsageReading({**fields, "outputTokens": usage.get("output_tokens")})

    def says_something(self, body: Mapping[str, Any]) -> bool | None:
        if body.get("type") in ("response.output_item.added", "response.output_item.done"):
            return True  # an output item only exists to carry content
        return has_content(body.get("output")) if body.get("object") == "response" else None  # a whole body

    def served_model(self, body: Mapping[str, Any]) -> str | None:
        # response.created / .completed carry the response; a whole body is the response itself.
        return model_name(body.get("model")) or model_name(_mapping(body.get("response")).get("model"))

    def read_calls(self, body: Mapping[str, Any], calls: CallSink) -> bool:
        if body.get("type") != "response.output_item.done":
            return False
        item = _mapping(body.get("item"))
        if item.get("type") == "function_call":
            calls.add_json(item.get("call_id"), item.get("name"), str(item.get("arguments") or ""))
        elif item.get("type") == "custom_tool_call":  # free-form input (Codex's apply_patch)
            calls.add_text(item.get("call_id"), item.get("name"), CUSTOM_INPUT, item.get("input"))
        return True


WIRE = OpenAIResponses()
