"""Host-neutral transcripts (``atlante/transcript-v1``): what the agent did in one trial.

The trial engine hands every stdout line of the host session to a :class:`StreamCapture` (with
the time it arrived), alongside the budget monitor.  After the session, :func:`build_transcript`
turns the captured lines into ordered, host-neutral events — assistant text, tool calls with a
host-neutral tool name and argument names, tool results (truncated, full size kept), per-turn
usage, subagent/skill calls, errors, the final totals and the abort — and :func:`write_trial_files`
writes them, plus the raw stream, beside the report.  The schema is documented in
``docs/transcripts.md``.

Privacy: credential values from the parent environment and sandbox paths are removed from every
line *as it is captured*, so neither file ever holds them.  Size: the raw stream kept in memory and
on disk is capped per trial (head kept, plus the last lines, which carry the outcome); the cap and
whether it was hit are written in the transcript's header.
"""

from __future__ import annotations

import json
import re
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from pytest_atlante.fsutil import atomic_write_bytes
from pytest_atlante.pathnames import escape_path
from pytest_atlante.hosts.streams import SYNTHETIC_MODEL, claude_model_usage, claude_usage, opencode_usage, sum_usage
from pytest_atlante.hosts.streams import _dict, _event as _json  # the monitors' junk-tolerant readers
from pytest_atlante.records import Usage
from pytest_atlante.records import iso_utc
from pytest_atlante.sandbox.redact import redact_sandbox_paths, scrub_paths

TRANSCRIPT_SCHEMA = "atlante/transcript-v1"
TRANSCRIPT_FILE = "transcript.jsonl"
HOST_STREAM_FILE = "host-stream.jsonl"
STREAM_CAP_BYTES = 2_000_000  # raw stream kept per trial (and written as host-stream.jsonl)
TAIL_LINES = 64  # lines past the cap still kept: the end of a stream says how the session ended
RESULT_CAP_CHARS = 2_000  # characters of one tool result kept in the transcript
TEXT_CAP_CHARS = 20_000  # characters of one assistant text kept
REDACTED = "<redacted>"

# Environment variables whose values are credentials, by name.  Short values ("1", "true") are
# switches, not secrets, and replacing them would mangle the stream.
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|PRIVATE", re.IGNORECASE)
_SECRET_MIN_CHARS = 8
# Credential shapes that need no environment variable to be recognised.
_SECRET_SHAPES = re.compile(r"sk-(?:ant-)?[A-Za-z0-9_-]{16,}|(?i:bearer)\s+[A-Za-z0-9._~+/=-]{16,}")

# Host tool name → host-neutral name (OpenCode's names are already the neutral ones).
_CLAUDE_TOOLS = {"Write": "write", "Edit": "edit", "MultiEdit": "edit", "Read": "read", "Bash": "bash",
                 "Glob": "glob", "Grep": "grep", "Task": "task", "Agent": "task", "Skill": "skill",
                 "TodoWrite": "todowrite", "WebFetch": "webfetch", "WebSearch": "websearch",
                 "NotebookEdit": "notebookedit"}
# Host argument name → host-neutral name (the scripted model's spelling, docs/scripted-model.md).
_ARGUMENTS = {"file_path": "path", "filePath": "path", "old_string": "old", "oldString": "old",
              "new_string": "new", "newString": "new", "replaceAll": "replace_all", "subagent_type": "agent",
              "skill": "name"}


def secret_values(env: Mapping[str, str]) -> list[str]:
    """Values of credential-named variables, longest first (so no secret is half-replaced)."""
    found = {v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= _SECRET_MIN_CHARS}
    return sorted(found, key=len, reverse=True)


