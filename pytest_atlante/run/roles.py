"""The eval run as pytest sees it: one role object per process, chosen once in ``pytest_configure``.

Roles follow pytest-xdist (``DSession`` / ``WorkerInteractor``) and pytest-cov (``Central`` /
``DistWorker``):

- :class:`Controller` — the only process of a serial run, or xdist's coordinating process: it
  discovers and validates the suite, probes the host once, allocates ``maxSessions``, aggregates
  the trial records that arrive on test reports, writes the report and decides the exit status.
  In a serial run it also runs the trials.
- :class:`Worker` — an xdist worker: it receives the validated suite, the run id and the probe
  result through ``workerinput`` (no re-discovery, no re-validation), collects, and runs trials.

Both share :class:`_TrialRole` (collection, allocation, running a trial, annotating reports), so no
hook asks which role it is in.  Behaviour lives in plain modules (discovery, trial, evalrun); these
classes only adapt them to pytest's hooks.
"""

from __future__ import annotations

import base64
import dataclasses
import faulthandler
import json
import os
import pickle
import signal
import socket
import threading
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generator, Iterable, NoReturn

import pytest

from pytest_atlante.trial.budget import allocate, trial_budget
from pytest_atlante.diagnostics import Diagnostic, envelope
from pytest_atlante.suite.discovery import ScenarioEntry, Suite, collection_plan
from pytest_atlante.suite.digests import suite_digests
from pytest_atlante.report.exitcodes import EXIT_RUN_ERROR, EXIT_VALIDATION
from pytest_atlante.fsutil import atomic_write_text
from pytest_atlante.hosts.base import HostInfo
from pytest_atlante.hosts.names import HostName
from pytest_atlante.sandbox.isolation import IsolationRecord, IsolationSetting, warning_text
from pytest_atlante.run.items import RUNNER_KEY, ScenarioFile, TrialFailed, TrialItem, trial_name
from pytest_atlante.records import INTERRUPTED_ERROR, TrialRecord
from pytest_atlante.report.model import EvalReport, ensure_gitignore, new_run_id
from pytest_atlante.suite.scenario import SETUP_TIMEOUT_MS, effective_timeout_ms
from pytest_atlante.run.shard import ShardSpec, expected_durations, split
from pytest_atlante.trial.runner import Progress, TrialInterrupted, TrialKey, TrialRunner

if TYPE_CHECKING:
    from pytest_atlante.run.forecast import Forecast
    from pytest_atlante.run.gate import Gate

WORKERINPUT_KEY = "atlante"
RECORD_KEY = pytest.StashKey[TrialRecord]()
GUARD_KEY = pytest.StashKey[threading.Timer]()
ATTEMPTED_KEY = pytest.StashKey[bool]()
GUARD_GRACE_S = 120
RERUNS_REFUSED = ("reruns are refused in eval runs: every attempt would be a host session outside maxSessions, "
                  "and a pass on rerun would hide the failure the pass rate measures; use budget.trials to repeat "
                  "a scenario")


@dataclass(frozen=True)
class Options:
    project_root: Path
    names: list[str]
    out: Path | None
    keep: bool
    scripted: bool
    host: HostName | None
    isolation: IsolationSetting | None
    selftest: bool = False
    forecast: bool = False
    max_cost: float | None = None
    baseline: Path | None = None
    fail_on_regression: bool = False
    html: bool = False
    shard: ShardSpec | None = None
    run_group: str | None = None

    @classmethod
    def from_config(cls, config: pytest.Config) -> "Options":
        project = config.getoption("atlante_project")
        # Default: where pytest was started ("pytest at the project root"), not pytest's rootdir,
        # which an enclosing repository's ini file can move upwards.
        root = Path(project).resolve() if project else config.invocation_params.dir
        out = config.getoption("atlante_out")
        shard = config.getoption("atlante_shard")
        baseline = config.getoption("atlante_baseline")
        return cls(root, list(config.getoption("atlante_scenario") or []),
                   Path(out).resolve() if out else None, bool(config.getoption("atlante_keep")),
                   bool(config.getoption("atlante_scripted")), config.getoption("atlante_host"),
                   config.getoption("atlante_isolation"),
                   bool(config.getoption("atlante_selftest")), bool(config.getoption("atlante_forecast")),
                   config.getoption("atlante_max_cost"),
                   Path(baseline) if baseline else None, bool(config.getoption("atlante_fail_on_regression")),
                   bool(config.getoption("atlante_html")),
                   ShardSpec(*shard) if shard else None, config.getoption("atlante_run_group"))


