"""Gemini CLI's ``--output-format stream-json`` events: the budget monitor and the transcript reader.

The stream (host-facts-gemini §12): ``init{session_id, model}``, ``message{role, content, delta}``,
``tool_use{tool_name, tool_id, parameters}``, ``tool_result{tool_id, status, output, error}``,
``error{severity, message}`` (non-fatal) and one final ``result{status, error?, stats}``.

What this reading relies on:
- usage is only in ``result.stats``, summed over the session: ``input_tokens`` includes ``cached``,
  ``total_tokens`` is prompt + candidates + thoughts, so output with thinking is
  ``total_tokens - input_tokens`` (``output_tokens`` leaves the thoughts out);
- there is no cost: it is estimated from the shipped price table (``hosts/prices.py``);
- the model identity is the key of ``result.stats.models`` (the response's ``modelVersion``);
- **the exit code says nothing**: it is 0 on an interrupt, an empty response and denied tools, and
  the HTTP status modulo 256 on API errors.  Success is a ``result`` with ``status: "success"``;
  a missing ``result`` (an interrupt) or ``status: "error"`` is a failure.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pytest_atlante.hosts.base import SessionOutcome
from pytest_atlante.hosts.prices import estimate_cost, shipped_table
from pytest_atlante.hosts.streams import StreamNotes, _count, _dict, _event
from pytest_atlante.hosts.transcripts import RESULT_CAP_CHARS, TEXT_CAP_CHARS, TranscriptBuilder, capped, neutral_input
from pytest_atlante.records import Usage

#: Gemini CLI's tool names → the host-neutral ones (others keep their own name without ``_``).
NEUTRAL_TOOLS = {"write_file": "write", "replace": "edit", "read_file": "read", "read_many_files": "read",
                 "run_shell_command": "bash", "glob": "glob", "grep_search": "grep", "activate_skill": "skill",
                 "invoke_agent": "task", "list_directory": "list", "web_fetch": "webfetch",
                 "google_web_search": "websearch", "write_todos": "todowrite"}


def neutral_tool(name: str) -> str:
    return NEUTRAL_TOOLS.get(name, name.replace("_", "").lower())


def stats_usage(stats: dict[str, Any], notes: StreamNotes | None = None) -> Usage:
    """``result.stats`` as the report's usage: cached apart from input, thinking counted as output."""
    prompt = _count(stats.get("input_tokens"), notes)
    cached = min(_count(stats.get("cached"), notes), prompt)
    output = _count(stats.get("output_tokens"), notes)
    total = _count(stats.get("total_tokens"), notes)
    return Usage(inputTokens=prompt - cached, outputTokens=max(output, total - prompt),
                 cacheReadTokens=cached, cacheWriteTokens=0)


def stats_model(stats: dict[str, Any]) -> str | None:
    models = [str(name)[:200] for name in _dict(stats.get("models")) if name]
    return models[0] if models else None


def estimated_cost(model: str | None, usage: Usage | None) -> tuple[float | None, str | None]:
    """The price table's estimate for the session and the table's label (None, None: unpriced)."""
    if usage is None:
        return None, None
    table = shipped_table()
    cost = estimate_cost(model, usage.inputTokens + usage.cacheReadTokens, usage.cacheReadTokens,
                         usage.outputTokens, table)
    return (cost, table.label) if cost is not None else (None, None)


class GeminiStreamMonitor:
    """Gemini CLI's stream, read for the verdict and the totals.

    The stream is untrusted input (docs/design.md §10): a second ``result`` (noted) can raise the
    figures, never lower them or undo an error.  No running total exists before ``result``, so
    ``maxTokens`` is the metering proxy's to enforce (host-facts-gemini §12).
    """

    def __init__(self) -> None:
        self._usage: Usage | None = None
        self._model: str | None = None
        self._configured_model: str | None = None
        self._result_seen = False
        self._is_error = False
        self._error: str | None = None
        self._error_event: str | None = None  # the first error event's message: the reason a bare result leaves out
        self.notes = StreamNotes()

    def feed(self, line: str) -> None:
        event = _event(line)
        if event is None:
            return
        kind = event.get("type")
        if kind == "init" and isinstance(event.get("model"), str) and self._configured_model is None:
            self._configured_model = str(event["model"])[:200]
        elif kind == "result":
            self._result(event)
        elif kind == "error" and event.get("severity") == "error" and self._error_event is None:
            self._error_event = str(event.get("message") or "")[:2000] or None

    def _result(self, event: dict[str, Any]) -> None:
        if self._result_seen:
            self.notes.add("a second result event: it can raise the figures, never lower them")
        self._result_seen = True
        stats = _dict(event.get("stats"))
        if stats:
            usage = stats_usage(stats, self.notes)
            if self._usage is None or usage.total > self._usage.total:
                self._usage = usage
                self._model = stats_model(stats) or self._model
        if event.get("status") != "success" and not self._is_error:
            self._is_error = True
            error = _dict(event.get("error"))
            message = error.get("message")
            status = f"session ended with status {str(event.get('status'))[:100]!r}"
            self._error = (str(message) if message else status + (f": {self._error_event}" if self._error_event else ""))[:2000]

    @property
    def cumulative_tokens(self) -> int | None:
        return None if self._usage is None else self._usage.total

    def outcome(self) -> SessionOutcome:
        is_error = self._is_error or not self._result_seen
        message = self._error if self._result_seen else "the host's stream ended without a result event"
        identity = self._model or self._configured_model
        cost, basis = estimated_cost(identity, self._usage)
        return SessionOutcome(
            usage=self._usage,
            cost_usd=cost,
            model_identity=identity,
            is_error=is_error,
            error_message=message if is_error else None,
            usage_events=1 if self._usage is not None else 0,
            budget_unmonitored=self._usage is None,
            notes=self.notes.listed(),
            cost_basis=basis,
        )


