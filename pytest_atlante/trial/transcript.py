"""Host-neutral transcripts (``atlante/transcript-v1``): what the agent did in one trial.

The trial engine hands every stdout line of the host session to a :class:`StreamCapture` (with
the time it arrived), alongside the budget monitor.  After the session, :func:`build_transcript`
has the host's own reader (``Host.transcript_events``, each adapter's stream shapes) turn the
captured lines into ordered, host-neutral events — assistant text, tool calls with a host-neutral
tool name and argument names, tool results (truncated, full size kept), per-turn usage,
subagent/skill calls, errors, the final totals — adds the header and the abort, and
:func:`write_trial_files` writes them, plus the raw stream, beside the report.  The schema is documented in
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
from typing import Any, Mapping, Sequence

from pytest_atlante.fsutil import atomic_write_bytes
from pytest_atlante.hosts.registry import host_for
from pytest_atlante.hosts.streams import _event as _json  # the monitors' junk-tolerant reader
from pytest_atlante.hosts.transcripts import TranscriptBuilder
from pytest_atlante.records import iso_utc
from pytest_atlante.sandbox.redact import redact_sandbox_paths, scrub_paths

TRANSCRIPT_SCHEMA = "atlante/transcript-v1"
TRANSCRIPT_FILE = "transcript.jsonl"
HOST_STREAM_FILE = "host-stream.jsonl"
STREAM_CAP_BYTES = 2_000_000  # raw stream kept per trial (and written as host-stream.jsonl)
TAIL_LINES = 64  # lines past the cap still kept: the end of a stream says how the session ended
REDACTED = "<redacted>"

# Environment variables whose values are credentials, by name.  Short values ("1", "true") are
# switches, not secrets, and replacing them would mangle the stream.
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|PRIVATE", re.IGNORECASE)
_SECRET_MIN_CHARS = 8
# Credential shapes that need no environment variable to be recognised.
_SECRET_SHAPES = re.compile(r"sk-(?:ant-)?[A-Za-z0-9_-]{16,}|(?i:bearer)\s+[A-Za-z0-9._~+/=-]{16,}")

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


def build_transcript(capture: StreamCapture, *, host: str, dialect: str, scenario: str, trial: int,
                     max_tokens: int = 0, abort: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The transcript's lines: a header, then the events in stream order, then the abort if any.

    The events come from the host's own reader (``Host.transcript_events``); this function adds
    what every host shares: the header, the truncation marker and the abort.
    """
    b = TranscriptBuilder(max_tokens=max_tokens)
    lines = capture.lines()
    host_for(host).transcript_events(lines, b)
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
