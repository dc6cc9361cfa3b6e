"""The part of an eval run every process that runs trials shares, and the xdist worker.

:class:`TrialRole` collects the suite's scenario documents into trial items, gives each its
budget (``maxSessions`` allocated in item order), runs an item when pytest calls it and annotates
its test reports; :class:`Worker` is an xdist worker built from the controller's ``workerinput``
(no re-discovery, no re-validation, no probe).  ``roles.Controller`` is the other role.  Where an
eval run and the self-test differ, both ask the run's plan (``plan.py``).
"""

from __future__ import annotations

import base64
import os
import pickle
import signal
import socket
import threading
from collections.abc import Callable, Generator, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from pytest_atlante.hosts.base import HostInfo
from pytest_atlante.records import INTERRUPTED_ERROR, TrialRecord
from pytest_atlante.run.items import RUNNER_KEY, ScenarioFile, TrialFailed, TrialItem, scenario_file_id, trial_failure
from pytest_atlante.run.options import RERUNS_REFUSED, Options
from pytest_atlante.run.outputs import configured_outputs
from pytest_atlante.run.plan import RECORD_KEY, EvalPlan, plan_for
from pytest_atlante.run.shard import ShardSpec, TrialRef, split
from pytest_atlante.sandbox.isolation import IsolationRecord
from pytest_atlante.suite.discovery import ScenarioEntry, ValidSuite, collection_plan, is_within
from pytest_atlante.suite.scenario import SETUP_TIMEOUT_MS, effective_timeout_ms
from pytest_atlante.suite.variants import CONTROL
from pytest_atlante.trial.budget import trial_budget
from pytest_atlante.trial.runner import Progress, RunnerSettings, TrialInterrupted, TrialKey, TrialRunner

if TYPE_CHECKING:
    from pytest_atlante.run.costcap import Ledger
    from pytest_atlante.run.inflight import TrialsInFlight

__all__ = ["TrialRole", "Worker", "failure_text", "guard_seconds", "interrupted_record", "register_worker"]

WORKERINPUT_KEY = "atlante"
GUARD_KEY = pytest.StashKey[threading.Timer]()
ATTEMPTED_KEY = pytest.StashKey[bool]()
GUARD_GRACE_S = 120


