"""Scoring rules with hand-computed expectations on small corpora."""

from __future__ import annotations

import json
from typing import Any

import ir_measures
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ir_measures import RR, Qrel, ScoredDoc

from atlas_query_builders import (
    context_expectation,
    context_receipt,
    corpus,
    fixture_case,
    observation,
    pinned_case,
    results,
)
from pytest_atlante.atlas.query_corpus import parse_corpus
from pytest_atlante.atlas.results import parse_results
from pytest_atlante.atlas.score import CaseScore, build_receipt, regression_line, score_corpus


def _score(cases: list[dict[str, Any]], observations: list[dict[str, Any]]) -> list[CaseScore]:
    parsed = parse_corpus(json.dumps(corpus(*cases)).encode(), "c.json")
    obs = parse_results(json.dumps(results(*observations)).encode(), parsed, "r.json")
    return score_corpus(parsed, obs)


def _one(case: dict[str, Any], obs: dict[str, Any]) -> CaseScore:
    """Score one fixture case (a trivially passing pinned case keeps the corpus two-tiered)."""
    return _score([case, pinned_case()], [obs, observation("pin")])[0]


def test_second_rank_hit_with_one_extra() -> None:
    # expected a, b; returned x, b, a -> first expected at rank 2, x is the one extra result.
    s = _one(fixture_case(expected_symbols=["a", "b"], allowed_ambiguity=1), observation(symbols=["x", "b", "a"]))
    assert (s["symbol_recall"], s["reciprocal_rank"], s["extra_results"], s["passed"]) == (1.0, 0.5, 1, True)


def test_extra_results_above_ambiguity_fail() -> None:
    s = _one(fixture_case(expected_symbols=["a", "b"]), observation(symbols=["x", "b", "a"]))
    assert not s["passed"]
    assert s["failures"] == ["extra results 1 exceed allowed_ambiguity 0"]


def test_no_expected_symbol_returned() -> None:
    s = _one(fixture_case(expected_symbols=["a", "b"], allowed_ambiguity=5), observation(symbols=["x", "y"]))
    assert (s["symbol_recall"], s["reciprocal_rank"]) == (0.0, 0.0)
    assert s["failures"][0] == "missing expected symbols: a, b"


def test_partial_recall_one_of_three() -> None:
    s = _one(fixture_case(expected_symbols=["a", "b", "c"]), observation(symbols=["c"]))
    assert s["symbol_recall"] == pytest.approx(1 / 3)
    assert s["reciprocal_rank"] == 1.0
    assert s["failures"] == ["missing expected symbols: a, b"]


def test_ambiguity_at_the_bound_passes_and_one_over_fails() -> None:
    extras = [f"x{i}" for i in range(64)]
    at_bound = _one(fixture_case(allowed_ambiguity=64), observation(symbols=["a", *extras]))
    assert (at_bound["extra_results"], at_bound["passed"]) == (64, True)
    over = _one(fixture_case(allowed_ambiguity=64), observation(symbols=["a", *extras], paths=[["p", "q"]]))
    assert over["extra_results"] == 65 and over["failures"] == ["extra results 65 exceed allowed_ambiguity 64"]


def test_ambiguity_never_permits_a_forbidden_hit() -> None:
    s = _one(fixture_case(forbidden_symbols=["bad"], allowed_ambiguity=64), observation(symbols=["a", "bad"]))
    assert s["failures"] == ["forbidden symbols returned: bad"]
    assert s["forbidden_hits"] == 1


def test_forbidden_hit_rate_counts_symbols_and_paths() -> None:
    case = fixture_case(expected_paths=[["a", "b"]], forbidden_symbols=["f"], forbidden_paths=[["a", "f"]],
                        allowed_ambiguity=10)
    s = _one(case, observation(symbols=["a", "f"], paths=[["a", "b"], ["a", "f"]]))
    assert (s["forbidden_hits"], s["returned"]) == (2, 4)
    assert s["failures"] == ["forbidden symbols returned: f", "forbidden paths returned: a -> f"]
    receipt = build_receipt("v1", "0" * 64, [s], 1)
    assert receipt["metrics"]["forbidden_hit_rate"] == {"hits": 2, "returned": 4, "rate": 0.5}  # type: ignore[index]


def test_path_precision_and_recall_are_exact_and_ordered() -> None:
    # [c, b] is not [b, c]: order matters, so one of two returned paths matches.
    case = fixture_case(expected_paths=[["a", "b"], ["b", "c"]], allowed_ambiguity=5)
    s = _one(case, observation(paths=[["a", "b"], ["c", "b"]]))
    assert (s["path_precision"], s["path_recall"]) == (0.5, 0.5)
    assert s["failures"] == ["missing expected paths: b -> c"]


