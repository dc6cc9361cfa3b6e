"""The eval run as pytest sees it: one ``EvalSession`` per process, registered at configure time.

Roles follow pytest-xdist: the *controller* (the only process in a serial run, the coordinating
process with ``-n``) validates, probes the host once, aggregates trial records from test reports and
writes the report; a *worker* receives the probe result through ``workerinput``, collects the same
items and runs trials.  Behaviour lives in plain modules (discovery, trial, report); this class only
adapts them to pytest's hooks.
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Generator

import pytest

from .config import HostName
from .budget import TrialBudget, allocate, trial_budget
from .diagnostics import Diagnostic, envelope
from .discovery import ScenarioEntry, Suite, discover
from .build import verify
from .fsutil import atomic_write_text
from .report import ensure_gitignore
from .items import ALLOCATED_KEY, ENTRY_KEY, TRIAL_KEY, ScenarioFile, TrialFailed, TrialItem
from .exitcodes import EXIT_RUN_ERROR, EXIT_VALIDATION
from .records import TrialRecord
from .scenario import SETUP_TIMEOUT_MS, effective_timeout_ms

WORKERINPUT_KEY = "atlante"


@dataclass(frozen=True)
class Options:
    project_root: Path
    names: list[str]
    out: Path | None
    keep: bool
    scripted: bool
    host: HostName | None

    @classmethod
    def from_config(cls, config: pytest.Config) -> "Options":
        project = config.getoption("atlante_project")
        # Default: where pytest was started ("pytest at the project root"), not pytest's rootdir,
        # which an enclosing repository's ini file can move upwards.
        root = Path(project).resolve() if project else config.invocation_params.dir
        out = config.getoption("atlante_out")
        return cls(root, list(config.getoption("atlante_scenario") or []),
                   Path(out).resolve() if out else None, bool(config.getoption("atlante_keep")),
                   bool(config.getoption("atlante_scripted")), config.getoption("atlante_host"))


class EvalSession:
    def __init__(self, config: pytest.Config, options: Options) -> None:
        self.config = config
        self.options = options
        self.is_worker = hasattr(config, "workerinput")
        if self.is_worker:
            # execnet starts xdist workers with SIGINT ignored, so Ctrl-C would leave a trial's host
            # running until its timeout.  A worker that raises KeyboardInterrupt instead kills the
            # host tree at once (process.run) and records the trial as interrupted.
            signal.signal(signal.SIGINT, signal.default_int_handler)
        self.worker_pids: set[int] = set()   # controller: workers seen running trials
        self.started: set[str] = set()       # controller under xdist: trials a worker began
        self.suite: Suite | None = None
        self.run_id = ""
        self.started_at = datetime.now(timezone.utc)
        self.host_info: dict[str, str] | None = None
        self.sources: dict[str, Any] = {}     # the controller's record of fixtures and build tree
        self.records: dict[str, TrialRecord] = {}
        self.expected: list[str] = []          # eval node ids in collection order (controller, serial)
        self.run_errors: list[Diagnostic] = []
        self.validation_failed = False
        self.report_path: Path | None = None
        self._engine: Any = None

    # -- set-up ---------------------------------------------------------------------------------
    @property
    def trials_per_scenario(self) -> int:
        assert self.suite is not None and self.suite.eval is not None
        return self.suite.eval.budget.trials

    def entries_for(self, path: Path) -> list[ScenarioEntry]:
        assert self.suite is not None
        return [e for e in self.suite.scenarios if e.file == path]

    @property
    def out_dir(self) -> Path:
        if self.options.out is not None:
            return self.options.out
        return self.options.project_root / ".atlante" / "eval" / self.run_id

    def _fail_validation(self, problems: list[Diagnostic]) -> None:
        self.validation_failed = True
        problems = sorted(set(problems))
        writer = self.config.get_terminal_writer()
        writer.line("")
        for problem in problems:
            writer.line(problem.render(), red=True)
        if self.options.out is not None or self.options.project_root.is_dir():
            path = self.out_dir / "diagnostics.json"
            try:
                atomic_write_text(path, json.dumps(envelope(problems), indent=2) + "\n")
                if self.options.out is None:
                    ensure_gitignore(self.options.project_root / ".atlante")
                writer.line(f"atlante: diagnostics envelope written to {path}")
            except OSError as exc:
                writer.line(f"eval-report-write-failed: {path}: {exc.strerror or exc}", red=True)
        pytest.exit(f"atlante: {len(problems)} validation problem(s); no trial was run", returncode=EXIT_VALIDATION)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        from .engine import new_run_id, prepare_run

        if self.is_worker:
            shared = self.config.workerinput[WORKERINPUT_KEY]  # type: ignore[attr-defined]
            self.run_id = shared["runId"]
            self.host_info = shared["host"]
            self.sources = shared["sources"]
        else:
            self.run_id = new_run_id(self.started_at)
        self.suite = discover(self.options.project_root, scripted=self.options.scripted, names=self.options.names,
                              host_override=self.options.host)
        if self.is_worker:
            if self.suite.diagnostics:
                raise pytest.UsageError("atlante: the suite changed on disk while the run started")
        else:
            if self.suite.diagnostics:
                # The build check needs no machine state: report its problems in the same run.
                build_problems = verify(self.suite.project_root, self.suite.eval.host) if self.suite.eval else []
                self._fail_validation(self.suite.diagnostics + build_problems)
            try:
                problems, run_error, info = prepare_run(self.suite, scripted=self.options.scripted,
                                                        probe=not self.config.option.collectonly)
                if info is not None and not problems and not run_error:
                    from .engine import prepare_run_sources

                    self.sources = prepare_run_sources(self.suite, self.run_id)
            except OSError as exc:
                problems, info = [], None
                run_error = [Diagnostic("", "", "eval-sources-copy-failed",
                                        f"cannot copy the fixtures and the build tree for this run: {exc}",
                                        "check the space and permissions of the temp directory ($TMPDIR)")]
            except Exception as exc:  # noqa: BLE001 - a run-level error, reported, never a traceback
                problems, info = [], None
                run_error = [Diagnostic("", "", "eval-internal-error", f"{type(exc).__name__}: {exc}",
                                        "this is a bug in pytest-atlante; please report it with the run's output")]
            if problems:
                self._fail_validation(problems)
            if run_error:
                self.run_errors.extend(run_error)
                try:
                    self._write_report(session, interrupted=False)
                except OSError as exc:
                    self.run_errors.append(Diagnostic(str(self.out_dir), "", "eval-report-write-failed",
                                                      exc.strerror or str(exc), "check the output directory"))
                # pytest prints no terminal summary after an exit from sessionstart: say it here.
                writer = self.config.get_terminal_writer()
                for problem in self.run_errors:
                    writer.line(problem.render(), red=True)
                pytest.exit("atlante: the run cannot start; no trial was run", returncode=EXIT_RUN_ERROR)
            self.host_info = info
        if self.config.args_source != pytest.Config.ArgsSource.ARGS:
            # No paths on the command line: the configured suites are the run.
            self.config.args = sorted({str(e.file) for e in self.suite.scenarios})

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKERINPUT_KEY] = {"runId": self.run_id, "host": self.host_info, "sources": self.sources}

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        # The xdist controller collects nothing itself; every worker reports the same ordered ids.
        assert self.suite is not None
        files = {os.path.relpath(e.file, self.config.rootpath).replace(os.sep, "/") for e in self.suite.scenarios}
        self.expected = [i for i in ids if i.split("::", 1)[0] in files]

    # -- collection -----------------------------------------------------------------------------
    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> ScenarioFile | None:
        if self.suite is None:
            return None
        entry = next((e for e in self.suite.scenarios if e.file == file_path), None)
        if entry is None:
            return None
        if not file_path.is_relative_to(self.config.rootpath):
            # pytest would shorten an id outside the rootdir to "::name"; keep the pack visible.
            return ScenarioFile.from_parent(parent, path=file_path, nodeid=entry.display)
        return ScenarioFile.from_parent(parent, path=file_path)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        assert self.suite is not None and self.suite.eval is not None
        trials = [i for i in items if isinstance(i, TrialItem)]
        guard = self.config.pluginmanager.has_plugin("timeout")
        for item, allocated in allocate(trials, self.suite.eval.budget.maxSessions):
            item.stash[ALLOCATED_KEY] = allocated
            if guard and item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(guard_seconds(item.stash[ENTRY_KEY], self.suite.eval.budget.timeoutMs),
                                                    method="thread", func_only=True))
        self.expected = [i.nodeid for i in trials]

    # -- running --------------------------------------------------------------------------------
    def budget_for(self, item: pytest.Item) -> TrialBudget:
        assert self.suite is not None and self.suite.eval is not None
        entry = item.stash[ENTRY_KEY]
        budget = self.suite.eval.budget
        return trial_budget(budget, effective_timeout_ms(entry.scenario, budget.timeoutMs), item.stash.get(ALLOCATED_KEY, True))

    def run_item(self, item: pytest.Item, budget: TrialBudget) -> None:
        from .engine import Engine, TrialInterrupted

        assert self.suite is not None and self.host_info is not None
        if self._engine is None:
            self._engine = Engine(self.suite, self.run_id, self.host_info, scripted=self.options.scripted, keep=self.options.keep,
                                  sources=self.sources, report_dir=self.out_dir)
        entry = item.stash[ENTRY_KEY]
        trial = item.stash[TRIAL_KEY]
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        verbose = reporter is not None and self.config.get_verbosity() > 0 and not self.is_worker

        capture = self.config.pluginmanager.get_plugin("capturemanager")

        def progress(phase: str) -> None:
            if verbose and reporter is not None:
                # Output capture is active while a test runs; suspend it, as pytest's live
                # logging does, so the phase reaches the terminal now rather than the report.
                if capture is not None:
                    with capture.global_and_fixture_disabled():
                        reporter.write(f"[{phase}] ", flush=True)
                else:
                    reporter.write(f"[{phase}] ", flush=True)

        try:
            record: TrialRecord = self._engine.run(entry, trial, item.nodeid, budget, progress)
        except TrialInterrupted as exc:
            # Only a serial run's controller sees this; xdist workers die with the interrupt.
            if not self.is_worker:
                self.records[item.nodeid] = exc.record
            raise
        item.stash[RECORD_KEY] = record
        if record.verdict == "pass":
            return
        if record.verdict == "skipped-budget":
            pytest.skip(f"skipped-budget: maxSessions={budget.maxSessions} exhausted before this trial")
        raise TrialFailed(failure_text(record))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
        outcome = yield
        report = outcome.get_result()
        if call.when == "setup" and self.is_worker:
            # Tells the controller which process to interrupt if the run is stopped (see below).
            report.atlante_worker_pid = os.getpid()
        if call.when == "call" and RECORD_KEY in item.stash:
            # Rides on the TestReport: xdist serialises report attributes to the controller.
            report.atlante_record = item.stash[RECORD_KEY].model_dump_json()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.is_worker:
            return
        worker_pid = getattr(report, "atlante_worker_pid", None)
        if isinstance(worker_pid, int):
            self.worker_pids.add(worker_pid)
        raw = getattr(report, "atlante_record", None)
        if raw is not None:
            record = TrialRecord.model_validate_json(raw)
            self.records[report.nodeid] = record
            self._progress_line(record)
        elif report.when in ("call", "???") and report.failed and report.nodeid in self.expected and report.nodeid not in self.records:
            # "???" is how xdist reports an item whose worker died under it.
            self.run_errors.append(Diagnostic("", report.nodeid, "eval-worker-crashed",
                                              "the trial produced no record (its worker crashed or pytest-timeout's guard fired)",
                                              "see the failure above; the report keeps every trial that finished"))

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        # Under xdist the controller's terminal cannot see a worker's phases; say when a trial starts
        # so a long host session is visibly under way.  Serial runs show phases inline with -v.
        if self.is_worker or not self.config.pluginmanager.has_plugin("dsession"):
            return
        self.started.add(nodeid)
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and self.config.get_verbosity() > 0 and nodeid in self.expected:
            reporter.write_line(f"atlante: {nodeid}: host session started")

    def pytest_keyboard_interrupt(self) -> None:
        # Ctrl-C in a terminal reaches every process of the group, but a SIGINT sent to the
        # controller alone would leave workers finishing their trials: pass it on.
        for pid in sorted(self.worker_pids):
            try:
                os.kill(pid, signal.SIGINT)
            except OSError:  # already gone
                pass

    def _progress_line(self, record: TrialRecord) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or self.config.get_verbosity() < 0:
            return
        tokens = record.usage.total if record.usage else 0
        cost = f"${record.costUsd:.4f}" if record.costUsd is not None else "$-"
        reporter.write_line(f"atlante: {record.nodeId}: {record.verdict} in {record.durationMs / 1000:.1f}s, "
                            f"{tokens} tokens, {cost}")

    # -- finishing ------------------------------------------------------------------------------
    def _write_report(self, session: pytest.Session, *, interrupted: bool) -> int:
        from .engine import finish_report

        assert self.suite is not None
        if interrupted:
            # Under xdist an interrupted trial's record dies with its worker; the controller saw it
            # start, so it is reported as interrupted (a serial run recorded it already).
            for node_id in sorted(self.started - set(self.records)):
                self.records[node_id] = interrupted_record(node_id)
        exit_status, path = finish_report(
            self.suite, self.run_id, self.started_at, self.host_info, self.records, self.expected,
            self.run_errors, self.out_dir, interrupted=interrupted, scripted=self.options.scripted,
            default_out=self.options.out is None,
        )
        self.report_path = path
        return exit_status

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.is_worker or self.validation_failed or self.suite is None or not self.host_info:
            return
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        try:
            status = self._write_report(session, interrupted=interrupted)
        except OSError as exc:
            self.run_errors.append(Diagnostic(str(self.out_dir), "", "eval-report-write-failed", str(exc), "check the output directory"))
            status = EXIT_RUN_ERROR
        except Exception as exc:  # noqa: BLE001 - a run-level error, reported, never a traceback
            self.run_errors.append(Diagnostic("", "", "eval-internal-error", f"{type(exc).__name__}: {exc}",
                                              "this is a bug in pytest-atlante; please report it with the run's output"))
            status = EXIT_RUN_ERROR
        if exitstatus == pytest.ExitCode.TESTS_FAILED and status == 0:
            # Every trial passed, so an ordinary item in the same run (e.g. an Atlas query case) failed.
            status = int(pytest.ExitCode.TESTS_FAILED)
        if exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED) or status == EXIT_RUN_ERROR:
            session.exitstatus = status

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker or (self.report_path is None and not self.run_errors):
            return
        from .engine import summary_lines

        terminalreporter.section("atlante eval")
        for line in summary_lines(self.report_path) if self.report_path else []:
            terminalreporter.write_line(line)
        for problem in self.run_errors:
            terminalreporter.write_line(problem.render(), red=True)


RECORD_KEY = pytest.StashKey[TrialRecord]()
GUARD_GRACE_S = 120


def guard_seconds(entry: ScenarioEntry, run_timeout_ms: int) -> float:
    """pytest-timeout's guard for one trial: everything the trial may legitimately take, plus grace.

    The plugin enforces its own timeouts (host session, setup, each check); this guard only catches a
    plugin bug that hangs a trial.  It uses pytest-timeout's ``thread`` method (never SIGALRM, which
    would interrupt the host runner's waits): when it fires, pytest-timeout dumps stacks and ends
    the process, so an xdist run reports the trial's worker as crashed (exit 3, the report keeps
    every finished trial) — the price of a guard that cannot be swallowed by the code it guards.
    """
    scenario = entry.scenario
    checks_ms = sum(getattr(c, "timeoutMs", 0) for c in scenario.checks)
    return (effective_timeout_ms(scenario, run_timeout_ms) + SETUP_TIMEOUT_MS + checks_ms) / 1000 + GUARD_GRACE_S


def interrupted_record(node_id: str) -> TrialRecord:
    """The record of a trial that was running when the run was interrupted, from its node id."""
    name, _, rest = node_id.rsplit("::", 1)[-1].partition("[trial-")
    return TrialRecord(scenario=name, trial=int(rest.rstrip("]") or 0), nodeId=node_id, verdict="infra-error",
                       interrupted=True, error="interrupted (Ctrl-C) while the trial ran")


def failure_text(record: TrialRecord) -> str:
    """One readable failure: the first line says what failed, details below."""
    failed = [c for c in record.checks if not c.passed]
    if record.verdict == "fail" and failed:
        head = f"{record.scenario} trial {record.trial}: fail: {failed[0].message}"
    elif record.error:
        head = f"{record.scenario} trial {record.trial}: {record.verdict}: {record.error.splitlines()[0]}"
    elif failed:
        # infra-error from a check that could not run: name that check, not just the verdict
        first = next((c for c in failed if c.error), failed[0])
        head = f"{record.scenario} trial {record.trial}: {record.verdict}: {first.message}"
    else:
        head = f"{record.scenario} trial {record.trial}: {record.verdict}"
    lines = [head, ""]
    for check in record.checks:
        mark = "PASS" if check.passed else ("ERROR" if check.error else "FAIL")
        extra = " (timed out)" if check.timedOut else ""
        lines.append(f"  [{mark}] #{check.index} {check.type}: {check.message}{extra}")
        if not check.passed and check.output:
            lines.extend("        " + line for line in check.output.splitlines()[-15:])
    if record.error and record.error.count("\n"):
        lines += ["", record.error]
    if record.changedPaths:
        lines += ["", "changed paths: " + ", ".join(record.changedPaths)]
    if record.escapes:
        lines += ["", "changed outside the sandbox (escapes): " + ", ".join(record.escapes)]
    return "\n".join(lines)

