"""Event-stream monitors: read a host's JSON lines as they arrive, never raise on junk.

The trial engine feeds each stdout line to a monitor, asks it for the running token total to
enforce ``maxTokens`` while the stream flows, and asks for the :class:`SessionOutcome` at the end.
"""

from __future__ import annotations

import json
from typing import Any

from pytest_atlante.hosts.base import SessionOutcome
from pytest_atlante.records import Usage

SYNTHETIC_MODEL = "<synthetic>"  # Claude Code's name for messages it made up itself (host-facts §2)


def _event(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _count(value: object) -> int:
    # bool is an int subclass; a non-negative integer is the only valid token count.
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _number(value: object) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


# --------------------------------------------------------------------------- Claude Code


def sum_usage(parts: list[Usage]) -> Usage:
    return Usage(
        inputTokens=sum(u.inputTokens for u in parts),
        outputTokens=sum(u.outputTokens for u in parts),
        cacheReadTokens=sum(u.cacheReadTokens for u in parts),
        cacheWriteTokens=sum(u.cacheWriteTokens for u in parts),
    )


def claude_usage(raw: dict[str, Any]) -> Usage:
    return Usage(
        inputTokens=_count(raw.get("input_tokens")),
        outputTokens=_count(raw.get("output_tokens")),
        cacheReadTokens=_count(raw.get("cache_read_input_tokens")),
        cacheWriteTokens=_count(raw.get("cache_creation_input_tokens")),
    )


def claude_model_usage(raw: dict[str, Any]) -> Usage | None:
    """Sum of ``result.modelUsage`` over every model (the main loop and each subagent model)."""
    entries = [_dict(entry) for entry in raw.values()]
    if not entries:
        return None
    return sum_usage(
        [
            Usage(
                inputTokens=_count(e.get("inputTokens")),
                outputTokens=_count(e.get("outputTokens")),
                cacheReadTokens=_count(e.get("cacheReadInputTokens")),
                cacheWriteTokens=_count(e.get("cacheCreationInputTokens")),
            )
            for e in entries
        ]
    )


class ClaudeStreamMonitor:
    """Claude Code ``--output-format stream-json --verbose`` (host-facts §3).

    While streaming, each assistant ``message.id`` contributes its usage once (a message's content
    blocks arrive as separate events with the same id and the same ``message_start`` usage, whose
    ``output_tokens`` is only 1). That running total is an underestimate; the final ``result``
    event replaces it with the authoritative figures. ``result.usage`` leaves out subagents, while
    ``result.modelUsage`` has one entry per model including subagent models, so the sum of
    ``modelUsage`` is preferred when present (it also matches ``total_cost_usd``).
    """

    def __init__(self) -> None:
        self._per_message: dict[str, Usage] = {}
        self._final: Usage | None = None
        self._cost: float | None = None
        self._models: list[str] = []
        self._result_models: list[str] = []
        self._usage_events = 0
        self._result_seen = False
        self._is_error = False
        self._error: str | None = None
        self._auth_error: str | None = None

    def feed(self, line: str) -> None:
        event = _event(line)
        if event is None:
            return
        kind = event.get("type")
        if kind == "assistant":
            self._assistant(event)
        elif kind == "result":
            self._result(event)

    def _assistant(self, event: dict[str, Any]) -> None:
        message = _dict(event.get("message"))
        model = message.get("model")
        if isinstance(model, str) and model and model != SYNTHETIC_MODEL and model not in self._models:
            self._models.append(model)
        if event.get("error") == "authentication_failed":
            self._auth_error = _message_text(message) or "authentication failed"
        usage = message.get("usage")
        message_id = message.get("id")
        if isinstance(usage, dict) and model != SYNTHETIC_MODEL:
            self._usage_events += 1
            if isinstance(message_id, str):
                self._per_message[message_id] = claude_usage(usage)

    def _result(self, event: dict[str, Any]) -> None:
        self._result_seen = True
        model_usage = _dict(event.get("modelUsage"))
        self._result_models = [name for name in model_usage if name != SYNTHETIC_MODEL]
        usage = event.get("usage")
        final = claude_model_usage(model_usage)
        if final is None and isinstance(usage, dict):
            final = claude_usage(usage)
        if final is not None:
            self._final = final
            self._usage_events += 1
        self._cost = _number(event.get("total_cost_usd"))
        if event.get("is_error") is True:
            self._is_error = True
            text = event.get("result")
            errors = event.get("errors")
            if isinstance(text, str) and text:
                self._error = text
            elif isinstance(errors, list) and errors:
                self._error = "; ".join(str(e) for e in errors)
            else:
                self._error = f"session ended with {event.get('subtype') or 'an error'}"

    @property
    def cumulative_tokens(self) -> int | None:
        if self._final is not None:
            return self._final.total
        if not self._per_message:
            return None
        return sum_usage(list(self._per_message.values())).total

    def outcome(self) -> SessionOutcome:
        is_error = self._is_error or self._auth_error is not None or not self._result_seen
        message = self._error or self._auth_error
        if message is None and not self._result_seen:
            message = "the host's stream ended without a result event"
        usage = self._final
        if usage is None and self._per_message:
            usage = sum_usage(list(self._per_message.values()))
        names = self._result_models or self._models
        identity = names[0] if names else None
        return SessionOutcome(
            usage=usage,
            cost_usd=self._cost,
            model_identity=identity,
            is_error=is_error,
            error_message=message if is_error else None,
            usage_events=self._usage_events,
            budget_unmonitored=self._usage_events == 0,
        )


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if not isinstance(content, list):
        return ""
    texts = [_dict(block).get("text") for block in content]
    return " ".join(text for text in texts if isinstance(text, str))


# --------------------------------------------------------------------------- OpenCode


class OpenCodeStreamMonitor:
    """OpenCode ``run --format json`` (host-facts §8).

    Usage and cost arrive per step in ``step_finish.part.tokens`` / ``.cost`` and are summed; there
    is no final summary event. ``error`` events mark the session failed. The model identity is not
    in the stream and subagent sessions are not streamed: both come from ``opencode export`` after
    the session (``OpenCodeHost.finalize`` runs ``opencode export``), using the
    ``session_id`` and ``subagent_session_ids`` collected here.
    """

    def __init__(self) -> None:
        self._usage: Usage | None = None
        self._cost: float | None = None
        self._usage_events = 0
        self._errors: list[str] = []
        self.session_id: str | None = None
        self.subagent_session_ids: list[str] = []

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
            if isinstance(child, str) and child and child not in self.subagent_session_ids:
                self.subagent_session_ids.append(child)
        elif kind == "error":
            self._errors.append(_opencode_error_text(_dict(event.get("error"))))

    def _step_finish(self, part: dict[str, Any]) -> None:
        tokens = part.get("tokens")
        if isinstance(tokens, dict):
            step = opencode_usage(tokens)
            self._usage = step if self._usage is None else sum_usage([self._usage, step])
            self._usage_events += 1
        cost = _number(part.get("cost"))
        if cost is not None:
            self._cost = (self._cost or 0.0) + cost

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
        )


def opencode_usage(tokens: dict[str, Any]) -> Usage:
    """OpenCode's ``tokens`` object (step, message or session): reasoning counts as output."""
    cache = _dict(tokens.get("cache"))
    return Usage(
        inputTokens=_count(tokens.get("input")),
        outputTokens=_count(tokens.get("output")) + _count(tokens.get("reasoning")),
        cacheReadTokens=_count(cache.get("read")),
        cacheWriteTokens=_count(cache.get("write")),
    )


def _opencode_error_text(error: dict[str, Any]) -> str:
    name = error.get("name")
    message = _dict(error.get("data")).get("message")
    parts = [p for p in (name, message) if isinstance(p, str) and p]
    return ": ".join(parts) if parts else "the host reported an error"
