"""query-corpus-v1: every rejection the reference lists, each with its code and location."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from atlas_query_builders import (
    codes_at,
    context_expectation,
    corpus,
    deep_set,
    diagnostics_of,
    fixture_case,
    pinned_case,
    write_json,
)
from pytest_atlante.atlas.query_corpus import load_corpus, parse_corpus

EXAMPLE = Path(__file__).resolve().parents[3] / "example_project/benchmarks/atlas/query-corpus.json"


def _parse(doc: dict[str, Any]) -> object:
    import json

    return parse_corpus(json.dumps(doc).encode(), "corpus.json")


def test_example_corpus_is_valid_with_both_tiers_and_b5_cases() -> None:
    parsed = load_corpus(EXAMPLE)
    tiers = {c.tier for c in parsed.cases}
    assert tiers == {"deterministic-fixture", "pinned-repository"}
    assert any(c.context_expectation is not None for c in parsed.cases)


def test_minimal_corpus_is_valid() -> None:
    _parse(corpus())


def test_ambiguity_at_the_bounds_is_accepted() -> None:
    _parse(corpus(fixture_case(allowed_ambiguity=64), pinned_case(allowed_ambiguity=0)))


def test_fixture_case_may_carry_a_revision() -> None:
    _parse(corpus(fixture_case(revision="a2d4282"), pinned_case()))


BASE = corpus()
REJECTIONS: list[tuple[str, dict[str, Any], str, str]] = [
    ("unknown-case-field", deep_set(BASE, "cases.0.colour", "red"),
     "atlas-query-corpus-unknown-field", "$.cases[0].colour"),
    ("unknown-top-field", deep_set(BASE, "extra", 1), "atlas-query-corpus-unknown-field", "$.extra"),
    ("wrong-schema", deep_set(BASE, "schema", "agent-spec/atlas-eval/corpus-v1"),
     "atlas-query-corpus-invalid", "$.schema"),
    ("empty-version", deep_set(BASE, "version", ""), "atlas-query-corpus-invalid", "$.version"),
    ("unknown-tier", deep_set(BASE, "cases.0.tier", "fixture"), "atlas-query-corpus-invalid", "$.cases[0].tier"),
    ("bool-ambiguity", deep_set(BASE, "cases.0.allowed_ambiguity", True),
     "atlas-query-corpus-invalid", "$.cases[0].allowed_ambiguity"),
    ("duplicate-id", corpus(fixture_case(), pinned_case(), fixture_case()),
     "atlas-query-corpus-duplicate-id", "$.cases[2].id"),
    ("duplicate-expected-symbol", deep_set(BASE, "cases.0.expected_symbols", ["a", "a"]),
     "atlas-query-corpus-duplicate-entry", "$.cases[0].expected_symbols"),
    ("duplicate-expected-path", deep_set(BASE, "cases.0.expected_paths", [["a", "b"], ["a", "b"]]),
     "atlas-query-corpus-duplicate-entry", "$.cases[0].expected_paths"),
    ("duplicate-forbidden-symbol", deep_set(BASE, "cases.0.forbidden_symbols", ["z", "z"]),
     "atlas-query-corpus-duplicate-entry", "$.cases[0].forbidden_symbols"),
    ("duplicate-evidence", deep_set(BASE, "cases.1.required_evidence", ["e", "e"]),
     "atlas-query-corpus-duplicate-entry", "$.cases[1].required_evidence"),
    ("duplicate-diagnostic", deep_set(BASE, "cases.0.required_diagnostics",
                                      [{"kind": "stale", "code": "s"}, {"kind": "stale", "code": "s"}]),
     "atlas-query-corpus-duplicate-entry", "$.cases[0].required_diagnostics"),
    ("empty-expected-symbols", deep_set(BASE, "cases.0.expected_symbols", []),
     "atlas-query-corpus-empty-list", "$.cases[0].expected_symbols"),
    ("empty-required-evidence", deep_set(BASE, "cases.0.required_evidence", []),
     "atlas-query-corpus-empty-list", "$.cases[0].required_evidence"),
    ("empty-rubric", deep_set(BASE, "cases.1.rubric", []), "atlas-query-corpus-empty-list", "$.cases[1].rubric"),
    ("empty-rubric-item", deep_set(BASE, "cases.0.rubric", ["ok", ""]),
     "atlas-query-corpus-empty-entry", "$.cases[0].rubric[1]"),
    ("empty-path", deep_set(BASE, "cases.0.expected_paths", [[]]),
     "atlas-query-corpus-empty-entry", "$.cases[0].expected_paths[0]"),
    ("symbol-conflict", deep_set(BASE, "cases.0.forbidden_symbols", ["a"]),
     "atlas-query-corpus-conflict", "$.cases[0].forbidden_symbols"),
    ("path-conflict", deep_set(deep_set(BASE, "cases.0.expected_paths", [["a", "b"]]),
                               "cases.0.forbidden_paths", [["a", "b"]]),
     "atlas-query-corpus-conflict", "$.cases[0].forbidden_paths"),
    ("short-revision", deep_set(BASE, "cases.1.revision", "a2d4282"),
     "atlas-query-corpus-mutable-revision", "$.cases[1].revision"),
    ("branch-revision", deep_set(BASE, "cases.1.revision", "main"),
     "atlas-query-corpus-mutable-revision", "$.cases[1].revision"),
    ("uppercase-revision", deep_set(BASE, "cases.1.revision", "0123456789ABCDEF0123456789ABCDEF01234567"),
     "atlas-query-corpus-mutable-revision", "$.cases[1].revision"),
    ("missing-revision", corpus(fixture_case(), pinned_case(revision=None)),
     "atlas-query-corpus-mutable-revision", "$.cases[1].revision"),
    ("pinned-in-fixtures", deep_set(BASE, "cases.1.repository", "fixtures/atlas/basic"),
     "atlas-query-corpus-pinned-in-fixtures", "$.cases[1].repository"),
    ("pinned-in-dot-fixtures", deep_set(BASE, "cases.1.repository", "./fixtures/big"),
     "atlas-query-corpus-pinned-in-fixtures", "$.cases[1].repository"),
    ("fixture-outside-fixtures", deep_set(BASE, "cases.0.repository", "https://example.com/r.git"),
     "atlas-query-corpus-fixture-location", "$.cases[0].repository"),
    ("paired-fixture-missing", corpus(fixture_case(), pinned_case(paired_fixture=None)),
     "atlas-query-corpus-paired-fixture", "$.cases[1].paired_fixture"),
    ("paired-fixture-unknown", deep_set(BASE, "cases.1.paired_fixture", "nope"),
     "atlas-query-corpus-paired-fixture", "$.cases[1].paired_fixture"),
    ("paired-fixture-to-pinned", corpus(fixture_case(), pinned_case(), pinned_case("pin2", paired="pin")),
     "atlas-query-corpus-paired-fixture", "$.cases[2].paired_fixture"),
    ("paired-fixture-on-fixture", deep_set(BASE, "cases.0.paired_fixture", "fx"),
     "atlas-query-corpus-paired-fixture", "$.cases[0].paired_fixture"),
    ("ambiguity-above-64", deep_set(BASE, "cases.0.allowed_ambiguity", 65),
     "atlas-query-corpus-ambiguity-range", "$.cases[0].allowed_ambiguity"),
    ("ambiguity-negative", deep_set(BASE, "cases.1.allowed_ambiguity", -1),
     "atlas-query-corpus-ambiguity-range", "$.cases[1].allowed_ambiguity"),
    ("diagnostic-kind", deep_set(BASE, "cases.0.required_diagnostics", [{"kind": "warning", "code": "w"}]),
     "atlas-query-corpus-diagnostic-kind", "$.cases[0].required_diagnostics[0].kind"),
    ("no-pinned-tier", corpus(fixture_case()), "atlas-query-corpus-tier-missing", "$.cases"),
    ("no-fixture-tier", corpus(pinned_case(paired="x")), "atlas-query-corpus-tier-missing", "$.cases"),
    ("context-expectation-unknown-field",
     deep_set(BASE, "cases.0.context_expectation", context_expectation(budget=3)),
     "atlas-query-corpus-unknown-field", "$.cases[0].context_expectation.budget"),
    ("context-expectation-wrong-schema",
     deep_set(BASE, "cases.0.context_expectation", context_expectation(schema="context-v0")),
     "atlas-query-corpus-invalid", "$.cases[0].context_expectation.schema"),
    ("context-expectation-omissions-without-loss",
     deep_set(BASE, "cases.0.context_expectation",
              context_expectation(retrieval_loss="none", projection_loss="none")),
     "atlas-query-corpus-context-expectation", "$.cases[0].context_expectation.omission_classes"),
    ("context-expectation-unknown-load-profile",
     deep_set(BASE, "cases.0.context_expectation", context_expectation(load_profile="heavy")),
     "atlas-query-corpus-invalid", "$.cases[0].context_expectation.load_profile"),
]


@pytest.mark.parametrize(("doc", "code", "location"), [r[1:] for r in REJECTIONS], ids=[r[0] for r in REJECTIONS])
def test_rejection(doc: dict[str, Any], code: str, location: str) -> None:
    diags = diagnostics_of(lambda: _parse(doc))
    assert (code, location) in codes_at(diags), diags
    assert all(d.file == "corpus.json" and d.hint for d in diags)


def test_every_problem_is_reported_at_once() -> None:
    doc = corpus(fixture_case(expected_symbols=[], rubric=[]), pinned_case(revision="HEAD"))
    found = codes_at(diagnostics_of(lambda: _parse(doc)))
    assert {
        ("atlas-query-corpus-empty-list", "$.cases[0].expected_symbols"),
        ("atlas-query-corpus-empty-list", "$.cases[0].rubric"),
        ("atlas-query-corpus-mutable-revision", "$.cases[1].revision"),
    } <= found


def test_invalid_json_is_a_diagnostic_not_a_traceback() -> None:
    diags = diagnostics_of(lambda: parse_corpus(b'{"schema": ', "corpus.json"))
    assert [d.code for d in diags] == ["atlas-query-corpus-invalid"]


def test_missing_file_is_unreadable(tmp_path: Path) -> None:
    diags = diagnostics_of(lambda: load_corpus(tmp_path / "absent.json"))
    assert [(d.code, d.file) for d in diags] == [("atlas-query-corpus-unreadable", str(tmp_path / "absent.json"))]


def test_load_corpus_reads_a_file(tmp_path: Path) -> None:
    assert load_corpus(write_json(tmp_path / "c.json", corpus(version="2026.1"))).version == "2026.1"
