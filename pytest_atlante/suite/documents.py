"""Loading user documents (JSON and JSONC) with locations for every problem.

json5 parses JSONC (comments, trailing commas).  Duplicate keys are rejected: json5 would silently
keep the last one, which hides typos in hand-edited files.  Locations are JSON paths where the
problem is inside the data, and ``line N`` where the text itself does not parse.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import json5
from pydantic import BaseModel, ValidationError

from pytest_atlante.checks import CHECK_TYPES
from pytest_atlante.diagnostics import Diagnostic, json_path
from pytest_atlante.fsutil import MAX_DOCUMENT_BYTES, UnreadableFile, read_capped


class DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key = key


def _reject_duplicates(pairs: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise DuplicateKeyError(key)
        result[key] = value
    return result


@dataclass(frozen=True)
class LoadedDocument:
    path: Path
    display: str  # the path as shown in diagnostics (project-relative, posix)
    text: str
    data: Any

    def line_of_key(self, key: str, value: str | None = None) -> int:
        """1-based line of the first ``"key": value`` (or just ``"key"``); 1 when not found."""
        pattern = re.escape(f'"{key}"') + r"\s*:"
        if value is not None:
            pattern += r"\s*" + re.escape(f'"{value}"')
        match = re.search(pattern, self.text)
        return self.text.count("\n", 0, match.start()) + 1 if match else 1


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
        # Plain JSON first: the stdlib parser is ~100x faster than json5 (a suite of thousands of
        # scenario documents is parsed at every start), and JSON is JSONC.  Anything else, errors
        # included, goes through json5, whose messages carry the line.
        data = json.loads(text, object_pairs_hook=_reject_duplicates)
    except (ValueError, RecursionError):
        pass
    else:
        return LoadedDocument(path, display, text, data)
    try:
        data = json5.loads(text, object_pairs_hook=_reject_duplicates)
    except (ValueError, RecursionError) as exc:
        # json5 re-wraps exceptions raised by the pairs hook, so the duplicate is recognised by text.
        duplicate = re.search(r"duplicate key '(.*)'", str(exc))
        if isinstance(exc, DuplicateKeyError) or duplicate:
            key = exc.key if isinstance(exc, DuplicateKeyError) else duplicate.group(1) if duplicate else ""
            line = _line_of_second(text, key)
            return Diagnostic(display, f"line {line}", code, f"duplicate key {key!r}", "remove one of the two entries; JSON keys must be unique")
        return Diagnostic(display, _parse_location(str(exc)), code, f"not valid JSON/JSONC: {_parse_message(str(exc))}", "fix the syntax (comments and trailing commas are allowed)")
    return LoadedDocument(path, display, text, data)


def _line_of_second(text: str, key: str) -> int:
    matches = list(re.finditer(re.escape(f'"{key}"') + r"\s*:", text))
    if len(matches) < 2:
        matches = list(re.finditer(re.escape(key) + r"\s*:", text))
    match = matches[1] if len(matches) > 1 else (matches[0] if matches else None)
    return text.count("\n", 0, match.start()) + 1 if match else 1


def _parse_location(message: str) -> str:
    match = re.match(r"<string>:(\d+)", message)
    return f"line {match.group(1)}" if match else "line 1"


def _parse_message(message: str) -> str:
    return re.sub(r"^<string>:\d+\s*", "", message) or message


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
    return isinstance(part, str) and (part.startswith("function-") or part in _CHECK_TAGS)


_CHECK_TAGS = CHECK_TYPES


def validate_model(model: type[BaseModel], doc: LoadedDocument, code: str, hint: str) -> tuple[Any, list[Diagnostic]]:
    try:
        return model.model_validate(doc.data), []
    except ValidationError as exc:
        return None, validation_diagnostics(exc, doc.display, code, hint)
