"""What a run does where the eval run and the self-test differ: the one plan the roles consult.

The roles (``roles.Controller``, ``trialrole.Worker``) are the same for both: validation, the
probe, collection, the suite handed to xdist workers, results riding on the ``TestReport``, the
controller writing the one document, the run directory cleaned up at the end.  The plan answers
the few questions whose answer differs (composition, as pytest's ``TerminalReporter`` or xdist's
``DSession`` are composed into a run, not subclassed per mode):

- :class:`EvalPlan` — one item per trial (``trial-1..trials``), ``maxSessions`` allocated in
  item order, the ``TrialRecord`` of each trial, ``report.json``;
- :class:`SelftestPlan` — ``--atlante-selftest``: one item per scenario (trial number 0) running a
  no-op trial (``with_host=False``) and the scripted reference trial, never counted against
  ``maxSessions`` (zero tokens), the classification of each scenario, ``selftest.json``.  It runs
  in scripted mode (a scenario without a script is ``no-reference``, not a validation failure),
  and neither the cost forecast nor the cap applies.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from pytest_atlante.diagnostics import Diagnostic
from pytest_atlante.records import TrialRecord
from pytest_atlante.report.exitcodes import EXIT_RUN_ERROR
from pytest_atlante.run.items import SELFTEST_TRIAL, TrialFailed, TrialItem
from pytest_atlante.run.options import Options
from pytest_atlante.trial.budget import allocate

if TYPE_CHECKING:
    from pytest_atlante.hosts.base import HostInfo
    from pytest_atlante.report import selftest
    from pytest_atlante.report.model import EvalReport, RunState
    from pytest_atlante.report.selftest_reuse import Reusable
    from pytest_atlante.suite.discovery import Suite, ValidSuite
    from pytest_atlante.trial.runner import Progress, TrialRunner

RECORD_KEY = pytest.StashKey[TrialRecord]()
RESULT_KEY = pytest.StashKey["selftest.SelftestScenario"]()
# The two trials of a self-test item, named like real trials' sandboxes: ``<scenario>-<n>``.
NOOP_TRIAL = 1
REFERENCE_TRIAL = 2
# One line of terminal output and its markup (``red``, ``yellow``).
Line = tuple[str, dict[str, bool]]


class Trials(Protocol):
    """What a plan asks of the role that runs an item (``trialrole.TrialRole``)."""

    def run_trial(self, item: TrialItem) -> None: ...

    def trial_runner(self) -> TrialRunner: ...

    def progress(self) -> Progress: ...

    @property
    def out_dir(self) -> Path: ...


class Run(Protocol):
    """What a plan reads of the controller when the run ends (``roles.Controller``)."""

    options: Options
    state: RunState
    host_info: HostInfo | None
    user_interrupt: bool

    @property
    def out_dir(self) -> Path: ...

    def write_report(self, *, interrupted: bool, other_failures: bool = False,
                     no_tests: bool = False) -> tuple[EvalReport, Path, Path | None]: ...


class EvalPlan:
    """The eval run's answers; :class:`SelftestPlan` changes the few that differ."""

    title = "atlante eval"            # the terminal summary's section
    trials_per_item = 1               # pytest-timeout's guard covers this many trials per item
    shards = True                     # --atlante-shard deselects the other shards' items
    crashed = "the trial produced no record (its worker crashed or pytest-timeout's guard fired)"
    crashed_hint = "see the failure above; the report keeps every trial that finished"

    def __init__(self) -> None:
        self.report: EvalReport | None = None
        self.path: Path | None = None
        self.html_path: Path | None = None

    def wrote(self, report: EvalReport, path: Path, html_path: Path | None) -> None:
        """The run's ``report.json`` (and ``report.html``), for the summary."""
        self.report, self.path, self.html_path = report, path, html_path

    def adjust(self, options: Options) -> Options:
        return options

    def prepare(self, suite: ValidSuite, digests: dict[str, tuple[str, str | None]], host: HostInfo | None,
                options: Options) -> list[str]:
        """The controller's last step before trials, once fixtures, build and host are known; the
        lines to print (the eval run has none)."""
        return []

    def to_workers(self) -> dict[str, Any]:
        """What the controller's :meth:`prepare` decided, for each xdist worker (``workerinput``)."""
        return {}

    def from_controller(self, shared: dict[str, Any]) -> None:
        """A worker takes what :meth:`to_workers` sent."""

    def validate(self, options: Options) -> tuple[Suite, list[Diagnostic]]:
        from pytest_atlante.run.evalrun import validate

        return validate(options.project_root, scripted=options.scripted, names=options.names, host_override=options.host,
                        variants=options.variants)

    def trial_numbers(self, suite: ValidSuite) -> list[int]:
        """The trial numbers every scenario contributes (``1..trials``)."""
        return list(range(1, suite.eval.budget.trials + 1))

    def allocation(self, items: list[TrialItem], max_sessions: int) -> Iterable[tuple[TrialItem, bool]]:
        # maxSessions is allocated by a pure function of the ordered items, so every worker (each
        # collects the whole suite) and a serial run agree without talking to each other.
        return allocate(items, max_sessions)

    def run_item(self, role: Trials, item: TrialItem) -> None:
        role.run_trial(item)

    def annotate(self, report: pytest.TestReport, item: TrialItem) -> None:
        record = item.stash.get(RECORD_KEY, None)
        if record is not None:
            report.atlante_record = record.model_dump_json()  # type: ignore[attr-defined]
            del item.stash[RECORD_KEY]

    def receive(self, report: pytest.TestReport, state: RunState) -> TrialRecord | None:
        """The record a test report carries, kept in the run state (``None``: this report has none)."""
        raw = getattr(report, "atlante_record", None)
        if raw is None:
            return None
        record = TrialRecord.model_validate_json(raw)
        state.records[report.nodeid] = record
        return record

    def has_result(self, node_id: str, state: RunState) -> bool:
        return node_id in state.records

    def finish(self, run: Run, exitstatus: int) -> int:
        """Write the run's document; the exit status it decided."""
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED and run.user_interrupt
        try:
            # pytest says "tests failed" also when only ordinary items (e.g. Atlas query cases) did;
            # the report must carry the status the process will exit with.
            # pytest's 5 ("no tests collected": nothing was selected) stays, and the report states it,
            # unless the run owns that status (an --atlante-shard whose share is empty exits 0).
            no_tests = exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and not self.owns(exitstatus, run.options)
            report, path, html_path = run.write_report(interrupted=interrupted,
                                                       other_failures=exitstatus == pytest.ExitCode.TESTS_FAILED,
                                                       no_tests=no_tests)
            self.wrote(report, path, html_path)
            return report.exitStatus
        except OSError as exc:
            run.state.errors.append(Diagnostic(str(run.out_dir), "", "eval-report-write-failed", str(exc),
                                               "check the output directory"))
        except Exception as exc:  # noqa: BLE001 - a run-level error, reported, never a traceback
            run.state.errors.append(internal_error(exc))
        return EXIT_RUN_ERROR

    def owns(self, exitstatus: int, options: Options) -> bool:
        """Whether the run's status replaces pytest's (never pytest's usage errors and the like)."""
        ours = [pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED]
        if options.shard is not None:
            ours.append(pytest.ExitCode.NO_TESTS_COLLECTED)  # a shard whose share is empty still reports
        return exitstatus in ours

    def summary(self, errors: list[Diagnostic], warnings: Sequence[str], failures_shown: bool = True) -> list[Line] | None:
        """The terminal summary's lines, or ``None`` for no section."""
        if self.report is None and not errors:
            return None
        from pytest_atlante.run.evalrun import summary_lines, summary_markup

        lines: list[Line] = []
        if self.report is not None and self.path is not None:
            texts = summary_lines(self.report, self.path, self.html_path)
            lines += list(zip(texts, summary_markup(self.report, texts), strict=True))
        lines += [(problem.render(), {"red": True}) for problem in errors]
        lines += [(warning, {"yellow": True}) for warning in warnings]
        return lines


