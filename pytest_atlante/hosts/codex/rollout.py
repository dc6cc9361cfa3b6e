"""Reading a Codex session: its ``codex exec --json`` stream and the rollout file it writes.

The stream (host-facts-codex §3) has ``thread.started``, ``turn.started``, ``item.started`` /
``item.completed`` (``agent_message``, ``command_execution``, ``file_change``, ``error``) and one
``turn.completed`` with the usage of the whole turn (cached tokens inside ``input_tokens``) or
``turn.failed``.  It lacks what a transcript needs: which model response an item belongs to, the
commands Codex refused (a rule's ``Rejected``, the sandbox) — they produce no item at all — and the
model.  The rollout, ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<thread id>.jsonl``, has all of
them: every response item in order (messages, ``function_call``/``custom_tool_call`` with their
arguments, their outputs), one ``token_usage_record`` per model response, and the session's model.

So :meth:`CodexHost.finalize` reads the rollout into one digest line (:data:`DIGEST_TYPE`) that the
session appends to the captured stream (redacted like every line), and the transcript is built
from it; without a rollout (deleted, unreadable) the transcript falls back to the stream's items.
The rollout lies in the trial's home, which the agent can write: it is read capped, as untrusted.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from pytest_atlante.fsutil import UnreadableFile, read_capped
from pytest_atlante.hosts.base import SessionOutcome
from pytest_atlante.hosts.codex.tools import PATCH_TOOL, SHELL_TOOL, read_path, skill_read
from pytest_atlante.hosts.streams import StreamNotes, _count, _dict, _event
from pytest_atlante.hosts.transcripts import (
    RESULT_CAP_CHARS,
    TEXT_CAP_CHARS,
    TranscriptBuilder,
    capped,
    neutral_input,
)
from pytest_atlante.records import Usage

#: The type of the digest line the session appends to the stream after reading the rollout.
DIGEST_TYPE = "atlante.codex-rollout"
#: A rollout larger than this is not read (a long real session stays far below it).
ROLLOUT_LIMIT = 64 * 1024 * 1024
#: Items of one digest (a hostile session can make millions of calls).
MAX_DIGEST_ITEMS = 2_000

_EXIT_CODE = re.compile(r"(?:Process exited with code|Exit code:) (-?\d+)")


def codex_usage(raw: dict[str, Any], notes: StreamNotes | None = None) -> Usage:
    """``turn.completed.usage`` / a rollout ``token_usage_record``: input includes the cached tokens."""
    total_input = _count(raw.get("input_tokens"), notes)
    cached = min(_count(raw.get("cached_input_tokens"), notes), total_input)
    return Usage(inputTokens=total_input - cached, outputTokens=_count(raw.get("output_tokens"), notes),
                 cacheReadTokens=cached, cacheWriteTokens=_count(raw.get("cache_write_input_tokens"), notes))


class CodexStreamMonitor:
    """``codex exec --json``: the usage comes once, in ``turn.completed``, at the end of the whole
    turn, so ``maxTokens`` is the metering proxy's to enforce (it sees every response); the stream
    still feeds the gate.  A second ``turn.completed`` can raise the figures, never lower them."""

    def __init__(self) -> None:
        self.thread_id: str | None = None
        self._usage: Usage | None = None
        self._usage_events = 0
        self._completed = False
        self._failed: str | None = None
        self._last_error: str | None = None
        self.notes = StreamNotes()

    def feed(self, line: str) -> None:
        event = _event(line)
        if event is None:
            return
        kind = event.get("type")
        if kind == "thread.started" and self.thread_id is None and isinstance(event.get("thread_id"), str):
            self.thread_id = str(event["thread_id"])[:200]
        elif kind == "turn.completed":
            usage = codex_usage(_dict(event.get("usage")), self.notes)
            self._usage_events += 1
            if self._completed:
                self.notes.add("a second turn.completed: it can raise the figures, never lower them")
            if self._usage is None or usage.total > self._usage.total:
                self._usage = usage
            self._completed = True
        elif kind == "turn.failed" and self._failed is None:
            self._failed = str(_dict(event.get("error")).get("message") or "the turn failed")[:2000]
        elif kind == "error" and isinstance(event.get("message"), str):
            self._last_error = event["message"][:2000]

    @property
    def cumulative_tokens(self) -> int | None:
        return None if self._usage is None else self._usage.total

    def outcome(self) -> SessionOutcome:
        is_error = self._failed is not None or not self._completed
        message = self._failed or self._last_error
        if is_error and message is None:
            message = "the host's stream ended without turn.completed"
        return SessionOutcome(usage=self._usage, cost_usd=None, model_identity=None, is_error=is_error,
                              error_message=message if is_error else None, usage_events=self._usage_events,
                              budget_unmonitored=self._usage_events == 0, notes=self.notes.listed())


# --------------------------------------------------------------------------- the rollout


def rollout_file(codex_home: Path, thread_id: str | None) -> Path | None:
    """The session's rollout: named after its thread id (the newest rollout when none is known)."""
    sessions = codex_home / "sessions"
    if not sessions.is_dir():
        return None
    found = sorted(sessions.glob("*/*/*/rollout-*.jsonl"))
    if thread_id:
        found = [path for path in found if path.name.endswith(f"-{thread_id}.jsonl")]
    return found[-1] if found else None


