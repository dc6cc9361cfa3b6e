"""OpenCode's stream monitor: ``run --format json`` read as it arrives (host-facts §8)."""

from __future__ import annotations

from typing import Any

from pytest_atlante.hosts.base import SessionOutcome
from pytest_atlante.hosts.streams import (
    MAX_NOTES,
    MAX_STREAM_COST_USD,
    StreamNotes,
    _count,
    _dict,
    _event,
    stream_cost,
    sum_usage,
)
from pytest_atlante.records import Usage


class OpenCodeStreamMonitor:
    """OpenCode ``run --format json`` (host-facts §8).

    Usage and cost arrive per step in ``step_finish.part.tokens`` / ``.cost`` and are summed; there
    is no final summary event. ``error`` events mark the session failed. The model identity is not
    in the stream and subagent sessions are not streamed: both come from the sessions OpenCode
    stored in the trial HOME (``OpenCodeHost.finalize``, what ``opencode export`` prints), using
    the ``session_id`` and ``subagent_session_ids`` collected here.  A value that is no valid count
    or cost is ignored and noted (docs/design.md §10); being a sum, the total only goes up.
    """

    def __init__(self) -> None:
        self._usage: Usage | None = None
        self._cost: float | None = None
        self._usage_events = 0
        self._errors: list[str] = []
        self.session_id: str | None = None
        self.subagent_session_ids: list[str] = []
        self.notes = StreamNotes()

    def feed(self, line: str) -> None:
        event = _event(line)
        if event is None:
            return
        session = event.get("sessionID")
        if self.session_id is None and isinstance(session, str) and session:
            self.session_id = session
        kind = event.get("type")
        part = _dict(event.get("part"))
        if kind == "step_finish":
            self._step_finish(part)
        elif kind == "tool_use" and part.get("tool") == "task":
            child = _dict(_dict(part.get("state")).get("metadata")).get("sessionId")
            if isinstance(child, str) and child and child not in self.subagent_session_ids \
                    and len(self.subagent_session_ids) < MAX_NOTES:
                self.subagent_session_ids.append(child)
        elif kind == "error" and len(self._errors) < MAX_NOTES:
            self._errors.append(_opencode_error_text(_dict(event.get("error")))[:500])

    def _step_finish(self, part: dict[str, Any]) -> None:
        tokens = part.get("tokens")
        if isinstance(tokens, dict):
            step = opencode_usage(tokens, self.notes)
            self._usage = step if self._usage is None else sum_usage([self._usage, step])
            self._usage_events += 1
        cost = stream_cost(part.get("cost"), self.notes)
        if cost is not None:
            self._cost = min((self._cost or 0.0) + cost, MAX_STREAM_COST_USD)

    @property
    def cumulative_tokens(self) -> int | None:
        return None if self._usage is None else self._usage.total

    def outcome(self) -> SessionOutcome:
        return SessionOutcome(
            usage=self._usage,
            cost_usd=self._cost,
            model_identity=None,
            is_error=bool(self._errors),
            error_message="; ".join(self._errors) if self._errors else None,
            usage_events=self._usage_events,
            budget_unmonitored=self._usage_events == 0,
            notes=self.notes.listed(),
        )


def opencode_usage(tokens: dict[str, Any], notes: StreamNotes | None = None) -> Usage:
    """OpenCode's ``tokens`` object (step, message or session): reasoning counts as output."""
    cache = _dict(tokens.get("cache"))
    return Usage(
        inputTokens=_count(tokens.get("input"), notes),
        outputTokens=_count(tokens.get("output"), notes) + _count(tokens.get("reasoning"), notes),
        cacheReadTokens=_count(cache.get("read"), notes),
        cacheWriteTokens=_count(cache.get("write"), notes),
    )


def _opencode_error_text(error: dict[str, Any]) -> str:
    name = error.get("name")
    message = _dict(error.get("data")).get("message")
    parts = [p for p in (name, message) if isinstance(p, str) and p]
    return ": ".join(parts) if parts else "the host reported an error"
