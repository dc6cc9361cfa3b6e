"""What the model really answered, and the transcript events the host's stream claims beyond it.

The metering proxy (``provider/proxy.py``) sees every model response of a metered trial.  A
:class:`ToolCallReader` reads, beside the usage the meter reads, the tool calls each response
contains, each wire format reading its own documents (``read_calls`` in ``provider/wire/``):
Anthropic Messages (``tool_use`` blocks, streamed or whole), OpenAI chat completions
(``tool_calls``, streamed or whole) and OpenAI Responses (``function_call`` output items, and
``custom_tool_call`` ones, whose free-form text is kept under ``input``).

The host's stream is untrusted: a tool of the agent can write events into it (``/proc/<cli
pid>/fd/1``, docs/design.md §10).  :func:`mark_unverified` compares the transcript with what was
served and marks every event that is not the host's own — ``"unverified": true`` with an
``unverifiedReason`` — so the view shows it and the trajectory checks do not count it:

- a ``tool_call`` whose id no served response holds, whose tool name differs from the model's, whose
  skill or agent (``input.name``/``input.agent``, what ``skill-used`` and ``agent-used`` count)
  differs from the model's arguments, or which repeats a call the stream already showed;
- a ``tool_result`` for no call the model made, before its call, or after that call's first result;
- a ``usage`` event whose counts no served response reported (each response vouches for one);
- a ``result`` stating fewer tokens than the vouched usage events before it, or more than the
  proxy counted in all.

Other arguments are not compared: the stream's copy is redacted (sandbox paths, secrets) where the
served one is not.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_atlante.hosts.transcripts import neutral_input
from pytest_atlante.provider.wire import WIRE_FORMATS
from pytest_atlante.provider.wire.shared import CallKey
from pytest_atlante.records import Usage

#: Tool calls kept per response, and argument characters assembled per call (beyond: not compared).
MAX_CALLS = 1000
MAX_ARGUMENT_CHARS = 1_000_000
#: The arguments the trajectory checks count on (``trial/checks/trajectory.py``).
IDENTITY_ARGUMENTS = ("name", "agent")


@dataclass(frozen=True)
class ServedCall:
    """One tool call of a served model response; ``arguments`` None when they could not be read."""

    id: str
    name: str
    arguments: Mapping[str, Any] | None


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _parsed(text: str) -> Mapping[str, Any] | None:
    try:
        value = json.loads(text or "{}")
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


class ToolCallReader:
    """The tool calls of one response, read from its JSON documents (whole bodies or SSE events) by
    the first format of the table that reads each (``WireFormat.read_calls``); the reader is the
    formats' ``CallSink``."""

    def __init__(self) -> None:
        self.calls: list[ServedCall] = []
        # Streams assemble a call over several events: its id, name and argument text by key.
        self._open: dict[CallKey, list[str]] = {}

    def read(self, body: Mapping[str, Any]) -> None:
        for wire in WIRE_FORMATS.values():
            if wire.read_calls(body, self):
                return

    def finish(self) -> None:
        """The response ended: a streamed chat call has no closing event."""
        for key in list(self._open):
            self.end(key)

    def add(self, call_id: object, name: object, arguments: Mapping[str, Any] | None) -> None:
        if isinstance(call_id, str) and call_id and isinstance(name, str) and len(self.calls) < MAX_CALLS:
            self.calls.append(ServedCall(call_id, name, arguments))

    def add_json(self, call_id: object, name: object, text: object) -> None:
        self.add(call_id, name, _parsed(str(text)))

    def add_text(self, call_id: object, name: object, field: str, text: object) -> None:
        self.add(call_id, name, {field: text} if isinstance(text, str) and len(text) <= MAX_ARGUMENT_CHARS else None)

    def begin(self, key: CallKey, call_id: object, name: object) -> None:
        self._open[key] = [str(call_id), str(name), ""]

    def extend(self, key: CallKey, text: object) -> None:
        entry = self._open.get(key)
        if entry is not None and isinstance(text, str) and len(entry[2]) + len(text) <= MAX_ARGUMENT_CHARS:
            entry[2] += text
        elif entry is not None:
            entry[2] = "\0"  # too long to assemble: the arguments stay unread

    def merge(self, key: CallKey, call_id: object, name: object, text: object) -> None:
        entry = self._open.setdefault(key, ["", "", ""])
        entry[0] = str(call_id or entry[0])
        entry[1] = str(name or entry[1])
        self.extend(key, text)

    def end(self, key: CallKey) -> None:
        entry = self._open.pop(key, None)
        if entry is not None:
            self.add(entry[0], entry[1], _parsed(entry[2]))


