"""The eval run as pytest sees it: one role object per process, chosen once in ``pytest_configure``.

Roles follow pytest-xdist (``DSession`` / ``WorkerInteractor``) and pytest-cov (``Central`` /
``DistWorker``):

- :class:`Controller` — the only process of a serial run, or xdist's coordinating process: it
  discovers and validates the suite, probes the host once, allocates ``maxSessions``, fills the
  run's :class:`~pytest_atlante.report.model.RunState` from the test reports, writes the report and
  decides the exit status.  In a serial run it also runs the trials.
- :class:`~pytest_atlante.run.trialrole.Worker` — an xdist worker: it receives the validated suite,
  the run id and the probe result through ``workerinput`` (no re-discovery, no re-validation),
  collects, and runs trials.

Both share :class:`~pytest_atlante.run.trialrole.TrialRole` (collection, allocation, running a
trial, annotating reports), so no hook asks which role it is in; the self-test is not another pair
of roles but another plan (``plan.py``) the same pair consults.  The controller's terminal output
is its own plugin object (``terminal.EvalTerminalReporter``).  Behaviour lives in plain modules
(discovery, trial, evalrun); these classes only adapt them to pytest's hooks.
"""

from __future__ import annotations

import base64
import contextlib
import faulthandler
import json
import os
import pickle
import shutil
import signal
import socket
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_atlante.diagnostics import Diagnostic, envelope
from pytest_atlante.fsutil import atomic_write_text
from pytest_atlante.projectroot import CONFIG_FILE
from pytest_atlante.records import TrialRecord
from pytest_atlante.report.exitcodes import EXIT_RUN_ERROR, EXIT_VALIDATION
from pytest_atlante.report.model import EvalReport, RunState, ensure_gitignore, new_run_id
from pytest_atlante.run.items import TrialItem, scenario_file_id, trial_name
from pytest_atlante.run.options import (
    DIST_EACH_REFUSED,
    RERUNS_REFUSED,
    Options,
    is_user_interrupt,
    requested_each_distribution,
    requested_reruns,
)
from pytest_atlante.run.outputs import own_basetemp
from pytest_atlante.run.plan import EvalPlan, internal_error, plan_for
from pytest_atlante.run.shard import expected_durations
from pytest_atlante.run.startup import StartupWork
from pytest_atlante.run.terminal import EvalTerminalReporter
from pytest_atlante.run.trialrole import GUARD_KEY, WORKERINPUT_KEY, TrialRole, Worker, interrupted_record, trial_key
from pytest_atlante.sandbox.isolation import warning_text
from pytest_atlante.sandbox.rundirs import RunClaim
from pytest_atlante.suite.digests import suite_digests
from pytest_atlante.trial.runner import Progress, TrialKey

if TYPE_CHECKING:
    from pytest_atlante.hosts.base import HostInfo
    from pytest_atlante.report.runs import RunLock
    from pytest_atlante.run.costcap import Ledger
    from pytest_atlante.run.forecast import Forecast
    from pytest_atlante.run.gate import Gate
    from pytest_atlante.suite.discovery import ValidSuite

__all__ = ["Controller", "Options", "Worker", "register", "role_for"]


def role_for(config: pytest.Config) -> TrialRole:
    """The one decision about roles: an xdist worker has ``workerinput``, every other process controls.
    The plan (an eval run, or ``--atlante-selftest``) is the other decision, made once here too."""
    options = Options.from_config(config)
    plan = plan_for(options)
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        return Worker(config, options, workerinput[WORKERINPUT_KEY], plan)
    return Controller(config, options, plan)


def register(config: pytest.Config) -> None:
    """``pytest_configure`` of an eval run: the role, and beside the controller its terminal output."""
    role = role_for(config)
    config.pluginmanager.register(role, "atlante-eval")
    if isinstance(role, Controller):
        config.pluginmanager.register(role.terminal, "atlante-eval-terminal")
        _register_github(config, role)


