"""The check types: each one whole (its model, its validation rules and its runner) → ``CheckResult``.

Every check runs, whatever happened to the ones before it.  ``passed`` is the verdict;
``error`` marks a check that could not produce one (a command that cannot start, a missing
baseline digest) and makes the trial an infra-error.  ``message`` is one line that names the check
and says what was found; it becomes the pytest failure text.

Rules chosen where the reference leaves room:

- command: argv runs with ``cwd`` = sandbox root and exactly the given environment.  The output
  pattern is searched (``re.search``, no flags: write ``(?m)`` for per-line anchors) in stdout
  followed by stderr; the two streams are captured separately, so their interleaving is lost.
- file-exists / file-absent: only the last path component is looked at without following it, so a
  symlink at the path counts as absent.  A path whose parent directories resolve outside the
  sandbox (through a symlinked directory) is not a sandbox path and counts as absent.
- file-unchanged: a symlink is not a regular file, so it digests to ``None`` like a missing path.
- file-contains: symlinks inside the sandbox are followed; one that leads outside is refused.
- diff-allowlist: an entry is a glob over relative POSIX paths: ``*``, ``?`` and ``[...]`` match
  within one path segment, ``**`` matches across segments.  An entry allows every path it matches
  and everything under a directory it matches, so ``src``, ``src/`` and ``src/*`` all allow
  ``src/a/b.ts``, while ``src/*.ts`` allows ``src/a.ts`` but not ``src/a/b.ts``.  A path is
  matched in both its forms: the name itself (a byte that is not UTF-8 is one character there, so
  ``bad*.txt`` allows it) and its shown form in the report (``bad\\xff.txt``), so an entry copied
  from a report allows what the report named.

Paths in messages (a check's own ``path`` too) are in their shown form
(:func:`pytest_atlante.pathnames.escape_path`), the one the report uses everywhere.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pytest_atlante.fsutil import UnreadableFile, read_capped
from pytest_atlante.pathnames import escape_path
from pytest_atlante.sandbox.process import run
from pytest_atlante.records import CheckResult, tail
from pytest_atlante.sandbox.trialdir import Diff, Sandbox, is_inside, path_digest, resolve_inside
from pytest_atlante.suite.scenario import (
    Check,
    CommandCheck,
    DiffAllowlistCheck,
    FileAbsentCheck,
    FileContainsCheck,
    FileExistsCheck,
    FileUnchangedCheck,
)

# How many offending paths a diff-allowlist message names before it summarises the rest.
_LISTED_PATHS = 10
# file-contains reads the whole file; a file larger than this fails the check instead.
CONTAINS_READ_LIMIT = 32 * 1024 * 1024
# Patterns longer than this are shortened in messages; the check itself uses the whole pattern.
_SHOWN_PATTERN = 80


Wrap = Callable[[list[str]], list[str]]


def run_checks(
    checks: Sequence[Check],
    *,
    sandbox: Sandbox,
    diff: Diff,
    env: Mapping[str, str],
    wrap: Wrap | None = None,
    redact: Callable[[str], str] = str,
) -> list[CheckResult]:
    """Run every check; command checks go through ``wrap`` (namespace isolation) when given.

    ``redact`` cleans a command's whole output before it is cut to its tail, so no credential
    survives half-cut at the start of the kept text."""
    return [_run_one(index, check, sandbox, diff, env, wrap, redact) for index, check in enumerate(checks)]


def _run_one(
    index: int, check: Check, sb: Sandbox, diff: Diff, env: Mapping[str, str], wrap: Wrap | None,
    redact: Callable[[str], str],
) -> CheckResult:
    if isinstance(check, CommandCheck):
        return _command(index, check, sb, env, wrap, redact)
    if isinstance(check, FileExistsCheck):
        return _presence(index, check.type, check.path, sb, want=True)
    if isinstance(check, FileAbsentCheck):
        return _presence(index, check.type, check.path, sb, want=False)
    if isinstance(check, FileUnchangedCheck):
        return _unchanged(index, check, sb)
    if isinstance(check, FileContainsCheck):
        return _contains(index, check, sb)
    return _allowlist(index, check, diff)


def _command(
    index: int, check: CommandCheck, sb: Sandbox, env: Mapping[str, str], wrap: Wrap | None,
    redact: Callable[[str], str],
) -> CheckResult:
    shown = f"command `{_shorten(shlex.join(check.run), 120)}`"
    result = run(check.run, cwd=sb.root, env=env, timeout_s=check.timeoutMs / 1000, wrap=wrap)
    combined = result.stdout
    if combined and result.stderr and not combined.endswith("\n"):
        combined += "\n"
    combined += result.stderr
    matched_on = combined  # the pattern sees the real output; what is kept is redacted
    combined = redact(combined)
    output = tail(combined)

    def outcome(passed: bool, message: str, *, error: bool = False, timedOut: bool = False) -> CheckResult:
        return CheckResult(
            index=index,
            type=check.type,
            passed=passed,
            error=error,
            timedOut=timedOut,
            message=f"{shown}: {message}",
            exitCode=result.returncode,
            output=output,
        )

    if result.start_error is not None:
        return outcome(False, f"could not start: {result.start_error}", error=True)
    if result.timed_out:
        return outcome(False, f"timed out after {check.timeoutMs} ms", timedOut=True)
    if result.returncode != check.expectExit:
        got = result.returncode
        status = f"killed by signal {-got}" if got is not None and got < 0 else f"exit {got}"
        return outcome(False, f"{status} (expected {check.expectExit}){_last_line(combined)}")
    if check.outputMatches is not None:
        shown_pattern = _quote(check.outputMatches)
        if re.search(check.outputMatches, matched_on) is None:
            why = f"output does not match {shown_pattern}{_last_line(combined)}"
            return outcome(False, f"exit {check.expectExit} as expected, but {why}")
        return outcome(True, f"exit {check.expectExit} and output matches {shown_pattern}")
    return outcome(True, f"exit {check.expectExit} as expected")


def _presence(index: int, kind: str, rel: str, sb: Sandbox, *, want: bool) -> CheckResult:
    found = _describe_entry(sb.root, rel)
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


def _unchanged(index: int, check: FileUnchangedCheck, sb: Sandbox) -> CheckResult:
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


def _contains(index: int, check: FileContainsCheck, sb: Sandbox) -> CheckResult:
    prefix = f"{check.type} {escape_path(check.path)}"

    def failed(why: str) -> CheckResult:
        return CheckResult(index=index, type=check.type, passed=False, message=f"{prefix}: {why}")

    path = resolve_inside(sb.root, check.path)
    if path is None or not is_inside(sb.root, path):
        return failed("symlink leads outside the sandbox; refusing to read it")
    try:
        # Non-blocking and size-checked: the agent may have left a FIFO, a device or a huge file
        # at the path, and none of them may hang the runner or fill its memory.
        text = read_capped(path, CONTAINS_READ_LIMIT).decode("utf-8", errors="replace")
    except UnreadableFile as exc:
        return failed("file not found" if exc.missing else exc.reason)
    noun = "regex" if check.regex else "pattern"
    shown = f"{noun} {_quote(check.pattern)}"
    found = re.search(check.pattern, text) if check.regex else check.pattern in text
    if not found:
        return failed(f"{shown} not found")
    message = f"{prefix}: {shown} found"
    return CheckResult(index=index, type=check.type, passed=True, message=message)


def _allowlist(index: int, check: DiffAllowlistCheck, diff: Diff) -> CheckResult:
    matchers = [allow_entry_regex(entry) for entry in check.allow]
    outside = [path for path in diff.changed_paths
               if not (path_allowed(diff.name_of(path), matchers) or path_allowed(path, matchers))]
    if not outside:
        count = len(diff.changed_paths)
        return CheckResult(
            index=index,
            type=check.type,
            passed=True,
            message=f"{check.type}: all {count} changed path(s) are allowed",
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


def _quote(pattern: str) -> str:
    return '"' + _shorten(pattern, _SHOWN_PATTERN).replace('"', '\\"') + '"'


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _last_line(output: str) -> str:
    """The last non-empty output line, as a hint in a failure message."""
    for line in reversed(output.splitlines()):
        if line.strip():
            return f"; last output: {_shorten(line.strip(), 160)}"
    return ""
