"""GitHub Actions, built in: the step summary and one annotation per failed trial.

Under ``GITHUB_ACTIONS=true`` (the variable the runner sets; never on another CI, whatever else is
set) the controller's eval run, once its report is written:

- appends ``atlante report md``'s Markdown of the report to the file ``GITHUB_STEP_SUMMARY`` names
  (the job's summary page);
- prints one ``::error file=…,line=…,title=…::message`` workflow command per trial that did not
  pass, at the line of the scenario's ``name`` in its document, with the first failing check's
  message, so the pull request's diff view shows it where the scenario is defined.

pytest-github-actions-annotate-failures annotates every failed test item itself, at the item's
location (a trial's is its scenario's line): when that plugin is active, the run leaves the
annotations to it, so each failed trial is annotated once.  ``--atlante-no-github`` turns both off.

Message and property values are escaped as the runner's toolkit does (``%``, CR, LF; and ``:``,
``,`` in properties), so a message, which may quote what the agent wrote, can never end the
command and start another on a new line.

The rest of a run's output is not ours to escape: pytest prints each failed trial's text, which
quotes command output an agent controls, and a line of it that starts with ``::`` would be a
workflow command to the runner (a forged ``::error``, an ``::add-mask::``, or a
``::stop-commands::`` that swallows every annotation after it).  So from the start of the session
the run stops command processing (``::stop-commands::<random token>``) and resumes it (``::<token>::``)
only to print its own annotations at the very end (``pytest_unconfigure``), after pytest's failure
sections and short summary, which quote trial output too (the runner reads a command after leading
blanks).  Not when the annotate
plugin is active: its annotations are printed as each trial fails.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_atlante.report.markdown import first_failure, render_markdown
from pytest_atlante.report.model import EvalReport

if TYPE_CHECKING:
    from pytest_atlante.run.plan import EvalPlan
    from pytest_atlante.suite.discovery import ScenarioEntry

__all__ = ["GitHubActions", "enabled", "error_commands", "escape_data", "escape_property"]

OPTION_NAME = "--atlante-no-github"
# The annotate plugin registers its failure annotator under this name (pytest_configure).
ANNOTATE_PLUGIN = "annotate_errors"


def enabled(env: Mapping[str, str], switched_off: bool) -> bool:
    """Only GitHub's own runner (``GITHUB_ACTIONS`` is exactly ``true`` there), unless turned off."""
    return env.get("GITHUB_ACTIONS") == "true" and not switched_off


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _shown_path(path: Path, env: Mapping[str, str], cwd: Path) -> str:
    """The document's path as the runner resolves annotations: relative to the workspace."""
    for base in (env.get("GITHUB_WORKSPACE"), str(cwd)):
        if base:
            try:
                return Path(os.path.relpath(path, base)).as_posix() if path.is_relative_to(base) else str(path)
            except ValueError:
                continue
    return str(path)


def error_commands(report: EvalReport, entries: Iterable[ScenarioEntry], env: Mapping[str, str], cwd: Path) -> list[str]:
    """One ``::error`` command per trial that did not pass, in report order."""
    where = {e.scenario.name: (e.file, e.line) for e in entries}
    commands = []
    for scenario in report.scenarios:
        place = where.get(scenario.name)
        for trial in scenario.trials:
            if trial.verdict == "pass":
                continue
            properties = [("title", f"{scenario.name} trial {trial.trial}: {trial.verdict}")]
            if place is not None:
                properties[:0] = [("file", _shown_path(place[0], env, cwd)), ("line", str(place[1]))]
            message = first_failure([trial]) or trial.verdict
            commands.append("::error " + ",".join(f"{k}={escape_property(v)}" for k, v in properties)
                            + "::" + escape_data(message))
    return commands


class GitHubActions:
    """Registered beside the controller when :func:`enabled`; acts once the report is written."""

    def __init__(self, config: pytest.Config, plan: EvalPlan, entries: Callable[[], Iterable[ScenarioEntry]],
                 env: Mapping[str, str]) -> None:
        self.config = config
        self.plan = plan
        self.entries = entries          # the suite's scenarios, known once validation passed
        self.env = env
        self.problems: list[str] = []
        self.token: str | None = None   # set while workflow commands are stopped

    def _annotating(self) -> bool:
        return not self.config.pluginmanager.has_plugin(ANNOTATE_PLUGIN)

    def pytest_sessionstart(self) -> None:
        if self._annotating():
            self.token = secrets.token_hex(16)
            writer = self.config.get_terminal_writer()
            writer.line(f"::stop-commands::{self.token}")
            writer.flush()

    @pytest.hookimpl(trylast=True)  # after the controller's sessionfinish wrote the report
    def pytest_sessionfinish(self) -> None:
        report = getattr(self.plan, "report", None)
        target = self.env.get("GITHUB_STEP_SUMMARY")
        if report is None or not target:
            return
        try:
            with open(target, "a", encoding="utf-8") as summary:
                summary.write(render_markdown(report) + "\n")
        except OSError as exc:
            self.problems.append(f"atlante: could not append to GITHUB_STEP_SUMMARY ({target}): {exc.strerror or exc}")

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self) -> None:
        """After every line pytest prints (its failure sections and short summary quote trial output):
        commands processed again, then ours."""
        lines = list(self.problems)
        if self.token is not None:
            lines.append(f"::{self.token}::")
            self.token = None
        report = getattr(self.plan, "report", None)
        if report is not None and self._annotating():
            lines += error_commands(report, self.entries(), self.env, self.config.invocation_params.dir)
        if not lines:
            return
        if self.config.pluginmanager.get_plugin("terminalreporter") is not None:
            writer = self.config.get_terminal_writer()   # the real stdout, whatever capture did to sys.stdout
            for line in lines:
                writer.line(line)
            writer.flush()
        else:
            sys.stdout.write("".join(line + "\n" for line in lines))
            sys.stdout.flush()
