"""Turn a JSON file into a strict pydantic model, or into diagnostics with stable codes.

Shared by the query corpus, the query results and the D4 receipt parsers so that every one of them
reports unreadable files, syntax errors, unknown fields and type errors the same way: a code built
from the document's prefix (``atlas-query-corpus``, ``atlas-query-results``, ``atlas-d4``), the
file, and the JSON path pydantic reports.  Parsing goes through ``model_validate_json`` (the Rust
JSON parser) because these files can hold hundreds of thousands of cases.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from pytest_atlante.diagnostics import Diagnostic, DiagnosticError, json_path
from pytest_atlante.fsutil import MAX_INPUT_BYTES, UnreadableFile, read_capped

ModelT = TypeVar("ModelT", bound=BaseModel)

# pydantic error types that mean "the document is not JSON at all"; they carry no useful location.
_SYNTAX_ERRORS = frozenset({"json_invalid", "json_type"})


def read_bytes(path: Path, prefix: str) -> bytes:
    """Read a whole input file; a missing, special or oversized file becomes ``<prefix>-unreadable``."""
    try:
        return read_capped(path, MAX_INPUT_BYTES)
    except UnreadableFile as exc:
        raise DiagnosticError(
            [
                Diagnostic(
                    file=str(path),
                    location="",
                    code=f"{prefix}-unreadable",
                    message=f"cannot read the file: it {exc.reason}",
                    hint="check the path passed on the command line or in atlante.jsonc",
                )
            ]
        ) from None


def validation_diagnostics(
    exc: ValidationError, file: str, prefix: str, hint: str
) -> list[Diagnostic]:
    """One diagnostic per pydantic error, located by JSON path.

    Unknown fields get their own code (``<prefix>-unknown-field``) because they are the most common
    authoring mistake (a typo in a field name) and deserve a precise hint.
    """
    out: list[Diagnostic] = []
    for err in exc.errors(include_url=False):
        kind = err["type"]
        location = "" if kind in _SYNTAX_ERRORS else json_path(err["loc"])
        if kind == "extra_forbidden":
            out.append(
                Diagnostic(
                    file=file,
                    location=location,
                    code=f"{prefix}-unknown-field",
                    message=f"unknown field {err['loc'][-1]!r}",
                    hint="remove the field or fix its spelling; unknown fields are rejected",
                )
            )
        else:
            out.append(
                Diagnostic(
                    file=file,
                    location=location,
                    code=f"{prefix}-invalid",
                    message=err["msg"],
                    hint=hint,
                )
            )
    return out


def parse_model(data: bytes, model: type[ModelT], file: str, prefix: str, hint: str) -> ModelT:
    """Validate ``data`` as ``model``; raise ``DiagnosticError`` carrying every problem found."""
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        raise DiagnosticError(validation_diagnostics(exc, file, prefix, hint)) from None