def test_path_metrics_undefined_without_paths() -> None:
    s = _one(fixture_case(), observation())
    assert (s["path_precision"], s["path_recall"]) == (None, None)


def test_evidence_recall() -> None:
    s = _one(fixture_case(required_evidence=["e1", "e2", "e3"]), observation(evidence=["e1", "e3", "zz"]))
    assert s["evidence_recall"] == pytest.approx(2 / 3)
    assert s["failures"] == ["missing required evidence: e2"]


def test_required_diagnostics_subset_but_runtime_boundary_exact() -> None:
    case = fixture_case(required_diagnostics=[{"kind": "capability", "code": "scip-off"}])
    extra_stale = observation(diagnostics=[{"kind": "capability", "code": "scip-off"}, {"kind": "stale", "code": "s"}])
    assert _one(case, extra_stale)["passed"]
    extra_boundary = observation(diagnostics=[{"kind": "capability", "code": "scip-off"},
                                              {"kind": "runtime-boundary", "code": "atlas-flow-runtime-boundary"}])
    failed = _one(case, extra_boundary)
    assert failed["failures"] == ["unexpected runtime-boundary diagnostics: runtime-boundary/atlas-flow-runtime-boundary"]
    missing = _one(case, observation())
    assert missing["failures"] == ["missing required diagnostics: capability/scip-off"]


def test_symbol_hit_cannot_hide_a_wrong_path() -> None:
    case = fixture_case(expected_paths=[["main", "run"]], allowed_ambiguity=3)
    s = _one(case, observation(symbols=["a"], paths=[["main", "other"]]))
    assert s["symbol_recall"] == 1.0 and not s["passed"]
    assert s["failures"][0] == "missing expected paths: main -> run"


def test_observed_diagnostic_codes_are_preserved_in_order() -> None:
    diags = [{"kind": "stale", "code": "s2"}, {"kind": "capability", "code": "c1"}]
    s = _one(fixture_case(), observation(diagnostics=diags))
    assert s["diagnostics"] == diags


def test_aggregate_hand_computed_with_ties() -> None:
    cases = [fixture_case("c1", expected_symbols=["a", "b"], allowed_ambiguity=9),
             fixture_case("c2", expected_symbols=["a"], allowed_ambiguity=9),
             fixture_case("c3", expected_symbols=["a"], allowed_ambiguity=9),
             pinned_case("pin", paired="c1")]
    obs = [observation("c1", symbols=["x", "a"], response_bytes=10, duration_ms=5, read_back_calls=1,
                       diagnostics=[{"kind": "capability", "code": "k"}]),
           observation("c2", symbols=["x", "y", "z", "a"], response_bytes=10, duration_ms=7, follow_up_queries=2,
                       diagnostics=[{"kind": "stale", "code": "s"}, {"kind": "stale", "code": "t"}]),
           observation("c3", symbols=["q"], response_bytes=30, duration_ms=9),
           observation("pin", symbols=["a"], response_bytes=50, duration_ms=100, follow_up_queries=2)]
    scores = _score(cases, obs)
    metrics: Any = build_receipt("v1", "0" * 64, scores, 4)["metrics"]
    # reciprocal ranks 1/2, 1/4, 0, 1 -> MRR 1.75 / 4
    assert metrics["mrr"] == {"samples": 4, "mean": pytest.approx(0.4375)}
    # recalls 1/2, 1, 0, 1
    assert metrics["symbol_recall"]["mean"] == pytest.approx(0.625)
    # bytes 10, 10, 30, 50 -> median 20 (tie at 10 below), deviations 10, 10, 10, 30 -> MAD 10
    assert metrics["response_bytes"] == {"samples": 4, "median": 20.0, "mad": 10.0}
    # durations 5, 7, 9, 100 -> median 8, deviations 3, 1, 1, 92 -> MAD 2
    assert metrics["duration_ms"] == {"samples": 4, "median": 8.0, "mad": 2.0}
    assert metrics["read_back_calls"] == {"samples": 4, "median": 0.0, "mad": 0.0}
    # follow-ups 0, 2, 0, 2 -> median 1, MAD 1
    assert metrics["follow_up_queries"] == {"samples": 4, "median": 1.0, "mad": 1.0}
    assert (metrics["diagnostic_counts"]["capability"], metrics["diagnostic_counts"]["stale"]) == (1, 2)
    assert metrics["forbidden_hit_rate"] == {"hits": 0, "returned": 8, "rate": 0.0}