def role_for(config: pytest.Config) -> "_TrialRole":
    """The one decision about roles: an xdist worker has ``workerinput``, every other process controls."""
    options = Options.from_config(config)
    workerinput = getattr(config, "workerinput", None)
    if options.selftest:
        from pytest_atlante.run.selftest_roles import SelftestController, SelftestWorker

        # The reference trial is the scripted trial: scripted mode whatever the command line said.
        # It spends no money, so the cost forecast and the cap do not apply.
        options = dataclasses.replace(options, scripted=True, forecast=False, max_cost=None)

        if workerinput is not None:
            return SelftestWorker(config, options, workerinput[WORKERINPUT_KEY])
        return SelftestController(config, options)
    if workerinput is not None:
        return Worker(config, options, workerinput[WORKERINPUT_KEY])
    return Controller(config, options)


class _TrialRole:
    """Collection, allocation and trial running: the same in every process that runs trials."""

    def __init__(self, config: pytest.Config, options: Options) -> None:
        self.config = config
        self.options = options
        self.suite: Suite | None = None
        self.run_id = ""
        self.host_info: HostInfo | None = None
        self.sources: dict[str, Any] = {}  # the controller's copy of fixtures and build tree, and its record
        self.isolation: IsolationRecord | None = None
        self.durations: dict[str, float] = {}  # expected ms per scenario, for a sharded run's split
        self._runner: TrialRunner | None = None
        self.by_file: dict[Path, list[ScenarioEntry]] = {}
        self.collectable: frozenset[Path] | None = None  # set when atlante chose pytest's arguments
        self._previous_sigterm: Any = None
        self._sigterm_handled = False

    def _handle_sigterm(self) -> None:
        """CI cancellation sends SIGTERM: handled like Ctrl-C (exit 3, the report written, running
        trials marked interrupted) in every role, instead of dying with the hosts still running.
        Only the main thread may install a handler (a worker on a socket gateway may not run there)."""
        if threading.current_thread() is threading.main_thread():
            self._previous_sigterm = signal.signal(signal.SIGTERM, _terminate_as_interrupt)
            self._sigterm_handled = True

    @property
    def out_dir(self) -> Path:
        """The report's directory; workers write their trials' transcripts there too."""
        if self.options.out is not None:
            return self.options.out
        return self.options.project_root / ".atlante" / "eval" / self.run_id

    # -- set-up ---------------------------------------------------------------------------------
    def _ready(self, suite: Suite) -> None:
        """The suite is final: trials may be collected and run from here on."""
        self.suite = suite
        self.config.stash[RUNNER_KEY] = self
        for entry in suite.scenarios:
            self.by_file.setdefault(entry.file, []).append(entry)
        if self.config.args_source != pytest.Config.ArgsSource.ARGS:
            # No paths on the command line: the configured suites are the run.
            self.config.args, self.collectable = collection_plan(list(self.by_file), self.config.rootpath)

    # -- collection -----------------------------------------------------------------------------
    def pytest_ignore_collect(self, collection_path: Path) -> bool | None:
        # The directories atlante passed to pytest may hold other files (test modules, scripts):
        # an eval run collects its scenario documents and nothing else.
        if self.collectable is None or collection_path in self.collectable:
            return None
        return True

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> ScenarioFile | None:
        if self.suite is None or self.suite.eval is None:
            return None
        entries = self.by_file.get(file_path)
        if not entries:
            return None
        trials = self.trial_numbers()
        if not file_path.is_relative_to(self.config.rootpath):
            # pytest would shorten an id outside the rootdir to "::name"; keep the pack visible.
            return ScenarioFile.from_parent(parent, path=file_path, nodeid=entries[0].display, entries=entries, trials=trials)
        return ScenarioFile.from_parent(parent, path=file_path, entries=entries, trials=trials)

    def trial_numbers(self) -> list[int]:
        """The trial numbers every scenario contributes (``1..trials``; the self-test has its own)."""
        assert self.suite is not None and self.suite.eval is not None
        return list(range(1, self.suite.eval.budget.trials + 1))

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        assert self.suite is not None and self.suite.eval is not None
        trials = [i for i in items if isinstance(i, TrialItem)]
        # maxSessions is allocated here, by a pure function of the ordered items, so every worker
        # (each collects the whole suite) and a serial run agree without talking to each other.
        self._give_budgets(allocate(trials, self.suite.eval.budget.maxSessions))
        if self.options.shard is not None:
            trials = self._keep_shard(items, trials, self.options.shard)
        self._collected(trials)

    def _give_budgets(self, allocation: Iterable[tuple[TrialItem, bool]], trials_per_item: int = 1) -> None:
        """Each item's frozen budget, and pytest-timeout's guard unless the item has its own marker
        (``trials_per_item`` trials' worth of it: the self-test runs two per item)."""
        assert self.suite is not None and self.suite.eval is not None
        budget = self.suite.eval.budget
        guard = self.config.pluginmanager.has_plugin("timeout")
        for item, allocated in allocation:
            item.budget = trial_budget(budget, effective_timeout_ms(item.entry.scenario, budget.timeoutMs), allocated)
            if guard and item.get_closest_marker("timeout") is None:
                seconds = trials_per_item * guard_seconds(item.entry, budget.timeoutMs)
                item.add_marker(pytest.mark.timeout(seconds, method="thread", func_only=True))

    def _keep_shard(self, items: list[pytest.Item], trials: list[TrialItem], shard: ShardSpec) -> list[TrialItem]:
        """Deselect the other shards' trials, after the global allocation (so budgets stay global)."""
        assert all(t.budget is not None for t in trials)
        assignment = split([((t.entry.scenario.name, t.trial), bool(t.budget and t.budget.allocated)) for t in trials],
                           self.durations, shard.count)
        others = {id(t) for t in trials if assignment[(t.entry.scenario.name, t.trial)] != shard.index}
        if others:
            self.config.hook.pytest_deselected(items=[i for i in items if id(i) in others])
            items[:] = [i for i in items if id(i) not in others]
        return [t for t in trials if id(t) not in others]

    def _collected(self, trials: list[TrialItem]) -> None:
        """The trials this process will run, in order (the controller remembers them)."""

    # -- running --------------------------------------------------------------------------------
    def _trial_runner(self) -> TrialRunner:
        if self._runner is None:
            assert self.suite is not None and self.host_info is not None
            self._runner = TrialRunner(self.suite, self.run_id, self.host_info, scripted=self.options.scripted,
                                       keep=self.options.keep, sources=self.sources, report_dir=self.out_dir,
                                       isolation=self.isolation, out_dir=self.out_dir)
        return self._runner

    def _progress(self) -> Progress:
        return lambda phase: None

    def _unallocated(self, item: TrialItem) -> None:
        # In the call phase, not fixture setup: a failure there is a pytest "error", and JUnit and
        # IDEs would file skipped-budget apart from the other trials that did not pass.
        assert item.budget is not None
        self._not_run(item, TrialRecord(scenario=item.entry.scenario.name, trial=item.trial, nodeId=item.nodeid,
                                        verdict="skipped-budget"))

    def _not_run(self, item: TrialItem, record: TrialRecord) -> NoReturn:
        """A skipped-budget trial (session cap or cost cap). Every verdict but pass is a pytest
        failure, skipped-budget included: the run exits 1, and so pytest's own exit status, the
        terminal, JUnit, report-log and TeamCity all say "failed"."""
        assert item.budget is not None
        item.stash[RECORD_KEY] = record
        raise TrialFailed(failure_text(record, item.budget.maxSessions))

    def run_item(self, item: TrialItem) -> None:
        # The budget is the one decided at collection, never the ``atlante_budget`` fixture's value:
        # a conftest that overrides the fixture can read the budget but not loosen it.
        assert item.budget is not None
        if ATTEMPTED_KEY in item.stash:
            # A rerun plugin (pytest-rerunfailures' flaky mark, pytest-retry ...) is running the trial
            # again: that would be a session beyond maxSessions, and a pass that hides the failure.
            raise TrialFailed(f"{item.entry.scenario.name} trial {item.trial}: {RERUNS_REFUSED}")
        item.stash[ATTEMPTED_KEY] = True
        if not item.budget.allocated:
            self._unallocated(item)
        if self.options.max_cost is not None:
            self._skip_over_cap(item, self.options.max_cost)
        try:
            record = self._trial_runner().run(item.entry, item.trial, item.nodeid, item.budget, self._progress())
        except TrialInterrupted as exc:
            self._interrupted(item, exc.record)
            raise
        item.stash[RECORD_KEY] = record
        self._ran(item, record)
        if record.verdict != "pass":
            # Every verdict but pass is a pytest failure (see _unallocated for skipped-budget).
            raise TrialFailed(failure_text(record, item.budget.maxSessions))

    def _interrupted(self, item: TrialItem, record: TrialRecord) -> None:
        """Ctrl-C inside a trial (a worker's record dies with it; the controller sees it started)."""

    def _ran(self, item: TrialItem, record: TrialRecord) -> None:
        """A trial of this process finished (a worker remembers its own spend, see costcap.py)."""

    def _spent(self) -> float:
        """The run's spend as this process knows it just before a trial starts (see costcap.py)."""
        return 0.0

    def _skip_over_cap(self, item: TrialItem, cap: float) -> None:
        from pytest_atlante.run import costcap

        spent = self._spent()
        if spent >= cap:
            base = TrialRecord(scenario=item.entry.scenario.name, trial=item.trial, nodeId=item.nodeid, verdict="skipped-budget")
            self._not_run(item, costcap.skipped_record(base, cap, spent))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
        outcome = yield
        if isinstance(item, TrialItem):
            self._annotate(outcome.get_result(), item)

    def _annotate(self, report: pytest.TestReport, item: TrialItem) -> None:
        # Rides on the TestReport: xdist serialises report attributes to the controller.
        report.atlante_trial = {"scenario": item.entry.scenario.name, "trial": item.trial}  # type: ignore[attr-defined]
        record = item.stash.get(RECORD_KEY, None)
        if record is not None:
            report.atlante_record = record.model_dump_json()  # type: ignore[attr-defined]
            del item.stash[RECORD_KEY]

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self._runner is not None:
            self._runner.close()

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        # An in-process run (pytester) must not leave its handler in the calling process.
        if self._sigterm_handled:
            # None: the previous handler was not installed from Python; the default is the best guess.
            signal.signal(signal.SIGTERM, self._previous_sigterm if self._previous_sigterm is not None else signal.SIG_DFL)


