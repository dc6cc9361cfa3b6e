"""``--atlante-selftest`` as pytest sees it: one item per scenario instead of one per trial.

Everything else is the eval run's (``EvalSession``): validation, the host probe on the controller,
xdist transport of results on the ``TestReport``, the controller writing the one document.  The
self-test runs the scripted reference through the real CLI, so it always runs in scripted mode and
needs no credentials; a scenario without a script is reported ``no-reference`` instead of failing
validation.  Self-test items never take a session from ``maxSessions``: they cost no tokens.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Generator

import pytest

from . import selftest
from .budget import TrialBudget
from .diagnostics import Diagnostic
from .discovery import ScenarioEntry, Suite, discover
from .exitcodes import EXIT_RUN_ERROR
from .items import ALLOCATED_KEY, ENTRY_KEY, TrialFailed, TrialItem
from .report import HostIdentity, ensure_gitignore
from .session import EvalSession, Options, guard_seconds

RESULT_KEY = pytest.StashKey[selftest.SelftestScenario]()
# The two trials of a self-test item share the sandbox naming of real trials: ``<scenario>-<n>``.
NOOP_TRIAL = 1
REFERENCE_TRIAL = 2


class SelftestSession(EvalSession):
    def __init__(self, config: pytest.Config, options: Options) -> None:
        # The reference trial is the scripted trial: scripted mode, whatever the command line said.
        # It spends no money, so the cost forecast and cap do not apply.
        super().__init__(config, dataclasses.replace(options, scripted=True, forecast=False, max_cost=None))
        self.results: dict[str, selftest.SelftestScenario] = {}
        self.selftest_path: Path | None = None
        self.selftest_report: selftest.SelftestReport | None = None

    def _discover(self) -> Suite:
        return discover(self.options.project_root, scripted=True, optional_scripts=True, names=self.options.names,
                        host_override=self.options.host)

    def item_keys(self, entry: ScenarioEntry) -> list[tuple[str, int]]:
        return [(f"{entry.scenario.name}[selftest]", 0)]

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        assert self.suite is not None and self.suite.eval is not None
        items_here = [i for i in items if isinstance(i, TrialItem)]
        guard = self.config.pluginmanager.has_plugin("timeout")
        for item in items_here:
            item.stash[ALLOCATED_KEY] = True   # zero tokens: never counted against maxSessions
            if guard and item.get_closest_marker("timeout") is None:
                # Two trials per item (the no-op one has no host session, but the same setup and checks).
                seconds = 2 * guard_seconds(item.stash[ENTRY_KEY], self.suite.eval.budget.timeoutMs)
                item.add_marker(pytest.mark.timeout(seconds, method="thread", func_only=True))
        self.expected = [i.nodeid for i in items_here]

    def run_item(self, item: pytest.Item, budget: TrialBudget) -> None:
        from .engine import Engine

        assert self.suite is not None and self.host_info is not None
        if self._engine is None:
            self._engine = Engine(self.suite, self.run_id, self.host_info, scripted=True, keep=self.options.keep)
        entry: ScenarioEntry = item.stash[ENTRY_KEY]

        def progress(phase: str) -> None:  # the item is short; phases are not shown
            pass

        noop = self._engine.run(entry, NOOP_TRIAL, item.nodeid, budget, progress, host_session=False)
        reference = (self._engine.run(entry, REFERENCE_TRIAL, item.nodeid, budget, progress)
                     if entry.script is not None else None)
        result = selftest.classify(entry.scenario.name, entry.display, entry.source, item.nodeid, noop, reference)
        item.stash[RESULT_KEY] = result
        if result.status not in selftest.ACCEPTABLE:
            raise TrialFailed(selftest.failure_text(result))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
        outcome = yield
        report = outcome.get_result()
        if call.when == "setup" and self.is_worker:
            report.atlante_worker_pid = os.getpid()
        if call.when == "call" and RESULT_KEY in item.stash:
            report.atlante_selftest = item.stash[RESULT_KEY].model_dump_json()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.is_worker:
            return
        worker_pid = getattr(report, "atlante_worker_pid", None)
        if isinstance(worker_pid, int):
            self.worker_pids.add(worker_pid)
        raw = getattr(report, "atlante_selftest", None)
        if raw is not None:
            self.results[report.nodeid] = selftest.SelftestScenario.model_validate_json(raw)
        elif report.when in ("call", "???") and report.failed and report.nodeid in self.expected and report.nodeid not in self.results:
            self.run_errors.append(Diagnostic("", report.nodeid, "eval-worker-crashed",
                                              "the self-test item produced no result (its worker crashed, an internal "
                                              "error, or pytest-timeout's guard fired)", "see the failure above"))

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.is_worker or self.validation_failed or self.suite is None or not self.host_info:
            return
        from . import sandbox

        errors = list(self.run_errors)
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            errors.append(Diagnostic("", "", "eval-interrupted", "the self-test was interrupted",
                                     "run it again; selftest.json holds the scenarios that finished"))
        host = HostIdentity(name=self.host_info["name"], version=self.host_info["version"],  # type: ignore[arg-type]
                            dialect=self.host_info["dialect"])  # type: ignore[arg-type]
        report = selftest.build(self.run_id, self.started_at, host, list(self.results.values()), self.expected, errors)
        self.selftest_report = report
        status = report.exitStatus
        try:
            self.selftest_path = selftest.write(report, self.out_dir)
            if self.options.out is None:
                ensure_gitignore(self.options.project_root / ".atlante")
        except OSError as exc:
            self.run_errors.append(Diagnostic(str(self.out_dir), "", "eval-report-write-failed", str(exc),
                                              "check the output directory"))
            status = EXIT_RUN_ERROR
        sandbox.remove_run_dir(self.run_id)
        if exitstatus == pytest.ExitCode.TESTS_FAILED and status == 0:
            status = int(pytest.ExitCode.TESTS_FAILED)   # an ordinary item of the same run failed
        if exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED) or status == EXIT_RUN_ERROR:
            session.exitstatus = status

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker or (self.selftest_report is None and not self.run_errors):
            return
        terminalreporter.section("atlante self-test")
        if self.selftest_report is not None:
            for result in self.selftest_report.scenarios:
                for problem in selftest.diagnostics(result):
                    terminalreporter.write_line(problem.render(), red=result.status not in selftest.ACCEPTABLE,
                                                yellow=result.status in selftest.ACCEPTABLE)
            for line in selftest.summary_lines(self.selftest_report, self.selftest_path):
                terminalreporter.write_line(line)
        for problem in self.run_errors:
            terminalreporter.write_line(problem.render(), red=True)
