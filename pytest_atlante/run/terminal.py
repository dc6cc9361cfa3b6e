"""The terminal output of an eval run: one plugin object, as pytest's ``TerminalReporter`` and
xdist's ``TerminalDistReporter`` are.

The controller composes it (``roles.register`` registers it beside the controller at configure
time) and tells it what happened; it alone writes to the terminal: the validation problems and the
forecast table before any trial, the isolation warning, each trial's phases (``-v``, serial) and
its one-line result, the start of a host session on an xdist worker (``-v``), the guard's last
words, and the ``atlante eval`` / ``atlante self-test`` section of the summary (the plan's lines).
Nothing here decides anything about the run.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_atlante.diagnostics import Diagnostic
from pytest_atlante.records import TrialRecord, Verdict
from pytest_atlante.report.model import RunState
from pytest_atlante.run.liveline import LiveLine

if TYPE_CHECKING:
    from pytest_atlante.run.plan import EvalPlan
    from pytest_atlante.trial.runner import Progress

__all__ = ["VERDICT_MARKUP", "EvalTerminalReporter", "SerialProgress"]

# pytest's colours for its own outcomes: passed green, failed and errors red, the rest yellow.
VERDICT_MARKUP: dict[Verdict, dict[str, bool]] = {
    "pass": {"green": True}, "fail": {"red": True, "bold": True}, "infra-error": {"red": True, "bold": True},
    "timeout": {"yellow": True}, "budget-exceeded": {"yellow": True}, "skipped-budget": {"yellow": True},
}


class SerialProgress:
    """A serial trial's phases inline (``-v``) and, on a terminal, the live line while its host
    session runs (``liveline.py``).  Output capture is active while a test runs: every write
    suspends it, as pytest's live logging does, so the text reaches the terminal now."""

    def __init__(self, reporter: Any, capture: Any, verbose: bool) -> None:
        self.reporter = reporter
        self.capture = capture
        self.verbose = verbose
        self.live = LiveLine(self._raw)

    @contextlib.contextmanager
    def _uncaptured(self) -> Iterator[None]:
        if self.capture is None:
            yield
            return
        with self.capture.global_and_fixture_disabled():
            yield

    def __call__(self, phase: str) -> None:
        self.live.stop()
        if self.verbose:
            with self._uncaptured():
                self.reporter.write(f"[{phase}] ", flush=True)

    def session_started(self, turns: Callable[[], int] | None) -> None:
        self.live.start(turns)

    def waiting(self, detail: Callable[[], str]) -> None:
        """An item waits for its trial, others in flight beside it (``run/inflight.py``)."""
        self.live.start(detail=detail)

    def _raw(self, text: str) -> bool:
        # Straight to the terminal, not through pytest's writer: the status is erased with
        # backspaces, and the writer must go on measuring the line it wrote (xdist and pytest's
        # progress percentage read that width).
        with self._uncaptured():
            stream = sys.stdout
            if not stream.isatty():
                return False
            stream.write(text)
            stream.flush()
            return True


