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
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

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

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        report = getattr(self.plan, "report", None)
        for problem in self.problems:
            terminalreporter.write_line(problem, yellow=True)
        if report is None or self.config.pluginmanager.has_plugin(ANNOTATE_PLUGIN):
            return
        for command in error_commands(report, self.entries(), self.env, self.config.invocation_params.dir):
            terminalreporter.write_line(command)
