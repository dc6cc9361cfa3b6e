"""The ``diff-allowlist`` check: every path the trial changed is one the scenario allows.

An entry is a glob over relative POSIX paths: ``*``, ``?`` and ``[...]`` match within one path
segment, ``**`` matches across segments.  An entry allows every path it matches and everything
under a directory it matches, so ``src``, ``src/`` and ``src/*`` all allow ``src/a/b.ts``, while
``src/*.ts`` allows ``src/a.ts`` but not ``src/a/b.ts``.  A path is matched in both its forms:
the name itself (a byte that is not UTF-8 is one character there, so ``bad*.txt`` allows it) and
its shown form in the report (``bad\\xff.txt``), so an entry copied from a report allows what the
report named.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from pytest_atlante.checks.base import CheckContext, CheckKind, NonEmpty, Rules
from pytest_atlante.models import StrictModel
from pytest_atlante.records import CheckResult

# How many offending paths a diff-allowlist message names before it summarises the rest.
_LISTED_PATHS = 10


class DiffAllowlistCheck(StrictModel):
    type: Literal["diff-allowlist"]
    allow: list[NonEmpty]


def rules(check: DiffAllowlistCheck, where: str, found: Rules) -> None:
    """Every entry must be a safe sandbox path, like any other check path."""
    for entry_index, entry in enumerate(check.allow):
        found.path(entry, f"{where}.allow[{entry_index}]", "allowlist entry")


def run(index: int, check: DiffAllowlistCheck, ctx: CheckContext) -> CheckResult:
    changed = ctx.diff.changed_paths
    matchers = [allow_entry_regex(entry) for entry in check.allow]
    outside = [path for path in changed
               if not (path_allowed(ctx.diff.name_of(path), matchers) or path_allowed(path, matchers))]
    if not outside:
        return CheckResult(
            index=index,
            type=check.type,
            passed=True,
            message=f"{check.type}: all {len(changed)} changed path(s) are allowed",
        )
    listed = ", ".join(outside[:_LISTED_PATHS])
    if len(outside) > _LISTED_PATHS:
        listed += f", ... and {len(outside) - _LISTED_PATHS} more"
    return CheckResult(
        index=index,
        type=check.type,
        passed=False,
        message=f"{check.type}: {len(outside)} changed path(s) outside the allowlist: {listed}",
    )


def allow_entry_regex(entry: str) -> re.Pattern[str]:
    """Compile one allowlist glob (see the module docstring for the rules)."""
    glob = entry.strip("/")
    out: list[str] = []
    i = 0
    while i < len(glob):
        char = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[" and (end := _class_end(glob, i)) > 0:
            body = glob[i + 1 : end]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            # Escape every member but '-' (ranges) so '[', '&&' or '~~' stay literal members.
            members = "".join(c if c == "-" else re.escape(c) for c in body)
            out.append("[" + ("^/" if negate else "") + members + "]")
            i = end + 1
        else:
            out.append(re.escape(char))
            i += 1
    # The entry matches the path itself or one of its parent directories.
    return re.compile("".join(out) + "(?:/.*)?", re.DOTALL)


def path_allowed(path: str, matchers: Sequence[re.Pattern[str]]) -> bool:
    return any(matcher.fullmatch(path) for matcher in matchers)


def _class_end(glob: str, start: int) -> int:
    """Index of the ``]`` closing the class opened at ``start``, or -1 (then ``[`` is literal)."""
    i = start + 1
    if i < len(glob) and glob[i] in "!^":
        i += 1
    if i < len(glob) and glob[i] == "]":
        i += 1  # a leading ']' is a member, as in fnmatch
    end = glob.find("]", i)
    return end if end > 0 and "/" not in glob[start:end] else -1


KIND = CheckKind(DiffAllowlistCheck, run, rules)
