"""Loading user documents (JSON and JSONC) with locations for every problem.

``suite.jsonc`` parses JSONC (comments, trailing commas) at the speed of JSON.  Duplicate keys are
rejected: keeping the last one would hide typos in hand-edited files.  Locations are JSON paths
where the problem is inside the data, and ``line N, column M`` where the text does not parse.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from pytest_atlante.checks import CHECK_TYPES
from pytest_atlante.diagnostics import Diagnostic, json_path
from pytest_atlante.fsutil import MAX_DOCUMENT_BYTES, UnreadableFile, read_capped
from pytest_atlante.suite import jsonc


@dataclass(frozen=True)
class LoadedDocument:
    path: Path
    display: str  # the path as shown in diagnostics (project-relative, posix)
    text: str
    data: Any

    def line_of_key(self, key: str, value: str | None = None) -> int:
        """1-based line of the first ``"key": value`` (or just ``"key"``); 1 when not found."""
        # One compiled pattern per key, not per value: a suite asks this of every scenario's name.
        for match in _key_pattern(key).finditer(self.text):
            if value is None or self.text.startswith(f'"{value}"', match.end()):
                return self.text.count("\n", 0, match.start()) + 1
        return 1


@functools.lru_cache(maxsize=64)
def _key_pattern(key: str) -> re.Pattern[str]:
    return re.compile(re.escape(f'"{key}"') + r"\s*:\s*")


def load_document(path: Path, display: str, code: str) -> LoadedDocument | Diagnostic:
    """Read and parse a JSON/JSONC document, or return the diagnostic that says why it cannot be."""
    try:
        raw = read_capped(path, MAX_DOCUMENT_BYTES)
    except UnreadableFile as exc:
        hint = "split or shrink the document" if exc.too_large else "point it at a readable regular file"
        return Diagnostic(display, "", code, f"cannot read file: it {exc.reason}", hint)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Diagnostic(display, f"byte {exc.start}", code, "file is not valid UTF-8", "save the file as UTF-8")
    try:
        data = jsonc.loads(text)
    except jsonc.JsoncError as exc:
        return Diagnostic(display, parse_location(exc), code, *_parse_problem(exc))
    return LoadedDocument(path, display, text, data)


def parse_location(error: jsonc.JsoncError) -> str:
    """Where a text does not parse, as diagnostics spell it."""
    return f"line {error.line}, column {error.column}"


def _parse_problem(error: jsonc.JsoncError) -> tuple[str, str]:
    if error.duplicate_key is not None:
        return f"duplicate key {error.duplicate_key!r}", "remove one of the two entries; JSON keys must be unique"
    return f"not valid JSON/JSONC: {error.message}", "fix the syntax (comments and trailing commas are allowed)"


def validation_diagnostics(error: ValidationError, file: str, code: str, hint: str) -> list[Diagnostic]:
    """One diagnostic per pydantic error, located by JSON path."""
    found = []
    for err in error.errors(include_url=False):
        loc = [part for part in err["loc"] if not _is_union_tag(part)]
        message = err["msg"]
        if err["type"] == "extra_forbidden":
            message = f"unknown key {str(loc[-1])!r}" if loc else "unknown key"
        elif err["type"] == "missing":
            message = f"missing required key {str(loc[-1])!r}" if loc else "missing required key"
        found.append(Diagnostic(file, json_path(loc), code, message, hint))
    return found


def _is_union_tag(part: int | str) -> bool:
    # pydantic inserts the discriminator value / function-validator names into ``loc`` for unions;
    # users never wrote those, so they are dropped from the JSON path.
    return isinstance(part, str) and (part.startswith("function-") or part in CHECK_TYPES)



def validate_model(model: type[BaseModel], doc: LoadedDocument, code: str, hint: str) -> tuple[Any, list[Diagnostic]]:
    try:
        return model.model_validate(doc.data), []
    except ValidationError as exc:
        return None, validation_diagnostics(exc, doc.display, code, hint)
