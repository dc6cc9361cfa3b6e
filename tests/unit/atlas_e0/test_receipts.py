"""Receipt rules: each rejection has its own test; messages and locations are checked."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from pytest_atlante.atlas.receipts import ProblemLog, Receipt, ReceiptReader
from pytest_atlante.diagnostics import Diagnostic

from ._builders import DROP, make_receipt, ndjson


def read(data: bytes) -> tuple[list[Receipt], list[Diagnostic]]:
    log = ProblemLog("r.ndjson")
    receipts = [r for _, r in ReceiptReader(io.BytesIO(data), log)]
    return receipts, log.kept


def rejected(**overrides: Any) -> Diagnostic:
    receipts, problems = read(ndjson([make_receipt(**overrides)]))
    assert receipts == []
    assert len(problems) == 1, problems
    assert problems[0].code == "atlas-receipts-invalid"
    return problems[0]


def test_reference_example_receipt_is_valid() -> None:
    receipts, problems = read(ndjson([make_receipt()]))
    assert problems == []
    assert receipts[0].correctness is not None and receipts[0].correctness.passed


def test_unknown_field_rejected() -> None:
    diag = rejected(notes="x")
    assert diag.location == "line 1, $.notes"
    assert diag.message == "unknown field 'notes' is not allowed"


def test_unknown_correctness_field_rejected() -> None:
    diag = rejected(correctness={"passed": True, "score": 1})
    assert diag.location == "line 1, $.correctness.score"


def test_correctness_passed_must_be_boolean() -> None:
    diag = rejected(correctness={"passed": "yes"})
    assert diag.location == "line 1, $.correctness.passed"
    assert diag.message == "Input should be a valid boolean"


def test_bad_arm_rejected() -> None:
    diag = rejected(arm="control")
    assert diag.location == "line 1, $.arm"
    assert diag.message == "Input should be 'atlas' or 'baseline'"


@pytest.mark.parametrize("trial", [0, -1])
def test_trial_must_be_positive(trial: int) -> None:
    diag = rejected(trial=trial)
    assert diag.location == "line 1, $.trial"
    assert diag.message == "Input should be greater than or equal to 1"


@pytest.mark.parametrize(
    "field", ["file_reads", "graph_calls", "tool_calls", "duration_ms", "context_bytes"]
)
def test_base_measurements_are_required_unsigned_integers(field: str) -> None:
    assert rejected(**{field: -1}).message == "Input should be greater than or equal to 0"
    assert rejected(**{field: 1.5}).message == "Input should be a valid integer"
    assert rejected(**{field: DROP}).message == "required field is missing"


def test_negative_cost_rejected() -> None:
    diag = rejected(cost_usd=-0.01)
    assert diag.location == "line 1, $.cost_usd"
    assert diag.message == "Input should be greater than or equal to 0"


def test_non_finite_cost_rejected() -> None:
    line = json.dumps(make_receipt()).replace('"cost_usd": 0.04', '"cost_usd": 1e400')
    _, problems = read(line.encode())
    assert [(d.location, d.message) for d in problems] == [
        ("line 1, $.cost_usd", "Input should be a finite number")
    ]


def test_cost_is_optional() -> None:
    receipts, problems = read(ndjson([make_receipt(cost_usd=DROP)]))
    assert problems == [] and receipts[0].cost_usd is None


def test_versioned_receipt_missing_a_query_measurement_rejected() -> None:
    diag = rejected(read_back_calls=DROP)
    assert diag.location == "line 1, $"
    assert diag.message == "query_metrics_schema is set but read_back_calls is missing"


def test_unknown_query_metrics_schema_rejected() -> None:
    diag = rejected(query_metrics_schema="agent-spec/atlas-eval/query-metrics-v9")
    assert diag.message == (
        "unknown query_metrics_schema 'agent-spec/atlas-eval/query-metrics-v9'; "
        "expected 'agent-spec/atlas-eval/query-metrics-v1'"
    )


def test_unversioned_non_zero_query_measurement_rejected() -> None:
    diag = rejected(
        query_metrics_schema=DROP,
        response_bytes=0,
        read_back_calls=DROP,
        follow_up_queries=3,
        truncated_queries=0,
    )
    assert diag.message == "non-zero query measurements follow_up_queries without query_metrics_schema"


def test_legacy_receipt_without_query_fields_accepted() -> None:
    legacy = make_receipt(
        query_metrics_schema=DROP,
        response_bytes=DROP,
        read_back_calls=DROP,
        follow_up_queries=DROP,
        truncated_queries=DROP,
    )
    receipts, problems = read(ndjson([legacy]))
    assert problems == [] and receipts[0].query_metrics_schema is None


def test_legacy_receipt_with_explicit_zeroes_accepted() -> None:
    legacy = make_receipt(
        query_metrics_schema=DROP,
        response_bytes=0,
        read_back_calls=0,
        follow_up_queries=0,
        truncated_queries=0,
    )
    _, problems = read(ndjson([legacy]))
    assert problems == []


@pytest.mark.parametrize(
    "dropped",
    [
        ["atlas_serving_mode"],
        ["concurrent_query_receipt_path"],
        ["concurrent_query_receipt_hash"],
        ["concurrent_query_receipt_path", "concurrent_query_receipt_hash"],
    ],
)
def test_partial_d4_triplet_rejected(dropped: list[str]) -> None:
    diag = rejected(**{name: DROP for name in dropped})
    assert diag.message.startswith("partial D4 metadata: ")
    assert diag.message.endswith("without " + ", ".join(dropped))


def test_d4_triplet_absent_accepted() -> None:
    receipt = make_receipt(
        atlas_serving_mode=DROP,
        concurrent_query_receipt_path=DROP,
        concurrent_query_receipt_hash=DROP,
    )
    assert read(ndjson([receipt]))[1] == []


def test_bad_d4_mode_rejected() -> None:
    assert rejected(atlas_serving_mode="daemon").message == "Input should be 'direct' or 'worker'"


def test_empty_d4_path_rejected() -> None:
    diag = rejected(concurrent_query_receipt_path="")
    assert diag.message == "concurrent_query_receipt_path must not be empty"


@pytest.mark.parametrize("digest", ["ab" * 31, "ab" * 33, "zz" * 32, "AB" * 32])
def test_invalid_d4_hash_rejected(digest: str) -> None:
    diag = rejected(concurrent_query_receipt_hash=digest)
    assert diag.message == (
        "concurrent_query_receipt_hash must be 64 lowercase hex characters (SHA-256), "
        f"got '{digest}'"
    )


def test_invalid_json_line_reports_its_line_number() -> None:
    data = ndjson([make_receipt()]) + b"\n{not json}\n" + ndjson([make_receipt(trial=2)])
    receipts, problems = read(data)
    assert [r.trial for r in receipts] == [1, 2]
    assert len(problems) == 1
    assert problems[0].location == "line 3, $"
    assert problems[0].message.startswith("Invalid JSON")


def test_array_errors_are_located_by_index() -> None:
    data = json.dumps([make_receipt(), make_receipt(arm="x")]).encode()
    receipts, problems = read(data)
    assert receipts == []
    assert [d.location for d in problems] == ["$[1].arm"]


def test_problem_report_is_capped_but_counts_everything() -> None:
    bad = ndjson([make_receipt(arm="x")] * 25)
    log = ProblemLog("r.ndjson")
    list(ReceiptReader(io.BytesIO(bad), log))
    assert log.total == 25 and len(log.kept) == 20
