"""query-results-v1: every structural rejection happens before scoring, with code and location."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from atlas_query_builders import (
    codes_at,
    context_expectation,
    context_receipt,
    corpus,
    deep_set,
    diagnostics_of,
    fixture_case,
    observation,
    pinned_case,
    results,
)
from pytest_atlante.atlas.query_corpus import QueryCorpus, parse_corpus
from pytest_atlante.atlas.results import load_results, observations_from_value, parse_results

B5_CORPUS = corpus(fixture_case(context_expectation=context_expectation()), pinned_case())
B5_RESULTS = results(observation("fx", context_receipt=context_receipt()), observation("pin"))


def _corpus(doc: dict[str, Any]) -> QueryCorpus:
    return parse_corpus(json.dumps(doc).encode(), "corpus.json")


def _parse(doc: dict[str, Any], corpus_doc: dict[str, Any] | None = None) -> object:
    return parse_results(json.dumps(doc).encode(), _corpus(corpus_doc or corpus()), "results.json")


def test_matching_results_parse() -> None:
    assert set(_parse(results())) == {"fx", "pin"}  # type: ignore[call-overload]


def test_consistent_b5_receipt_parses() -> None:
    assert _parse(B5_RESULTS, B5_CORPUS)


BASE = results()
REJECTIONS: list[tuple[str, dict[str, Any], str, str]] = [
    ("wrong-version", results(version="v0"), "atlas-query-results-version-mismatch", "$.corpus_version"),
    ("wrong-schema", deep_set(BASE, "schema", "query-results-v0"), "atlas-query-results-invalid", "$.schema"),
    ("missing-observation", results(observation("fx")), "atlas-query-results-missing-observation", "$.observations"),
    ("duplicate-observation", results(observation("fx"), observation("pin"), observation("fx")),
     "atlas-query-results-duplicate-observation", "$.observations[2].case_id"),
    ("unknown-observation", results(observation("fx"), observation("pin"), observation("ghost")),
     "atlas-query-results-unknown-case", "$.observations[2].case_id"),
    ("unknown-field", deep_set(BASE, "observations.1.score", 0.3),
     "atlas-query-results-unknown-field", "$.observations[1].score"),
    ("negative-bytes", deep_set(BASE, "observations.0.response_bytes", -1),
     "atlas-query-results-invalid", "$.observations[0].response_bytes"),
    ("string-duration", deep_set(BASE, "observations.0.duration_ms", "10"),
     "atlas-query-results-invalid", "$.observations[0].duration_ms"),
    ("float-follow-ups", deep_set(BASE, "observations.1.follow_up_queries", 1.5),
     "atlas-query-results-invalid", "$.observations[1].follow_up_queries"),
    ("missing-evidence-field", {**BASE, "observations": [
        {k: v for k, v in observation("fx").items() if k != "evidence"}, observation("pin")]},
     "atlas-query-results-invalid", "$.observations[0].evidence"),
    ("repeated-ranked-symbol", deep_set(BASE, "observations.0.symbols", ["a", "b", "a"]),
     "atlas-query-results-duplicate-entry", "$.observations[0].symbols"),
    ("repeated-path", deep_set(BASE, "observations.0.paths", [["a", "b"], ["a", "b"]]),
     "atlas-query-results-duplicate-entry", "$.observations[0].paths"),
    ("diagnostic-kind", deep_set(BASE, "observations.0.diagnostics", [{"kind": "info", "code": "x"}]),
     "atlas-query-results-diagnostic-kind", "$.observations[0].diagnostics[0].kind"),
]


@pytest.mark.parametrize(("doc", "code", "location"), [r[1:] for r in REJECTIONS], ids=[r[0] for r in REJECTIONS])
def test_rejection(doc: dict[str, Any], code: str, location: str) -> None:
    assert (code, location) in codes_at(diagnostics_of(lambda: _parse(doc)))


def _b5(**receipt: Any) -> dict[str, Any]:
    return results(observation("fx", context_receipt=context_receipt(**receipt)), observation("pin"))


AT = "$.observations[0].context_receipt"
INCONSISTENT: list[tuple[str, dict[str, Any], str]] = [
    ("retrieval-does-not-add-up", _b5(retrieval={"candidates": 7, "returned": 4, "hard_cap_dropped": 2}),
     f"{AT}.retrieval"),
    ("returned-above-cap", _b5(limits={"retrieval_hard_cap": 3, "max_serialized_bytes": 1000}),
     f"{AT}.retrieval.returned"),
    ("dropped-below-cap", _b5(limits={"retrieval_hard_cap": 5, "max_serialized_bytes": 1000}),
     f"{AT}.retrieval.hard_cap_dropped"),
    ("projection-input", _b5(projection={"input": 5, "relevant": 4, "relevance_dropped": 1, "retained": 4,
                                         "retention_dropped": 0}), f"{AT}.projection.input"),
    ("relevance-does-not-add-up", _b5(projection={"input": 4, "relevant": 3, "relevance_dropped": 2,
                                                  "retained": 3, "retention_dropped": 0}), f"{AT}.projection"),
    ("retention-does-not-add-up", _b5(projection={"input": 4, "relevant": 3, "relevance_dropped": 1,
                                                  "retained": 1, "retention_dropped": 1}), f"{AT}.projection"),
    ("bytes-over-limit", _b5(limits={"retrieval_hard_cap": 4, "max_serialized_bytes": 99}),
     f"{AT}.serialized_bytes"),
    ("omission-counts-disagree", _b5(omissions=[{"stage": "retrieval-hard-cap", "class": "low-rank", "count": 2}]),
     f"{AT}.omissions"),
    ("omission-listed-twice", _b5(omissions=[
        {"stage": "retrieval-hard-cap", "class": "low-rank", "count": 1},
        {"stage": "retrieval-hard-cap", "class": "low-rank", "count": 1},
        {"stage": "projection-relevance", "class": "low-rank", "count": 1}]), f"{AT}.omissions"),
    ("bytes-disagree", _b5(serialized_bytes=101), f"{AT}.serialized_bytes"),
    ("follow-ups-disagree", _b5(follow_up_queries=2), f"{AT}.follow_up_queries"),
    ("read-back-disagrees", _b5(read_back_calls=1), f"{AT}.read_back_calls"),
]


@pytest.mark.parametrize(("doc", "location"), [r[1:] for r in INCONSISTENT], ids=[r[0] for r in INCONSISTENT])
def test_impossible_context_receipt_is_rejected(doc: dict[str, Any], location: str) -> None:
    found = codes_at(diagnostics_of(lambda: _parse(doc, B5_CORPUS)))
    assert ("atlas-query-results-context-inconsistent", location) in found, found


def test_b5_case_without_receipt_is_rejected() -> None:
    found = codes_at(diagnostics_of(lambda: _parse(results(), B5_CORPUS)))
    assert found == {("atlas-query-results-context-missing", AT)}


def test_receipt_unknown_field_and_schema() -> None:
    found = codes_at(diagnostics_of(lambda: _parse(_b5(schema="ctx-v0", extra=1), B5_CORPUS)))
    assert {("atlas-query-results-invalid", f"{AT}.schema"),
            ("atlas-query-results-unknown-field", f"{AT}.extra")} <= found


def test_receipt_bad_graph_fingerprint() -> None:
    found = codes_at(diagnostics_of(lambda: _parse(_b5(graph_fingerprint="xyz"), B5_CORPUS)))
    assert found == {("atlas-query-results-invalid", f"{AT}.graph_fingerprint")}


def test_missing_results_file(tmp_path: Path) -> None:
    diags = diagnostics_of(lambda: load_results(tmp_path / "none.json", _corpus(corpus())))
    assert [d.code for d in diags] == ["atlas-query-results-unreadable"]


def test_fixture_value_forms() -> None:
    parsed = _corpus(corpus())
    as_list = observations_from_value([observation("fx"), observation("pin")], parsed, "fixture")
    as_doc = observations_from_value(results(), parsed, "fixture")
    assert set(as_list) == set(as_doc) == {"fx", "pin"}
    found = codes_at(diagnostics_of(lambda: observations_from_value([observation("fx")], parsed, "fixture")))
    assert found == {("atlas-query-results-missing-observation", "$.observations")}
    found = codes_at(diagnostics_of(lambda: observations_from_value([{"case_id": "fx"}], parsed, "fixture")))
    assert ("atlas-query-results-invalid", "$[0].symbols") in found