class TrialRole:
    """Collection, allocation and trial running: the same in every process that runs trials.

    ``plan`` answers where an eval run and the self-test differ (``plan.py``).
    """

    def __init__(self, config: pytest.Config, options: Options, plan: EvalPlan | None = None) -> None:
        self.config = config
        self.plan = plan if plan is not None else plan_for(options)
        self.options = self.plan.adjust(options)
        self.suite: ValidSuite | None = None   # set once validation passed
        self.run_id = ""
        self.host_info: HostInfo | None = None
        self.sources: dict[str, Any] = {}  # the controller's copy of fixtures and build tree, and its record
        self.isolation: IsolationRecord | None = None
        self.durations: dict[str, float] = {}  # expected ms per scenario, for a sharded run's split
        self._runner: TrialRunner | None = None
        self._arm_runners: dict[str, TrialRunner] = {}
        # A variant run's probed hosts by name (the control's is ``host_info``).
        self.arm_host_infos: dict[str, HostInfo] = {}
        self.by_file: dict[Path, list[ScenarioEntry]] = {}
        self.collectable: frozenset[Path] | None = None  # set when atlante chose pytest's arguments
        self._previous_sigterm: Any = None
        self._sigterm_handled = False
        # --atlante-in-flight N > 1: this process's trials run N at a time (run/inflight.py).
        self.in_flight: TrialsInFlight | None = None

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
    def _ready(self, suite: ValidSuite) -> None:
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
        if self.suite is None:
            return None
        entries = self.by_file.get(file_path)
        if not entries:
            return None
        trials = self.trial_numbers()
        if not is_within(file_path, self.config.rootpath):
            # pytest would shorten an id outside the rootdir to "::name"; keep the file visible.
            return ScenarioFile.from_parent(parent, path=file_path, nodeid=scenario_file_id(entries[0], self.config.rootpath),
                                            entries=entries, trials=trials, arms=self.arm_names())
        return ScenarioFile.from_parent(parent, path=file_path, entries=entries, trials=trials, arms=self.arm_names())

    def trial_numbers(self) -> list[int]:
        """The trial numbers every scenario contributes (``1..trials``; the self-test has its own)."""
        assert self.suite is not None
        return self.plan.trial_numbers(self.suite)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        assert self.suite is not None
        trials = [i for i in items if isinstance(i, TrialItem)]
        self._give_budgets(self.plan.allocation(trials, self.suite.eval.budget.maxSessions), self.plan.trials_per_item)
        if self.plan.shards and self.options.shard is not None:
            self._keep_shard(items, trials, self.options.shard)

    def _give_budgets(self, allocation: Iterable[tuple[TrialItem, bool]], trials_per_item: int = 1) -> None:
        """Each item's frozen budget, and pytest-timeout's guard unless the item has its own marker
        (``trials_per_item`` trials' worth of it: the self-test runs two per item)."""
        assert self.suite is not None
        budget = self.suite.eval.budget
        guard = self.config.pluginmanager.has_plugin("timeout")
        # One mark per distinct guard (marks are immutable): most trials of a suite share a few.
        guards: dict[float, pytest.MarkDecorator] = {}
        for item, allocated in allocation:
            item.budget = trial_budget(budget, effective_timeout_ms(item.entry.scenario, budget.timeoutMs), allocated)
            if guard and item.get_closest_marker("timeout") is None:
                seconds = trials_per_item * guard_seconds(item.entry, budget.timeoutMs)
                mark = guards.get(seconds)
                if mark is None:
                    mark = guards[seconds] = pytest.mark.timeout(seconds, method="thread", func_only=True)
                item.add_marker(mark)

    def _keep_shard(self, items: list[pytest.Item], trials: list[TrialItem], shard: ShardSpec) -> None:
        """Deselect the other shards' trials, after the global allocation (so budgets stay global);
        the controller reads the final items at ``pytest_collection_finish``."""
        assert all(t.budget is not None for t in trials)
        assignment = split([(_ref(t), bool(t.budget and t.budget.allocated)) for t in trials], self.durations, shard.count)
        others = {id(t) for t in trials if assignment[_ref(t)] != shard.index}
        if others:
            self.config.hook.pytest_deselected(items=[i for i in items if id(i) in others])
            items[:] = [i for i in items if id(i) not in others]

    # -- running --------------------------------------------------------------------------------
    def trial_runner(self, arm: str | None = None) -> TrialRunner:
        """The runner of the control (``arm`` None or ``control``) or of a variant's arm, each built
        once: an arm's runner has its own host, model and build tree (``TrialRunner.for_arm``)."""
        if arm is not None and arm != CONTROL:
            runner = self._arm_runners.get(arm)
            if runner is None:
                assert self.suite is not None
                chosen = next(a for a in self.suite.arms if a.name == arm)
                runner = self._arm_runners[arm] = TrialRunner(
                    self.suite, self.run_id, self.arm_host_infos[chosen.host], sources=self.sources,
                    report_dir=self.out_dir, settings=self._runner_settings(), arm=chosen)
            return runner
        if self._runner is None:
            assert self.suite is not None and self.host_info is not None
            self._runner = TrialRunner(self.suite, self.run_id, self.host_info, sources=self.sources,
                                       report_dir=self.out_dir, settings=self._runner_settings())
        return self._runner

    def _runner_settings(self) -> RunnerSettings:
        # What pytest and its plugins write meanwhile is never a trial's escape (run/outputs.py).
        return RunnerSettings(scripted=self.options.scripted, keep=self.options.keep, isolation=self.isolation,
                              outputs=configured_outputs(self.config, self.options.project_root))

    def arm_names(self) -> list[str | None]:
        """The arms each scenario's trials run in: ``[None]`` without variants (today's items and
        ids), else the control and every selected variant."""
        assert self.suite is not None
        if len(self.suite.arms) < 2:
            return [None]
        # With --atlante-control-from the control's trials come from the earlier report: no item.
        return [arm.name for arm in self.suite.arms if not (self.options.control_from and arm.name == CONTROL)]

    def progress(self) -> Progress:
        return lambda phase: None

    def _unallocated(self, item: TrialItem) -> None:
        # In the call phase, not fixture setup: a failure there is a pytest "error", and JUnit and
        # IDEs would file skipped-budget apart from the other trials that did not pass.
        assert item.budget is not None
        self._not_run(item, TrialRecord(scenario=item.entry.scenario.name, trial=item.trial, nodeId=item.nodeid,
                                        verdict="skipped-budget", variant=item.arm))

    def _not_run(self, item: TrialItem, record: TrialRecord) -> NoReturn:
        """A skipped-budget trial (session cap or cost cap). Every verdict but pass is a pytest
        failure, skipped-budget included: the run exits 1, and so pytest's own exit status, the
        terminal, JUnit, report-log and TeamCity all say "failed"."""
        assert item.budget is not None
        item.stash[RECORD_KEY] = record
        raise TrialFailed(failure_text(record, item.budget.maxSessions))

    def run_item(self, item: TrialItem) -> None:
        if self.in_flight is not None:
            self.in_flight.run(item)
        else:
            self.plan.run_item(self, item)

    def keep_in_flight(self, width: int) -> None:
        """Run this process's trials ``width`` at a time (``--atlante-in-flight``; run/inflight.py)."""
        from pytest_atlante.run.inflight import TrialsInFlight
        from pytest_atlante.sandbox.process import let_children_take_interrupts

        def before_start(items: Sequence[TrialItem]) -> None:
            # In the main thread: each arm's runner is built once, and only it may set signal handlers.
            let_children_take_interrupts()
            for arm in dict.fromkeys(item.arm for item in items):
                self.trial_runner(arm)

        def forget(items: Sequence[TrialItem]) -> None:
            for item in items:
                self._forget(item)

        self.in_flight = TrialsInFlight(width, lambda item: self.plan.run_item(self, item), before_start, forget,
                                        self._waiting)
        self.config.pluginmanager.register(self.in_flight, "atlante-in-flight")

    def run_trial(self, item: TrialItem) -> None:
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
            record = self.trial_runner(item.arm).run(item.entry, item.trial, item.nodeid, item.budget, self.progress(),
                                                     variant=item.arm)
        except TrialInterrupted as exc:
            self._interrupted(item, exc.record)
            raise
        item.stash[RECORD_KEY] = record
        self._ran(item, record)
        if record.verdict != "pass":
            # Every verdict but pass is a pytest failure (see _unallocated for skipped-budget);
            # the exception's class tells a measured failure from an error (trial_failure).
            raise trial_failure(record.verdict, failure_text(record, item.budget.maxSessions))

    def _interrupted(self, item: TrialItem, record: TrialRecord) -> None:
        """Ctrl-C inside a trial (a worker's record dies with it; the controller sees it started)."""

    def _waiting(self, detail: Callable[[], str]) -> None:
        """An item waits for its trial while others are in flight (the controller's live line)."""

    def _forget(self, item: TrialItem) -> None:
        """A trial cut short by a stop pytest chose (``-x``) while in flight: not run (inflight.py)."""

    def _ran(self, item: TrialItem, record: TrialRecord) -> None:
        """A trial of this process finished (a worker remembers its own spend, see costcap.py)."""

    def _spent(self) -> float:
        """The run's spend as this process knows it just before a trial starts (see costcap.py)."""
        return 0.0

    def _skip_over_cap(self, item: TrialItem, cap: float) -> None:
        from pytest_atlante.run import costcap

        spent = self._spent()
        if spent >= cap:
            base = TrialRecord(scenario=item.entry.scenario.name, trial=item.trial, nodeId=item.nodeid, verdict="skipped-budget",
                               variant=item.arm)
            self._not_run(item, costcap.skipped_record(base, cap, spent))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
        outcome = yield
        if isinstance(item, TrialItem):
            report = outcome.get_result()
            if report.when == "call":
                self._client_details(item)
            self._annotate(report, item)

    def _client_details(self, item: TrialItem) -> None:
        """Reporters that read more than the test report (Allure, if active) get the trial's details."""
        from pytest_atlante.run.clients import allure_details

        record = item.stash.get(RECORD_KEY, None)
        summary = failure_text(record, item.budget.maxSessions) if record is not None and item.budget is not None else None
        allure_details(item, record, self.out_dir, summary)

    def _annotate(self, report: pytest.TestReport, item: TrialItem) -> None:
        # Rides on the TestReport: xdist serialises report attributes to the controller.
        report.atlante_trial = {"scenario": item.entry.scenario.name, "trial": item.trial,  # type: ignore[attr-defined]
                                **({"variant": item.arm} if item.arm is not None else {})}
        self.plan.annotate(report, item)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        for runner in [self._runner, *self._arm_runners.values()]:
            if runner is not None:
                runner.close()

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        # An in-process run (pytester) must not leave its handler in the calling process.
        if self._sigterm_handled:
            # None: the previous handler was not installed from Python; the default is the best guess.
            signal.signal(signal.SIGTERM, self._previous_sigterm if self._previous_sigterm is not None else signal.SIG_DFL)


