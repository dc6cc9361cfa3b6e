"""Strict E0 receipts and a streaming reader for JSON-array or NDJSON receipt files.

A receipt is what an external agent command reports for one planned run.  The model enforces the
reference's receipt rules:

* unknown fields are rejected; ``arm`` is ``atlas`` or ``baseline``; ``trial`` is positive;
  the five base measurements are unsigned integers; ``cost_usd`` is optional, finite, >= 0;
* query measurements are versioned: with ``query_metrics_schema`` all four must be present; without
  it the receipt is *legacy* and any query measurement it carries must be zero (pre-schema
  producers deserialize omitted measurements as zero), so missing values can never improve a
  comparison;
* the D4 triplet (``atlas_serving_mode``, ``concurrent_query_receipt_path``,
  ``concurrent_query_receipt_hash``) is all-or-none, with a non-empty path and a 64-hex SHA-256.

``correctness`` is optional *in the model* so that a missing verdict is reported by the summarizer
as its own, correctness-first error (``atlas-receipts-ungraded``) rather than as a schema error.
A JSON ``null`` on an optional field means the same as omitting it, as in the reference's serde
producers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated, BinaryIO, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from pytest_atlante.atlas.corpus import pydantic_diagnostics
from pytest_atlante.diagnostics import Diagnostic, DiagnosticError

QUERY_METRICS_SCHEMA = "agent-spec/atlas-eval/query-metrics-v1"
BASE_METRICS = ("file_reads", "graph_calls", "tool_calls", "duration_ms", "context_bytes")
QUERY_METRICS = ("response_bytes", "read_back_calls", "follow_up_queries", "truncated_queries")
D4_FIELDS = ("atlas_serving_mode", "concurrent_query_receipt_path", "concurrent_query_receipt_hash")

CODE_RECEIPTS_INVALID = "atlas-receipts-invalid"
CODE_RECEIPTS_EMPTY = "atlas-receipts-empty"
CODE_RECEIPTS_UNGRADED = "atlas-receipts-ungraded"

# Reports stay readable for a file with a million bad lines; the count of the rest is kept.
MAX_REPORTED_PROBLEMS = 20

_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
# Unsigned 64-bit, the range of the reference's producers.
Unsigned = Annotated[int, Field(ge=0, le=2**64 - 1)]


class Correctness(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    passed: bool


class Receipt(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    case_id: Annotated[str, Field(min_length=1)]
    arm: Literal["atlas", "baseline"]
    trial: Annotated[int, Field(ge=1, le=2**32 - 1)]
    correctness: Correctness | None = None
    file_reads: Unsigned
    graph_calls: Unsigned
    tool_calls: Unsigned
    duration_ms: Unsigned
    context_bytes: Unsigned
    cost_usd: Annotated[float, Field(ge=0)] | None = None
    query_metrics_schema: str | None = None
    response_bytes: Unsigned | None = None
    read_back_calls: Unsigned | None = None
    follow_up_queries: Unsigned | None = None
    truncated_queries: Unsigned | None = None
    atlas_serving_mode: Literal["direct", "worker"] | None = None
    concurrent_query_receipt_path: str | None = None
    concurrent_query_receipt_hash: str | None = None

    @model_validator(mode="after")
    def _query_metrics_rules(self) -> Receipt:
        schema = self.query_metrics_schema
        if schema is None:
            nonzero = [name for name in QUERY_METRICS if getattr(self, name)]
            if nonzero:
                raise PydanticCustomError(
                    "unversioned_query_metrics",
                    "non-zero query measurements {fields} without query_metrics_schema",
                    {"fields": ", ".join(nonzero)},
                )
        else:
            if schema != QUERY_METRICS_SCHEMA:
                raise PydanticCustomError(
                    "unknown_query_metrics_schema",
                    "unknown query_metrics_schema '{schema}'; expected '{expected}'",
                    {"schema": schema, "expected": QUERY_METRICS_SCHEMA},
                )
            missing = [name for name in QUERY_METRICS if getattr(self, name) is None]
            if missing:
                raise PydanticCustomError(
                    "partial_query_metrics",
                    "query_metrics_schema is set but {fields} missing",
                    {"fields": ", ".join(missing) + (" is" if len(missing) == 1 else " are")},
                )
        return self

    @model_validator(mode="after")
    def _d4_triplet_rules(self) -> Receipt:
        present = [name for name in D4_FIELDS if getattr(self, name) is not None]
        if not present:
            return self
        if len(present) != len(D4_FIELDS):
            missing = [name for name in D4_FIELDS if name not in present]
            raise PydanticCustomError(
                "partial_d4_metadata",
                "partial D4 metadata: {present} given without {missing}",
                {"present": ", ".join(present), "missing": ", ".join(missing)},
            )
        if not (self.concurrent_query_receipt_path or "").strip():
            raise PydanticCustomError(
                "empty_d4_path", "concurrent_query_receipt_path must not be empty"
            )
        digest = self.concurrent_query_receipt_hash or ""
        if not _SHA256_HEX.fullmatch(digest):
            raise PydanticCustomError(
                "invalid_d4_hash",
                "concurrent_query_receipt_hash must be 64 lowercase hex characters (SHA-256), "
                "got '{digest}'",
                {"digest": digest},
            )
        return self


_RECEIPT_LIST: TypeAdapter[list[Receipt]] = TypeAdapter(list[Receipt])


class ProblemLog:
    """Collects diagnostics across a whole file, keeping only the first few in memory."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.kept: list[Diagnostic] = []
        self.total = 0

    def add(self, diagnostics: list[Diagnostic]) -> None:
        self.total += len(diagnostics)
        room = MAX_REPORTED_PROBLEMS - len(self.kept)
        if room > 0:
            self.kept.extend(diagnostics[:room])

    def raise_if_any(self) -> None:
        if not self.total:
            return
        kept = list(self.kept)
        if self.total > len(kept):
            kept.append(
                Diagnostic(
                    file=self.file,
                    location="",
                    code=kept[-1].code,
                    message=f"{self.total - len(kept)} further problems not shown",
                    hint="fix the problems above and run again to see the rest",
                )
            )
        raise DiagnosticError(kept)


