"""The ``file-contains`` check: a file in the sandbox holds a literal text or matches a regex.

Symlinks inside the sandbox are followed; one that leads outside is refused.  The file is read
whole (decoded as UTF-8, undecodable bytes replaced), non-blocking and size-checked, because the
agent may have left a FIFO, a device or a huge file at the path.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field

from pytest_atlante.checks.base import CheckContext, CheckKind, NonEmpty, Rules, quote
from pytest_atlante.fsutil import UnreadableFile, read_capped
from pytest_atlante.models import StrictModel
from pytest_atlante.pathnames import escape_path
from pytest_atlante.records import CheckResult
from pytest_atlante.sandbox.trialdir import is_inside, resolve_inside

# file-contains reads the whole file; a file larger than this fails the check instead.
CONTAINS_READ_LIMIT = 32 * 1024 * 1024


class FileContainsCheck(StrictModel):
    type: Literal["file-contains"]
    path: NonEmpty
    pattern: NonEmpty
    regex: Annotated[bool, Field(strict=True)] = False


def rules(check: FileContainsCheck, where: str, found: Rules) -> None:
    """The path must stay inside the sandbox; a regex must compile (literal text always does)."""
    found.path(check.path, f"{where}.path", "check path")
    if check.regex:
        found.pattern(check.pattern, f"{where}.pattern")


def run(index: int, check: FileContainsCheck, ctx: CheckContext) -> CheckResult:
    root = ctx.sandbox.root
    prefix = f"{check.type} {escape_path(check.path)}"

    def failed(why: str) -> CheckResult:
        return CheckResult(index=index, type=check.type, passed=False, message=f"{prefix}: {why}")

    path = resolve_inside(root, check.path)
    if path is None or not is_inside(root, path):
        return failed("symlink leads outside the sandbox; refusing to read it")
    try:
        # Non-blocking and size-checked: the agent may have left a FIFO, a device or a huge file
        # at the path, and none of them may hang the runner or fill its memory.
        text = read_capped(path, CONTAINS_READ_LIMIT).decode("utf-8", errors="replace")
    except UnreadableFile as exc:
        return failed("file not found" if exc.missing else exc.reason)
    noun = "regex" if check.regex else "pattern"
    shown = f"{noun} {quote(check.pattern)}"
    found = re.search(check.pattern, text) if check.regex else check.pattern in text
    if not found:
        return failed(f"{shown} not found")
    message = f"{prefix}: {shown} found"
    return CheckResult(index=index, type=check.type, passed=True, message=message)


KIND = CheckKind(FileContainsCheck, run, rules)