def _terminate_as_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


class Worker(_TrialRole):
    """An xdist worker: the controller already validated the suite and probed the host."""

    def __init__(self, config: pytest.Config, options: Options, shared: dict[str, Any]) -> None:
        super().__init__(config, options)
        self.run_id = shared["runId"]
        self.host_info = HostInfo(**shared["host"]) if shared["host"] else None
        self.sources = shared["sources"]
        isolation = shared.get("isolation")
        self.isolation = IsolationRecord.model_validate(isolation) if isolation else None
        self.durations = dict(shared.get("durations", {}))
        self._shared_suite: Suite = pickle.loads(base64.b64decode(shared["suite"]))
        if threading.current_thread() is threading.main_thread():
            # execnet starts xdist workers with SIGINT ignored, so Ctrl-C would leave a trial's host
            # running until its timeout.  A worker that raises KeyboardInterrupt instead kills the
            # host tree at once (process.run) and records the trial as interrupted.  A worker on a
            # socket gateway may not run in the main thread, where no handler can be installed.
            signal.signal(signal.SIGINT, signal.default_int_handler)
        self.own_records: dict[str, TrialRecord] = {}

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self._handle_sigterm()
        self._ready(self._shared_suite)

    def _ran(self, item: TrialItem, record: TrialRecord) -> None:
        self.own_records[item.nodeid] = record

    def _spent(self) -> float:
        # The controller's ledger plus this worker's own trials: its last trial's report may not
        # have reached the controller yet.
        from pytest_atlante.run import costcap

        return costcap.spend_before_trial(self.run_id, self.own_records.values())

    def _annotate(self, report: pytest.TestReport, item: TrialItem) -> None:
        super()._annotate(report, item)
        # Tells the controller which process to interrupt if the run is stopped; the host name keeps
        # it from signalling a local process that merely shares a remote worker's pid.
        report.atlante_worker_pid = os.getpid()  # type: ignore[attr-defined]
        report.atlante_worker_host = socket.gethostname()  # type: ignore[attr-defined]


