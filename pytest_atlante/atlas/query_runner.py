"""Plain (pytest-free) logic behind the query-corpus pytest items.

``QueryCaseRunner`` loads the corpus once, resolves observations either from a pytest fixture value
or from the results file (validated once, the outcome — observations or diagnostics — cached for
every later case), scores one case at a time and builds the session receipt from the case scores
that the items reported.  ``items.py`` only adapts this to pytest.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_atlante.atlas.output import render
from pytest_atlante.atlas.query_corpus import QueryCase, QueryCorpus, load_corpus
from pytest_atlante.atlas.results import Observation, load_results, observations_from_value
from pytest_atlante.atlas.score import CaseScore, build_receipt, corpus_fingerprint, score_case
from pytest_atlante.diagnostics import DiagnosticError
from pytest_atlante.fsutil import atomic_write_bytes

OBSERVATIONS_FIXTURE = "atlante_query_observations"
RECEIPT_RELPATH = Path(".atlante/atlas/query-regression.json")


class QueryCaseFailed(Exception):
    """A query case failed correctness; the message's first line names what was wrong."""


def failure_message(score: CaseScore, corpus_label: str) -> str:
    lines = [score["failures"][0], f"query case {score['case_id']} ({score['tier']}) in {corpus_label}"]
    if len(score["failures"]) > 1:
        lines.append("all failures:")
        lines.extend(f"  - {failure}" for failure in score["failures"])
    return "\n".join(lines)


def case_lines(text: str) -> dict[str, int]:
    """1-based line of each ``"id": "..."`` in the corpus text, for pytest's failure headers."""
    lines: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith('"id"'):
            try:
                value = json.loads("{" + stripped.rstrip(",") + "}")["id"]
            except (ValueError, KeyError, TypeError):
                continue
            if isinstance(value, str):
                lines.setdefault(value, number)
    return lines


class QueryCaseRunner:
    def __init__(self, corpus_path: Path, results_path: Path) -> None:
        self.corpus_path = corpus_path
        self.results_path = results_path
        self.corpus: QueryCorpus
        self.corpus = load_corpus(corpus_path)
        self.cases: dict[str, QueryCase] = {case.id: case for case in self.corpus.cases}
        self._from_file: dict[str, Observation] | DiagnosticError | None = None
        self._from_fixture: tuple[object, dict[str, Observation]] | None = None

    def _file_observations(self) -> dict[str, Observation]:
        if self._from_file is None:
            try:
                self._from_file = load_results(self.results_path, self.corpus)
            except DiagnosticError as exc:
                self._from_file = exc
        if isinstance(self._from_file, DiagnosticError):
            raise self._from_file
        return self._from_file

    def _fixture_observations(self, value: Any) -> dict[str, Observation]:
        # A session-scoped fixture returns the same object to every case: validate it once.
        if self._from_fixture is not None and self._from_fixture[0] is value:
            return self._from_fixture[1]
        observations = observations_from_value(value, self.corpus, f"fixture {OBSERVATIONS_FIXTURE}")
        self._from_fixture = (value, observations)
        return observations

    def score(self, case_id: str, fixture_value: Any | None) -> CaseScore:
        """Score one case against fixture-supplied observations, or the results file when ``None``."""
        observations = (
            self._file_observations() if fixture_value is None else self._fixture_observations(fixture_value)
        )
        return score_case(self.cases[case_id], observations[case_id])

    def receipt(self, scores: Sequence[CaseScore]) -> dict[str, object]:
        order = {case.id: index for index, case in enumerate(self.corpus.cases)}
        ordered = sorted(scores, key=lambda s: order.get(s["case_id"], len(order)))
        return build_receipt(self.corpus.version, corpus_fingerprint(self.corpus), ordered, len(self.corpus.cases))

    def write_receipt(self, project_root: Path, scores: Sequence[CaseScore]) -> Path:
        path = project_root / RECEIPT_RELPATH
        atomic_write_bytes(path, render(self.receipt(scores)))
        return path
