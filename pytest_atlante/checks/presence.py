"""The ``file-exists`` and ``file-absent`` checks: one question (is there an entry at the path?)
asked with opposite wanted answers, so both live here.

Rules chosen where the reference leaves room: only the last path component is looked at without
following it, so a symlink at the path counts as absent.  A path whose parent directories resolve
outside the sandbox (through a symlinked directory) is not a sandbox path and counts as absent.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Literal

from pytest_atlante.checks.base import CheckContext, CheckKind, NonEmpty, Rules
from pytest_atlante.models import StrictModel
from pytest_atlante.pathnames import escape_path
from pytest_atlante.records import CheckResult
from pytest_atlante.sandbox.trialdir import resolve_inside


class FileExistsCheck(StrictModel):
    type: Literal["file-exists"]
    path: NonEmpty


class FileAbsentCheck(StrictModel):
    type: Literal["file-absent"]
    path: NonEmpty


def rules(check: FileExistsCheck | FileAbsentCheck, where: str, found: Rules) -> None:
    """The path must stay inside the sandbox."""
    found.path(check.path, f"{where}.path", "check path")


def run_exists(index: int, check: FileExistsCheck, ctx: CheckContext) -> CheckResult:
    return _presence(index, check.type, check.path, ctx.sandbox.root, want=True)


def run_absent(index: int, check: FileAbsentCheck, ctx: CheckContext) -> CheckResult:
    return _presence(index, check.type, check.path, ctx.sandbox.root, want=False)


def _presence(index: int, kind: str, rel: str, root: Path, *, want: bool) -> CheckResult:
    found = _describe_entry(root, rel)
    exists = found in ("file", "directory", "special file")
    if exists:
        what = f"{found} exists"
    elif found == "symlink":
        what = "is a symlink (a symlink does not count as existing)"
    elif found == "outside":
        what = "a parent directory leads outside the sandbox (not a sandbox path)"
    else:
        what = "does not exist"
    message = f"{kind} {escape_path(rel)}: {what}"
    return CheckResult(index=index, type=kind, passed=exists == want, message=message)


def _describe_entry(root: Path, rel: str) -> str:
    """file | directory | special file | symlink | missing | outside (the last link unfollowed)."""
    path = resolve_inside(root, rel)
    if path is None:
        return "outside"
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "missing"
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "directory"
    return "file" if stat.S_ISREG(mode) else "special file"


EXISTS = CheckKind(FileExistsCheck, run_exists, rules)
ABSENT = CheckKind(FileAbsentCheck, run_absent, rules)
