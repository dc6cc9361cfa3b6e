"""Correctness-first summary of E0 receipts: counts, then median / MAD per metric and per arm.

Receipts are streamed: each one contributes its numbers to compact typed arrays and is then
dropped, so memory grows by a few machine words per receipt, never by a receipt object.  No
aggregate is computed unless every receipt carries a correctness verdict.

Output shape (every metrics object, aggregate or per arm, is computed the same way)::

    {"receipts": N, "correctness": {"passed": P, "failed": F},
     "metrics": METRICS, "arms": {"atlas": {"receipts", "correctness", "metrics"}, ...}}

where METRICS maps each metric name to ``{"samples", "median", "mad"}`` (``cost_usd`` only when a
receipt of that group reports a cost) and adds ``query_metrics_receipts`` and
``legacy_query_metrics_receipts``.  Legacy receipts (no ``query_metrics_schema``) are counted but
excluded from the four query-metric distributions.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_atlante.atlas.corpus import unreadable
from pytest_atlante.atlas.receipts import (
    BASE_METRICS,
    CODE_RECEIPTS_EMPTY,
    CODE_RECEIPTS_UNGRADED,
    QUERY_METRICS,
    ProblemLog,
    Receipt,
    ReceiptReader,
)
from pytest_atlante.atlas.stats import distribution
from pytest_atlante.diagnostics import Diagnostic, DiagnosticError
from pytest_atlante.fsutil import MAX_INPUT_BYTES, UnreadableFile, open_regular

ARM_ORDER = ("atlas", "baseline")


class ArmSamples:
    """The numeric samples and counts of one arm; nothing else of a receipt is kept."""

    __slots__ = ("cost", "failed", "legacy", "passed", "receipts", "samples", "versioned")

    def __init__(self) -> None:
        self.receipts = 0
        self.passed = 0
        self.failed = 0
        self.versioned = 0
        self.legacy = 0
        # 'Q' (unsigned 64-bit) holds every admissible measurement exactly in 8 bytes.
        self.samples: dict[str, array[int]] = {
            name: array("Q") for name in BASE_METRICS + QUERY_METRICS
        }
        self.cost: array[float] = array("d")

    def add(self, receipt: Receipt) -> None:
        self.receipts += 1
        if receipt.correctness is not None:
            if receipt.correctness.passed:
                self.passed += 1
            else:
                self.failed += 1
        samples = self.samples
        for name in BASE_METRICS:
            samples[name].append(getattr(receipt, name))
        if receipt.cost_usd is not None:
            self.cost.append(receipt.cost_usd)
        if receipt.query_metrics_schema is None:
            self.legacy += 1
            return
        self.versioned += 1
        for name in QUERY_METRICS:
            samples[name].append(getattr(receipt, name))


def _group_summaries(groups: Sequence[ArmSamples]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The aggregate summary over ``groups`` and one summary per group, computed alike.

    Each arm's samples are sorted once; the aggregate list is the concatenation of those sorted
    runs, which timsort merges in linear time.  ``stats`` sorts its input again, but sorted input
    keeps that linear too, and the absolute deviations of sorted data form two runs, so MAD stays
    near-linear.  One metric at a time is expanded into Python numbers, bounding peak memory.
    """
    aggregate: dict[str, Any] = {}
    per_group: list[dict[str, Any]] = [{} for _ in groups]
    for name in (*BASE_METRICS, "cost_usd", *QUERY_METRICS):
        parts = [sorted(g.cost if name == "cost_usd" else g.samples[name]) for g in groups]
        if name == "cost_usd" and not any(parts):
            continue  # no receipt reports a cost: the metric is absent, not zero
        for part, metrics in zip(parts, per_group, strict=True):
            if part or name != "cost_usd":
                metrics[name] = dict(distribution(part))
        merged = [value for part in parts for value in part]
        merged.sort()
        aggregate[name] = dict(distribution(merged))
    for group, metrics in zip([groups, *([g] for g in groups)], [aggregate, *per_group], strict=True):
        metrics["query_metrics_receipts"] = sum(g.versioned for g in group)
        metrics["legacy_query_metrics_receipts"] = sum(g.legacy for g in group)
    summaries = [_counts([g], m) for g, m in zip(groups, per_group, strict=True)]
    return _counts(groups, aggregate), summaries


def _counts(groups: Sequence[ArmSamples], metrics: dict[str, Any]) -> dict[str, Any]:
    return {
        "receipts": sum(g.receipts for g in groups),
        "correctness": {
            "passed": sum(g.passed for g in groups),
            "failed": sum(g.failed for g in groups),
        },
        "metrics": metrics,
    }


def summarize_stream(reader: ReceiptReader) -> dict[str, Any]:
    """Consume ``reader`` and return the summary, or raise every problem found."""
    arms = {arm: ArmSamples() for arm in ARM_ORDER}
    problems = reader.problems
    ungraded = ProblemLog(problems.file)
    for position, receipt in reader:
        if receipt.correctness is None:
            ungraded.add([_ungraded(problems.file, reader.location(position))])
        arms[receipt.arm].add(receipt)
    # Schema problems first: an ungraded verdict on an otherwise broken file is secondary.
    problems.raise_if_any()
    ungraded.raise_if_any()
    populated = [arm for arm in ARM_ORDER if arms[arm].receipts]
    if not populated:
        raise DiagnosticError(
            [
                Diagnostic(
                    file=problems.file,
                    location="",
                    code=CODE_RECEIPTS_EMPTY,
                    message="the receipt file holds no receipts",
                    hint="run the plan through scripts/atlas-eval/run-opt-in.sh first",
                )
            ]
        )
    summary, per_arm = _group_summaries([arms[arm] for arm in populated])
    summary["arms"] = dict(zip(populated, per_arm, strict=True))
    return summary


def _ungraded(file: str, location: str) -> Diagnostic:
    return Diagnostic(
        file=file,
        location=location,
        code=CODE_RECEIPTS_UNGRADED,
        message="receipt lacks a correctness verdict; no aggregate is computed",
        hint='grade every run and add "correctness": {"passed": true|false}',
    )


def summarize_file(path: Path) -> dict[str, Any]:
    """Open ``path`` and summarize it; unreadable files become ``atlas-input-unreadable``."""
    try:
        handle = open_regular(path, MAX_INPUT_BYTES)
    except UnreadableFile as exc:
        raise DiagnosticError([unreadable(path, exc)]) from None
    with handle:
        return summarize_stream(ReceiptReader(handle, ProblemLog(str(path))))
