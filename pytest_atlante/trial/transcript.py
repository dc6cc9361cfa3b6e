"""Host-neutral transcripts (``atlante/transcript-v1``): what the agent did in one trial.

The trial engine hands every stdout line of the host session to a :class:`StreamCapture` (with
the time it arrived), alongside the budget monitor.  After the session, :func:`build_transcript`
has the host's own reader (``Host.transcript_events``, each adapter's stream shapes) turn the
captured lines into ordered, host-neutral events — assistant text, tool calls with a host-neutral
tool name and argument names, tool results (truncated, full size kept), per-turn usage,
subagent/skill calls, errors, the final totals — adds the header and the abort, and
:func:`write_trial_files` writes them, plus the raw stream, beside the report.  The schema is documented in
``docs/transcripts.md``.

Privacy: secrets (the trial's :class:`~pytest_atlante.sandbox.redact.Secrets`: known values and key
shapes, the one definition the report uses too) and sandbox paths are removed from every line *as it
is captured*, so neither file ever holds them.  Size: the raw stream kept in memory and
on disk is capped per trial (head kept, plus the last lines, which carry the outcome); the cap and
whether it was hit are written in the transcript's header.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytest_atlante.fsutil import atomic_write_bytes, read_capped
from pytest_atlante.hosts.base import SlashCommand, no_place, slash_command
from pytest_atlante.hosts.registry import host_for
from pytest_atlante.hosts.streams import (
    _event as _json,  # the monitors' junk-tolerant reader
)
from pytest_atlante.hosts.transcripts import TranscriptBuilder
from pytest_atlante.records import iso_utc
from pytest_atlante.sandbox.redact import (
    REDACTED,
    Secrets,
    redact_sandbox_paths,
    scrub_paths,
)

__all__ = ["HOST_STREAM_FILE", "REDACTED", "STREAM_CAP_BYTES", "TAIL_LINES", "TRANSCRIPT_FILE", "TRANSCRIPT_SCHEMA",
           "Redactor", "StreamCapture", "build_transcript", "read_transcript", "trial_dir", "write_trial_files"]

TRANSCRIPT_SCHEMA = "atlante/transcript-v1"
TRANSCRIPT_FILE = "transcript.jsonl"
HOST_STREAM_FILE = "host-stream.jsonl"
STREAM_CAP_BYTES = 2_000_000  # raw stream kept per trial (and written as host-stream.jsonl)
# A transcript is written from a capped stream; a bigger file is not one the runner wrote.
MAX_TRANSCRIPT_BYTES = 8 * STREAM_CAP_BYTES
TAIL_LINES = 64  # lines past the cap still kept: the end of a stream says how the session ended


class Redactor:
    """Removes secrets and sandbox paths from one captured line.

    What a secret is comes from ``secrets`` alone (the trial's own object, so a credential it learns
    later applies to the lines after); the other spellings of the trial's paths that a host writes
    into its stream come from the host (``Host.stream_path_forms``) as ``forms``.
    """

    def __init__(self, secrets: Secrets, roots: Sequence[str], forms: Iterable[str] = ()) -> None:
        self._secrets = secrets
        self._roots = list(roots)
        self._forms = sorted({form for form in forms if form}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        # Paths first, then secrets, as the report does: a key shape must not cut a sandbox path
        # (a scenario named "risk-assessment-…") so that the path is no longer recognised.  A host's
        # spelling holds no separator before "atlante-eval-", so the scrubbing leaves it whole.
        text = redact_sandbox_paths(scrub_paths(text, self._roots))
        for form in self._forms:
            text = text.replace(form, "<sandbox>")
        return self._secrets(text)


@dataclass
class StreamCapture:
    """The host's stdout lines with their arrival time (ms since the session started), capped."""

    redact: Redactor
    cap_bytes: int = STREAM_CAP_BYTES
    started: float = field(default_factory=time.monotonic)
    started_at: str = field(default_factory=lambda: iso_utc(datetime.now(UTC)))  # what ``t`` counts from
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
                     max_tokens: int = 0, abort: dict[str, Any] | None = None,
                     prompt: str | None = None) -> list[dict[str, Any]]:
    """The transcript's lines: a header, then the events in stream order, then the abort if any.

    The events come from the host's own reader (``Host.transcript_events``); this function adds
    what every host shares: the header, the ``command`` event of a ``/name`` prompt
    (:func:`command_event`), the truncation marker and the abort.
    """
    b = TranscriptBuilder(max_tokens=max_tokens)
    lines = capture.lines()
    reading = host_for(host)
    reading.transcript_events(lines, b)
    command = slash_command(prompt) if prompt is not None else None
    if command is not None and no_place(reading, "command") is None and expanded(b.events):
        b.events[:0] = [command_event(command, b.events[0]["t"] if b.events else 0)]
        for seq, event in enumerate(b.events, start=1):
            event["seq"] = seq
    if capture.truncated:
        b.emit(b.events[-1]["t"] if b.events else 0, "truncated", droppedLines=capture.dropped_lines)
    if abort is not None:
        b.emit(lines[-1][0] if lines else 0, "abort", **abort)
    header = {"schema": TRANSCRIPT_SCHEMA, "type": "header", "host": host, "dialect": dialect, "scenario": scenario,
              "trial": trial, "startedAt": capture.started_at, "capBytes": capture.cap_bytes, "streamBytes": capture.total_bytes,
              "truncated": capture.truncated, "events": len(b.events)}
    return [header, *b.events]


