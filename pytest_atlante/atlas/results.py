"""``agent-spec/atlas-eval/query-results-v1``: one ranked observation per corpus case.

The results must name the corpus ``version`` they were captured against and hold exactly one
observation per case.  Every structural problem (missing, duplicate, unknown, wrong-version,
malformed, impossible context receipt) is collected and raised before scoring, so a regression
receipt is only ever built from a complete, well-formed observation set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from pytest_atlante.atlas.context import ContextReceipt, receipt_inconsistencies
from pytest_atlante.atlas.query_corpus import DIAGNOSTIC_KINDS, JSON_STRING_CACHE, QueryCorpus, TypedDiagnostic
from pytest_atlante.atlas.query_loading import parse_model, read_bytes, validation_diagnostics
from pytest_atlante.diagnostics import Diagnostic, DiagnosticError

QUERY_RESULTS_SCHEMA = "agent-spec/atlas-eval/query-results-v1"
PREFIX = "atlas-query-results"
_HINT = "fix the field to match agent-spec/atlas-eval/query-results-v1 (see docs/atlas-query.md)"


class Observation(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    case_id: str = Field(min_length=1)
    symbols: list[str]
    paths: list[list[str]]
    evidence: list[str]
    diagnostics: list[TypedDiagnostic]
    response_bytes: int = Field(ge=0)
    duration_ms: int = Field(ge=0)
    read_back_calls: int = Field(ge=0)
    follow_up_queries: int = Field(ge=0)
    context_receipt: ContextReceipt | None = None


class QueryResults(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, **JSON_STRING_CACHE)

    schema_: Literal["agent-spec/atlas-eval/query-results-v1"] = Field(alias="schema")
    corpus_version: str = Field(min_length=1)
    observations: list[Observation]


_KNOWN_KINDS = frozenset(DIAGNOSTIC_KINDS)
_OBSERVATION_LIST: TypeAdapter[list[Observation]] = TypeAdapter(list[Observation])


def _duplicate_entry(name: str, at: str, file: str) -> Diagnostic:
    return Diagnostic(file, f"{at}.{name}", f"{PREFIX}-duplicate-entry",
                      f"{name} repeats an entry; a ranked list holds each answer once",
                      "deduplicate the ranked list, keeping the best rank")


def _observation_problems(obs: Observation, at: str, file: str, found: list[Diagnostic]) -> None:
    """Append the malformations pydantic cannot see: repeated ranked entries, unknown kinds, bad
    receipts.  Runs for every observation, so the common cases (a single symbol, no paths, no
    diagnostics, no receipt) cost no more than a truth test and allocate nothing."""
    if len(obs.symbols) > 1 and len(set(obs.symbols)) != len(obs.symbols):
        found.append(_duplicate_entry("symbols", at, file))
    if obs.paths and len({tuple(p) for p in obs.paths}) != len(obs.paths):
        found.append(_duplicate_entry("paths", at, file))
    for index, diag in enumerate(obs.diagnostics):
        if diag.kind not in _KNOWN_KINDS:
            found.append(Diagnostic(file, f"{at}.diagnostics[{index}].kind", f"{PREFIX}-diagnostic-kind",
                                    f"unknown diagnostic kind {diag.kind!r}",
                                    "use one of: " + ", ".join(DIAGNOSTIC_KINDS)))
    if obs.context_receipt is not None:
        for suffix, message in receipt_inconsistencies(
            obs.context_receipt, obs.response_bytes, obs.follow_up_queries, obs.read_back_calls
        ):
            found.append(Diagnostic(file, f"{at}.context_receipt{suffix}", f"{PREFIX}-context-inconsistent",
                                    message, "the receipt must describe what this observation returned"))


def match_observations(
    corpus: QueryCorpus, observations: list[Observation], file: str, version: str | None
) -> dict[str, Observation]:
    """Pair every corpus case with exactly one observation, or raise with every problem found.

    ``version`` is the results' ``corpus_version`` (``None`` when observations come from a pytest
    fixture as a bare list, which is captured from the corpus under test and cannot be stale).
    """
    found: list[Diagnostic] = []
    if version is not None and version != corpus.version:
        found.append(Diagnostic(file, "$.corpus_version", f"{PREFIX}-version-mismatch",
                                f"results target corpus version {version!r}, the corpus is {corpus.version!r}",
                                "capture fresh observations against this corpus version"))
    cases = {case.id: case for case in corpus.cases}
    by_case: dict[str, Observation] = {}
    for index, obs in enumerate(observations):
        at = f"$.observations[{index}]"
        case_id = obs.case_id
        case = cases.get(case_id)
        if case is None:
            found.append(Diagnostic(file, f"{at}.case_id", f"{PREFIX}-unknown-case",
                                    f"observation for {case_id!r}, which is not a corpus case",
                                    "remove it or add the case to the corpus"))
            continue
        if case_id in by_case:
            found.append(Diagnostic(file, f"{at}.case_id", f"{PREFIX}-duplicate-observation",
                                    f"a second observation for case {case_id!r}",
                                    "keep exactly one observation per case"))
            continue
        by_case[case_id] = obs
        _observation_problems(obs, at, file, found)
        if case.context_expectation is not None and obs.context_receipt is None:
            found.append(Diagnostic(file, f"{at}.context_receipt", f"{PREFIX}-context-missing",
                                    f"case {case_id!r} has a context_expectation but no context_receipt",
                                    "B5 observations must carry a context_receipt"))
    # Every observation in ``by_case`` names a distinct corpus case, so as many of them as there
    # are cases means none is missing; the per-case scan is only needed when one is.
    if len(by_case) != len(corpus.cases):
        for case_id in (case.id for case in corpus.cases if case.id not in by_case):
            found.append(Diagnostic(file, "$.observations", f"{PREFIX}-missing-observation",
                                    f"no observation for case {case_id!r}",
                                    "provide exactly one observation for every corpus case"))
    if found:
        raise DiagnosticError(found)
    return by_case


def parse_results(data: bytes, corpus: QueryCorpus, file: str) -> dict[str, Observation]:
    results = parse_model(data, QueryResults, file, PREFIX, _HINT)
    return match_observations(corpus, list(results.observations), file, results.corpus_version)


def load_results(path: Path, corpus: QueryCorpus) -> dict[str, Observation]:
    return parse_results(read_bytes(path, PREFIX), corpus, str(path))


def observations_from_value(value: Any, corpus: QueryCorpus, source: str) -> dict[str, Observation]:
    """Accept what a pytest fixture returns: a query-results-v1 dict or a bare list of observations."""
    try:
        if isinstance(value, list):
            observations = _OBSERVATION_LIST.validate_python(value)
            return match_observations(corpus, observations, source, None)
        results = QueryResults.model_validate(value)
    except ValidationError as exc:
        raise DiagnosticError(validation_diagnostics(exc, source, PREFIX, _HINT)) from None
    return match_observations(corpus, list(results.observations), source, results.corpus_version)