# --------------------------------------------------------------------------- transcript


def transcript_events(lines: Iterable[tuple[int, str]], b: TranscriptBuilder) -> None:
    """``gemini -p --output-format stream-json`` lines → host-neutral transcript events.

    A turn is one model response: it starts with the first assistant text or tool call after the
    prompt or after tool results.  Consecutive text deltas of a turn are one ``text`` event.
    """
    tools: dict[str, str] = {}
    in_turn = False
    text: list[str] = []
    text_t = 0
    result_seen = False

    def flush() -> None:
        if text:
            b.emit(text_t, "text", agent=None, **capped("".join(text), TEXT_CAP_CHARS))
            text.clear()

    def start_turn() -> None:
        nonlocal in_turn
        if not in_turn:
            b.turn += 1
            in_turn = True

    for t, line in lines:
        event = _event(line)
        if event is None:
            continue
        kind = event.get("type")
        if kind == "message" and event.get("role") == "assistant" and isinstance(event.get("content"), str):
            start_turn()
            if not text:
                text_t = t
            text.append(event["content"])
        elif kind == "tool_use":
            start_turn()
            flush()
            host_tool = str(event.get("tool_name", ""))
            tool_id = str(event.get("tool_id"))
            if len(tools) < 10_000:
                tools[tool_id] = host_tool
            parameters = _dict(event.get("parameters"))
            b.emit(t, "tool_call", id=tool_id, tool=neutral_tool(host_tool), hostTool=host_tool,
                   input=neutral_input(parameters), agent=None)
            if host_tool == "invoke_agent":
                b.emit(t, "subagent", id=tool_id, agent=parameters.get("agent_name"),
                       description=parameters.get("prompt"), status="started")
        elif kind == "tool_result":
            flush()
            in_turn = False
            tool_id = str(event.get("tool_id"))
            host_tool = tools.get(tool_id, "")
            failed = event.get("status") != "success"
            error = _dict(event.get("error"))
            output = str(event["output"]) if isinstance(event.get("output"), str) else ""
            shown = str(error.get("message") or output) if failed else output
            b.emit(t, "tool_result", id=tool_id, tool=neutral_tool(host_tool), isError=failed, agent=None,
                   **capped(shown, RESULT_CAP_CHARS))
            if host_tool == "invoke_agent":
                b.emit(t, "subagent", id=tool_id, agent=None, description=None,
                       status="failed" if failed else "completed")
        elif kind == "error":
            flush()
            b.emit(t, "error", message=str(event.get("message") or "error")[:2000])
        elif kind == "result" and not result_seen:
            flush()
            result_seen = True
            _result(t, event, b)
    flush()
    if not result_seen:
        last_t = b.events[-1]["t"] if b.events else 0
        b.emit(last_t, "error", message="the host's stream ended without a result event")
        b.emit(last_t, "result", usage=None, costUsd=None, turns=b.turn, stopReason=None, isError=True)


def _result(t: int, event: dict[str, Any], b: TranscriptBuilder) -> None:
    stats = _dict(event.get("stats"))
    usage = stats_usage(stats) if stats else None
    cost, _ = estimated_cost(stats_model(stats), usage)
    failed = event.get("status") != "success"
    if usage is not None:
        b.usage(t, usage, cost, exact=True)
    if failed:
        b.emit(t, "error", message=str(_dict(event.get("error")).get("message") or "error")[:2000])
    b.emit(t, "result", usage=usage.model_dump() if usage else None, costUsd=cost, turns=b.turn,
           stopReason=str(event.get("status"))[:100], isError=failed)