class Controller(_TrialRole):
    """The serial run, or xdist's controller: validation, probe, aggregation, report, exit status."""

    def __init__(self, config: pytest.Config, options: Options) -> None:
        super().__init__(config, options)
        self.started_at = datetime.now(timezone.utc)
        self.run_id = new_run_id(self.started_at)
        self.worker_pids: set[int] = set()       # workers seen running trials
        self.started: dict[str, TrialKey] = {}   # trials whose setup finished (node id → key)
        self.records: dict[str, TrialRecord] = {}
        self.expected: dict[str, TrialKey] = {}  # requested trials in collection order
        self.run_errors: list[Diagnostic] = []
        self.validation_failed = False
        self.user_interrupt = False               # Ctrl-C / SIGINT, as opposed to -x, --sw, --maxfail
        self.report: EvalReport | None = None
        self.report_path: Path | None = None
        self.html_path: Path | None = None
        self.digests: dict[str, tuple[str, str | None]] | None = None   # per scenario, after validation
        self.gate: Gate | None = None

    # -- set-up ---------------------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        from pytest_atlante.run.evalrun import prepare_run, prepare_run_sources
        # Only the controller compares against a baseline: workers never import the gate.
        from pytest_atlante.run.gate import load_gate

        self._handle_sigterm()
        suite, problems = self._validate()
        self.suite = suite
        self.gate, gate_problems = load_gate(self.options.baseline, self.options.fail_on_regression)
        rerun_option = requested_reruns(self.config)
        if rerun_option:
            gate_problems = [*gate_problems, Diagnostic("", rerun_option, "eval-reruns-refused", RERUNS_REFUSED,
                                                        f"run without {rerun_option}; raise budget.trials for more attempts")]
        if problems or gate_problems:
            self._fail_validation(sorted(set(problems + gate_problems)))
        if self.options.shard is not None:
            self.durations = expected_durations(self.options.project_root)
        if self.options.forecast:
            self._forecast_only()
        if self.config.option.collectonly:
            # --collect-only (e.g. an IDE's test explorer) never needs the CLI: no probe.
            self._ready(suite)
            return
        try:
            problems, run_error, info = prepare_run(suite, scripted=self.options.scripted)
            if info is not None and not problems and not run_error:
                self.sources = prepare_run_sources(suite, self.run_id)
        except OSError as exc:
            problems, info = [], None
            run_error = [Diagnostic("", "", "eval-sources-copy-failed",
                                    f"cannot copy the fixtures and the build tree for this run: {exc}",
                                    "check the space and permissions of the temp directory ($TMPDIR)")]
        except Exception as exc:  # noqa: BLE001 - a run-level error, reported, never a traceback
            problems, info = [], None
            run_error = [internal_error(exc)]
        if problems:
            self._fail_validation(problems)
        if suite.eval is not None:
            # Fixtures and the build are verified now: fingerprint what every trial will copy.
            self.digests = suite_digests(suite.scenarios, suite.project_root, suite.eval.host)
        if not run_error:
            run_error = self._decide_isolation()
        if run_error:
            self._cannot_start(run_error)
        self.host_info = info
        if self.options.max_cost is not None:
            self._refuse_over_cap(self.options.max_cost)
        self._ready(suite)

    def _validate(self) -> tuple[Suite, list[Diagnostic]]:
        from pytest_atlante.run.evalrun import validate

        return validate(self.options.project_root, scripted=self.options.scripted, names=self.options.names,
                        host_override=self.options.host)

    def _forecast(self) -> "Forecast":
        from pytest_atlante.run.forecast import forecast, requested

        assert self.suite is not None and self.suite.eval is not None
        numprocesses = getattr(self.config.option, "numprocesses", None)
        # Validation verified fixtures and build: the digests say which history is the same experiment.
        digests = self.digests or suite_digests(self.suite.scenarios, self.suite.project_root, self.suite.eval.host)
        return forecast(requested(self.suite, digests), self.options.project_root / ".atlante" / "eval", host=self.suite.eval.host,
                        model=self.suite.eval.model, scripted=self.options.scripted,
                        workers=numprocesses if isinstance(numprocesses, int) and numprocesses > 0 else 1)

    def _forecast_only(self) -> None:
        from pytest_atlante.run.forecast import table_lines

        writer = self.config.get_terminal_writer()
        writer.line("")
        for line in table_lines(self._forecast()):
            writer.line(line)
        pytest.exit("atlante: forecast only (--atlante-forecast); no trial was run", returncode=0)

    def _refuse_over_cap(self, cap: float) -> None:
        from pytest_atlante.run.forecast import over_cap, table_lines

        predicted = self._forecast()
        problem = over_cap(predicted, cap)
        writer = self.config.get_terminal_writer()
        if problem is not None:
            writer.line("")
            for line in table_lines(predicted):
                writer.line(line)
            self._fail_validation([problem])
        if predicted.cost_unknown:
            writer.line(f"atlante: --atlante-max-cost {cap:g}: no cost history for {', '.join(predicted.cost_unknown)}; "
                        "the forecast cannot cover them, the cap still stops the run once its recorded spend reaches it")

    def _decide_isolation(self) -> list[Diagnostic]:
        """Probe bubblewrap once for the run; warn, or refuse to start, as configured."""
        from pytest_atlante.run.evalrun import prepare_isolation

        assert self.suite is not None and self.suite.eval is not None
        setting = self.options.isolation or self.suite.eval.isolation
        self.isolation, problem = prepare_isolation(setting)
        self.isolation_warning = warning_text(setting, self.isolation)
        if self.isolation_warning is not None:
            self.config.get_terminal_writer().line(self.isolation_warning, yellow=True)
        return [problem] if problem is not None else []

    def _fail_validation(self, problems: list[Diagnostic]) -> None:
        self.validation_failed = True
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

    def _cannot_start(self, run_error: list[Diagnostic]) -> None:
        self.run_errors.extend(run_error)
        try:
            self._write_report(interrupted=False)
        except OSError as exc:
            self.run_errors.append(Diagnostic(str(self.out_dir), "", "eval-report-write-failed",
                                              exc.strerror or str(exc), "check the output directory"))
        # pytest prints no terminal summary after an exit from sessionstart: say it here.
        writer = self.config.get_terminal_writer()
        for problem in self.run_errors:
            writer.line(problem.render(), red=True)
        pytest.exit("atlante: the run cannot start; no trial was run", returncode=EXIT_RUN_ERROR)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        # The suite travels pickled (workers run the same code); the probe result as plain values.
        node.workerinput[WORKERINPUT_KEY] = {
            "runId": self.run_id,
            "host": asdict(self.host_info) if self.host_info else None,
            "isolation": self.isolation.model_dump() if self.isolation is not None else None,
            "suite": base64.b64encode(pickle.dumps(self.suite)).decode("ascii"),
            "durations": self.durations,
            "sources": self.sources,
        }

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        # The xdist controller collects nothing itself; every worker reports the same ordered ids.
        assert self.suite is not None and self.suite.eval is not None
        keys = {trial_name(e, t): TrialKey(e.scenario.name, t) for e in self.suite.scenarios for t in self.trial_numbers()}
        files = {os.path.relpath(e.file, self.config.rootpath).replace(os.sep, "/") for e in self.suite.scenarios}
        self.expected = {i: keys[i.rpartition("::")[2]] for i in ids
                         if i.split("::", 1)[0] in files and i.rpartition("::")[2] in keys}

    def _collected(self, trials: list[TrialItem]) -> None:
        self.expected = {i.nodeid: TrialKey(i.entry.scenario.name, i.trial) for i in trials}

    # -- running --------------------------------------------------------------------------------
    def _progress(self) -> Progress:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        if reporter is None or self.config.get_verbosity() <= 0:
            return super()._progress()

        def progress(phase: str) -> None:
            # Output capture is active while a test runs; suspend it, as pytest's live logging
            # does, so the phase reaches the terminal now rather than the report.
            if capture is not None:
                with capture.global_and_fixture_disabled():
                    reporter.write(f"[{phase}] ", flush=True)
            else:
                reporter.write(f"[{phase}] ", flush=True)

        return progress

    def _interrupted(self, item: TrialItem, record: TrialRecord) -> None:
        self.records[item.nodeid] = record

    def _spent(self) -> float:
        from pytest_atlante.run import costcap

        return costcap.spent(self.records.values())[0]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        worker_pid = getattr(report, "atlante_worker_pid", None)
        if isinstance(worker_pid, int) and getattr(report, "atlante_worker_host", None) == socket.gethostname():
            self.worker_pids.add(worker_pid)
        key = getattr(report, "atlante_trial", None)
        if isinstance(key, dict) and report.when == "setup":
            self.started[report.nodeid] = TrialKey(key["scenario"], key["trial"])
        raw = getattr(report, "atlante_record", None)
        if raw is not None:
            record = TrialRecord.model_validate_json(raw)
            self.records[report.nodeid] = record
            self._progress_line(record)
            if self.options.max_cost is not None:
                from pytest_atlante.run import costcap

                costcap.publish(self.run_id, costcap.costs(self.records.values()))
        elif report.when in ("call", "???") and report.failed and report.nodeid in self.expected and report.nodeid not in self.records:
            # "???" is how xdist reports an item whose worker died under it.
            self.run_errors.append(Diagnostic("", report.nodeid, "eval-worker-crashed",
                                              "the trial produced no record (its worker crashed or pytest-timeout's guard fired)",
                                              "see the failure above; the report keeps every trial that finished"))

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        # Under xdist the controller's terminal cannot see a worker's phases; say when a trial starts
        # so a long host session is visibly under way.  Serial runs show phases inline with -v.
        if not self.config.pluginmanager.has_plugin("dsession"):
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and self.config.get_verbosity() > 0 and nodeid in self.expected:
            reporter.write_line(f"atlante: {nodeid}: host session started")

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        if not is_user_interrupt(excinfo.value):
            return  # --sw or xdist's -x: a stop pytest chose, the trials not run are just not run
        self.user_interrupt = True
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

    # -- pytest-timeout's guard (a serial run: only there does the controller run trials) ----------
    @pytest.hookimpl(optionalhook=True, tryfirst=True)
    def pytest_timeout_set_timer(self, item: pytest.Item, settings: Any) -> bool | None:
        """Our own timer instead of pytest-timeout's for a serial run's trials (see ``_guard_fired``).

        xdist workers keep pytest-timeout's: the controller reports the dead worker (exit 3).
        """
        if not isinstance(item, TrialItem):
            return None
        timer = threading.Timer(settings.timeout, self._guard_fired, (item, settings.timeout))
        timer.daemon = True
        timer.name = f"atlante guard {item.nodeid}"
        item.stash[GUARD_KEY] = timer
        timer.start()
        return True

    @pytest.hookimpl(optionalhook=True, tryfirst=True)
    def pytest_timeout_cancel_timer(self, item: pytest.Item) -> bool | None:
        timer = item.stash.get(GUARD_KEY, None)
        if timer is None:
            return None
        timer.cancel()
        return True

    def _guard_fired(self, item: TrialItem, seconds: float) -> None:
        """The trial hung past every timeout of its own: mark it, write the report, exit 3.

        Like pytest-timeout's thread method this ends the process (the hung thread cannot be
        stopped), but first the report records every finished trial and this one as infra-error.
        """
        from pytest_atlante.run.evalrun import summary_lines

        capture = self.config.pluginmanager.get_plugin("capturemanager")
        if capture is not None:
            capture.suspend_global_capture(in_=True)
        self.records[item.nodeid] = TrialRecord(
            scenario=item.entry.scenario.name, trial=item.trial, nodeId=item.nodeid, verdict="infra-error",
            error=f"pytest-timeout's guard fired after {seconds:g} s: the trial hung past its own timeouts")
        self.run_errors.append(Diagnostic("", item.nodeid, "eval-guard-timeout",
                                          f"the trial hung for {seconds:g} s; the run was stopped",
                                          "this is a bug in pytest-atlante; please report it with the stacks printed above"))
        writer = self.config.get_terminal_writer()
        writer.sep("+", f"atlante: guard timeout in {item.nodeid}")
        writer.flush()
        faulthandler.dump_traceback(all_threads=True)
        try:
            self._write_report(interrupted=False)
            lines = summary_lines(self.report, self.report_path) if self.report and self.report_path else []
        except Exception as exc:  # noqa: BLE001 - the process ends next either way; say why there is no report
            lines = [f"eval-report-write-failed: {type(exc).__name__}: {exc}"]
        for line in lines + [p.render() for p in self.run_errors]:
            writer.line(line)
        writer.flush()
        os._exit(EXIT_RUN_ERROR)

    # -- finishing ------------------------------------------------------------------------------
    def _write_report(self, *, interrupted: bool, other_failures: bool = False) -> int:
        from pytest_atlante.run.evalrun import finish_report

        assert self.suite is not None
        if interrupted:
            # Under xdist an interrupted trial's record dies with its worker; the controller saw it
            # start, so it is reported as interrupted (a serial run recorded it already).
            for node_id, key in self.started.items():
                if node_id not in self.records:
                    self.records[node_id] = interrupted_record(node_id, key)
        self.report, self.report_path = finish_report(
            self.suite, self.run_id, self.started_at, self.host_info, self.records, self.expected,
            self.run_errors, self.out_dir, interrupted=interrupted, scripted=self.options.scripted,
            default_out=self.options.out is None, other_failures=other_failures, digests=self.digests,
            gate=self.gate, isolation=self.isolation, keep=self.options.keep, max_cost=self.options.max_cost,
            shard=self.options.shard, run_group=self.options.run_group,
        )
        if self.options.html:
            from pytest_atlante.report.view import write_view

            self.html_path = write_view(self.report_path)
        return self.report.exitStatus

    @pytest.hookimpl(tryfirst=True)  # before other plugins read session.exitstatus
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        super().pytest_sessionfinish(session, exitstatus)
        if self.validation_failed or self.suite is None or self.host_info is None:
            return
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED and self.user_interrupt
        try:
            # pytest says "tests failed" also when only ordinary items (e.g. Atlas query cases) did;
            # the report must carry the status the process will exit with.
            status = self._write_report(interrupted=interrupted,
                                        other_failures=exitstatus == pytest.ExitCode.TESTS_FAILED)
        except OSError as exc:
            self.run_errors.append(Diagnostic(str(self.out_dir), "", "eval-report-write-failed", str(exc), "check the output directory"))
            status = EXIT_RUN_ERROR
        except Exception as exc:  # noqa: BLE001 - a run-level error, reported, never a traceback
            self.run_errors.append(internal_error(exc))
            status = EXIT_RUN_ERROR
        ours = [pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED]
        if self.options.shard is not None:
            ours.append(pytest.ExitCode.NO_TESTS_COLLECTED)  # a shard whose share is empty still reports
        if exitstatus in ours or status == EXIT_RUN_ERROR:
            session.exitstatus = status

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.report is None and not self.run_errors:
            return
        from pytest_atlante.run.evalrun import summary_lines

        terminalreporter.section("atlante eval")
        if self.report is not None and self.report_path is not None:
            for line in summary_lines(self.report, self.report_path, self.html_path):
                terminalreporter.write_line(line)
        for problem in self.run_errors:
            terminalreporter.write_line(problem.render(), red=True)
        if self.isolation_warning is not None:
            terminalreporter.write_line(self.isolation_warning, yellow=True)


