"""``atlante benchmark score``: grade query observations against the golden corpus.

Per case the scorer decides correctness (a case fails when an expected symbol or path is missing, a
forbidden one is returned, required evidence or diagnostics are missing, a runtime-boundary
diagnostic differs, extra results exceed ``allowed_ambiguity``, or B5 context behaviour differs)
and records the measurements the aggregate needs.  Case scores are plain JSON-able dicts so the
pytest items can ship them across xdist workers and the aggregate is computed from them alone.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from operator import itemgetter
from pathlib import Path
from typing import Any, TypedDict

from blake3 import blake3
from pydantic import TypeAdapter

from pytest_atlante.atlas import stats
from pytest_atlante.atlas.context import behaviour_failures
from pytest_atlante.atlas.output import emit
from pytest_atlante.atlas.query_corpus import (
    DIAGNOSTIC_KINDS,
    FIXTURE_TIER,
    PINNED_TIER,
    QueryCase,
    QueryCorpus,
    load_corpus,
)
from pytest_atlante.atlas.results import Observation, load_results

QUERY_REGRESSION_SCHEMA = "agent-spec/atlas-eval/query-regression-v1"
FINGERPRINT_ALGORITHM = "blake3-schema-order-json-v1"
REGRESSION_CODE = "atlas-query-regression"
RUNTIME_BOUNDARY = "runtime-boundary"
_CORPUS_JSON: TypeAdapter[QueryCorpus] = TypeAdapter(QueryCorpus)


class DiagnosticDict(TypedDict):
    kind: str
    code: str


class CaseScore(TypedDict):
    case_id: str
    tier: str
    passed: bool
    failures: list[str]
    symbol_recall: float
    reciprocal_rank: float
    path_precision: float | None
    path_recall: float | None
    evidence_recall: float
    returned: int
    forbidden_hits: int
    extra_results: int
    allowed_ambiguity: int
    response_bytes: int
    duration_ms: int
    read_back_calls: int
    follow_up_queries: int
    context_checked: bool
    diagnostics: list[DiagnosticDict]


def corpus_fingerprint(corpus: QueryCorpus) -> str:
    """BLAKE3 of the validated corpus in its canonical JSON form (see ``docs/atlas-query.md``).

    Canonical rather than raw file bytes: reformatting the file or reordering keys does not change
    the golden content, so it must not change the fingerprint a receipt is tied to.  The canonical
    form is the compact re-serialization of the validated model: keys in schema order, absent
    optional fields omitted, no whitespace, UTF-8.  It is produced in pydantic-core (Rust), so it
    costs a fraction of re-parsing the file with ``json`` and sorting keys.  The adapter hands
    back the UTF-8 bytes directly (``model_dump_json`` would decode them to a ``str`` that has to
    be encoded again: two extra copies of a document that can be tens of MiB); the bytes are the
    same.
    """
    return blake3(_CORPUS_JSON.dump_json(corpus, by_alias=True, exclude_none=True)).hexdigest()


def _render(items: Sequence[object]) -> str:
    return ", ".join(" -> ".join(i) if isinstance(i, tuple) else str(i) for i in items)


def score_case(case: QueryCase, obs: Observation) -> CaseScore:
    """Correctness and measurements of one observation; failures are ordered most-telling first.

    Runs once per case on corpora of 10^5 cases, so path tuples, diagnostic sets and the lists
    behind failure messages are only built when they can be non-empty (most are empty); the cheap
    set tests guarding them (subset, disjointness, sizes) decide exactly what the lists would.
    """
    expected_symbols = set(case.expected_symbols)
    returned_symbols = obs.symbols
    returned_symbol_set = set(returned_symbols)
    expected_paths = {tuple(p) for p in case.expected_paths} if case.expected_paths else set()
    returned_paths = [tuple(p) for p in obs.paths] if obs.paths else []
    returned_path_set = set(returned_paths)

    matched_symbols = expected_symbols & returned_symbol_set
    matched_paths = expected_paths & returned_path_set if expected_paths else set()
    rank = 0
    for position, symbol in enumerate(returned_symbols, 1):
        if symbol in expected_symbols:
            rank = position
            break
    forbidden_symbols: list[str] = []
    if not returned_symbol_set.isdisjoint(case.forbidden_symbols):
        forbidden_symbol_set = set(case.forbidden_symbols)
        forbidden_symbols = [s for s in returned_symbols if s in forbidden_symbol_set]
    forbidden_paths: list[tuple[str, ...]] = []
    if case.forbidden_paths and returned_paths:
        forbidden_path_set = {tuple(f) for f in case.forbidden_paths}
        forbidden_paths = [p for p in returned_paths if p in forbidden_path_set]
    extra = (len(returned_symbol_set) - len(matched_symbols)) + (len(returned_path_set) - len(matched_paths))
    evidence = set(obs.evidence)
    required_evidence = set(case.required_evidence)
    observed = [(d.kind, d.code) for d in obs.diagnostics] if obs.diagnostics else []
    observed_set = set(observed)
    required = {(d.kind, d.code) for d in case.required_diagnostics} if case.required_diagnostics else set()

    failures: list[str] = []
    if len(matched_symbols) != len(expected_symbols):
        missing = [s for s in case.expected_symbols if s not in returned_symbol_set]
        failures.append(f"missing expected symbols: {_render(missing)}")
    if len(matched_paths) != len(expected_paths):
        missing_paths = [tuple(p) for p in case.expected_paths if tuple(p) not in returned_path_set]
        failures.append(f"missing expected paths: {_render(missing_paths)}")
    if forbidden_symbols:
        failures.append(f"forbidden symbols returned: {_render(forbidden_symbols)}")
    if forbidden_paths:
        failures.append(f"forbidden paths returned: {_render(forbidden_paths)}")
    if not required_evidence <= evidence:
        missing_evidence = [e for e in case.required_evidence if e not in evidence]
        failures.append(f"missing required evidence: {_render(missing_evidence)}")
    if not required <= observed_set:
        missing_diags = [f"{k}/{c}" for k, c in sorted(required - observed_set)]
        failures.append(f"missing required diagnostics: {_render(missing_diags)}")
    # Runtime boundaries are query hints, matched exactly: an unrequired one is as wrong as a
    # missing one, because it claims a boundary the golden answer does not have.
    if observed_set and (extra_boundaries := sorted(
        f"{k}/{c}" for k, c in observed_set - required if k == RUNTIME_BOUNDARY
    )):
        failures.append(f"unexpected runtime-boundary diagnostics: {_render(extra_boundaries)}")
    if extra > case.allowed_ambiguity:
        failures.append(f"extra results {extra} exceed allowed_ambiguity {case.allowed_ambiguity}")
    context_checked = case.context_expectation is not None and obs.context_receipt is not None
    if case.context_expectation is not None and obs.context_receipt is not None:
        failures.extend(behaviour_failures(case.context_expectation, obs.context_receipt))

    returned = len(returned_symbols) + len(returned_paths)
    return {
        "case_id": case.id,
        "tier": case.tier,
        "passed": not failures,
        "failures": failures,
        "symbol_recall": len(matched_symbols) / len(expected_symbols),
        "reciprocal_rank": 1.0 / rank if rank else 0.0,
        "path_precision": len(matched_paths) / len(returned_path_set) if returned_path_set else None,
        "path_recall": len(matched_paths) / len(expected_paths) if expected_paths else None,
        "evidence_recall": len(required_evidence & evidence) / len(required_evidence),
        "returned": returned,
        "forbidden_hits": len(forbidden_symbols) + len(forbidden_paths),
        "extra_results": extra,
        "allowed_ambiguity": case.allowed_ambiguity,
        "response_bytes": obs.response_bytes,
        "duration_ms": obs.duration_ms,
        "read_back_calls": obs.read_back_calls,
        "follow_up_queries": obs.follow_up_queries,
        "context_checked": context_checked,
        "diagnostics": [{"kind": k, "code": c} for k, c in observed],
    }


def _mean(values: Sequence[float | None]) -> dict[str, float | int]:
    present = [v for v in values if v is not None]
    return {"samples": len(present), "mean": sum(present) / len(present) if present else 0.0}


def _columns(scores: Sequence[CaseScore], *keys: str) -> list[tuple[Any, ...]]:
    """The values of ``keys`` (two or more) across all scores, one tuple per key, in score order.

    One C-level pass (``itemgetter`` + ``zip``) over 10^5 score dicts instead of one Python
    comprehension per metric; the order is kept, so sums and medians are bit-for-bit the same.
    """
    if not scores:
        return [() for _ in keys]
    return list(zip(*map(itemgetter(*keys), scores), strict=True))


def aggregate(scores: Sequence[CaseScore]) -> dict[str, object]:
    """Aggregate metrics over case scores; every rule is documented in docs/atlas-query.md."""
    (symbol_recall, reciprocal_rank, path_precision, path_recall, evidence_recall, returned_counts,
     forbidden_hits, response_bytes, duration_ms, read_back_calls, follow_up_queries, context_checked,
     passed) = _columns(
        scores, "symbol_recall", "reciprocal_rank", "path_precision", "path_recall", "evidence_recall",
        "returned", "forbidden_hits", "response_bytes", "duration_ms", "read_back_calls",
        "follow_up_queries", "context_checked", "passed",
    )
    returned = sum(returned_counts)
    hits = sum(forbidden_hits)
    kinds = dict.fromkeys(DIAGNOSTIC_KINDS, 0)
    for diagnostics in map(itemgetter("diagnostics"), scores):
        for d in diagnostics:
            kinds[d["kind"]] = kinds.get(d["kind"], 0) + 1
    context_passed = [ok for checked, ok in zip(context_checked, passed, strict=True) if checked]
    return {
        "symbol_recall": _mean(symbol_recall),
        "mrr": _mean(reciprocal_rank),
        "path_precision": _mean(path_precision),
        "path_recall": _mean(path_recall),
        "evidence_recall": _mean(evidence_recall),
        "forbidden_hit_rate": {"hits": hits, "returned": returned, "rate": hits / returned if returned else 0.0},
        "response_bytes": stats.distribution(response_bytes),
        "duration_ms": stats.distribution(duration_ms),
        "read_back_calls": stats.distribution(read_back_calls),
        "follow_up_queries": stats.distribution(follow_up_queries),
        "diagnostic_counts": kinds,
        "context": {"cases": len(context_passed), "passed": sum(1 for ok in context_passed if ok)},
    }


def build_receipt(
    corpus_version: str, fingerprint: str, scores: Sequence[CaseScore], corpus_cases: int
) -> dict[str, object]:
    """The query-regression-v1 receipt.  ``complete`` is false when fewer cases were scored than
    the corpus holds (a pytest run narrowed with ``-k``); the CLI always scores every case."""
    tier_of, passed = _columns(scores, "tier", "passed")
    tiers = {
        tier: {"cases": tier_of.count(tier),
               "passed": sum(1 for t, ok in zip(tier_of, passed, strict=True) if t == tier and ok)}
        for tier in (FIXTURE_TIER, PINNED_TIER)
    }
    failed = sum(1 for ok in passed if not ok)
    return {
        "schema": QUERY_REGRESSION_SCHEMA,
        "corpus_version": corpus_version,
        "corpus_fingerprint": fingerprint,
        "fingerprint_algorithm": FINGERPRINT_ALGORITHM,
        "passed": failed == 0,
        "complete": len(scores) == corpus_cases,
        "summary": {"cases": len(scores), "passed": len(scores) - failed, "failed": failed, "tiers": tiers},
        "metrics": aggregate(scores),
        "cases": list(scores),
    }


def score_corpus(corpus: QueryCorpus, observations: dict[str, Observation]) -> list[CaseScore]:
    return [score_case(case, observations[case.id]) for case in corpus.cases]


def score_files(corpus_path: Path, results_path: Path) -> tuple[dict[str, object], list[CaseScore]]:
    """Validate both files (raising ``DiagnosticError`` before anything is written) and score."""
    corpus = load_corpus(corpus_path)
    observations = load_results(results_path, corpus)
    scores = score_corpus(corpus, observations)
    return build_receipt(corpus.version, corpus_fingerprint(corpus), scores, len(corpus.cases)), scores


def regression_line(scores: Sequence[CaseScore]) -> str | None:
    """The stderr line CI greps for, or ``None`` when every case passed."""
    failed = [s for s in scores if not s["passed"]]
    if not failed:
        return None
    first = failed[0]
    return (
        f"{REGRESSION_CODE}: {len(failed)} of {len(scores)} query case(s) failed correctness; "
        f"first: {first['case_id']}: {first['failures'][0]}"
    )


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while millions of acyclic objects (models, dicts) are built.

    Each generation-2 pass walks the whole heap, so with the GC on, parsing a 10^5-case corpus
    spends most of its time in collections that free nothing (measured: ~3x slower parsing).
    Reference counting still frees everything; the GC is restored on exit, even on error.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def cmd_score(corpus: Path, results: Path, out: Path | None) -> int:
    """CLI entry: receipt first (stdout or ``--out``), then exit 1 with the regression line."""
    with _gc_paused():
        receipt, scores = score_files(corpus, results)
        emit(receipt, out)
    if line := regression_line(scores):
        print(line, file=sys.stderr)
        return 1
    return 0
