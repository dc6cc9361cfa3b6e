"""What every check module shares: the context a runner gets, the rules collector, the limits.

A check type is one module in this package holding its model, its validation rules and its runner;
this module holds what more than one of them needs, and what the scenario-level fields need too
(the suite validates a scenario's fixture path, prompt and setup argv with the same rules as the
check paths and argv, so the rules are written once, here, below the suite).

A module describes its check type to the dispatch in ``checks/__init__.py`` with one
:class:`CheckKind`: the model class, the runner and the rules.  The kind is generic in the model,
so mypy holds each runner and each rules function to the model it is listed with.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Annotated, Any, Generic, TypeVar

from pydantic import Field

from pytest_atlante.diagnostics import Diagnostic
from pytest_atlante.models import StrictModel
from pytest_atlante.records import CheckResult, Usage
from pytest_atlante.sandbox.trialdir import Diff, Sandbox

MAX_TIMEOUT_MS = 3_600_000
# Linux refuses any single argv string of 128 KiB or more (MAX_ARG_STRLEN, NUL included) with
# E2BIG; both hosts take the prompt as an argument, so a longer prompt could never start a trial.
MAX_ARG_BYTES = 128 * 1024 - 1
DEFAULT_CHECK_TIMEOUT_MS = 120_000
# Patterns longer than this are shortened in messages; the check itself uses the whole pattern.
_SHOWN_PATTERN = 80

NonEmpty = Annotated[str, Field(min_length=1)]
TimeoutMs = Annotated[int, Field(ge=1, le=MAX_TIMEOUT_MS, strict=True)]

Wrap = Callable[[list[str]], list[str]]
"""Turns an argv into the argv that runs it isolated (namespaces); command checks go through it."""


@dataclass(frozen=True)
class SessionView:
    """What the trajectory checks (``trajectory``, ``usage_within``) look at: the trial's
    host-neutral transcript events (``docs/transcripts.md``) and its session totals.

    ``events`` is ``None`` when the session ran but its transcript could not be built, which
    makes those checks errors; the self-test's no-op trial has no session at all
    (``had_session=False``, no events), which they treat as zero uses and no usage."""

    had_session: bool
    events: tuple[Mapping[str, Any], ...] | None = ()
    usage: Usage | None = None
    cost_usd: float | None = None
    duration_ms: int = 0
    # Harness agent → the name the host delegates to it by, where they differ (the build manifest's
    # ``agentNames``): ``agent-used`` counts a delegation under either.
    agent_names: Mapping[str, str] = field(default_factory=dict)
    # The host runs a harness skill as ``/name`` (Claude Code, OpenCode: docs/host-facts.md §13), no
    # skill tool called: ``skill-used`` then also counts the prompt's ``command`` event of that name.
    skills_run_as_commands: bool = False

    @property
    def truncated(self) -> bool:
        """Stream lines were dropped by the cap: a count from these events is a lower bound."""
        return any(event.get("type") == "truncated" for event in self.events or ())


NO_SESSION = SessionView(had_session=False)


@dataclass(frozen=True)
class CheckContext:
    """Everything a runner may look at besides its check: one object, so a runner's signature
    stays ``(index, check, context)`` whatever a future check type needs to see."""

    sandbox: Sandbox
    diff: Diff
    env: Mapping[str, str]
    wrap: Wrap | None = None
    redact: Callable[[str], str] = str
    session: SessionView = NO_SESSION


@dataclass
class Rules:
    """Collects the diagnostics of the path, pattern and argument rules for one document.

    Problems are collected, never raised, so one validation pass reports every problem; each
    carries the code and JSON path the reference gives it."""

    file: str
    found: list[Diagnostic] = field(default_factory=list)

    def path(self, value: str, location: str, what: str) -> None:
        """``eval-path-unsafe`` for a path that is absolute, climbs out or names ``.git``."""
        reason = unsafe_path_reason(value)
        if reason:
            root = "project (or pack) root" if what == "fixture" else "sandbox root"
            self.found.append(Diagnostic(
                self.file,
                location,
                "eval-path-unsafe",
                f"{what} {value!r}: {reason}",
                f"use a path relative to the {root} without '..', '.git' or 'node_modules'",
            ))

    def pattern(self, value: str, location: str) -> None:
        """``eval-pattern-invalid`` for an expression ``re`` cannot compile: it fails before any
        host run instead of as a check error after one."""
        error = compile_pattern(value)
        if error:
            self.found.append(Diagnostic(
                self.file,
                location,
                "eval-pattern-invalid",
                f"invalid regular expression {value!r}: {error}",
                "fix the expression (Python `re` syntax), or set regex: false for literal text",
            ))

    def argument(self, value: str, location: str, what: str) -> None:
        """``eval-scenario-invalid`` for text that no process argument can hold."""
        # Both problems would only show at run time as an infra-error ("embedded null byte",
        # "Argument list too long") after a sandbox was built; here they fail validation.
        size = len(value.encode("utf-8", "surrogatepass"))
        if "\0" in value:
            problem = "contains a NUL character, which no process argument can hold"
        elif size > MAX_ARG_BYTES:
            problem = f"is {size} bytes; a process argument holds at most {MAX_ARG_BYTES}"
        else:
            return
        self.found.append(Diagnostic(self.file, location, "eval-scenario-invalid", f"{what} {problem}",
                                     "shorten the text (put long material in a fixture file the prompt names) "
                                     "and remove NUL characters"))


M = TypeVar("M", bound=StrictModel)


@dataclass(frozen=True)
class CheckKind(Generic[M]):
    """One check type as the dispatch sees it: its model, its runner and its validation rules.

    ``run(index, check, context)`` returns the check's result; ``rules(check, where, rules)``
    reports the check's problems into ``rules`` (``where`` is the check's JSON path, such as
    ``$.checks[2]``).  Structure is pydantic's; ``rules`` is only for what needs its own code."""

    model: type[M]
    run: Callable[[int, M, CheckContext], CheckResult]
    rules: Callable[[M, str, Rules], None]


@functools.lru_cache(maxsize=4096)
def unsafe_path_reason(value: str) -> str | None:
    """Why a user-supplied relative path is unsafe, or ``None`` when it is fine.

    Shared by fixture paths, check paths and allowlist entries (and pack paths), so the rule is
    written once: relative, no ``..``, no ``.git`` or ``node_modules`` segment.  Cached: a suite
    repeats the same few paths (one fixture for hundreds of scenarios), and the answer depends on
    the text alone.
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


def quote(pattern: str) -> str:
    """A pattern as a message shows it: quoted, and shortened when long."""
    return '"' + shorten(pattern, _SHOWN_PATTERN).replace('"', '\\"') + '"'


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
