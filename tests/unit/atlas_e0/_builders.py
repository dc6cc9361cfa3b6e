"""Builders for the E0 harness tests: a valid corpus, a valid receipt, NDJSON bytes."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
QUERY_SCHEMA = "agent-spec/atlas-eval/query-metrics-v1"
HASH = "ab" * 32

BASE_CASE: dict[str, Any] = {
    "id": "symbol-lookup",
    "size": "small",
    "task_class": "symbol",
    "repository": "fixtures/atlas/basic",
    "revision": "a2d4282",
    "trials_per_arm": 3,
    "rubric": ["Names the defining file."],
    "permissions": "read-only",
    "cache_condition": "cold",
}


def make_corpus(*cases: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema": "agent-spec/atlas-eval/corpus-v1",
        "model": "offline-fixture-model",
        "prompt": "Produce an evidence-backed answer.",
        "cases": [copy.deepcopy(c) for c in (cases or (BASE_CASE,))],
    }


def make_receipt(**overrides: Any) -> dict[str, Any]:
    receipt: dict[str, Any] = {
        "case_id": "symbol-lookup",
        "arm": "atlas",
        "trial": 1,
        "correctness": {"passed": True},
        "file_reads": 12,
        "graph_calls": 3,
        "tool_calls": 9,
        "duration_ms": 842,
        "context_bytes": 12000,
        "cost_usd": 0.04,
        "query_metrics_schema": QUERY_SCHEMA,
        "response_bytes": 24000,
        "read_back_calls": 1,
        "follow_up_queries": 2,
        "truncated_queries": 0,
        "atlas_serving_mode": "worker",
        "concurrent_query_receipt_path": "benchmarks/atlas/concurrent-query-receipt-v1.json",
        "concurrent_query_receipt_hash": HASH,
    }
    for key, value in overrides.items():
        if value is DROP:
            receipt.pop(key, None)
        else:
            receipt[key] = value
    return receipt


DROP = object()


def ndjson(receipts: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in receipts).encode()