def _ms(stamp: object, start: datetime | None) -> int | None:
    if not isinstance(stamp, str) or start is None:
        return None
    try:
        return max(int((datetime.fromisoformat(stamp.replace("Z", "+00:00")) - start).total_seconds() * 1000), 0)
    except ValueError:
        return None


def read_rollout(path: Path) -> dict[str, Any] | None:
    """The digest of one rollout: ``model``, ``items`` (model responses' items and tool outputs, in
    order, with ``ms`` since the session began), ``usage`` per model response; None when unreadable."""
    try:
        text = read_capped(path, ROLLOUT_LIMIT, follow_symlinks=False).decode("utf-8", "replace")
    except UnreadableFile:
        return None
    model: str | None = None
    start: datetime | None = None
    items: list[dict[str, Any]] = []
    usage: list[dict[str, Any]] = []
    for line in text.splitlines():
        entry = _event(line)
        if entry is None:
            continue
        payload = _dict(entry.get("payload"))
        kind = entry.get("type")
        if start is None and isinstance(entry.get("timestamp"), str):
            with contextlib.suppress(ValueError):
                start = datetime.fromisoformat(str(entry["timestamp"]).replace("Z", "+00:00"))
        if kind == "turn_context" and isinstance(payload.get("model"), str):
            model = str(payload["model"])[:200]
        elif kind == "event_msg" and payload.get("type") == "thread_settings_applied" and model is None:
            settings = _dict(payload.get("thread_settings"))
            model = str(settings["model"])[:200] if isinstance(settings.get("model"), str) else None
        elif kind == "token_usage_record":
            usage.append({"ms": _ms(entry.get("timestamp"), start), "usage": _dict(payload.get("usage"))})
        elif kind == "response_item" and len(items) < MAX_DIGEST_ITEMS:
            item = _digest_item(payload)
            if item is not None:
                items.append(item | {"ms": _ms(entry.get("timestamp"), start)})
    return {"type": DIGEST_TYPE, "model": model, "items": items, "usage": usage}


def _digest_item(payload: dict[str, Any]) -> dict[str, Any] | None:
    kind = payload.get("type")
    if kind == "message" and payload.get("role") == "assistant":
        texts = [_dict(p).get("text") for p in payload.get("content") or []]
        return {"kind": "text", "text": "\n".join(t for t in texts if isinstance(t, str))[:TEXT_CAP_CHARS]}
    if kind in ("function_call", "custom_tool_call"):
        raw = payload.get("arguments") if kind == "function_call" else payload.get("input")
        return {"kind": "call", "id": str(payload.get("call_id"))[:200], "name": str(payload.get("name"))[:200],
                "input": str(raw)[:RESULT_CAP_CHARS * 4] if raw is not None else ""}
    if kind in ("reasoning",):
        return {"kind": "reasoning"}
    if kind in ("function_call_output", "custom_tool_call_output"):
        output = payload.get("output")
        text = output if isinstance(output, str) else json.dumps(output)
        return {"kind": "output", "id": str(payload.get("call_id"))[:200], "output": text[:RESULT_CAP_CHARS * 2]}
    return None


# --------------------------------------------------------------------------- the transcript


def neutral_call(name: str, raw_input: str) -> tuple[str, dict[str, Any]]:
    """A Codex tool call as (neutral tool, neutral input): ``exec_command`` of a plain ``cat`` of
    one file is a ``read`` (of a ``SKILL.md`` a ``skill`` load), any other command a ``bash``; an
    ``apply_patch`` adding a file is a ``write``, one changing files an ``edit``."""
    if name == SHELL_TOOL:
        try:
            arguments = _dict(json.loads(raw_input or "{}"))
        except ValueError:
            arguments = {}
        command = str(arguments.get("cmd") or "")
        if (skill := skill_read(command)) is not None:
            return "skill", {"name": skill}
        if (path := read_path(command)) is not None:
            return "read", neutral_input({"path": path})
        return "bash", {"command": command}
    if name == PATCH_TOOL:
        adds = re.findall(r"^\*\*\* Add File: (.+)$", raw_input, re.MULTILINE)
        updates = re.findall(r"^\*\*\* (?:Update|Delete) File: (.+)$", raw_input, re.MULTILINE)
        if adds and not updates:
            content = "".join(line[1:] + "\n" for line in raw_input.splitlines() if line.startswith("+"))
            return "write", neutral_input({"path": adds[0], "content": content})
        return "edit", neutral_input({"path": (updates or adds or [""])[0], "patch": raw_input})
    return name.lower(), {"input": raw_input}