def expanded(events: Sequence[dict[str, Any]]) -> bool:
    """Whether the host took the prompt's command: it asked the model (a main-session ``usage``
    event) and did not answer that it has no such command (an ``error`` with ``unknownCommand``).

    No host's stream names the expansion itself (docs/host-facts.md §13: Claude Code, OpenCode
    and Gemini CLI each send the command's text as the first user message and stream nothing of
    it), and each takes a ``/name`` prompt only as its command: Claude Code answers an unknown one
    itself, OpenCode's ``run --command`` fails, Gemini CLI would send the text as it is, which
    validation prevents (the harness must define the command)."""
    if any(e.get("type") == "error" and e.get("unknownCommand") for e in events):
        return False
    return any(e.get("type") == "usage" and e.get("agent") is None for e in events)


def command_event(command: SlashCommand, t: int) -> dict[str, Any]:
    """The ``command`` event of the prompt's slash command: the first input of the session's first
    turn, recorded by the runner, which knows the prompt (a line the agent writes into the stream
    cannot make one: no reader turns a stream line into it)."""
    return {"seq": 1, "t": t, "type": "command", "turn": 1, "name": command.name, "arguments": command.arguments,
            "agent": None}


def trial_dir(scenario: str, trial: int, variant: str | None = None) -> str:
    """The trial's directory relative to the report (scenario and variant names are slugs: safe as
    a path); a variant run's trials sit under their arm, ``trials/<scenario>/<arm>/<N>``."""
    return f"trials/{scenario}/{trial}" if variant is None else f"trials/{scenario}/{variant}/{trial}"


def write_trial_files(out_dir: Path, capture: StreamCapture, transcript: list[dict[str, Any]],
                      scenario: str, trial: int, variant: str | None = None) -> tuple[str, str]:
    """Write both files; returns their paths relative to ``out_dir`` (the report's directory)."""
    rel = trial_dir(scenario, trial, variant)
    stream = "".join(line + "\n" for _, line in capture.lines())
    atomic_write_bytes(out_dir / rel / HOST_STREAM_FILE, stream.encode("utf-8", "replace"))
    text = "".join(json.dumps(event, ensure_ascii=False) + "\n" for event in transcript)
    atomic_write_bytes(out_dir / rel / TRANSCRIPT_FILE, text.encode("utf-8", "replace"))
    return f"{rel}/{TRANSCRIPT_FILE}", f"{rel}/{HOST_STREAM_FILE}"


def read_transcript(path: Path) -> list[dict[str, Any]]:
    """A transcript file's events (the header first); lines that are no event object are skipped.

    The file sits in the report directory, which a trial can write with isolation off, so it is
    read as untrusted input: a regular file of at most :data:`MAX_TRANSCRIPT_BYTES`, no symlink
    followed, never blocking on a FIFO (``fsutil.UnreadableFile`` says why not), and every event an
    object with a string ``type``."""
    data = read_capped(path, MAX_TRANSCRIPT_BYTES, follow_symlinks=False)
    events = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        value = _json(line)
        if value is not None and isinstance(value.get("type"), str):
            events.append(value)
    return events