class Redactor:
    """Removes credentials and sandbox paths from one captured line."""

    def __init__(self, secrets: Sequence[str], roots: Sequence[str]) -> None:
        # A secret appears either verbatim or JSON-escaped inside a string of the stream.
        forms = {form for s in secrets for form in (s, json.dumps(s)[1:-1]) if form}
        self._secrets = sorted(forms, key=len, reverse=True)
        self._roots = list(roots)
        # Claude Code names its per-project store after the cwd with every "/" made "-" (FACTS §4).
        self._mangled = sorted({r.rstrip("/").replace("/", "-") for r in roots if r.strip("/")}, key=len, reverse=True)
        # OpenCode titles a tool call with the path relative to its worktree, which is "/" when the
        # sandbox is no git checkout: "tmp/atlante-eval-.../sandbox/notes.txt" (seen under bwrap).
        self._relative = sorted({r.strip("/") for r in roots if r.strip("/")}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        for mangled in self._mangled:
            text = text.replace(mangled, "<sandbox>")
        text = _SECRET_SHAPES.sub(REDACTED, text)
        text = redact_sandbox_paths(scrub_paths(text, self._roots))
        for relative in self._relative:
            text = text.replace(relative, "<sandbox>")
        return text


@dataclass
class StreamCapture:
    """The host's stdout lines with their arrival time (ms since the session started), capped."""

    redact: Redactor
    cap_bytes: int = STREAM_CAP_BYTES
    started: float = field(default_factory=time.monotonic)
    started_at: str = field(default_factory=lambda: iso_utc(datetime.now(timezone.utc)))  # what ``t`` counts from
    head: list[tuple[int, str]] = field(default_factory=list)
    tail: deque[tuple[int, str]] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    kept_bytes: int = 0
    total_bytes: int = 0
    dropped_lines: int = 0

    def add(self, line: str) -> None:
        entry = (int((time.monotonic() - self.started) * 1000), self.redact(line.rstrip("\r\n")))
        size = len(entry[1].encode("utf-8", "replace")) + 1
        self.total_bytes += size
        if not self.tail and self.kept_bytes + size <= self.cap_bytes:
            self.head.append(entry)
            self.kept_bytes += size
            return
        if len(self.tail) == self.tail.maxlen:
            self.dropped_lines += 1
        self.tail.append(entry)

    @property
    def truncated(self) -> bool:
        return self.dropped_lines > 0

    def lines(self) -> list[tuple[int, str]]:
        return self.head + list(self.tail)


# --------------------------------------------------------------------------- building


@dataclass
class _Builder:
    events: list[dict[str, Any]] = field(default_factory=list)
    turn: int = 0
    cumulative: int = 0
    max_tokens: int = 0
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


def neutral_input(value: object) -> dict[str, Any]:
    """A tool call's arguments with host-neutral names; a ``path`` in its shown form (``escape_path``),
    as the report names it."""
    fields = {_ARGUMENTS.get(k, k): v for k, v in _dict(value).items()}
    if isinstance(fields.get("path"), str):
        fields["path"] = escape_path(fields["path"])
    return fields


def _capped(text: str, limit: int) -> dict[str, Any]:
    if len(text) <= limit:
        return {"text": text, "chars": len(text), "truncated": False}
    return {"text": text[:limit], "chars": len(text), "truncated": True}


def _result_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(_dict(b).get("text", "")) for b in content if isinstance(b, dict))
    return "" if content is None else json.dumps(content)


def _claude(lines: Iterable[tuple[int, str]], b: _Builder) -> None:
    seen_messages: set[str] = set()
    tools: dict[str, str] = {}
    for t, line in lines:
        event = _json(line)
        if event is None:
            continue
        kind = event.get("type")
        agent = event.get("parent_tool_use_id") if isinstance(event.get("parent_tool_use_id"), str) else None
        if kind == "assistant":
            message = _dict(event.get("message"))
            message_id = message.get("id")
            if isinstance(message_id, str) and message_id not in seen_messages:
                seen_messages.add(message_id)
                if agent is None:
                    b.turn += 1
                usage = message.get("usage")
                if isinstance(usage, dict) and message.get("model") != SYNTHETIC_MODEL:
                    # message_start usage: input and cache exact, output_tokens only 1 (FACTS §3)
                    b.usage(t, claude_usage(usage), None, exact=False, agent=agent)
            for block in message.get("content") or []:
                block = _dict(block)
                if block.get("type") == "text" and block.get("text"):
                    b.emit(t, "text", agent=agent, **_capped(str(block["text"]), TEXT_CAP_CHARS))
                elif block.get("type") == "tool_use":
                    host_tool = str(block.get("name", ""))
                    tools[str(block.get("id"))] = host_tool
                    b.emit(t, "tool_call", id=block.get("id"), tool=_CLAUDE_TOOLS.get(host_tool, host_tool.lower()),
                           hostTool=host_tool, input=neutral_input(block.get("input")), agent=agent)
        elif kind == "user":
            for block in _dict(event.get("message")).get("content") or []:
                block = _dict(block)
                if block.get("type") == "tool_result":
                    host_tool = tools.get(str(block.get("tool_use_id")), "")
                    b.emit(t, "tool_result", id=block.get("tool_use_id"), tool=_CLAUDE_TOOLS.get(host_tool, host_tool.lower()),
                           isError=block.get("is_error") is True, agent=agent,
                           **_capped(_result_text(block.get("content")), RESULT_CAP_CHARS))
        elif kind == "system" and event.get("subtype") in ("task_started", "task_notification"):
            b.emit(t, "subagent", id=event.get("tool_use_id"), agent=event.get("subagent_type"),
                   description=event.get("description") or event.get("summary"),
                   status="started" if event.get("subtype") == "task_started" else event.get("status"))
        elif kind == "system" and event.get("subtype") == "api_retry":
            b.emit(t, "error", message=f"API retry {event.get('attempt')}: {event.get('error')} (HTTP {event.get('error_status')})")
        elif kind == "result":
            _claude_result(t, event, b)