def rollout_call(name: str, arguments: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """A model's tool call (as the metering proxy read it: a free-form call's text under ``input``)
    the way the rollout would show it."""
    raw = arguments.get("input")
    if name == PATCH_TOOL and isinstance(raw, str):
        return neutral_call(name, raw)
    return neutral_call(name, json.dumps(dict(arguments)))


def output_failed(output: str) -> bool:
    """Whether a tool output says the call failed: refused to start, or a non-zero exit."""
    if output.startswith(("exec_command failed", "apply_patch verification failed")) or "Rejected(" in output[:500]:
        return True
    match = _EXIT_CODE.search(output[:500])
    return match is not None and match.group(1) != "0"


def transcript_events(lines: Iterable[tuple[int, str]], b: TranscriptBuilder) -> None:
    """The session's events from the rollout digest (the stream's items when there is none), then one
    ``result`` from ``turn.completed``."""
    monitor = CodexStreamMonitor()
    digest: dict[str, Any] | None = None
    stream: list[tuple[int, dict[str, Any]]] = []
    last_t = 0
    for t, line in lines:
        event = _event(line)
        if event is None:
            continue
        last_t = max(last_t, t)
        if event.get("type") == DIGEST_TYPE:
            digest = event
            continue
        monitor.feed(line)
        stream.append((t, event))
    if digest is not None:
        _from_digest(digest, b, last_t)
    else:
        _from_stream(stream, b)
    outcome = monitor.outcome()
    for t, event in stream:
        if event.get("type") in ("turn.failed",) or (event.get("type") == "error" and outcome.is_error):
            message = _dict(event.get("error")).get("message") if event.get("type") == "turn.failed" else event.get("message")
            b.emit(t, "error", message=str(message or "error")[:2000])
    b.emit(last_t, "result", usage=outcome.usage.model_dump() if outcome.usage else None, costUsd=None,
           turns=b.turn, stopReason=None, isError=outcome.is_error)


def _from_digest(digest: dict[str, Any], b: TranscriptBuilder, last_t: int) -> None:
    calls: dict[str, str] = {}
    previous_model_side = False
    usage = [u for u in digest.get("usage") or [] if isinstance(u, dict)]
    for raw in digest.get("items") or []:
        item = _dict(raw)
        t = min(item["ms"], last_t) if isinstance(item.get("ms"), int) else last_t
        kind = item.get("kind")
        model_side = kind in ("text", "call", "reasoning")
        if model_side and not previous_model_side:
            b.turn += 1
            if b.turn <= len(usage):  # one usage record per model response, in order
                record = usage[b.turn - 1]
                b.usage(t, codex_usage(_dict(record.get("usage"))), None, exact=True)
        previous_model_side = model_side
        if kind == "text" and item.get("text"):
            b.emit(t, "text", agent=None, **capped(str(item["text"]), TEXT_CAP_CHARS))
        elif kind == "call":
            tool, arguments = neutral_call(str(item.get("name")), str(item.get("input") or ""))
            calls[str(item.get("id"))] = tool
            b.emit(t, "tool_call", id=item.get("id"), tool=tool, hostTool=item.get("name"), input=arguments, agent=None)
        elif kind == "output":
            output = str(item.get("output") or "")
            b.emit(t, "tool_result", id=item.get("id"), tool=calls.get(str(item.get("id")), ""),
                   isError=output_failed(output), agent=None, **capped(output, RESULT_CAP_CHARS))


def _from_stream(stream: list[tuple[int, dict[str, Any]]], b: TranscriptBuilder) -> None:
    """Without a rollout: the stream's completed items, all in one turn (the stream does not say
    which model response an item belongs to), refused commands missing."""
    b.turn = 1
    for t, event in stream:
        if event.get("type") != "item.completed":
            continue
        item = _dict(event.get("item"))
        kind = item.get("type")
        if kind == "agent_message" and item.get("text"):
            b.emit(t, "text", agent=None, **capped(str(item["text"]), TEXT_CAP_CHARS))
        elif kind == "command_execution":
            command = str(item.get("command") or "")
            try:
                words = shlex.split(command)
                inner = words[-1] if len(words) == 3 and words[1] in ("-lc", "-c") else command
            except ValueError:
                inner = command
            tool, arguments = neutral_call(SHELL_TOOL, json.dumps({"cmd": inner}))
            b.emit(t, "tool_call", id=item.get("id"), tool=tool, hostTool=SHELL_TOOL, input=arguments, agent=None)
            b.emit(t, "tool_result", id=item.get("id"), tool=tool, isError=item.get("exit_code") != 0, agent=None,
                   **capped(str(item.get("aggregated_output") or ""), RESULT_CAP_CHARS))
        elif kind == "file_change":
            changes = [_dict(c) for c in item.get("changes") or []]
            tool = "write" if changes and all(c.get("kind") == "add" for c in changes) else "edit"
            path = str(changes[0].get("path")) if changes else ""
            b.emit(t, "tool_call", id=item.get("id"), tool=tool, hostTool=PATCH_TOOL,
                   input=neutral_input({"path": path}), agent=None)
            b.emit(t, "tool_result", id=item.get("id"), tool=tool, isError=item.get("status") != "completed",
                   agent=None, text="", chars=0, truncated=False)
