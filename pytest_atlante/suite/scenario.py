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

from pytest_atlante.checks import TRAJECTORY_TYPES, Check, check_rules
from pytest_atlante.checks.base import NonEmpty, Rules, TimeoutMs
from pytest_atlante.diagnostics import Diagnostic, json_path
from pytest_atlante.models import StrictModel

SCENARIO_SCHEMA_URIS = {
    "0.1": "https://atlante.sh/schema/v0.1/eval-scenario.json",
    "0.2": "https://atlante.sh/schema/v0.2/eval-scenario.json",
}
SCENARIO_SCHEMA_URI = SCENARIO_SCHEMA_URIS["0.2"]  # what new documents say
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
    schema_uri: Literal["https://atlante.sh/schema/v0.1/eval-scenario.json",
                        "https://atlante.sh/schema/v0.2/eval-scenario.json"] = Field(alias="$schema")
    version: Literal["0.1", "0.2"]
    name: Annotated[str, Field(pattern=SLUG_PATTERN)]
    description: str | None = None
    task: Task
    budget: ScenarioBudget | None = None
    checks: Annotated[list[Check], Field(min_length=1)]


def version_diagnostics(scenario: Scenario, file: str) -> list[Diagnostic]:
    """The v0.1/v0.2 rules: ``$schema`` names the document's version; the trajectory check types
    (computed from the transcript) need version 0.2, so a 0.1 document means what it always meant."""
    found = []
    expected = SCENARIO_SCHEMA_URIS[scenario.version]
    if scenario.schema_uri != expected:
        found.append(Diagnostic(file, json_path(["$schema"]), "eval-scenario-invalid",
                                f"$schema {scenario.schema_uri!r} does not match version {scenario.version!r}",
                                f"use {expected!r}"))
    if scenario.version == "0.1":
        for index, check in enumerate(scenario.checks):
            if check.type in TRAJECTORY_TYPES:
                found.append(Diagnostic(file, f"$.checks[{index}].type", "eval-scenario-invalid",
                                        f"version 0.1 scenario documents do not admit check type {check.type!r}",
                                        f"set \"version\": \"0.2\" and \"$schema\": \"{SCENARIO_SCHEMA_URIS['0.2']}\""))
    return found


def rule_diagnostics(scenario: Scenario, file: str) -> list[Diagnostic]:
    """Path, pattern and argument problems of a structurally valid scenario: the task's here, the
    checks' from each check type's own rules; the version rules first."""
    found = Rules(file, version_diagnostics(scenario, file))
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