def _register_github(config: pytest.Config, role: Controller) -> None:
    """Under GitHub Actions: the step summary and the trials' annotations (``run/github.py``)."""
    import os

    if os.environ.get("GITHUB_ACTIONS") != "true":
        return   # the module is not even imported elsewhere
    from pytest_atlante.run.github import GitHubActions, enabled

    if enabled(os.environ, bool(config.getoption("atlante_no_github"))):
        config.pluginmanager.register(
            GitHubActions(config, role.plan, lambda: role.suite.scenarios if role.suite else [], dict(os.environ)),
            "atlante-github")


class RunStopped(Exception):
    """The run ends before any trial, as it should (not an error of the plugin): its status and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Controller(TrialRole):
    """The serial run, or xdist's controller: validation, probe, aggregation, report, exit status."""

    def __init__(self, config: pytest.Config, options: Options, plan: EvalPlan | None = None) -> None:
        super().__init__(config, options, plan)
        started_at = datetime.now(UTC)
        self.run_id = new_run_id(started_at)
        self.state = RunState(self.run_id, started_at, scripted=self.options.scripted)
        self.terminal = EvalTerminalReporter(config, self.state, self.plan)
        self.worker_pids: set[int] = set()       # workers seen running trials
        self.finished_here: dict[str, TrialRecord] = {}   # this process's trials, as each finishes
        self.reused_control: list[TrialRecord] = []   # --atlante-control-from: the earlier control trials
        self.validation_failed = False
        self.user_interrupt = False               # Ctrl-C / SIGINT, as opposed to -x, --sw, --maxfail
        self.gate: Gate | None = None
        self.run_claim: RunClaim | None = None    # the run directory, held from the sources copy to the end
        self.run_lock: RunLock | None = None      # the run's folder under .atlante/eval/, marked running
        self.stopped: int | None = None           # the exit status of a run that ended before any trial
        self.startup: StartupWork | None = None   # the bubblewrap probe and dead-run sweep, beside the rest
        # Computed for the first xdist node and reused for the others (the suite is final by then):
        # the pickled suite, and the trial names and scenario files that map a node's ids to trials.
        self._suite_blob: tuple[ValidSuite | None, str] | None = None
        self._node_keys: tuple[dict[str, TrialKey], set[str]] | None = None
        # --atlante-max-cost under xdist: the spend published to workers, MAC'd with a key only this
        # process and its workers hold (costcap.py)
        self.ledger = _new_ledger(self.run_id) if self.options.max_cost is not None else None
        # Under xdist, pytest's base temp directory of this run's own (outputs.own_basetemp): the
        # end of the run never removes the user's other pytest runs' directories.
        self.basetemp = own_basetemp(config, self.run_id)

    # -- set-up ---------------------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        try:
            self._start()
        except RunStopped as stop:
            # An ordinary end before any trial (a forecast, a validation stop, a run that cannot
            # start): the session runs on to its end with nothing to collect or run, so pytest
            # prints no `Exit` banner and every plugin's sessionfinish sees the status (docs/design.md §12).
            self.stopped = stop.status
            self.terminal.stopped(stop.message)
            # xdist's status line counts the workers it is about to start ("created: 2/2 workers");
            # none will start, so it goes before xdist's own pytest_sessionstart runs.
            reporter = self.config.pluginmanager.get_plugin("terminaldistreporter")
            if reporter is not None:
                self.config.pluginmanager.unregister(reporter)

    # While stopped: no collection, no test loop (xdist's included), no workers, and the status.
    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> bool | None:
        return True if self.stopped is not None else None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        return True if self.stopped is not None else None

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_setupnodes(self, config: pytest.Config, specs: list[Any]) -> None:
        # xdist starts its workers in its own (later) pytest_sessionstart: a stopped run starts none.
        if self.stopped is not None:
            specs.clear()

    def _start(self) -> None:
        from pytest_atlante.run.evalrun import (
            prepare_arm_hosts,
            prepare_run,
            prepare_run_sources,
            unselected_agent_warnings,
        )

        # Only the controller compares against a baseline: workers never import the gate.
        from pytest_atlante.run.gate import load_gate

        self._handle_sigterm()
        if not self.options.forecast and not self.config.option.collectonly:
            # The probe and the sweep need only the machine: they run beside validation (startup.py).
            self.startup = StartupWork(probe_isolation=self.options.isolation != "off")
        found, problems = self.plan.validate(self.options)
        self.gate, gate_problems = load_gate(self.options.baseline, self.options.fail_on_regression,
                                             self.options.project_root)
        rerun_option = requested_reruns(self.config)
        if rerun_option:
            gate_problems = [*gate_problems, Diagnostic("", rerun_option, "eval-reruns-refused", RERUNS_REFUSED,
                                                        f"run without {rerun_option}; raise budget.trials for more attempts")]
        if requested_each_distribution(self.config):
            gate_problems = [*gate_problems, Diagnostic("", "--dist each", "eval-dist-each-refused", DIST_EACH_REFUSED,
                                                        "use -n N with --dist load (the default), loadscope, loadfile, "
                                                        "loadgroup or worksteal; raise budget.trials for more attempts")]
        if self.options.in_flight > 1 and self.config.pluginmanager.has_plugin("dsession"):
            from pytest_atlante.run.inflight import IN_FLIGHT_XDIST_REFUSED

            gate_problems = [*gate_problems, Diagnostic("", "--atlante-in-flight", "eval-in-flight-xdist", IN_FLIGHT_XDIST_REFUSED,
                                                        "choose one: --atlante-in-flight N (one process, N trials at once) "
                                                        "or -n N (N processes, one trial each)")]
        if problems or gate_problems:
            self._fail_validation(sorted(set(problems + gate_problems)))   # raises RunStopped
        self.suite = suite = found.validated()   # no problem: configuration and eval are there
        from pytest_atlante.suite.strays import suite_strays

        for warning in suite_strays(suite):   # before --collect-only returns: an IDE's collection says it too
            self.terminal.warn(warning)
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
            if info is not None and not problems and not run_error and len(suite.arms) > 1:
                problems, run_error, self.arm_host_infos = prepare_arm_hosts(suite, info, scripted=self.options.scripted)
            if info is not None and not problems and not run_error:
                self.run_claim, self.sources = prepare_run_sources(suite, self.run_id)
                self._hold_run_folder()
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
        # Fixtures and the build are verified now: fingerprint what every trial will copy.
        self.state.digests = suite_digests(suite.scenarios, suite.project_root, suite.eval.host)
        if self.options.control_from is not None and info is not None and not run_error:
            self._reuse_control(info)
        if not run_error:
            run_error = self._decide_isolation()
        if not run_error:
            for warning in unselected_agent_warnings(suite):
                self.terminal.warn(warning)
        if run_error:
            self._cannot_start(run_error)
        self.host_info = info
        for line in self.plan.prepare(suite, self.state.digests or {}, info, self.options):
            self.terminal.warn(line)
        if self.options.max_cost is not None:
            self._refuse_over_cap(self.options.max_cost)
        if self.options.in_flight > 1:
            self.keep_in_flight(self.options.in_flight)
        self._ready(suite)

    def _reuse_control(self, info: HostInfo) -> None:
        """--atlante-control-from: the earlier control trials, or exit 2 naming each difference."""
        from pytest_atlante.run import controlfrom

        assert self.suite is not None and self.options.control_from is not None and self.state.digests is not None
        path = self.options.control_from
        if len(self.suite.arms) < 2:
            self._fail_validation([Diagnostic("", "--atlante-control-from", controlfrom.CODE,
                                              "--atlante-control-from reuses a control beside variants; this run has none",
                                              "add --atlante-variants all (or names)")])
        report, problems = controlfrom.load(path)
        if report is not None:
            problems = controlfrom.differences(path, report, self.suite, self.state.digests, info, self.options.scripted)
        if problems or report is None:
            self._fail_validation(problems)
        assert report is not None
        self.reused_control = controlfrom.reused(report, set(self.state.digests))
        self.terminal.warn(f"atlante: {len(self.reused_control)} control trial(s) reused from {path}: "
                           f"{sum(t.verdict != 'skipped-budget' for t in self.reused_control)} session(s) saved")

    def _forecast(self) -> Forecast:
        from pytest_atlante.run.forecast import forecast, requested

        assert self.suite is not None
        numprocesses = getattr(self.config.option, "numprocesses", None)
        # Validation verified fixtures and build: the digests say which history is the same experiment.
        digests = self.state.digests or suite_digests(self.suite.scenarios, self.suite.project_root, self.suite.eval.host)
        workers = numprocesses if isinstance(numprocesses, int) and numprocesses > 0 else self.options.in_flight
        history = self.options.project_root / ".atlante" / "eval"
        if len(self.suite.arms) > 1:
            return self._arms_forecast(digests, history, workers)
        return forecast(requested(self.suite, digests), history, host=self.suite.eval.host,
                        model=self.suite.eval.model, scripted=self.options.scripted, workers=workers)

    def _arms_forecast(self, digests: dict[str, tuple[str, str | None]], history: Path, workers: int) -> Forecast:
        """A variant run's forecast and cost cap cover every arm, each from its own history."""
        from pytest_atlante.run.forecast import arm_requested, combined, forecast
        from pytest_atlante.suite.digests import harness_digest

        assert self.suite is not None
        arms = self.suite.arms
        wanted = arm_requested(self.suite, digests,
                               {a.name: harness_digest(self.suite.project_root, a.host, a.harness_of) for a in arms})
        return combined([(a.name, forecast(wanted[a.name], history, host=a.host, model=a.model,
                                           scripted=self.options.scripted, workers=workers)) for a in arms])

    def _forecast_only(self) -> None:
        from pytest_atlante.run.forecast import table_lines

        self.terminal.forecast(table_lines(self._forecast()))
        raise RunStopped(0, "atlante: forecast only (--atlante-forecast); no trial was run")

    def _refuse_over_cap(self, cap: float) -> None:
        from pytest_atlante.run.forecast import over_cap, table_lines

        predicted = self._forecast()
        problem = over_cap(predicted, cap)
        if problem is not None:
            self.terminal.forecast(table_lines(predicted))
            self._fail_validation([problem])
        if predicted.cost_unknown:
            self.terminal.cost_unknown(cap, predicted.cost_unknown)

    def _decide_isolation(self) -> list[Diagnostic]:
        """Probe bubblewrap once for the run; warn, or refuse to start, as configured."""
        from pytest_atlante.run.evalrun import model_only_problem, prepare_isolation
        from pytest_atlante.sandbox.isolation import probe

        assert self.suite is not None
        setting = self.options.isolation or self.suite.eval.isolation
        network = self.options.network or self.suite.eval.network
        self.isolation, problem = prepare_isolation(setting, network,
                                                    self.startup.isolation_probe if self.startup else probe)
        self.terminal.isolation(warning_text(setting, self.isolation))
        if problem is None and network == "model-only" and not self.options.scripted:
            problem = model_only_problem(self.suite.eval.host, dict(os.environ), self.suite.eval.model)
        if problem is None and not self.options.scripted:
            problem = self._credential_exposures()
        return [problem] if problem is not None else []

    def _credential_exposures(self) -> Diagnostic | None:
        """Whose trials' agents could read a real credential: for the summary's warning, or the
        refusal of a ``stand-in-only`` run before any session (run/credentials.py)."""
        from pytest_atlante.run.credentials import run_exposures, stand_in_only_problem

        assert self.suite is not None
        arms = [(arm.host, arm.model) for arm in self.suite.arms] or [(self.suite.eval.host, self.suite.eval.model)]
        exposures = run_exposures(arms, dict(os.environ), self.isolation)
        self.terminal.credential_exposures = exposures
        self.terminal.arm_hosts = {None: self.suite.eval.host, **{arm.name: arm.host for arm in self.suite.arms}}
        return stand_in_only_problem(exposures) if self.suite.eval.credentials == "stand-in-only" else None

    def _fail_validation(self, problems: list[Diagnostic]) -> None:
        self.validation_failed = True
        self.terminal.validation_failed(problems)
        # Only into a project (or --atlante-out): a run started where there is none writes nothing.
        if self.options.out is not None or os.path.lexists(self.options.project_root / CONFIG_FILE):
            path = self.out_dir / "diagnostics.json"
            try:
                atomic_write_text(path, json.dumps(envelope(problems), indent=2) + "\n")
                if self.options.out is None:
                    ensure_gitignore(self.options.project_root / ".atlante")
                self.terminal.diagnostics_written(path)
            except OSError as exc:
                self.terminal.diagnostics_not_written(path, exc)
        raise RunStopped(EXIT_VALIDATION, f"atlante: {len(problems)} validation problem(s); no trial was run")

    def _cannot_start(self, run_error: list[Diagnostic]) -> None:
        self.state.errors.extend(run_error)
        try:
            self.plan.wrote(*self.write_report(interrupted=False))
        except OSError as exc:
            self.state.errors.append(Diagnostic(str(self.out_dir), "", "eval-report-write-failed",
                                                exc.strerror or str(exc), "check the output directory"))
        self.terminal.cannot_start(self.state.errors)
        raise RunStopped(EXIT_RUN_ERROR, "atlante: the run cannot start; no trial was run")

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        # The suite travels pickled (workers run the same code); the probe result as plain values.
        node.workerinput[WORKERINPUT_KEY] = {
            "runId": self.run_id,
            "host": asdict(self.host_info) if self.host_info else None,
            "armHosts": {name: asdict(info) for name, info in self.arm_host_infos.items()},
            "isolation": self.isolation.model_dump() if self.isolation is not None else None,
            "suite": self._pickled_suite(),
            "durations": self.durations,
            "sources": self.sources,
            "ledgerKey": self.ledger.key.hex() if self.ledger is not None else None,
            "plan": self.plan.to_workers(),
        }

    def _pickled_suite(self) -> str:
        # Once per run, not once per node: at -n 32 a 500-scenario suite pickled for every node
        # cost the controller 0.2 s of CPU (7 ms a node).
        if self._suite_blob is None or self._suite_blob[0] is not self.suite:
            self._suite_blob = (self.suite, base64.b64encode(pickle.dumps(self.suite)).decode("ascii"))
        return self._suite_blob[1]

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        # The xdist controller collects nothing itself; every worker reports the same ordered ids.
        assert self.suite is not None
        if self._node_keys is None:  # the same for every node: built for the first one
            self._node_keys = ({trial_name(e, t, a): TrialKey(e.scenario.name, t, a) for e in self.suite.scenarios
                                for t in self.trial_numbers() for a in self.arm_names()},
                               {scenario_file_id(e, self.config.rootpath) for e in self.suite.scenarios})
        keys, files = self._node_keys
        # The ids are the worker's final items: whatever deselected the others is already applied.
        self.state.expected = {i: keys[i.rpartition("::")[2]] for i in ids
                               if i.split("::", 1)[0] in files and i.rpartition("::")[2] in keys}
        self._collected()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """The trials this run will run: the final items, after every ``pytest_collection_modifyitems``
        (``-k``, ``-m``, ``--deselect``, ``--lf``, pytest-split, pytest-shard, ``--atlante-shard``),
        so a deselected trial is never "not run" whichever plugin deselected it, and in whatever order.
        xdist's controller collects nothing (its workers report their items above)."""
        if self.config.pluginmanager.has_plugin("dsession"):
            return
        self.state.expected = {i.nodeid: trial_key(i) for i in session.items if isinstance(i, TrialItem)}
        self._collected()

    def _collected(self) -> None:
        """The selection is final: record what it was made from (``report/runs.py`` tells a run of
        the whole suite from a narrowed one by it)."""
        from pytest_atlante.report.model import SelectionRecord
        from pytest_atlante.run.options import narrowed_by

        assert self.suite is not None
        for index, record in enumerate(self.reused_control):
            # Keyed apart from this run's node ids: these trials ran in the earlier run.
            key = f"reused-control:{index}"
            self.state.records[key] = record
            self.state.expected[key] = TrialKey(record.scenario, record.trial, record.variant)
        self.state.collected = True
        self.state.selection = SelectionRecord(suiteTrials=len(self.suite.scenarios) * len(self.trial_numbers()) * len(self.arm_names()),
                                               narrowedBy=narrowed_by(self.config, self.options))

    # -- running --------------------------------------------------------------------------------
    def progress(self) -> Progress:
        if self.in_flight is not None:
            return super().progress()   # one live line cannot follow several trials at once
        return self.terminal.phases() or super().progress()

    def _interrupted(self, item: TrialItem, record: TrialRecord) -> None:
        self.state.records[item.nodeid] = record

    def _waiting(self, detail: Callable[[], str]) -> None:
        self.terminal.waiting(detail)

    def _forget(self, item: TrialItem) -> None:
        record = self.state.records.get(item.nodeid)
        if record is not None and record.interrupted:
            del self.state.records[item.nodeid]

    def _ran(self, item: TrialItem, record: TrialRecord) -> None:
        # With trials in flight, a finished trial's report may wait behind an earlier item's: its
        # spend counts for the trials starting meanwhile (the thread's write is one dict store).
        if self.in_flight is not None:
            self.finished_here[item.nodeid] = record

    def _spent(self) -> float:
        from pytest_atlante.run import costcap

        return costcap.spent({**self.state.records, **self.finished_here}.values())[0]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        worker_pid = getattr(report, "atlante_worker_pid", None)
        if isinstance(worker_pid, int) and getattr(report, "atlante_worker_host", None) == socket.gethostname():
            self.worker_pids.add(worker_pid)
        key = getattr(report, "atlante_trial", None)
        if isinstance(key, dict) and report.when == "setup":
            self.state.started[report.nodeid] = TrialKey(key["scenario"], key["trial"], key.get("variant"))
        if self.plan.receive(report, self.state) is not None:
            record = self.state.records[report.nodeid]
            self.terminal.trial_finished(record)
            if self.options.scripted:
                self._refused_scripted_calls(record)
            if self.ledger is not None:
                from pytest_atlante.run import costcap

                self.ledger.publish(costcap.costs(self.state.records.values()))
        elif (report.when in ("call", "???") and report.failed and report.nodeid in self.state.expected
              and not self.plan.has_result(report.nodeid, self.state)):
            # "???" is how xdist reports an item whose worker died under it.
            self.state.errors.append(Diagnostic("", report.nodeid, "eval-worker-crashed", self.plan.crashed,
                                                self.plan.crashed_hint))

    def _refused_scripted_calls(self, record: TrialRecord) -> None:
        """A scripted action the host refused (Claude Code's "File has not been read yet") leaves
        the trial passing if the checks do: the run says so instead of staying silent."""
        from pytest_atlante.run.plan import refused_calls

        refused = refused_calls(self.out_dir, record)
        if refused:
            self.terminal.warn(f"atlante: warning: {record.nodeId}: the host refused or errored {len(refused)} scripted "
                               f"tool call(s), so this run is not the script's solution: {'; '.join(refused)} "
                               "(`atlante selftest` reports it as reference-tool-error)")

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        if not is_user_interrupt(excinfo.value):
            return  # --sw or xdist's -x: a stop pytest chose, the trials not run are just not run
        self.user_interrupt = True
        # Ctrl-C in a terminal reaches every process of the group, but a SIGINT sent to the
        # controller alone would leave workers finishing their trials: pass it on.
        for pid in sorted(self.worker_pids):
            with contextlib.suppress(OSError):  # already gone
                os.kill(pid, signal.SIGINT)

    # -- pytest-timeout's guard (a serial run: only there does the controller run trials) ----------
    @pytest.hookimpl(optionalhook=True, tryfirst=True)
    def pytest_timeout_set_timer(self, item: pytest.Item, settings: Any) -> bool | None:
        """Our own timer instead of pytest-timeout's for a serial run's trials (see ``_guard_fired``).

        xdist workers keep pytest-timeout's: the controller reports the dead worker (exit 3).
        """
        import threading

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
        if self.in_flight is not None:
            # The other trials in flight stop their hosts and record themselves interrupted before
            # the process ends (the hung one may not answer: the stop waits a bounded time); the
            # hung trial's record below is the guard's, whatever its thread wrote meanwhile.
            self.in_flight.stop()
        self.state.records[item.nodeid] = TrialRecord(
            scenario=item.entry.scenario.name, trial=item.trial, nodeId=item.nodeid, verdict="infra-error", variant=item.arm,
            error=f"pytest-timeout's guard fired after {seconds:g} s: the trial hung past its own timeouts")
        self.state.errors.append(Diagnostic("", item.nodeid, "eval-guard-timeout",
                                            f"the trial hung for {seconds:g} s; the run was stopped",
                                            "this is a bug in pytest-atlante; please report it with the stacks printed above"))
        self.terminal.guard_fired(item.nodeid)
        faulthandler.dump_traceback(all_threads=True)
        try:
            report, path, _ = self.write_report(interrupted=False)
            lines = summary_lines(report, path)
        except Exception as exc:  # noqa: BLE001 - the process ends next either way; say why there is no report
            lines = [f"eval-report-write-failed: {type(exc).__name__}: {exc}"]
        self.terminal.last_words(lines)
        os._exit(EXIT_RUN_ERROR)

    # -- finishing ------------------------------------------------------------------------------
    def write_report(self, *, interrupted: bool, other_failures: bool = False,
                     no_tests: bool = False) -> tuple[EvalReport, Path, Path | None]:
        """``report.json`` from the run state (and ``report.html`` with ``--atlante-html``)."""
        from pytest_atlante.run.evalrun import arm_records, finish_report, host_identity

        assert self.suite is not None
        state = self.state
        for node_id, record in list(self.finished_here.items()):
            # With trials in flight, a trial may have finished while the run stopped before its
            # item reported it (Ctrl-C, -x, the guard): it ran and was paid for, so it counts.
            state.records.setdefault(node_id, record)
        if interrupted:
            # Under xdist an interrupted trial's record dies with its worker; the controller saw it
            # start, so it is reported as interrupted (a serial run recorded it already).
            for node_id, key in state.started.items():
                if node_id not in state.records:
                    state.records[node_id] = interrupted_record(node_id, key)
        state.interrupted = interrupted
        state.host = host_identity(self.host_info)
        state.arms = arm_records(self.suite, self.host_info, self.arm_host_infos)
        state.isolation = self.isolation
        report, path = finish_report(state, self.suite, self.options, out_dir=self.out_dir, gate=self.gate,
                                     other_failures=other_failures, no_tests=no_tests)
        html = None
        if self.options.html:
            from pytest_atlante.report.view import write_view

            html = write_view(path)
        return report, path, html

    @pytest.hookimpl(tryfirst=True)  # before other plugins read session.exitstatus
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        super().pytest_sessionfinish(session, exitstatus)
        try:
            self._finish(session, exitstatus)
        finally:
            if self.run_claim is not None:
                from pytest_atlante.run.evalrun import release_run_dir

                # After the report: the run directory and the run's sources copy go, kept or not.
                release_run_dir(self.run_id, keep=self.options.keep, held=self.run_claim)
                self.run_claim = None
            if self.startup is not None:
                self.startup.finish()
            if self.basetemp is not None:  # every worker has ended: nothing writes there any more
                shutil.rmtree(self.basetemp, ignore_errors=True)
            self._retain_runs()

    def _hold_run_folder(self) -> None:
        """While the run lives, its folder under .atlante/eval/ is marked running: retention and
        ``atlante runs`` leave it alone (a folder a --atlante-out run writes elsewhere is not ours)."""
        from pytest_atlante.report.runs import hold

        if self.options.out is None:
            with contextlib.suppress(OSError):  # only retention's care: the report says if the folder is unwritable
                self.run_lock = hold(self.out_dir)

    def _retain_runs(self) -> None:
        """``eval.keepRuns``: the older run folders go once this run's report is written."""
        if self.run_lock is None or self.suite is None:
            return
        from pytest_atlante.report.runs import prune

        self.run_lock.release()
        self.run_lock = None
        protect = [self.options.baseline.resolve()] if self.options.baseline is not None else []
        prune(self.options.project_root, self.suite.eval.keepRuns, protect=protect)

    def _finish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.stopped is not None:
            session.exitstatus = self.stopped
            return
        if self.validation_failed or self.suite is None or self.host_info is None:
            return
        status = self.plan.finish(self, exitstatus)
        if self.plan.owns(exitstatus, self.options) or status == EXIT_RUN_ERROR:
            session.exitstatus = status


def _new_ledger(run_id: str) -> Ledger:
    from pytest_atlante.run.costcap import Ledger, undumpable

    undumpable()  # the key stays in this process's memory
    return Ledger.new(run_id)
