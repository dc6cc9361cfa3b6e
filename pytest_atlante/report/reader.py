"""The one reader of eval reports: every command that reads a ``report.json`` reads it here.

``atlante view``, ``atlante compare``, ``atlante report merge``, ``--atlante-forecast`` and
``--atlante-max-cost`` (which read every earlier report of the project), the ``--atlante-baseline``
gate and the pack provenance view all take reports that someone else wrote, so each read is:

- **capped and regular files only**: ``fsutil.read_capped`` opens without blocking and refuses a
  FIFO, a device or a file over ``MAX_REPORT_BYTES`` (a FIFO named ``report.json`` used to hang
  three of those commands);
- **strict JSON**: a duplicate key, ``NaN``/``Infinity``, an integer of thousands of digits or a
  nesting deeper than the interpreter allows is refused, so two readers can never see two
  different reports in one file;
- **validated** against ``EvalReport``.

:func:`read_sealed_as` is the fast path for a reader of many reports that needs a few fields
(``atlante history``): the seal is verified on the bytes first, so the document is one a run of
this user's wrote (no duplicate key, no ``NaN``: the writer emits none), and only the fields of the
caller's narrow model are validated, by pydantic's own JSON parser (about 0.2 ms instead of 2.5 ms
for a 60 KB report: benchmarks/history_read.py).

A refusal is a :class:`ReportRejected` with a stable ``code`` (``report-missing``,
``report-too-large``, ``report-unsafe``, ``report-unreadable``, ``report-unsealed``,
``report-malformed``, ``report-invalid``) and a reason; :func:`load_report` turns it into the caller's diagnostic code.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from pydantic import BaseModel, ValidationError

from pytest_atlante.diagnostics import Diagnostic, DiagnosticError, json_path
from pytest_atlante.fsutil import UnreadableFile, no_duplicate_keys, read_capped
from pytest_atlante.report.model import MAX_REPORT_BYTES, EvalReport
from pytest_atlante.report.seal import is_sealed

__all__ = ["ReportRejected", "load_report", "parse_json", "read_bytes", "read_report", "read_sealed_as", "validate"]

View = TypeVar("View", bound=BaseModel)

# Anything longer is not a count or a duration a report could hold (and Python's int() is
# quadratic in the length of what it converts).
MAX_INT_DIGITS = 19
# How many validation errors a diagnostic lists for one report.
_SHOWN_ERRORS = 20
_HINT = "pass the path of a report.json written by an eval run"
# The refusals that mean "no report could be read" (as opposed to "what was read is no report").
_UNREADABLE = ("report-missing", "report-too-large", "report-unsafe", "report-unreadable")


class ReportRejected(Exception):
    """Why a report cannot be used: a stable ``code``, a reason, and (for schema errors) where."""

    def __init__(self, code: str, reason: str, locations: list[tuple[str, str]] | None = None) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.locations = locations or []   # (JSON path, message) per schema error


def _reject(code: str, reason: str) -> NoReturn:
    raise ReportRejected(code, reason)


def read_bytes(path: Path, *, follow_symlinks: bool = True) -> bytes:
    """The report file's bytes: a regular file of at most ``MAX_REPORT_BYTES``, never blocking."""
    try:
        return read_capped(path, MAX_REPORT_BYTES, follow_symlinks=follow_symlinks)
    except UnreadableFile as exc:
        if exc.missing:
            _reject("report-missing", "no report at that path")
        if exc.too_large:
            _reject("report-too-large", f"the report {exc.reason}")
        if "regular file" in exc.reason:
            _reject("report-unsafe", f"the report path {exc.reason}")
        _reject("report-unreadable", f"the report {exc.reason}")


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"non-finite number {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("number out of range")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError("integer too large")
    return int(text)


def parse_json(data: bytes) -> Any:
    """The document in ``data``, parsed strictly (see the module docstring)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        _reject("report-malformed", "the report is not UTF-8 text")
    try:
        return json.loads(text, object_pairs_hook=no_duplicate_keys, parse_constant=_no_constant,
                          parse_float=_finite_float, parse_int=_bounded_int)
    except RecursionError:
        _reject("report-malformed", "the report is nested too deeply")
    except ValueError as exc:  # JSONDecodeError is a ValueError, so are the hooks' refusals
        _reject("report-malformed", f"the report is not valid JSON: {exc}")


def validate(document: Any, *, strict: bool = False) -> EvalReport:
    """``document`` as an ``EvalReport``; ``strict`` refuses any coercion (the provenance view)."""
    try:
        return EvalReport.model_validate(document, strict=strict)
    except ValidationError as exc:
        locations = [(json_path(e["loc"]), e["msg"]) for e in exc.errors()[:_SHOWN_ERRORS]]
        shown = "; ".join(f"{where}: {message}" for where, message in locations[:3])
        more = exc.error_count() - min(3, len(locations))
        raise ReportRejected("report-invalid", shown + (f" (and {more} more)" if more > 0 else ""),
                             locations) from None


def read_report(path: Path, *, follow_symlinks: bool = True, sealed: bool = False) -> EvalReport:
    """Read, parse and validate the report at ``path``; ``ReportRejected`` says why not.

    ``sealed``: for a reader that picks reports up without being given them (``report/seal.py``):
    only a report whose seal verifies over the bytes read is used (``report-unsealed``)."""
    data = read_bytes(path, follow_symlinks=follow_symlinks)
    report = validate(parse_json(data))
    if sealed and not is_sealed(path, data):
        _reject("report-unsealed", "the report carries no valid seal of a run of this user's (a file a trial, "
                "or anyone, wrote there by hand)")
    return report


def read_sealed_as(path: Path, view: type[View], *, follow_symlinks: bool = False) -> View:
    """The sealed report at ``path`` read as ``view``, a narrow model of the fields the caller needs
    (extra fields ignored): ``report-unsealed`` before anything is parsed when the seal does not
    verify, ``report-malformed`` / ``report-invalid`` when the sealed bytes do not fit ``view``."""
    data = read_bytes(path, follow_symlinks=follow_symlinks)
    if not is_sealed(path, data):
        _reject("report-unsealed", "the report carries no valid seal of a run of this user's")
    try:
        return view.model_validate_json(data)
    except ValidationError as exc:
        code = "report-malformed" if any(e["type"] == "json_invalid" for e in exc.errors()) else "report-invalid"
        _reject(code, f"the report does not fit {view.__name__}: {exc.errors()[0]['msg']}")


def load_report(path: Path, code: str, *, hint: str = _HINT, unreadable_code: str | None = None) -> EvalReport:
    """``read_report`` for a command: a refusal is a ``DiagnosticError`` with ``code`` (or
    ``unreadable_code`` when the file cannot be read at all), one diagnostic per schema error."""
    try:
        return read_report(path)
    except ReportRejected as exc:
        raise DiagnosticError(diagnostics_for(path, exc, code, hint=hint, unreadable_code=unreadable_code)) from None


def diagnostics_for(path: Path, rejected: ReportRejected, code: str, *, hint: str = _HINT,
                    unreadable_code: str | None = None) -> list[Diagnostic]:
    display = str(path)
    if rejected.code in _UNREADABLE and unreadable_code is not None:
        code = unreadable_code
    if rejected.code == "report-invalid":
        schema_hint = "this is not an atlante/eval-report-v1 document (or it was edited)"
        return [Diagnostic(display, where, code, message, schema_hint) for where, message in rejected.locations]
    reason = rejected.reason
    if rejected.code in _UNREADABLE:
        reason = f"cannot read the report: {reason.removeprefix('the report ')}"
    return [Diagnostic(display, "", code, reason, hint)]