@dataclass(frozen=True)
class Served:
    """What the proxy served in one trial: every response's tool calls and usage, and the total."""

    calls: Sequence[ServedCall]
    responses: Sequence[Usage]
    total: Usage


def _mark(event: dict[str, Any], reason: str) -> None:
    event["unverified"] = True
    event["unverifiedReason"] = reason


def _identity(arguments: Mapping[str, Any] | None) -> dict[str, object] | None:
    if arguments is None:
        return None
    neutral = neutral_input(arguments)
    return {key: neutral.get(key) for key in IDENTITY_ARGUMENTS}


#: A host's reading of a model's call (tool name, arguments) as the transcript's neutral (tool, input).
Neutral = Callable[[str, Mapping[str, Any]], tuple[str, dict[str, Any]]]


def _call_problem(event: Mapping[str, Any], served: ServedCall | None, claimed: set[str],
                  neutral: Neutral | None) -> str | None:
    if served is None:
        return "no model response the metering proxy served holds this tool call"
    if str(event.get("hostTool") or event.get("tool") or "").lower() != served.name.lower():
        return f"the model called {served.name!r} under this id"
    if neutral is not None and served.arguments is not None:  # the host's own reading (a Codex skill is a cat)
        tool, arguments = neutral(served.name, served.arguments)
        if tool != event.get("tool"):
            return f"the model's call is a {tool!r}"
        wanted: dict[str, object] | None = {key: arguments.get(key) for key in IDENTITY_ARGUMENTS}
    else:
        wanted = _identity(served.arguments)
    shown = _dict(event.get("input"))
    if wanted is not None and any(shown.get(key) != value for key, value in wanted.items()):
        return "the model's call names another skill or agent"
    if str(event.get("id")) in claimed:  # the stream's id: the model's own, or matched to it in order
        return "repeats a tool call the stream already showed"
    return None


def _result_problem(event: Mapping[str, Any], served: ServedCall | None, claimed: set[str],
                    answered: set[str], cut: bool) -> str | None:
    if served is None:
        return "answers no tool call the model made"
    key = str(event.get("id"))
    if key not in claimed and not cut:  # a cut stream may have lost the call's line
        return "comes before the stream showed its tool call"
    if key in answered:
        return "a second result for one tool call"
    return None


def _compared(event: Mapping[str, Any]) -> list[str]:
    """The counts of a usage event that a served response states exactly."""
    fields = ["inputTokens", "cacheReadTokens", "cacheWriteTokens"]
    if event.get("outputExact") is not False:  # Claude Code's per-message output is a placeholder
        fields.append("outputTokens")
    return fields


def _usage_matches(event: Mapping[str, Any], usage: Usage) -> bool:
    shown = _dict(event.get("usage"))
    return all(shown.get(name, 0) == getattr(usage, name) for name in _compared(event))


def _total(event: Mapping[str, Any]) -> int:
    shown = _dict(event.get("usage"))
    return sum(v for v in shown.values() if isinstance(v, int) and not isinstance(v, bool))


