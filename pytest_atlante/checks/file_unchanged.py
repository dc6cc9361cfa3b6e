"""The ``file-unchanged`` check: the path's digest after the trial equals the one before.

The baseline digests are taken when the sandbox is assembled (the trial snapshots every
``file-unchanged`` path), so a path without one is an internal error, not a verdict.  A symlink is
not a regular file, so it digests to ``None`` like a missing path.
"""

from __future__ import annotations

from typing import Literal

from pytest_atlante.checks.base import CheckContext, CheckKind, NonEmpty, Rules
from pytest_atlante.models import StrictModel
from pytest_atlante.pathnames import escape_path
from pytest_atlante.records import CheckResult
from pytest_atlante.sandbox.trialdir import path_digest


class FileUnchangedCheck(StrictModel):
    type: Literal["file-unchanged"]
    path: NonEmpty


def rules(check: FileUnchangedCheck, where: str, found: Rules) -> None:
    """The path must stay inside the sandbox."""
    found.path(check.path, f"{where}.path", "check path")


def run(index: int, check: FileUnchangedCheck, ctx: CheckContext) -> CheckResult:
    sb = ctx.sandbox
    prefix = f"{check.type} {escape_path(check.path)}"
    if check.path not in sb.digests:
        return CheckResult(
            index=index,
            type=check.type,
            passed=False,
            error=True,
            message=f"{prefix}: no baseline digest was recorded (internal error)",
        )
    before = sb.digests[check.path]
    after = path_digest(sb.root, check.path)
    if before == after:
        state = "unchanged" if before is not None else "still missing or not a regular file"
        return CheckResult(index=index, type=check.type, passed=True, message=f"{prefix}: {state}",
                           digestBefore=before, digestAfter=after)
    if before is None:
        change = "was missing or not a regular file before the trial, now a regular file"
    elif after is None:
        change = "was deleted or replaced by a non-regular file"
    else:
        change = f"content changed (sha256 {before[:12]} -> {after[:12]})"
    return CheckResult(index=index, type=check.type, passed=False, message=f"{prefix}: {change}",
                       digestBefore=before, digestAfter=after)


KIND = CheckKind(FileUnchangedCheck, run, rules)
