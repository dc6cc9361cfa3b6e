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

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_atlante.diagnostics import Diagnostic
from pytest_atlante.records import TrialRecord
from pytest_atlante.report.model import RunState

if TYPE_CHECKING:
    from pytest_atlante.run.plan import EvalPlan
    from pytest_atlante.trial.runner import Progress

__all__ = ["EvalTerminalReporter"]


class EvalTerminalReporter:
    """Everything an eval run (or a self-test) prints, registered as ``atlante-eval-terminal``."""

    def __init__(self, config: pytest.Config, state: RunState, plan: EvalPlan) -> None:
        self.config = config
        self.state = state
        self.plan = plan
        self.warnings: list[str] = []               # said at the start, and again in the summary
        self.stop_line: str | None = None           # a run that ended before any trial: why, once, at the end

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
        """What shows a serial trial's phases inline with ``-v`` (``None``: nothing shows them)."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        if reporter is None or self.config.get_verbosity() <= 0:
            return None

        def progress(phase: str) -> None:
            # Output capture is active while a test runs; suspend it, as pytest's live logging
            # does, so the phase reaches the terminal now rather than the report.
            if capture is not None:
                with capture.global_and_fixture_disabled():
                    reporter.write(f"[{phase}] ", flush=True)
            else:
                reporter.write(f"[{phase}] ", flush=True)

        return progress

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
        reporter.write_line(f"atlante: {record.nodeId}: {record.verdict} in {record.durationMs / 1000:.1f}s, {spent}")

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        # Under xdist the controller's terminal cannot see a worker's phases; say when a trial starts
        # so a long host session is visibly under way.  Serial runs show phases inline with -v.
        if not self.config.pluginmanager.has_plugin("dsession"):
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and self.config.get_verbosity() > 0 and nodeid in self.state.expected:
            reporter.write_line(f"atlante: {nodeid}: host session started")

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
        lines = self.plan.summary(self.state.errors, self.warnings,
                                  failures_shown=getattr(self.config.option, "tbstyle", "auto") != "no")
        if lines is None:
            return
        terminalreporter.section(self.plan.title)
        for text, markup in lines:
            terminalreporter.write_line(text, **markup)