class EvalTerminalReporter:
    """Everything an eval run (or a self-test) prints, registered as ``atlante-eval-terminal``."""

    def __init__(self, config: pytest.Config, state: RunState, plan: EvalPlan) -> None:
        self.config = config
        self.state = state
        self.plan = plan
        self.warnings: list[str] = []               # said at the start, and again in the summary
        self.stop_line: str | None = None           # a run that ended before any trial: why, once, at the end
        self.serial: SerialProgress | None = None   # the serial run's phases and live line, once asked for
        # Why each host's trials of this run can read a real credential (run/credentials.py), and each
        # record's arm → its host: the summary's one line for the exposed trials.
        self.credential_exposures: dict[str, str] = {}
        self.arm_hosts: dict[str | None, str] = {}

    # -- before any trial -----------------------------------------------------------------------
    def validation_failed(self, problems: Iterable[Diagnostic]) -> None:
        writer = self.config.get_terminal_writer()
        writer.line("")
        for problem in problems:
            writer.line(problem.render(), red=True)

    def diagnostics_written(self, path: Path) -> None:
        self.config.get_terminal_writer().line(f"atlante: diagnostics envelope written to {path}")

    def diagnostics_not_written(self, path: Path, exc: OSError) -> None:
        self.config.get_terminal_writer().line(f"eval-report-write-failed: {path}: {exc.strerror or exc}", red=True)

    def forecast(self, lines: Iterable[str]) -> None:
        writer = self.config.get_terminal_writer()
        writer.line("")
        for line in lines:
            writer.line(line)

    def cost_unknown(self, cap: float, scenarios: Iterable[str]) -> None:
        self.config.get_terminal_writer().line(
            f"atlante: --atlante-max-cost {cap:g}: no cost history for {', '.join(scenarios)}; "
            "the forecast cannot cover them, the cap still stops the run once its recorded spend reaches it")

    def isolation(self, warning: str | None) -> None:
        if warning is not None:
            self.warn(warning)

    def warn(self, warning: str) -> None:
        self.warnings.append(warning)
        self.config.get_terminal_writer().line(warning, yellow=True)

    def cannot_start(self, errors: Iterable[Diagnostic]) -> None:
        # pytest prints no terminal summary after an exit from sessionstart: say it here.
        writer = self.config.get_terminal_writer()
        for problem in errors:
            writer.line(problem.render(), red=True)

    # -- while trials run -----------------------------------------------------------------------
    def phases(self) -> Progress | None:
        """What follows a serial trial: its phases inline with ``-v``, the live line of a long host
        session on a terminal (``None`` with ``-q``, or without pytest's terminal)."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or self.config.get_verbosity() < 0:
            return None
        if self.serial is None:
            self.serial = SerialProgress(reporter, self.config.pluginmanager.get_plugin("capturemanager"),
                                         verbose=self.config.get_verbosity() > 0)
        return self.serial

    def waiting(self, detail: Callable[[], str]) -> None:
        """With trials in flight: the live line while an item waits for its own (its phases run
        in another thread, beside others, and are not shown)."""
        progress = self.phases()
        if isinstance(progress, SerialProgress):
            progress.waiting(detail)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Before pytest writes the outcome: a session that ended without a further phase (an error)
        # leaves no live status behind.
        if self.serial is not None:
            self.serial.live.stop()

    def trial_finished(self, record: TrialRecord) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or self.config.get_verbosity() < 0:
            return
        from pytest_atlante.report.model import SCRIPTED_COST_LABEL

        tokens = record.usage.total if record.usage else 0
        cost = f"${record.costUsd:.4f}" if record.costUsd is not None else "$-"
        if record.costBasis is not None and record.costUsd is not None:  # the host reported tokens only
            cost += f" estimated from {record.costBasis}"
        # A scripted run's figures are the script's and the host's arithmetic, never a real model's bill.
        spent = f"{tokens} scripted tokens, {cost} ({SCRIPTED_COST_LABEL})" if self.state.scripted else f"{tokens} tokens, {cost}"
        writer = self._fresh_line(reporter)
        writer.write(f"atlante: {record.nodeId}: ")
        writer.write(record.verdict, **VERDICT_MARKUP.get(record.verdict, {}))
        writer.line(f" in {record.durationMs / 1000:.1f}s, {spent}")

    def _fresh_line(self, reporter: Any) -> Any:
        """The terminal writer, at the start of a line of its own."""
        writer = self.config.get_terminal_writer()
        reporter.ensure_newline()
        if writer.width_of_current_line:
            # Under xdist the progress letters (``..F``) end no line and set no path pytest's
            # ensure_newline knows of: atlante's line starts on a line of its own all the same.
            writer.line()
        return writer

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        # Under xdist the controller's terminal cannot see a worker's phases; say when a trial starts
        # so a long host session is visibly under way.  Serial runs show phases inline with -v.
        if not self.config.pluginmanager.has_plugin("dsession"):
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and self.config.get_verbosity() > 0 and nodeid in self.state.expected:
            self._fresh_line(reporter).line(f"atlante: {nodeid}: host session started")

    def guard_fired(self, node_id: str) -> None:
        writer = self.config.get_terminal_writer()
        writer.sep("+", f"atlante: guard timeout in {node_id}")
        writer.flush()

    def last_words(self, lines: Iterable[str]) -> None:
        """The guard's report summary and the run's problems, just before the process ends."""
        writer = self.config.get_terminal_writer()
        for line in lines:
            writer.line(line)
        for problem in self.state.errors:
            writer.line(problem.render())
        writer.flush()

    def stopped(self, message: str) -> None:
        self.stop_line = message

    # -- the summary ----------------------------------------------------------------------------
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.stop_line is not None:
            # Its diagnostics (or forecast) were printed when it stopped: only the reason, once.
            terminalreporter.write_line(self.stop_line)
            return
        from pytest_atlante.run.credentials import exposure_warning

        exposed = exposure_warning(self.state.finished(), self.credential_exposures, self.arm_hosts)
        lines = self.plan.summary(self.state.errors, [*self.warnings, *([exposed] if exposed else [])],
                                  failures_shown=getattr(self.config.option, "tbstyle", "auto") != "no")
        if lines is None:
            return
        terminalreporter.section(self.plan.title)
        for text, markup in lines:
            terminalreporter.write_line(text, **markup)
