"""Scenario documents: the models, the checks union, and the path and pattern rules.

Structure is checked by pydantic (``eval-scenario-invalid``); the rules that need their own code run
as a second pass over the validated model so every problem carries the right code and JSON path:
paths (``eval-path-unsafe``) and regular expressions (``eval-pattern-invalid``).  Patterns are
compiled here, at validation, so an invalid expression fails before any host run.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Annotated, Literal, Union

from pydantic import Field

from pytest_atlante.diagnostics import Diagnostic
from pytest_atlante.models import StrictModel

SCENARIO_SCHEMA_URI = "https://atlante.sh/schema/v0.1/eval-scenario.json"
SLUG_PATTERN = r"^[a-z0-9-]+$"  # the reference's "Slug (a-z, 0-9, hyphen)"
MAX_TIMEOUT_MS = 3_600_000
# Linux refuses any single argv string of 128 KiB or more (MAX_ARG_STRLEN, NUL included) with
# E2BIG; both hosts take the prompt as an argument, so a longer prompt could never start a trial.
MAX_ARG_BYTES = 128 * 1024 - 1
SETUP_TIMEOUT_MS = 300_000
DEFAULT_CHECK_TIMEOUT_MS = 120_000

NonEmpty = Annotated[str, Field(min_length=1)]
TimeoutMs = Annotated[int, Field(ge=1, le=MAX_TIMEOUT_MS, strict=True)]


class CommandCheck(StrictModel):
    type: Literal["command"]
    run: Annotated[list[NonEmpty], Field(min_length=1)]
    expectExit: Annotated[int, Field(strict=True)] = 0
    outputMatches: str | None = None
    timeoutMs: TimeoutMs = DEFAULT_CHECK_TIMEOUT_MS


class FileExistsCheck(StrictModel):
    type: Literal["file-exists"]
    path: NonEmpty


class FileAbsentCheck(StrictModel):
    type: Literal["file-absent"]
    path: NonEmpty


class FileUnchangedCheck(StrictModel):
    type: Literal["file-unchanged"]
    path: NonEmpty


class FileContainsCheck(StrictModel):
    type: Literal["file-contains"]
    path: NonEmpty
    pattern: NonEmpty
    regex: Annotated[bool, Field(strict=True)] = False


class DiffAllowlistCheck(StrictModel):
    type: Literal["diff-allowlist"]
    allow: list[NonEmpty]


Check = Annotated[
    Union[
        CommandCheck,
        FileExistsCheck,
        FileAbsentCheck,
        FileUnchangedCheck,
        FileContainsCheck,
        DiffAllowlistCheck,
    ],
    Field(discriminator="type"),
]


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


def unsafe_path_reason(value: str) -> str | None:
    """Why a user-supplied relative path is unsafe, or ``None`` when it is fine.

    Shared by fixture paths, check paths and allowlist entries (and pack paths), so the rule is
    written once: relative, no ``..``, no ``.git`` or ``node_modules`` segment.
    """
    if "\0" in value:
        return "NUL characters are not allowed"
    if value.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:[\\/]", value):
        return "absolute paths are not allowed"
    parts = PurePosixPath(value.replace("\\", "/")).parts
    if ".." in parts:
        return "path traversal ('..') is not allowed"
    for banned in (".git", "node_modules"):
        if banned in parts:
            return f"a '{banned}' path segment is not allowed"
    return None


def compile_pattern(pattern: str) -> str | None:
    """The error text of an invalid regular expression, or ``None`` when it compiles."""
    try:
        re.compile(pattern)
    except re.error as exc:
        return str(exc)
    return None


def rule_diagnostics(scenario: Scenario, file: str) -> list[Diagnostic]:
    """Path and pattern problems of a structurally valid scenario."""
    found: list[Diagnostic] = []

    def path_rule(value: str, location: str, what: str) -> None:
        reason = unsafe_path_reason(value)
        if reason:
            found.append(
                Diagnostic(
                    file,
                    location,
                    "eval-path-unsafe",
                    f"{what} {value!r}: {reason}",
                    "use a path relative to the "
                    + ("project (or pack) root" if what == "fixture" else "sandbox root")
                    + " without '..', '.git' or 'node_modules'",
                )
            )

    def pattern_rule(value: str, location: str) -> None:
        error = compile_pattern(value)
        if error:
            found.append(
                Diagnostic(
                    file,
                    location,
                    "eval-pattern-invalid",
                    f"invalid regular expression {value!r}: {error}",
                    "fix the expression (Python `re` syntax), or set regex: false for literal text",
                )
            )

    def argument_rule(value: str, location: str, what: str) -> None:
        # Both problems would only show at run time as an infra-error ("embedded null byte",
        # "Argument list too long") after a sandbox was built; here they fail validation.
        size = len(value.encode("utf-8", "surrogatepass"))
        if "\0" in value:
            problem = "contains a NUL character, which no process argument can hold"
        elif size > MAX_ARG_BYTES:
            problem = f"is {size} bytes; a process argument holds at most {MAX_ARG_BYTES}"
        else:
            return
        found.append(Diagnostic(file, location, "eval-scenario-invalid", f"{what} {problem}",
                                "shorten the text (put long material in a fixture file the prompt names) "
                                "and remove NUL characters"))

    argument_rule(scenario.task.prompt, "$.task.prompt", "the prompt")
    if scenario.task.agent is not None:
        argument_rule(scenario.task.agent, "$.task.agent", "the agent name")
    for index, arg in enumerate(scenario.task.setup or []):
        argument_rule(arg, f"$.task.setup[{index}]", "the setup argument")
    path_rule(scenario.task.fixture, "$.task.fixture", "fixture")
    for index, check in enumerate(scenario.checks):
        where = f"$.checks[{index}]"
        if isinstance(check, CommandCheck):
            for arg_index, arg in enumerate(check.run):
                argument_rule(arg, f"{where}.run[{arg_index}]", "the command argument")
            if check.outputMatches is not None:
                pattern_rule(check.outputMatches, f"{where}.outputMatches")
        elif isinstance(check, DiffAllowlistCheck):
            for entry_index, entry in enumerate(check.allow):
                path_rule(entry, f"{where}.allow[{entry_index}]", "allowlist entry")
        else:
            path_rule(check.path, f"{where}.path", "check path")
            if isinstance(check, FileContainsCheck) and check.regex:
                pattern_rule(check.pattern, f"{where}.pattern")
    return found


def effective_timeout_ms(scenario: Scenario, run_default_ms: int) -> int:
    """The host-session timeout of one trial: the scenario override wins over the run budget."""
    return scenario.budget.timeoutMs if scenario.budget else run_default_ms