class _Ledger:
    """The served responses not yet claimed by a usage event, and what the claimed ones add up to."""

    def __init__(self, served: Served) -> None:
        self.unclaimed = list(served.responses)
        self.vouched = 0  # the least a true result can state: the counts of the vouched usage events
        self.total = served.total.total

    def usage_problem(self, event: Mapping[str, Any]) -> str | None:
        match = next((u for u in self.unclaimed if _usage_matches(event, u)), None)
        if match is None:
            return "no model response the metering proxy served reported these counts"
        self.unclaimed.remove(match)
        self.vouched += sum(getattr(match, name) for name in _compared(event))
        return None

    def result_problem(self, event: Mapping[str, Any]) -> str | None:
        stated = _total(event)
        if stated < self.vouched or stated > self.total:
            return f"states {stated} tokens; the metering proxy counted {self.total}"
        return None


def _same_call(event: Mapping[str, Any], served: ServedCall, neutral: Neutral | None) -> bool:
    """The event shows this served call, up to the arguments the transcript's checks count on."""
    return _call_problem(event, served, set(), neutral) is None


def _matched_in_order(events: Sequence[Mapping[str, Any]], served: Served,
                      neutral: Neutral | None) -> dict[str, ServedCall]:
    """For a host whose stream numbers its calls itself (Gemini CLI): each ``tool_call`` event's id
    → the first served call not matched yet of the same tool, skill and agent.  A forged event can
    take a real call's place (that call's own event is then unmatched), never add one: the matched
    events never outnumber the model's calls of a tool."""
    pending = list(served.calls)
    matched: dict[str, ServedCall] = {}
    for event in events:
        key = str(event.get("id"))
        if event.get("type") != "tool_call" or key in matched:
            continue
        found = next((call for call in pending if _same_call(event, call, neutral)), None)
        if found is not None:
            pending.remove(found)
            matched[key] = found
    return matched


def mark_unverified(events: Sequence[dict[str, Any]], served: Served, neutral: Neutral | None = None,
                    *, by_order: bool = False) -> int:
    """Mark, in place, the events (header excluded) the served responses do not vouch for; how many.

    A ``result`` is not vouched for when it states fewer tokens than the vouched usage events before
    it, or more than the proxy counted in all (OpenCode's ``result`` is the transcript's own sum of
    its steps, so a forged step shows there too).  ``neutral``: the host's reading of a model call,
    where its transcript's neutral tool is not the call's name read generically (Codex).
    ``by_order``: the stream's call ids are the host's own, so calls are matched by tool and order
    (:func:`_matched_in_order`) and results by the stream's ids."""
    calls = _matched_in_order(events, served, neutral) if by_order else {call.id: call for call in served.calls}
    ledger = _Ledger(served)
    claimed: set[str] = set()
    answered: set[str] = set()
    cut = any(event.get("type") == "truncated" for event in events)
    marked = 0
    for event in events:
        kind = event.get("type")
        key = str(event.get("id"))
        problem: str | None = None
        if kind == "tool_call":
            problem = _call_problem(event, calls.get(key), claimed, neutral)
            if problem is None:
                claimed.add(key)
        elif kind == "tool_result":
            problem = _result_problem(event, calls.get(key), claimed, answered, cut)
            if problem is None:
                answered.add(key)
        elif kind == "usage":
            problem = ledger.usage_problem(event)
        elif kind == "result" and isinstance(event.get("usage"), dict):
            problem = ledger.result_problem(event)
        if problem is not None:
            _mark(event, problem)
            marked += 1
    return marked


def unshown_calls(events: Sequence[Mapping[str, Any]], served: Served) -> list[ServedCall]:
    """The served responses' tool calls no vouched-for ``tool_call`` event of the transcript shows:
    what a transcript read from a file the agent can rewrite (Codex's rollout) left out."""
    shown = {str(event.get("id")) for event in events
             if event.get("type") == "tool_call" and event.get("unverified") is not True}
    return [call for call in served.calls if call.id not in shown]