class ReceiptReader:
    """Typed-parses a receipt candidate, yielding ``(position, receipt)`` one at a time.

    NDJSON is validated line by line and nothing but the current receipt is alive at once, so
    memory does not grow with the file.  A file whose first non-blank byte is ``[`` is a JSON array
    and is validated as a whole.  Invalid receipts go to ``problems``; the caller decides when to
    raise, after the whole file has been read, so one run reports every bad line.
    """

    def __init__(self, handle: BinaryIO, problems: ProblemLog) -> None:
        self._handle = handle
        self.problems = problems
        self.is_array = False

    def location(self, position: int) -> str:
        """Where receipt ``position`` sits: ``$[i]`` in an array, ``line N`` in NDJSON."""
        return f"$[{position}]" if self.is_array else f"line {position}"

    def __iter__(self) -> Iterator[tuple[int, Receipt]]:
        lines = iter(self._handle)
        lineno = 0
        for line in lines:
            lineno += 1
            stripped = line.strip()
            if not stripped:
                continue
            if stripped.startswith(b"["):
                self.is_array = True
                yield from self._array(line + self._handle.read())
                return
            yield from self._ndjson(line, lineno, lines)
            return

    def _array(self, data: bytes) -> Iterator[tuple[int, Receipt]]:
        try:
            receipts = _RECEIPT_LIST.validate_json(data)
        except ValidationError as exc:
            self.problems.add(
                pydantic_diagnostics(exc, file=self.problems.file, code=CODE_RECEIPTS_INVALID)
            )
            return
        yield from enumerate(receipts)

    def _ndjson(
        self, first: bytes, first_lineno: int, rest: Iterator[bytes]
    ) -> Iterator[tuple[int, Receipt]]:
        validate = Receipt.model_validate_json
        lineno = first_lineno
        line = first
        while True:
            if line.strip():
                try:
                    receipt = validate(line)
                except ValidationError as exc:
                    self.problems.add(
                        pydantic_diagnostics(
                            exc, file=self.problems.file, code=CODE_RECEIPTS_INVALID, line=lineno
                        )
                    )
                else:
                    yield lineno, receipt
            next_line = next(rest, None)
            if next_line is None:
                return
            line = next_line
            lineno += 1