def internal_error(exc: Exception) -> Diagnostic:
    return Diagnostic("", "", "eval-internal-error", f"{type(exc).__name__}: {exc}",
                      "this is a bug in pytest-atlante; please report it with the run's output")


def guard_seconds(entry: ScenarioEntry, run_timeout_ms: int) -> float:
    """pytest-timeout's guard for one trial: everything the trial may legitimately take, plus grace.

    The plugin enforces its own timeouts (host session, setup, each check); this guard only catches a
    plugin bug that hangs a trial.  It uses pytest-timeout's ``thread`` method (never SIGALRM, which
    would interrupt the host runner's waits).  When it fires the process ends — the price of a guard
    that cannot be swallowed by the code it guards: in a serial run our own timer first writes the
    report with the trial marked (``Controller._guard_fired``, exit 3); an xdist worker dies with
    pytest-timeout's dump, and the controller reports it as crashed (exit 3, every finished trial kept).
    """
    scenario = entry.scenario
    checks_ms = sum(getattr(c, "timeoutMs", 0) for c in scenario.checks)
    return (effective_timeout_ms(scenario, run_timeout_ms) + SETUP_TIMEOUT_MS + checks_ms) / 1000 + GUARD_GRACE_S


def requested_reruns(config: pytest.Config) -> str | None:
    """The pytest-rerunfailures setting that asks for reruns of every test, if any (checked up front)."""
    for option, name in (("--reruns", "reruns"), ("--force-reruns", "force_reruns")):
        if config.getoption(name, None):
            return option
    try:
        return "the reruns ini option" if int(config.getini("reruns") or 0) else None
    except ValueError:  # no such ini option: pytest-rerunfailures is not installed
        return None