def _claude_result(t: int, event: dict[str, Any], b: _Builder) -> None:
    # the same reading as the budget monitor's, so the totals equal the trial record's usage
    usage = claude_model_usage(_dict(event.get("modelUsage")))
    if usage is None and isinstance(event.get("usage"), dict):
        usage = claude_usage(event["usage"])
    cost = event.get("total_cost_usd")
    if event.get("is_error") is True:
        b.emit(t, "error", message=str(event.get("result") or event.get("subtype") or "error"))
    b.emit(t, "result", usage=usage.model_dump() if usage else None,
           costUsd=cost if isinstance(cost, (int, float)) else None, turns=event.get("num_turns"),
           stopReason=event.get("terminal_reason") or event.get("stop_reason"), isError=event.get("is_error") is True)


def _opencode(lines: Iterable[tuple[int, str]], b: _Builder) -> None:
    total: Usage | None = None
    cost_total: float | None = None
    for t, line in lines:
        event = _json(line)
        if event is None:
            continue
        kind = event.get("type")
        part = _dict(event.get("part"))
        if kind == "step_start":
            b.turn += 1
        elif kind == "text" and part.get("text"):
            b.emit(t, "text", agent=None, **_capped(str(part["text"]), TEXT_CAP_CHARS))
        elif kind == "tool_use":
            state = _dict(part.get("state"))
            tool = str(part.get("tool", ""))
            b.emit(t, "tool_call", id=part.get("callID"), tool=tool, hostTool=tool, input=neutral_input(state.get("input")), agent=None)
            failed = state.get("status") == "error"
            output = state.get("error") if failed else state.get("output")
            b.emit(t, "tool_result", id=part.get("callID"), tool=tool, isError=failed, agent=None,
                   **_capped(_result_text(output), RESULT_CAP_CHARS))
            child = _dict(state.get("metadata")).get("sessionId")
            if tool == "task":
                arguments = _dict(state.get("input"))
                b.emit(t, "subagent", id=child if isinstance(child, str) else part.get("callID"),
                       agent=arguments.get("subagent_type"), description=arguments.get("description"), status=state.get("status"))
        elif kind == "step_finish":
            tokens = part.get("tokens")
            step_cost = part.get("cost") if isinstance(part.get("cost"), (int, float)) else None
            if isinstance(tokens, dict):
                step = opencode_usage(tokens)
                total = step if total is None else sum_usage([total, step])
                b.usage(t, step, step_cost, exact=True)
            if step_cost is not None:
                cost_total = (cost_total or 0.0) + step_cost
        elif kind == "error":
            error = _dict(event.get("error"))
            message = _dict(error.get("data")).get("message")
            b.emit(t, "error", message=": ".join(str(p) for p in (error.get("name"), message) if p) or "error")
    last_t = b.events[-1]["t"] if b.events else 0
    # OpenCode has no summary event (FACTS §8): the totals are the sum of the steps.
    b.emit(last_t, "result", usage=total.model_dump() if total else None, costUsd=cost_total, turns=b.turn,
           stopReason=None, isError=any(e["type"] == "error" for e in b.events))


def build_transcript(capture: StreamCapture, *, host: str, dialect: str, scenario: str, trial: int,
                     max_tokens: int = 0, abort: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The transcript's lines: a header, then the events in stream order, then the abort if any."""
    b = _Builder(max_tokens=max_tokens)
    lines = capture.lines()
    (_claude if host == "claude-code" else _opencode)(lines, b)
    if capture.truncated:
        b.emit(b.events[-1]["t"] if b.events else 0, "truncated", droppedLines=capture.dropped_lines)
    if abort is not None:
        b.emit(lines[-1][0] if lines else 0, "abort", **abort)
    header = {"schema": TRANSCRIPT_SCHEMA, "type": "header", "host": host, "dialect": dialect, "scenario": scenario,
              "trial": trial, "startedAt": capture.started_at, "capBytes": capture.cap_bytes, "streamBytes": capture.total_bytes,
              "truncated": capture.truncated, "events": len(b.events)}
    return [header, *b.events]


def trial_dir(scenario: str, trial: int) -> str:
    """The trial's directory relative to the report (scenario names are slugs: safe as a path)."""
    return f"trials/{scenario}/{trial}"


def write_trial_files(out_dir: Path, capture: StreamCapture, transcript: list[dict[str, Any]],
                      scenario: str, trial: int) -> tuple[str, str]:
    """Write both files; returns their paths relative to ``out_dir`` (the report's directory)."""
    rel = trial_dir(scenario, trial)
    stream = "".join(line + "\n" for _, line in capture.lines())
    atomic_write_bytes(out_dir / rel / HOST_STREAM_FILE, stream.encode("utf-8", "replace"))
    text = "".join(json.dumps(event, ensure_ascii=False) + "\n" for event in transcript)
    atomic_write_bytes(out_dir / rel / TRANSCRIPT_FILE, text.encode("utf-8", "replace"))
    return f"{rel}/{TRANSCRIPT_FILE}", f"{rel}/{HOST_STREAM_FILE}"


def read_transcript(path: Path) -> list[dict[str, Any]]:
    """A transcript file's events (the header first); unreadable lines are skipped."""
    events = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        value = _json(line)
        if value is not None:
            events.append(value)
    return events