def test_receipt_summary_and_regression_line() -> None:
    scores = _score([fixture_case(), pinned_case()], [observation(symbols=["zz"]), observation("pin")])
    receipt: Any = build_receipt("v1", "f" * 64, scores, 2)
    assert receipt["schema"] == "agent-spec/atlas-eval/query-regression-v1"
    assert (receipt["passed"], receipt["complete"]) == (False, True)
    assert receipt["summary"]["tiers"] == {"deterministic-fixture": {"cases": 1, "passed": 0},
                                          "pinned-repository": {"cases": 1, "passed": 1}}
    assert regression_line(scores) == (
        "atlas-query-regression: 1 of 2 query case(s) failed correctness; first: fx: missing expected symbols: a")
    assert regression_line(scores[1:]) is None


def _b5_score(expectation: dict[str, Any], receipt: dict[str, Any], **obs: Any) -> CaseScore:
    return _one(fixture_case(context_expectation=context_expectation(**expectation)),
                observation(context_receipt=context_receipt(**receipt), **obs))


def test_b5_matching_behaviour_passes() -> None:
    s = _b5_score({}, {})
    assert s["passed"] and s["context_checked"]


@pytest.mark.parametrize(("expectation", "receipt", "obs", "failure"), [
    ({"profile": "wide"}, {}, {}, "context profile 'compact' is not the expected 'wide'"),
    ({"limits": {"retrieval_hard_cap": 4, "max_serialized_bytes": 2000}}, {}, {},
     "context limits differ from the expected limits"),
    ({"retrieval_loss": "none"}, {}, {}, "context retrieval loss forbidden but 2 item(s) were lost"),
    ({"projection_loss": "none"}, {}, {}, "context projection loss forbidden but 1 item(s) were lost"),
    ({"projection_loss": "required"},
     {"projection": {"input": 4, "relevant": 4, "relevance_dropped": 0, "retained": 4, "retention_dropped": 0},
      "omissions": [{"stage": "retrieval-hard-cap", "class": "low-rank", "count": 2}]}, {},
     "context projection loss required but nothing was lost"),
    ({"read_back": "forbidden"}, {"read_back_calls": 2}, {"read_back_calls": 2},
     "context read-back forbidden but 2 read-back call(s) were made"),
    ({"read_back": "required"}, {}, {}, "context read-back required but none was made"),
    ({"omission_classes": ["low-rank", "tests"]}, {}, {}, "missing context omission classes: tests"),
    ({"omission_classes": ["tests"]}, {}, {}, "missing context omission classes: tests"),
    ({"load_profile": "burst"}, {}, {}, "load profile 'steady' is not the expected 'burst'"),
], ids=["profile", "limits", "retrieval-none", "projection-none", "projection-required", "read-back-forbidden",
        "read-back-required", "omission-missing", "omission-unexpected", "load-profile"])
def test_b5_behaviour_mismatch_fails_the_case(expectation: dict[str, Any], receipt: dict[str, Any],
                                              obs: dict[str, Any], failure: str) -> None:
    s = _b5_score(expectation, receipt, **obs)
    assert not s["passed"] and failure in s["failures"], s["failures"]


def test_b5_unexpected_omission_class_is_named() -> None:
    s = _b5_score({"omission_classes": ["tests"]}, {})
    assert "unexpected context omission classes: low-rank" in s["failures"]


def _ir_measures_mrr(expected: list[list[str]], returned: list[list[str]]) -> float:
    qrels = [Qrel(f"q{i}", doc, 1) for i, docs in enumerate(expected) for doc in docs]
    run = [ScoredDoc(f"q{i}", doc, float(len(docs) - rank))
           for i, docs in enumerate(returned) for rank, doc in enumerate(docs)]
    # ir_measures scores a judged query with no retrieved document as 0, as the corpus does.
    return float(ir_measures.calc_aggregate([RR], qrels, run)[RR])


SYMBOLS = st.sampled_from([f"s{i}" for i in range(8)])


@settings(max_examples=60, deadline=None, database=None)
@given(st.lists(st.tuples(st.lists(SYMBOLS, min_size=1, max_size=4, unique=True),
                          st.lists(SYMBOLS, max_size=6, unique=True)), min_size=1, max_size=6))
def test_mrr_matches_ir_measures(pairs: list[tuple[list[str], list[str]]]) -> None:
    cases = [fixture_case(f"c{i}", expected_symbols=exp, allowed_ambiguity=64) for i, (exp, _) in enumerate(pairs)]
    obs = [observation(f"c{i}", symbols=ret) for i, (_, ret) in enumerate(pairs)]
    scores = _score([*cases, pinned_case("pin", paired="c0")], [*obs, observation("pin")])[:-1]
    ours: Any = build_receipt("v1", "0" * 64, scores, len(scores))["metrics"]
    expected = _ir_measures_mrr([e for e, _ in pairs], [r for _, r in pairs])
    assert ours["mrr"]["mean"] == pytest.approx(expected)
