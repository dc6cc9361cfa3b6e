"""The host-neutral transcript events (``atlante/transcript-v1``), as each adapter emits them.

Each adapter reads its own CLI's stream into events through :class:`TranscriptBuilder`
(``Host.transcript_events``); ``trial/transcript.py`` captures the stream, drives the host's reader,
adds the header, truncation and abort, and writes the files.  The event shapes are documented in
``docs/transcripts.md``: ``text``, ``tool_call``, ``tool_result``, ``usage``, ``subagent``,
``error`` and one final ``result``, each with ``seq``, ``t`` (ms since the session started),
``type`` and ``turn``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pytest_atlante.pathnames import escape_path
from pytest_atlante.records import Usage

RESULT_CAP_CHARS = 2_000  # characters of one tool result kept in the transcript
TEXT_CAP_CHARS = 20_000  # characters of one assistant text kept

# Host argument name → host-neutral name (the scripted model's spelling, docs/scripted-model.md).
_ARGUMENTS = {"file_path": "path", "filePath": "path", "old_string": "old", "oldString": "old",
              "new_string": "new", "newString": "new", "replaceAll": "replace_all", "allow_multiple": "replace_all",
              "subagent_type": "agent", "agent_name": "agent",
              "skill": "name"}


@dataclass
class TranscriptBuilder:
    """The events of one transcript, numbered in order, with the running turn and token total."""

    events: list[dict[str, Any]] = field(default_factory=list)
    turn: int = 0
    cumulative: int = 0
    max_tokens: int = 0  # the trial's token budget: the usage event crossing it is marked
    budget_marked: bool = False

    def emit(self, t: int, kind: str, **fields: Any) -> None:
        self.events.append({"seq": len(self.events) + 1, "t": t, "type": kind, "turn": self.turn, **fields})

    def usage(self, t: int, usage: Usage, cost: float | None, *, exact: bool, agent: str | None = None) -> None:
        self.cumulative += usage.total
        crossed = bool(self.max_tokens) and not self.budget_marked and self.cumulative > self.max_tokens
        self.budget_marked = self.budget_marked or crossed
        extra: dict[str, Any] = {"budgetCrossed": True} if crossed else {}
        self.emit(t, "usage", usage=usage.model_dump(), costUsd=cost, outputExact=exact,
                  cumulativeTokens=self.cumulative, agent=agent, **extra)


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def neutral_input(value: object) -> dict[str, Any]:
    """A tool call's arguments with host-neutral names; a ``path`` in its shown form (``escape_path``),
    as the report names it."""
    fields = {_ARGUMENTS.get(k, k): v for k, v in _dict(value).items()}
    if isinstance(fields.get("path"), str):
        fields["path"] = escape_path(fields["path"])
    return fields


def capped(text: str, limit: int) -> dict[str, Any]:
    """The ``text``/``chars``/``truncated`` fields of a text or tool-result event."""
    if len(text) <= limit:
        return {"text": text, "chars": len(text), "truncated": False}
    return {"text": text[:limit], "chars": len(text), "truncated": True}


def result_text(content: object) -> str:
    """A tool result's content as text (a string, a list of text blocks, or any JSON value)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(_dict(b).get("text", "")) for b in content if isinstance(b, dict))
    return "" if content is None else json.dumps(content)
