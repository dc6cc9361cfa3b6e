"""Diagnostics: the one shape every user-facing problem takes.

A diagnostic carries a stable ``code`` (``eval-…`` or ``atlas-…``), the ``file`` it concerns, a
``location`` inside that file (a JSON path such as ``$.checks[2].pattern`` or ``line 4``), a
``message`` saying what is wrong and a ``hint`` saying what to do.  Problems are collected, never
raised one at a time, so a single run reports every problem in every document.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

ENVELOPE_SCHEMA = "atlante/diagnostics-v1"


@dataclass(frozen=True, order=True)
class Diagnostic:
    """One problem found in user input or in the run's environment."""

    file: str
    location: str
    code: str
    message: str
    hint: str = ""

    def render(self) -> str:
        """Human-readable form: ``file:location: code: message`` plus an indented hint."""
        where = self.file or "<run>"
        if self.location:
            where = f"{where} at {self.location}"
        text = f"{self.code}: {where}: {self.message}"
        if self.hint:
            text += f"\n    hint: {self.hint}"
        return text

    def to_json(self) -> dict[str, str]:
        return asdict(self)


@dataclass
class DiagnosticError(Exception):
    """Raised at a boundary when validation produced diagnostics; carries all of them."""

    diagnostics: list[Diagnostic] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(d.render() for d in self.diagnostics)


def json_path(parts: Iterable[Any]) -> str:
    """Render a pydantic ``loc`` tuple (or any key sequence) as a JSON path: ``$.a[0].b``."""
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and part.replace("_", "a").replace("-", "a").isalnum():
            out += f".{part}"
        else:
            out += f"[{json.dumps(str(part))}]"
    return out


def envelope(diagnostics: Sequence[Diagnostic]) -> dict[str, Any]:
    """The machine-readable error envelope written beside the report (or printed by the CLI)."""
    ordered = sorted(set(diagnostics))
    return {
        "schema": ENVELOPE_SCHEMA,
        "ok": not ordered,
        "diagnostics": [d.to_json() for d in ordered],
    }
