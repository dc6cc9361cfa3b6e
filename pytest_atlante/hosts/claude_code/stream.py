"""Claude Code's stream monitor: ``--output-format stream-json --verbose`` read as it arrives (host-facts §3)."""

from __future__ import annotations

import re
from typing import Any

from pytest_atlante.hosts.base import SessionOutcome
from pytest_atlante.hosts.streams import (
    StreamNotes,
    _count,
    _dict,
    _event,
    stream_cost,
    sum_usage,
)
from pytest_atlante.records import Usage

SYNTHETIC_MODEL = "<synthetic>"  # Claude Code's name for messages it made up itself (host-facts §2)
#: Claude Code's own answer to a ``-p "/name"`` prompt naming no command or skill it has: a synthetic
#: message and a ``result`` of 0 turns with ``is_error: false`` (docs/host-facts.md §13).
#: It may suggest another: ``Unknown command: /greet. Did you mean /reset?``.
UNKNOWN_COMMAND = re.compile(r"Unknown (?:command|skill): (/?\S+?)\.?(?:\s|$)")


def unknown_command(text: object) -> str | None:
    """The command Claude Code's "Unknown command: /x" answer names, or None for any other text."""
    found = UNKNOWN_COMMAND.match(text.strip()) if isinstance(text, str) else None
    return found.group(1) if found else None


def unknown_command_error(answer: str) -> str:
    return (f"Claude Code answered {answer!r} without asking the model (0 turns): it has no such command "
            "or skill, so the trial tested nothing; check the harness's commands and how the host names "
            "them (a command in a folder is /folder:name)")


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
        answer = event.get("result")
        if event.get("num_turns") == 0 and unknown_command(answer) is not None and not self._is_error:
            # The host refused the prompt's command itself and reports success: an infra-error.
            self._is_error = True
            self._error = unknown_command_error(str(answer).strip()[:200])
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
