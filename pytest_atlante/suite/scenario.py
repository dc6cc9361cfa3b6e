"""Scenario documents: the scenario model and the rules of its scenario-level fields.

Structure is checked by pydantic (``eval-scenario-invalid``); the rules that need their own code run
as a second pass over the validated model so every problem carries the right code and JSON path:
paths (``eval-path-unsafe``), regular expressions (``eval-pattern-invalid``) and process
arguments.  Patterns are compiled at validation, so an invalid expression fails before any host run.

The check types (their models, the ``Check`` union and their rules) live in ``pytest_atlante.checks``,
one module each; this module validates the task and hands the checks to ``check_rules``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from pytest_atlante.checks import Check, check_rules
from pytest_atlante.checks.base import NonEmpty, Rules, TimeoutMs
from pytest_atlante.diagnostics import Diagnostic
from pytest_atlante.models import StrictModel

SCENARIO_SCHEMA_URI = "https://atlante.sh/schema/v0.1/eval-scenario.json"
SLUG_PATTERN = r"^[a-z0-9-]+$"  # the reference's "Slug (a-z, 0-9, hyphen)"
SETUP_TIMEOUT_MS = 300_000


class Task(StrictModel):
    fixture: NonEmpty
    setup: Annotated[list[NonEmpty], Field(min_length=1)] | None = None
    agent: NonEmpty | None = None
    prompt: NonEmpty


class ScenarioBudget(StrictModel):
    timeoutMs: TimeoutMs


class Scenario(StrictModel):
    schema_uri: Literal["https://atlante.sh/schema/v0.1/eval-scenario.json"] = Field(alias="$schema")
    version: Literal["0.1"]
    name: Annotated[str, Field(pattern=SLUG_PATTERN)]
    description: str | None = None
    task: Task
    budget: ScenarioBudget | None = None
    checks: Annotated[list[Check], Field(min_length=1)]


def rule_diagnostics(scenario: Scenario, file: str) -> list[Diagnostic]:
    """Path, pattern and argument problems of a structurally valid scenario: the task's here, the
    checks' from each check type's own rules."""
    found = Rules(file)
    found.argument(scenario.task.prompt, "$.task.prompt", "the prompt")
    if scenario.task.agent is not None:
        found.argument(scenario.task.agent, "$.task.agent", "the agent name")
    for index, arg in enumerate(scenario.task.setup or []):
        found.argument(arg, f"$.task.setup[{index}]", "the setup argument")
    found.path(scenario.task.fixture, "$.task.fixture", "fixture")
    return found.found + check_rules(scenario.checks, file)


def effective_timeout_ms(scenario: Scenario, run_default_ms: int) -> int:
    """The host-session timeout of one trial: the scenario override wins over the run budget."""
    return scenario.budget.timeoutMs if scenario.budget else run_default_ms