def is_user_interrupt(exc: BaseException) -> bool:
    """Ctrl-C (or SIGINT), rather than a stop pytest or a plugin asked for.

    pytest (``--sw``) and pytest-xdist (``-x``, ``--maxfail``) stop a run by raising subclasses of
    ``KeyboardInterrupt``; a signal raises ``KeyboardInterrupt`` itself (or the trial pipeline's
    ``TrialInterrupted``), and xdist reports a worker's as "received keyboard-interrupt".
    """
    return type(exc) is KeyboardInterrupt or isinstance(exc, TrialInterrupted) or "keyboard-interrupt" in str(exc)


def interrupted_record(node_id: str, key: TrialKey) -> TrialRecord:
    """The record of a trial that was running when the run was interrupted."""
    return TrialRecord(scenario=key.scenario, trial=key.trial, nodeId=node_id, verdict="infra-error",
                       interrupted=True, error=INTERRUPTED_ERROR)


# What one failed trial prints in the terminal: a readable head, never an agent-sized dump.
FAILURE_PATHS = 20
FAILURE_TEXT_CAP = 8_000


def failure_text(record: TrialRecord, max_sessions: int) -> str:
    """One readable failure: the first line says what failed, details below."""
    failed = [c for c in record.checks if not c.passed]
    if record.verdict == "skipped-budget":
        reason = record.error or f"maxSessions={max_sessions} exhausted before this trial"
        return (f"{record.scenario} trial {record.trial}: skipped-budget: {reason} "
                "(it did not run; the run fails because not every requested trial passed)")
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
        shown = ", ".join(record.changedPaths[:FAILURE_PATHS])
        total = record.changedPathsTotal or len(record.changedPaths)
        if total > FAILURE_PATHS:
            shown += f", ... and {total - FAILURE_PATHS} more (see report.json)"
        lines += ["", "changed paths: " + shown]
    if record.escapes:
        lines += ["", "changed outside the sandbox (escapes): " + ", ".join(record.escapes[:FAILURE_PATHS])]
    text = "\n".join(lines)
    # Check messages and errors are bounded already; this keeps the sum of them bounded too.
    return text if len(text) <= FAILURE_TEXT_CAP else text[:FAILURE_TEXT_CAP] + "\n... (cut; see report.json)"


__all__ = ["Controller", "Options", "Worker", "role_for"]
