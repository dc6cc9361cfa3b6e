"""Event-stream monitors: read a host's JSON lines as they arrive, never raise on junk.

The trial engine feeds each stdout line to a monitor, asks it for the running token total to
enforce ``maxTokens`` while the stream flows, and asks for the :class:`SessionOutcome` at the end.
"""

from __future__ import annotations

import json
import math
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


#: The largest token count one stream value may carry: a session of a million-token context window
#: many thousand times over.  Anything larger is no count a provider sends (docs/design.md §10).
MAX_STREAM_TOKENS = 10**10
#: The largest cost in USD one stream value may carry; larger is a forged or broken figure.
MAX_STREAM_COST_USD = 10_000.0
#: How many notes about ignored stream values one session keeps (a hostile stream can send millions).
MAX_NOTES = 20


class StreamNotes:
    """What a monitor ignored in the host's stream, in words, for the trial record (capped)."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.dropped = 0

    def add(self, text: str) -> None:
        if len(self.items) < MAX_NOTES:
            self.items.append(text[:200])
        else:
            self.dropped += 1

    def listed(self) -> list[str]:
        return self.items + ([f"and {self.dropped} more ignored stream value(s)"] if self.dropped else [])


def _count(value: object, notes: StreamNotes | None = None, what: str = "token count") -> int:
    # bool is an int subclass; a non-negative integer up to MAX_STREAM_TOKENS is the only valid count.
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_STREAM_TOKENS:
        return value
    if value is not None and notes is not None:
        notes.add(f"ignored {what} {_shown(value)}")
    return 0


def stream_cost(value: object, notes: StreamNotes | None = None) -> float | None:
    """A cost the stream claims, when it is one: a finite number from 0 to MAX_STREAM_COST_USD."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
            and 0 <= value <= MAX_STREAM_COST_USD:
        return float(value)
    if value is not None and notes is not None:
        notes.add(f"ignored cost {_shown(value)}")
    return None


def _shown(value: object) -> str:
    return repr(value)[:40]


# --------------------------------------------------------------------------- Claude Code


def sum_usage(parts: list[Usage]) -> Usage:
    return Usage(
        inputTokens=sum(u.inputTokens for u in parts),
        outputTokens=sum(u.outputTokens for u in parts),
        cacheReadTokens=sum(u.cacheReadTokens for u in parts),
        cacheWriteTokens=sum(u.cacheWriteTokens for u in parts),
    )


def claude_usage(raw: dict[str, Any], notes: StreamNotes | None = None) -> Usage:
    return Usage(
        inputTokens=_count(raw.get("input_tokens"), notes),
        outputTokens=_count(raw.get("output_tokens"), notes),
        cacheReadTokens=_count(raw.get("cache_read_input_tokens"), notes),
        cacheWriteTokens=_count(raw.get("cache_creation_input_tokens"), notes),
    )


def claude_model_usage(raw: dict[str, Any], notes: StreamNotes | None = None) -> Usage | None:
    """Sum of ``result.modelUsage`` over every model (the main loop and each subagent model)."""
    entries = [_dict(entry) for entry in raw.values()]
    if not entries:
        return None
    return sum_usage(
        [
            Usage(
                inputTokens=_count(e.get("inputTokens"), notes),
                outputTokens=_count(e.get("outputTokens"), notes),
                cacheReadTokens=_count(e.get("cacheReadInputTokens"), notes),
                cacheWriteTokens=_count(e.get("cacheCreationInputTokens"), notes),
            )
            for e in entries
        ]
    )


class ClaudeStreamMonitor:
    """Claude Code ``--output-format stream-json --verbose`` (host-facts §3).

    While streaming, each assistant ``message.id`` contributes its usage once (a message's content
    blocks arrive as separate events with the same id and the same ``message_start`` usage, whose
    ``output_tokens`` is only 1). That running total is an underestimate; the final ``result``
    event raises it to the authoritative figures. ``result.usage`` leaves out subagents, while
    ``result.modelUsage`` has one entry per model including subagent models, so the sum of
    ``modelUsage`` is preferred when present (it also matches ``total_cost_usd``).

    The stream is untrusted input (docs/design.md §10): a tool of the agent can write events into
    the pipe the runner reads.  So counts and cost only go up: a second ``result`` (noted) can raise
    the figures, never lower them or undo an error, a ``result`` below the per-message sum does not
    lower the total, and a value that is no valid count or cost is ignored and noted.  Which of
    the session's errors are believed is the runner's decision, from what the metering proxy saw.
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
        self._high_water = 0
        self.notes = StreamNotes()

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
            self._models.append(model[:200])
        if event.get("error") == "authentication_failed":
            self._auth_error = (_message_text(message) or "authentication failed")[:500]
        usage = message.get("usage")
        message_id = message.get("id")
        if isinstance(usage, dict) and model != SYNTHETIC_MODEL:
            self._usage_events += 1
            if isinstance(message_id, str) and message_id not in self._per_message:
                # A message's usage is read once: a later event with the same id cannot lower it.
                self._per_message[message_id] = claude_usage(usage, self.notes)

    def _result(self, event: dict[str, Any]) -> None:
        if self._result_seen:
            self.notes.add("a second result event: it can raise the figures, never lower them")
        self._result_seen = True
        model_usage = _dict(event.get("modelUsage"))
        usage = event.get("usage")
        final = claude_model_usage(model_usage, self.notes)
        if final is None and isinstance(usage, dict):
            final = claude_usage(usage, self.notes)
        if final is not None:
            self._usage_events += 1
            if self._final is None or final.total > self._final.total:
                self._final = final
                self._result_models = [name[:200] for name in model_usage if name != SYNTHETIC_MODEL]
        cost = stream_cost(event.get("total_cost_usd"), self.notes)
        if cost is not None:
            self._cost = max(cost, self._cost or 0.0)
        if event.get("is_error") is True and not self._is_error:
            self._is_error = True  # an error stays an error: a later result cannot undo it
            text = event.get("result")
            errors = event.get("errors")
            if isinstance(text, str) and text:
                self._error = text[:2000]
            elif isinstance(errors, list) and errors:
                self._error = "; ".join(str(e) for e in errors[:10])[:2000]
            else:
                self._error = f"session ended with {str(event.get('subtype') or 'an error')[:100]}"

    def _usage(self, *, noting: bool = False) -> Usage | None:
        """The larger of the result's figures and the per-message sum: counts only go up."""
        streamed = sum_usage(list(self._per_message.values())) if self._per_message else None
        if self._final is None or (streamed is not None and streamed.total > self._final.total):
            if noting and self._final is not None and streamed is not None:
                self.notes.add(f"the result's {self._final.total} tokens are below the "
                               f"{streamed.total} its messages reported")
            return streamed
        return self._final

    @property
    def cumulative_tokens(self) -> int | None:
        usage = self._usage()
        if usage is None:
            return None
        self._high_water = max(self._high_water, usage.total)
        return self._high_water

    def outcome(self) -> SessionOutcome:
        is_error = self._is_error or self._auth_error is not None or not self._result_seen
        message = self._error or self._auth_error
        if message is None and not self._result_seen:
            message = "the host's stream ended without a result event"
        usage = self._usage(noting=True)
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
            notes=self.notes.listed(),
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
