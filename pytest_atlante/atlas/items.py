"""pytest glue for query-corpus cases: one offline item per case, a receipt at session end.

Items are ``<corpus relative to rootdir>::<case id>``.  The corpus file is collected when pytest
walks over it; when the run was started without explicit paths (``pytest`` alone, or testpaths)
and the walk did not reach it, the items are appended at the start of
``pytest_collection_modifyitems`` so ``-k``/``-m`` deselection still applies to them.  Each item
scores its case against observations from the user's ``atlante_query_observations`` fixture when
one is defined, else from the configured results file.  Scores ride on the report's
``user_properties``, so the receipt is written once, by the controller, in serial and xdist runs
alike.  All behaviour lives in ``query_runner``; this module only adapts it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from pytest_atlante.atlas.query_runner import (
    OBSERVATIONS_FIXTURE,
    QueryCaseFailed,
    QueryCaseRunner,
    case_lines,
    failure_message,
)
from pytest_atlante.atlas.score import CaseScore
from pytest_atlante.diagnostics import DiagnosticError
from pytest_atlante.fsutil import MAX_INPUT_BYTES, read_capped

SCORE_PROPERTY = "atlante_query_case"


class QueryCorpusFile(pytest.File):
    plugin: AtlasQueryPlugin

    def collect(self) -> Iterator[pytest.Item]:
        runner = self.plugin.runner()
        # The runner has already parsed this file (and refused a special or oversized one).
        lines = case_lines(read_capped(self.path, MAX_INPUT_BYTES).decode("utf-8"))
        for case_id in runner.cases:
            item = QueryCaseItem.from_parent(self, name=case_id, callobj=_make_check(self.plugin, case_id))
            item.case_line = lines.get(case_id, 0)
            yield item

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, DiagnosticError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class QueryCaseItem(pytest.Function):
    case_line: int = 0

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, self.case_line - 1 if self.case_line else None, f"query case {self.name}"

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, (QueryCaseFailed, DiagnosticError)):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


def _make_check(plugin: AtlasQueryPlugin, case_id: str) -> Any:
    def check(request: pytest.FixtureRequest) -> None:
        try:
            value = request.getfixturevalue(OBSERVATIONS_FIXTURE)
        except pytest.FixtureLookupError:
            value = None
        runner = plugin.runner()
        score = runner.score(case_id, value)
        request.node.user_properties.append((SCORE_PROPERTY, score))
        if not score["passed"]:
            raise QueryCaseFailed(failure_message(score, request.node.nodeid.split("::")[0]))

    check.__name__ = f"query_case_{case_id}"
    return check


class AtlasQueryPlugin:
    """Registered by plugin.py when atlante.jsonc names ``atlas.queryCorpus``/``queryResults``."""

    def __init__(self, project_root: Path, corpus: Path, results: Path) -> None:
        self.project_root = project_root
        self.corpus = (project_root / corpus).resolve()
        self.results = (project_root / results).resolve()
        self._runner: QueryCaseRunner | None = None
        self._walked_corpus = False
        self._scores: list[CaseScore] = []

    def runner(self) -> QueryCaseRunner:
        if self._runner is None:
            self._runner = QueryCaseRunner(self.corpus, self.results)
        return self._runner

    def _corpus_file(self, parent: pytest.Collector, path: Path) -> QueryCorpusFile:
        node: QueryCorpusFile = QueryCorpusFile.from_parent(parent, path=path)
        node.plugin = self
        return node

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> QueryCorpusFile | None:
        if file_path.resolve() != self.corpus:
            return None
        self._walked_corpus = True
        return self._corpus_file(parent, file_path)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        if self._walked_corpus or config.args_source == pytest.Config.ArgsSource.ARGS:
            return
        node = self._corpus_file(session, self.corpus)
        try:
            items.extend(node.collect())
        except DiagnosticError as exc:
            report = pytest.CollectReport(node.nodeid, "failed", str(exc), [])
            config.hook.pytest_collectreport(report=report)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        for name, value in report.user_properties:
            if name == SCORE_PROPERTY:
                self._scores.append(cast(CaseScore, value))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(session.config, "workerinput") or not self._scores:
            return
        try:
            self.runner().write_receipt(self.project_root, self._scores)
        except (DiagnosticError, OSError) as exc:
            session.config.get_terminal_writer().line(f"atlas query receipt not written: {exc}", red=True)
