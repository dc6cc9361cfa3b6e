"""``--atlante-selftest`` as pytest sees it: one item per scenario instead of one per trial.

Everything else is the eval run's roles (``roles.py``): validation, the host probe on the
controller, the suite and probe result handed to xdist workers, results riding on the
``TestReport``, the controller writing the one document.  The self-test runs the scripted reference
through the real CLI, so it runs in scripted mode (``role_for`` sets it) and needs no credentials; a
scenario without a script is reported ``no-reference`` instead of failing validation.  Self-test
items never take a session from ``maxSessions``: they cost no tokens.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_atlante.report import selftest
from pytest_atlante.diagnostics import Diagnostic
from pytest_atlante.suite.discovery import Suite
from pytest_atlante.report.exitcodes import EXIT_RUN_ERROR
from pytest_atlante.run.items import SELFTEST_TRIAL, TrialFailed, TrialItem
from pytest_atlante.report.model import HostIdentity, ensure_gitignore
from pytest_atlante.run.roles import Controller, Worker, _TrialRole
from pytest_atlante.trial.runner import TrialKey

RESULT_KEY = pytest.StashKey[selftest.SelftestScenario]()
# The two trials of a self-test item, named like real trials' sandboxes: ``<scenario>-<n>``.
NOOP_TRIAL = 1
REFERENCE_TRIAL = 2


class _SelftestRole(_TrialRole):
    """Collection and running of self-test items, the same in every process that runs them."""

    def trial_numbers(self) -> list[int]:
        return [SELFTEST_TRIAL]

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        tests = [i for i in items if isinstance(i, TrialItem)]
        # Zero tokens: never counted against maxSessions.  Two trials per item for the guard (the
        # no-op one without a host session, but with setup and checks).
        self._give_budgets(((item, True) for item in tests), trials_per_item=2)
        self._collected(tests)

    def run_item(self, item: TrialItem) -> None:
        assert item.budget is not None
        runner = self._trial_runner()
        entry = item.entry
        noop = runner.run(entry, NOOP_TRIAL, item.nodeid, item.budget, self._progress(), with_host=False)
        reference = (runner.run(entry, REFERENCE_TRIAL, item.nodeid, item.budget, self._progress())
                     if entry.script is not None else None)
        result = selftest.classify(entry.scenario.name, entry.display, entry.source, item.nodeid, noop, reference)
        item.stash[RESULT_KEY] = result
        if result.status not in selftest.ACCEPTABLE:
            raise TrialFailed(selftest.failure_text(result))

    def _annotate(self, report: pytest.TestReport, item: TrialItem) -> None:
        super()._annotate(report, item)
        result = item.stash.get(RESULT_KEY, None)
        if result is not None:
            report.atlante_selftest = result.model_dump_json()  # type: ignore[attr-defined]
            del item.stash[RESULT_KEY]


class SelftestWorker(_SelftestRole, Worker):
    """An xdist worker of a self-test run."""


class SelftestController(_SelftestRole, Controller):
    """The serial self-test, or xdist's controller of one: validation, probe, ``selftest.json``."""

    def __init__(self, config: pytest.Config, options: Any) -> None:
        super().__init__(config, options)
        self.results: dict[str, selftest.SelftestScenario] = {}
        self.selftest_report: selftest.SelftestReport | None = None
        self.selftest_path: Path | None = None

    def _validate(self) -> tuple[Suite, list[Diagnostic]]:
        from pytest_atlante.run.evalrun import validate

        # Scripts are optional: a scenario without one is reported no-reference, not refused.
        return validate(self.options.project_root, scripted=True, optional_scripts=True, names=self.options.names,
                        host_override=self.options.host)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        worker_pid = getattr(report, "atlante_worker_pid", None)
        if isinstance(worker_pid, int):
            self.worker_pids.add(worker_pid)
        key = getattr(report, "atlante_trial", None)
        if isinstance(key, dict) and report.when == "setup":
            self.started[report.nodeid] = TrialKey(key["scenario"], key["trial"])
        raw = getattr(report, "atlante_selftest", None)
        if raw is not None:
            self.results[report.nodeid] = selftest.SelftestScenario.model_validate_json(raw)
        elif report.when in ("call", "???") and report.failed and report.nodeid in self.expected and report.nodeid not in self.results:
            self.run_errors.append(Diagnostic("", report.nodeid, "eval-worker-crashed",
                                              "the self-test item produced no result (its worker crashed, an internal "
                                              "error, or pytest-timeout's guard fired)", "see the failure above"))

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.validation_failed or self.suite is None or self.host_info is None:
            return
        from pytest_atlante.sandbox import trialdir as sandbox

        errors = list(self.run_errors)
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            errors.append(Diagnostic("", "", "eval-interrupted", "the self-test was interrupted",
                                     "run it again; selftest.json holds the scenarios that finished"))
        info = self.host_info
        host = HostIdentity(name=info.name, version=info.version, dialect=info.dialect)  # type: ignore[arg-type]
        report = selftest.build(self.run_id, self.started_at, host, list(self.results.values()), list(self.expected), errors)
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
        if self.selftest_report is None and not self.run_errors:
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