def _terminate_as_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def register_worker(config: pytest.Config) -> None:
    """``pytest_configure`` of an xdist worker of an eval run (``config.workerinput`` is set).

    Separate from ``roles.register`` so that a worker never imports ``roles``: the controller's
    modules (the report model and its statistics, the terminal output, the start-up probes, the
    suite digests) cost every worker CPU at start-up and no trial needs them.
    """
    options = Options.from_config(config)
    plan = plan_for(options)
    shared = config.workerinput[WORKERINPUT_KEY]  # type: ignore[attr-defined]  # set by xdist
    config.pluginmanager.register(Worker(config, options, shared, plan), "atlante-eval")


class Worker(TrialRole):
    """An xdist worker: the controller already validated the suite and probed the host."""

    def __init__(self, config: pytest.Config, options: Options, shared: dict[str, Any], plan: EvalPlan | None = None) -> None:
        super().__init__(config, options, plan)
        self.run_id = shared["runId"]
        self.host_info = HostInfo(**shared["host"]) if shared["host"] else None
        self.arm_host_infos = {name: HostInfo(**info) for name, info in shared.get("armHosts", {}).items()}
        self.sources = shared["sources"]
        isolation = shared.get("isolation")
        self.isolation = IsolationRecord.model_validate(isolation) if isolation else None
        self.durations = dict(shared.get("durations", {}))
        self._shared_suite: ValidSuite = pickle.loads(base64.b64decode(shared["suite"]))
        self.plan.from_controller(shared.get("plan", {}))
        if threading.current_thread() is threading.main_thread():
            # execnet starts xdist workers with SIGINT ignored, so Ctrl-C would leave a trial's host
            # running until its timeout.  A worker that raises KeyboardInterrupt instead kills the
            # host tree at once (process.run) and records the trial as interrupted.  A worker on a
            # socket gateway may not run in the main thread, where no handler can be installed.
            signal.signal(signal.SIGINT, signal.default_int_handler)
        self.own_records: dict[str, TrialRecord] = {}
        key = shared.get("ledgerKey")
        self.ledger = _ledger(self.run_id, key) if isinstance(key, str) else None

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self._handle_sigterm()
        self._ready(self._shared_suite)

    def _ran(self, item: TrialItem, record: TrialRecord) -> None:
        self.own_records[item.nodeid] = record

    def _spent(self) -> float:
        # The controller's ledger plus this worker's own trials: its last trial's report may not
        # have reached the controller yet.
        if self.ledger is None:  # no key came with workerinput: only this worker's own spend counts
            from pytest_atlante.run import costcap

            return sum(costcap.costs(self.own_records.values()).values())
        return self.ledger.spend_before_trial(self.own_records.values())

    def _annotate(self, report: pytest.TestReport, item: TrialItem) -> None:
        super()._annotate(report, item)
        # Tells the controller which process to interrupt if the run is stopped; the host name keeps
        # it from signalling a local process that merely shares a remote worker's pid.
        report.atlante_worker_pid = os.getpid()  # type: ignore[attr-defined]
        report.atlante_worker_host = socket.gethostname()  # type: ignore[attr-defined]


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


def interrupted_record(node_id: str, key: TrialKey) -> TrialRecord:
    """The record of a trial that was running when the run was interrupted."""
    return TrialRecord(scenario=key.scenario, trial=key.trial, nodeId=node_id, verdict="infra-error",
                       interrupted=True, error=INTERRUPTED_ERROR, variant=key.variant)


def _ref(item: TrialItem) -> TrialRef:
    """The trial as the shard split knows it (with its arm in a variant run)."""
    name = item.entry.scenario.name
    return (name, item.trial) if item.arm is None else (name, item.trial, item.arm)


def trial_key(item: TrialItem) -> TrialKey:
    return TrialKey(item.entry.scenario.name, item.trial, item.arm)


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


def _ledger(run_id: str, key: str) -> Ledger:
    from pytest_atlante.run.costcap import Ledger, undumpable

    undumpable()  # the key stays in this process's memory
    return Ledger(run_id, bytes.fromhex(key))
