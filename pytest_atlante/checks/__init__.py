"""The check types: the ``Check`` union a scenario lists, and the dispatch to each type's module.

A check type is one module in this package holding its model, its validation rules and its runner
(``command``, ``presence`` for file-exists / file-absent, ``file_unchanged``, ``file_contains``,
``diff_allowlist``, ``trajectory`` for skill-used / agent-used / tool-used / command-used, ``usage_within``); each describes itself with a ``base.CheckKind``.  This module lists them
twice, once in the union (what pydantic parses) and once in ``_KINDS`` (what runs and validates),
and :func:`check_table` compares the two at import: a model without a runner, or a runner without
a place in the union, stops the package from importing instead of failing in some trial later.  So
there is no catch-all branch: every check reaches the runner listed for its exact model class.

Paths in messages (a check's own ``path`` too) are in their shown form
(:func:`pytest_atlante.pathnames.escape_path`), the one the report uses everywhere.

Every check runs, whatever happened to the ones before it.  ``passed`` is the verdict; ``error``
marks a check that could not produce one (a command that cannot start, a missing baseline digest)
and makes the trial an infra-error.  ``message`` is one line that names the check and says what
was found; it becomes the pytest failure text.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import Field

from pytest_atlante.checks import (
    command,
    diff_allowlist,
    file_contains,
    file_unchanged,
    presence,
    trajectory,
    usage_within,
)
from pytest_atlante.checks.base import NO_SESSION, CheckContext, CheckKind, Rules, SessionView, Wrap
from pytest_atlante.checks.command import CommandCheck
from pytest_atlante.checks.diff_allowlist import DiffAllowlistCheck
from pytest_atlante.checks.file_contains import FileContainsCheck
from pytest_atlante.checks.file_unchanged import FileUnchangedCheck
from pytest_atlante.checks.presence import FileAbsentCheck, FileExistsCheck
from pytest_atlante.checks.trajectory import AgentUsedCheck, CommandUsedCheck, SkillUsedCheck, ToolUsedCheck
from pytest_atlante.checks.usage_within import UsageWithinCheck
from pytest_atlante.diagnostics import Diagnostic
from pytest_atlante.records import CheckResult
from pytest_atlante.sandbox.trialdir import Diff, Sandbox

__all__ = [
    "CHECK_TYPES",
    "NO_SESSION",
    "TABLE",
    "TRAJECTORY_TYPES",
    "AgentUsedCheck",
    "Check",
    "CheckContext",
    "CommandCheck",
    "CommandUsedCheck",
    "DiffAllowlistCheck",
    "FileAbsentCheck",
    "FileContainsCheck",
    "FileExistsCheck",
    "FileUnchangedCheck",
    "SessionView",
    "SkillUsedCheck",
    "ToolUsedCheck",
    "UsageWithinCheck",
    "Wrap",
    "check_rules",
    "check_table",
    "run_checks",
    "union_members",
]

Check = Annotated[
    CommandCheck | FileExistsCheck | FileAbsentCheck | FileUnchangedCheck | FileContainsCheck | DiffAllowlistCheck
    | SkillUsedCheck | AgentUsedCheck | ToolUsedCheck | CommandUsedCheck | UsageWithinCheck,
    Field(discriminator="type"),
]
# The check types computed from the session's transcript and totals (scenario documents v0.2 on).
TRAJECTORY_TYPES = frozenset({"skill-used", "agent-used", "tool-used", "command-used", "usage-within"})

_KINDS: tuple[CheckKind[Any], ...] = (
    command.KIND,
    presence.EXISTS,
    presence.ABSENT,
    file_unchanged.KIND,
    file_contains.KIND,
    diff_allowlist.KIND,
    trajectory.SKILL,
    trajectory.AGENT,
    trajectory.TOOL,
    trajectory.COMMAND,
    usage_within.KIND,
)


def union_members(union: object) -> tuple[type, ...]:
    """The model classes of an ``Annotated[Union[...], Field(...)]`` (or of a bare union)."""
    inner = get_args(union)[0] if hasattr(union, "__metadata__") else union
    if get_origin(inner) in (Union, types.UnionType):
        return tuple(get_args(inner))
    return (inner,) if isinstance(inner, type) else ()


def check_table(union: object, kinds: Iterable[CheckKind[Any]]) -> dict[type, CheckKind[Any]]:
    """The dispatch table (model class → kind), refused with ``TypeError`` unless it covers the
    union's members exactly: no member without a kind, no kind outside the union, no model twice."""
    table: dict[type, CheckKind[Any]] = {}
    for kind in kinds:
        if kind.model in table:
            raise TypeError(f"check model {kind.model.__name__} is listed twice in the dispatch table")
        table[kind.model] = kind
    members = union_members(union)
    missing = [m.__name__ for m in members if m not in table]
    extra = [m.__name__ for m in table if m not in members]
    problems = []
    if missing:
        problems.append(f"in the Check union without a runner in the table: {', '.join(missing)}")
    if extra:
        problems.append(f"in the table but not in the Check union: {', '.join(extra)}")
    if problems:
        raise TypeError("the check dispatch table and the Check union disagree; " + "; ".join(problems))
    return table


TABLE: Mapping[type, CheckKind[Any]] = check_table(Check, _KINDS)
# Every check type's ``type`` value: pydantic puts it in an error's location, where the document
# loader drops it (users never wrote it as a key).
CHECK_TYPES = frozenset(value for kind in TABLE.values() for value in get_args(kind.model.model_fields["type"].annotation))


def run_checks(
    checks: Sequence[Check],
    *,
    sandbox: Sandbox,
    diff: Diff,
    env: Mapping[str, str],
    wrap: Wrap | None = None,
    redact: Callable[[str], str] = str,
    session: SessionView = NO_SESSION,
) -> list[CheckResult]:
    """Run every check, in order; command checks go through ``wrap`` (namespace isolation) when given.

    ``redact`` cleans a command's whole output before it is cut to its tail, so no credential
    survives half-cut at the start of the kept text.  ``session`` is what the trajectory checks
    count on (the no-op trial of the self-test has none)."""
    ctx = CheckContext(sandbox=sandbox, diff=diff, env=env, wrap=wrap, redact=redact, session=session)
    return [TABLE[type(check)].run(index, check, ctx) for index, check in enumerate(checks)]


def check_rules(checks: Sequence[Check], file: str) -> list[Diagnostic]:
    """The path, pattern and argument problems of a scenario's (structurally valid) checks,
    located at ``$.checks[i]…`` in ``file``, in check order."""
    found = Rules(file)
    for index, check in enumerate(checks):
        TABLE[type(check)].rules(check, f"$.checks[{index}]", found)
    return found.found
