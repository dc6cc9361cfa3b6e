"""Summaries: hand-computed median/MAD, NDJSON == array, legacy rules, correctness first."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from pytest_atlante.atlas.receipts import ProblemLog, ReceiptReader
from pytest_atlante.atlas.summarize import summarize_file, summarize_stream
from pytest_atlante.diagnostics import DiagnosticError

from ._builders import DROP, REPO, make_receipt, ndjson

LEGACY = dict(
    query_metrics_schema=DROP,
    response_bytes=DROP,
    read_back_calls=DROP,
    follow_up_queries=DROP,
    truncated_queries=DROP,
)


def summarize(data: bytes) -> dict[str, Any]:
    return summarize_stream(ReceiptReader(io.BytesIO(data), ProblemLog("r.ndjson")))


def failure(data: bytes) -> DiagnosticError:
    with pytest.raises(DiagnosticError) as info:
        summarize(data)
    return info.value


def test_odd_count_median_and_mad_by_hand() -> None:
    # file_reads 1, 2, 9 -> median 2; |dev| = 1, 0, 7 -> MAD 1
    data = ndjson([make_receipt(trial=i + 1, file_reads=v) for i, v in enumerate([9, 1, 2])])
    assert summarize(data)["metrics"]["file_reads"] == {"samples": 3, "median": 2.0, "mad": 1.0}


def test_even_count_median_and_mad_by_hand() -> None:
    # 1, 2, 4, 10 -> median (2+4)/2 = 3; |dev| = 2, 1, 1, 7 -> sorted 1, 1, 2, 7 -> MAD 1.5
    values = [10, 1, 4, 2]
    data = ndjson([make_receipt(trial=i + 1, duration_ms=v) for i, v in enumerate(values)])
    assert summarize(data)["metrics"]["duration_ms"] == {"samples": 4, "median": 3.0, "mad": 1.5}


def test_ties_median_and_mad_by_hand() -> None:
    # 5, 5, 5, 7, 100 -> median 5; |dev| = 0, 0, 0, 2, 95 -> MAD 0
    values = [5, 7, 5, 100, 5]
    data = ndjson([make_receipt(trial=i + 1, tool_calls=v) for i, v in enumerate(values)])
    assert summarize(data)["metrics"]["tool_calls"] == {"samples": 5, "median": 5.0, "mad": 0.0}


def test_even_count_with_ties_by_hand() -> None:
    # 3, 3, 3, 3, 8, 8 -> median 3; |dev| = 0, 0, 0, 0, 5, 5 -> MAD 0
    values = [8, 3, 3, 8, 3, 3]
    data = ndjson([make_receipt(trial=i + 1, graph_calls=v) for i, v in enumerate(values)])
    assert summarize(data)["metrics"]["graph_calls"] == {"samples": 6, "median": 3.0, "mad": 0.0}


def test_per_arm_and_aggregate_use_the_same_calculation() -> None:
    atlas = [make_receipt(arm="atlas", trial=t, file_reads=v) for t, v in [(1, 2), (2, 4), (3, 9)]]
    base = [make_receipt(arm="baseline", trial=t, file_reads=v) for t, v in [(1, 20), (2, 30)]]
    summary = summarize(ndjson(atlas + base))
    assert summary["arms"]["atlas"]["metrics"]["file_reads"] == {
        "samples": 3, "median": 4.0, "mad": 2.0,
    }
    # 20, 30 -> median 25, |dev| 5, 5 -> MAD 5
    assert summary["arms"]["baseline"]["metrics"]["file_reads"] == {
        "samples": 2, "median": 25.0, "mad": 5.0,
    }
    # 2, 4, 9, 20, 30 -> median 9; |dev| 7, 5, 0, 11, 21 -> MAD 7
    assert summary["metrics"]["file_reads"] == {"samples": 5, "median": 9.0, "mad": 7.0}
    assert summary["arms"]["atlas"]["receipts"] == 3
    assert summary["arms"]["baseline"]["receipts"] == 2


def test_output_shape_and_key_order() -> None:
    summary = summarize(ndjson([make_receipt(), make_receipt(correctness={"passed": False})]))
    assert list(summary) == ["receipts", "correctness", "metrics", "arms"]
    assert summary["receipts"] == 2
    assert summary["correctness"] == {"passed": 1, "failed": 1}
    assert list(summary["arms"]) == ["atlas"]  # only populated arms
    assert list(summary["metrics"]) == [
        "file_reads", "graph_calls", "tool_calls", "duration_ms", "context_bytes", "cost_usd",
        "response_bytes", "read_back_calls", "follow_up_queries", "truncated_queries",
        "query_metrics_receipts", "legacy_query_metrics_receipts",
    ]
    assert summary["arms"]["atlas"]["metrics"] == summary["metrics"]


def test_cost_absent_when_no_receipt_reports_it() -> None:
    summary = summarize(ndjson([make_receipt(cost_usd=DROP), make_receipt(trial=2, cost_usd=None)]))
    assert "cost_usd" not in summary["metrics"]
    assert "cost_usd" not in summary["arms"]["atlas"]["metrics"]


def test_cost_samples_count_only_receipts_with_a_cost() -> None:
    data = ndjson([
        make_receipt(cost_usd=0.1),
        make_receipt(trial=2, cost_usd=DROP),
        make_receipt(trial=3, cost_usd=0.3),
        make_receipt(arm="baseline", cost_usd=DROP),
    ])
    summary = summarize(data)
    assert summary["metrics"]["cost_usd"]["samples"] == 2
    assert summary["metrics"]["cost_usd"]["median"] == pytest.approx(0.2)
    assert "cost_usd" not in summary["arms"]["baseline"]["metrics"]


def test_legacy_receipts_counted_and_excluded_from_query_distributions() -> None:
    data = ndjson([
        make_receipt(response_bytes=100, read_back_calls=1),
        make_receipt(trial=2, response_bytes=300, read_back_calls=3),
        make_receipt(trial=3, **LEGACY),
        make_receipt(arm="baseline", **LEGACY),
    ])
    summary = summarize(data)
    metrics = summary["metrics"]
    assert metrics["query_metrics_receipts"] == 2
    assert metrics["legacy_query_metrics_receipts"] == 2
    # legacy zeros would have pulled the median to 50; they are excluded instead
    assert metrics["response_bytes"] == {"samples": 2, "median": 200.0, "mad": 100.0}
    assert metrics["read_back_calls"]["samples"] == 2
    assert metrics["file_reads"]["samples"] == 4  # base metrics still count every receipt
    baseline = summary["arms"]["baseline"]["metrics"]
    assert baseline["legacy_query_metrics_receipts"] == 1
    assert baseline["query_metrics_receipts"] == 0
    assert baseline["response_bytes"] == {"samples": 0, "median": 0.0, "mad": 0.0}


def test_missing_correctness_refuses_any_aggregate() -> None:
    data = ndjson([make_receipt(), make_receipt(trial=2, correctness=DROP)])
    error = failure(data)
    assert [(d.code, d.location, d.message) for d in error.diagnostics] == [
        (
            "atlas-receipts-ungraded",
            "line 2",
            "receipt lacks a correctness verdict; no aggregate is computed",
        )
    ]


def test_missing_correctness_located_by_index_in_arrays() -> None:
    data = json.dumps([make_receipt(correctness=DROP)]).encode()
    assert [d.location for d in failure(data).diagnostics] == ["$[0]"]


@pytest.mark.parametrize("data", [b"", b"\n\n  \n", b"[]", b"  [ ]\n"])
def test_empty_input_rejected(data: bytes) -> None:
    (diag,) = failure(data).diagnostics
    assert diag.code == "atlas-receipts-empty"
    assert diag.message == "the receipt file holds no receipts"


def test_schema_errors_reported_before_aggregation() -> None:
    data = ndjson([make_receipt(), make_receipt(arm="control")])
    (diag,) = failure(data).diagnostics
    assert (diag.code, diag.location) == ("atlas-receipts-invalid", "line 2, $.arm")


def test_ndjson_blank_lines_skipped_and_array_gives_identical_summary() -> None:
    receipts = [
        make_receipt(arm=arm, trial=t, file_reads=t * 3 + (arm == "baseline"), cost_usd=t / 10)
        for t in range(1, 5)
        for arm in ("atlas", "baseline")
    ] + [make_receipt(arm="baseline", trial=9, **LEGACY)]
    lines = ndjson(receipts).split(b"\n")
    spaced = b"\n\n".join(lines[:3]) + b"\n   \n" + b"\n".join(lines[3:]) + b"\n\n"
    from_ndjson = summarize(spaced)
    from_array = summarize(json.dumps(receipts, indent=2).encode())
    assert from_ndjson == from_array
    assert from_ndjson["receipts"] == 9


def test_checked_in_example_receipts_ndjson_and_array_agree() -> None:
    atlas_dir = REPO / "example_project/benchmarks/atlas"
    from_ndjson = summarize_file(atlas_dir / "receipts.ndjson")
    assert from_ndjson == summarize_file(atlas_dir / "receipts.json")
    assert from_ndjson["receipts"] == 48
    assert from_ndjson["metrics"]["legacy_query_metrics_receipts"] == 0


def test_unreadable_file_is_a_diagnostic(tmp_path: Any) -> None:
    with pytest.raises(DiagnosticError) as info:
        summarize_file(tmp_path / "missing.ndjson")
    (diag,) = info.value.diagnostics
    assert diag.code == "atlas-input-unreadable"
    assert diag.message == "cannot read input: it does not exist"
