"""What every host's stream monitor shares: the junk-tolerant line reader and the bounded values.

The trial engine feeds each stdout line to a host's monitor (``hosts/<host>/stream.py``), asks it
for the running token total to enforce ``maxTokens`` while the stream flows, and asks for the
:class:`SessionOutcome` at the end.  The monitors read their host's JSON lines with these helpers
and never raise on junk: a value that is no valid count or cost is ignored and noted.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pytest_atlante.records import Usage


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


def sum_usage(parts: list[Usage]) -> Usage:
    return Usage(
        inputTokens=sum(u.inputTokens for u in parts),
        outputTokens=sum(u.outputTokens for u in parts),
        cacheReadTokens=sum(u.cacheReadTokens for u in parts),
        cacheWriteTokens=sum(u.cacheWriteTokens for u in parts),
    )
