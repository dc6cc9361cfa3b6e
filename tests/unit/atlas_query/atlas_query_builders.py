"""Builders for small query corpora and results used by the atlas_query tests.

Each builder returns a plain dict that is valid on its own; tests override the one field they are
about, so every test states exactly what it changes.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_atlante.diagnostics import Diagnostic, DiagnosticError

PINNED_REVISION = "0123456789abcdef0123456789abcdef01234567"
FINGERPRINT = "ab" * 32


def fixture_case(case_id: str = "fx", **overrides: Any) -> dict[str, Any]:
    case: dict[str, Any] = {
        "id": case_id,
        "tier": "deterministic-fixture",
        "repository": "fixtures/atlas/basic",
        "query": f"question {case_id}",
        "expected_symbols": ["a"],
        "expected_paths": [],
        "forbidden_symbols": [],
        "forbidden_paths": [],
        "required_evidence": ["ev"],
        "required_diagnostics": [],
        "allowed_ambiguity": 0,
        "rubric": ["is right"],
        "source_ref": "issue #1",
    }
    case.update(overrides)
    return case


def pinned_case(case_id: str = "pin", paired: str = "fx", **overrides: Any) -> dict[str, Any]:
    case = fixture_case(case_id, tier="pinned-repository", repository="https://example.com/r.git",
                        revision=PINNED_REVISION, paired_fixture=paired)
    case.update(overrides)
    return case


def corpus(*cases: dict[str, Any], version: str = "v1") -> dict[str, Any]:
    chosen = list(cases) or [fixture_case(), pinned_case()]
    return {"schema": "agent-spec/atlas-eval/query-corpus-v1", "version": version, "cases": chosen}


def observation(case_id: str = "fx", **overrides: Any) -> dict[str, Any]:
    obs: dict[str, Any] = {
        "case_id": case_id,
        "symbols": ["a"],
        "paths": [],
        "evidence": ["ev"],
        "diagnostics": [],
        "response_bytes": 100,
        "duration_ms": 10,
        "read_back_calls": 0,
        "follow_up_queries": 0,
    }
    obs.update(overrides)
    return obs


def results(*observations: dict[str, Any], version: str = "v1") -> dict[str, Any]:
    chosen = list(observations) or [observation("fx"), observation("pin")]
    return {"schema": "agent-spec/atlas-eval/query-results-v1", "corpus_version": version,
            "observations": chosen}


def context_expectation(**overrides: Any) -> dict[str, Any]:
    exp: dict[str, Any] = {
        "schema": "agent-spec/atlas-eval/context-expectation-v1",
        "profile": "compact",
        "limits": {"retrieval_hard_cap": 4, "max_serialized_bytes": 1000},
        "retrieval_loss": "required",
        "projection_loss": "allowed",
        "read_back": "forbidden",
        "omission_classes": ["low-rank"],
    }
    exp.update(overrides)
    return exp


def context_receipt(**overrides: Any) -> dict[str, Any]:
    """A consistent receipt: 6 candidates, 4 kept at the cap, 2 dropped; 3 relevant, all retained."""
    rec: dict[str, Any] = {
        "schema": "agent-spec/atlas-eval/context-receipt-v1",
        "profile": "compact",
        "limits": {"retrieval_hard_cap": 4, "max_serialized_bytes": 1000},
        "retrieval": {"candidates": 6, "returned": 4, "hard_cap_dropped": 2},
        "projection": {"input": 4, "relevant": 3, "relevance_dropped": 1, "retained": 3, "retention_dropped": 0},
        "serialized_bytes": 100,
        "omissions": [
            {"stage": "retrieval-hard-cap", "class": "low-rank", "count": 2},
            {"stage": "projection-relevance", "class": "low-rank", "count": 1},
        ],
        "graph_fingerprint": FINGERPRINT,
        "read_back_calls": 0,
        "follow_up_queries": 0,
        "load_profile": "steady",
    }
    rec.update(overrides)
    return rec


def deep_set(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """Copy ``doc`` and set a dotted path (integers index lists): ``cases.0.rubric``."""
    out = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node: Any = out
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return out


def write_json(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return path


def diagnostics_of(action: Callable[[], object]) -> list[Diagnostic]:
    try:
        action()
    except DiagnosticError as exc:
        return exc.diagnostics
    raise AssertionError("expected a DiagnosticError, got none")


def codes_at(diags: list[Diagnostic]) -> set[tuple[str, str]]:
    return {(d.code, d.location) for d in diags}