class SelftestPlan(EvalPlan):
    """``--atlante-selftest``: one item per scenario, a no-op and a reference trial, ``selftest.json``.

    ``report.selftest`` (and ``report.model``) are imported where they are used, never by this
    module: an eval run's workers import this module but never a self-test's report.
    """

    title = "atlante self-test"
    trials_per_item = 2     # the no-op trial (no host session, but setup and checks) and the reference
    shards = False
    crashed = ("the self-test item produced no result (its worker crashed, an internal error, or "
               "pytest-timeout's guard fired)")
    crashed_hint = "see the failure above"

    def __init__(self) -> None:
        super().__init__()
        self.results: dict[str, selftest.SelftestScenario] = {}
        self.selftest: selftest.SelftestReport | None = None
        self.inputs: dict[str, str] = {}          # scenario name: inputs digest (selftest_reuse.py)
        self.reusable: dict[str, Reusable] = {}   # scenario name: an earlier sealed clean reference

    def adjust(self, options: Options) -> Options:
        # The reference trial is the scripted trial: scripted mode whatever the command line said.
        # It spends no money, so the cost forecast and the cap do not apply.
        return dataclasses.replace(options, scripted=True, forecast=False, max_cost=None)

    def prepare(self, suite: ValidSuite, digests: dict[str, tuple[str, str | None]], host: HostInfo | None,
                options: Options) -> list[str]:
        """Each scenario's inputs digest, and the earlier sealed reference runs it may reuse (none
        with ``--atlante-selftest-full``)."""
        from pytest_atlante.report.runs import run_dirs
        from pytest_atlante.report.selftest_reuse import earlier_references, inputs_digest

        if host is None:
            return []
        overrides = {"isolation": options.isolation, "network": options.network}
        eval_section = suite.eval.model_dump(mode="json", by_alias=True)
        self.inputs = {name: inputs_digest(scenario, harness, host.name, host.version, eval_section, overrides)
                       for name, (scenario, harness) in digests.items()}
        if options.selftest_full:
            return ["atlante: full self-test (--atlante-selftest-full): every reference trial runs"]
        with_script = {e.scenario.name for e in suite.scenarios if e.script is not None}
        self.reusable = earlier_references(run_dirs(options.project_root),
                                           {n: d for n, d in self.inputs.items() if n in with_script})
        if not self.reusable:
            return []
        return [f"atlante: {len(self.reusable)} of {len(with_script)} reference trial(s) reused from earlier "
                f"sealed self-tests (inputs unchanged); --atlante-selftest-full runs them again"]

    def to_workers(self) -> dict[str, Any]:
        return {"inputs": self.inputs, "reusable": {n: r.to_json() for n, r in self.reusable.items()}}

    def from_controller(self, shared: dict[str, Any]) -> None:
        from pytest_atlante.report.selftest_reuse import Reusable

        self.inputs = dict(shared.get("inputs", {}))
        self.reusable = {n: Reusable.from_json(r) for n, r in shared.get("reusable", {}).items()}

    def validate(self, options: Options) -> tuple[Suite, list[Diagnostic]]:
        from pytest_atlante.run.evalrun import validate

        # Scripts are optional: a scenario without one is reported no-reference, not refused.
        return validate(options.project_root, scripted=True, optional_scripts=True, names=options.names,
                        host_override=options.host)

    def trial_numbers(self, suite: ValidSuite) -> list[int]:
        return [SELFTEST_TRIAL]

    def allocation(self, items: list[TrialItem], max_sessions: int) -> Iterable[tuple[TrialItem, bool]]:
        return ((item, True) for item in items)  # zero tokens: never counted against maxSessions

    def run_item(self, role: Trials, item: TrialItem) -> None:
        assert item.budget is not None
        runner = role.trial_runner()
        entry = item.entry
        name = entry.scenario.name
        noop = runner.run(entry, NOOP_TRIAL, item.nodeid, item.budget, role.progress(), with_host=False)
        reused = self.reusable.get(name) if entry.script is not None else None
        reference = (runner.run(entry, REFERENCE_TRIAL, item.nodeid, item.budget, role.progress())
                     if entry.script is not None and reused is None else None)
        from pytest_atlante.report import selftest

        refused = refused_calls(role.out_dir, reference) if reference is not None else []
        result = selftest.classify(name, entry.display, entry.source, item.nodeid, noop,
                                   reused.trial if reused is not None else reference, refused)
        result = result.model_copy(update={"inputsDigest": self.inputs.get(name),
                                           "reusedFrom": reused.run_id if reused is not None else None})
        item.stash[RESULT_KEY] = result
        if result.status not in selftest.ACCEPTABLE:
            raise TrialFailed(selftest.failure_text(result))

    def annotate(self, report: pytest.TestReport, item: TrialItem) -> None:
        super().annotate(report, item)
        result = item.stash.get(RESULT_KEY, None)
        if result is not None:
            report.atlante_selftest = result.model_dump_json()  # type: ignore[attr-defined]
            del item.stash[RESULT_KEY]

    def receive(self, report: pytest.TestReport, state: RunState) -> TrialRecord | None:
        from pytest_atlante.report import selftest

        raw = getattr(report, "atlante_selftest", None)
        if raw is not None:
            self.results[report.nodeid] = selftest.SelftestScenario.model_validate_json(raw)
        return None

    def has_result(self, node_id: str, state: RunState) -> bool:
        return node_id in self.results

    def finish(self, run: Run, exitstatus: int) -> int:
        from pytest_atlante.report import selftest
        from pytest_atlante.report.model import HostIdentity, ensure_gitignore

        state, options = run.state, run.options
        errors = list(state.errors)
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            errors.append(Diagnostic("", "", "eval-interrupted", "the self-test was interrupted",
                                     "run it again; selftest.json holds the scenarios that finished"))
        info = run.host_info
        host = HostIdentity(name=info.name, version=info.version, dialect=info.dialect) if info else None  # type: ignore[arg-type]
        self.selftest = selftest.build(state.run_id, state.started_at, host, list(self.results.values()),
                                       list(state.expected), errors)
        status = self.selftest.exitStatus
        try:
            self.path = selftest.write(self.selftest, run.out_dir)
            if options.out is None:
                ensure_gitignore(options.project_root / ".atlante")
        except OSError as exc:
            state.errors.append(Diagnostic(str(run.out_dir), "", "eval-report-write-failed", str(exc),
                                           "check the output directory"))
            status = EXIT_RUN_ERROR
        if exitstatus == pytest.ExitCode.TESTS_FAILED and status == 0:
            status = int(pytest.ExitCode.TESTS_FAILED)   # an ordinary item of the same run failed
        return status

    def owns(self, exitstatus: int, options: Options) -> bool:
        return exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED)

    def summary(self, errors: list[Diagnostic], warnings: Sequence[str], failures_shown: bool = True) -> list[Line] | None:
        """Each diagnostic once: a failing scenario's are in its failure report (the FAILURES section,
        JUnit, report-log), so here only a passing one's, or every one's when pytest shows no
        failure reports (``--tb=no``)."""
        from pytest_atlante.report import selftest

        if self.selftest is None and not errors:
            return None
        lines: list[Line] = []
        if self.selftest is not None:
            for result in self.selftest.scenarios:
                acceptable = result.status in selftest.ACCEPTABLE
                if acceptable or not failures_shown:
                    lines += [(problem.render(), {"red": not acceptable, "yellow": acceptable})
                              for problem in selftest.diagnostics(result)]
            lines += [(line, {}) for line in selftest.summary_lines(self.selftest, self.path)]
        lines += [(problem.render(), {"red": True}) for problem in errors]
        return lines


def refused_calls(out_dir: Path, record: TrialRecord) -> list[str]:
    """A scripted trial's tool calls the host refused or errored, from its transcript (none without
    one: a trial that never reached its host session is an infra-error anyway)."""
    from pytest_atlante.fsutil import UnreadableFile
    from pytest_atlante.report import selftest
    from pytest_atlante.trial.transcript import read_transcript

    if not record.transcript:
        return []
    try:
        return selftest.refused_calls(read_transcript(out_dir / record.transcript))
    except UnreadableFile as exc:
        return [f"the transcript could not be read ({exc.reason}), so the host's answers to the calls are unknown"]


def plan_for(options: Options) -> EvalPlan:
    return SelftestPlan() if options.selftest else EvalPlan()


def internal_error(exc: Exception) -> Diagnostic:
    return Diagnostic("", "", "eval-internal-error", f"{type(exc).__name__}: {exc}",
                      "this is a bug in pytest-atlante; please report it with the run's output")


__all__ = ["RECORD_KEY", "EvalPlan", "Line", "Run", "SelftestPlan", "Trials", "internal_error", "plan_for", "refused_calls"]
