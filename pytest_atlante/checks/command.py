"""The ``command`` check: run an argv in the sandbox and judge its exit code (and its output).

Rules chosen where the reference leaves room: argv runs with ``cwd`` = sandbox root and exactly
the given environment.  The output pattern is searched (``re.search``, no flags: write ``(?m)`` for
per-line anchors) in stdout followed by stderr; the two streams are captured separately, so their
interleaving is lost.  The pattern sees the real output, but what the result keeps is redacted
first, so no credential survives half-cut at the start of the kept tail.
"""

from __future__ import annotations

import re
import shlex
from typing import Annotated, Literal

from pydantic import Field

from pytest_atlante.checks.base import (
    DEFAULT_CHECK_TIMEOUT_MS,
    CheckContext,
    CheckKind,
    NonEmpty,
    Rules,
    TimeoutMs,
    quote,
    shorten,
)
from pytest_atlante.models import StrictModel
from pytest_atlante.records import CheckResult, tail
from pytest_atlante.sandbox.process import run as run_process


class CommandCheck(StrictModel):
    type: Literal["command"]
    run: Annotated[list[NonEmpty], Field(min_length=1)]
    expectExit: Annotated[int, Field(strict=True)] = 0
    outputMatches: str | None = None
    timeoutMs: TimeoutMs = DEFAULT_CHECK_TIMEOUT_MS


def rules(check: CommandCheck, where: str, found: Rules) -> None:
    """Every argument must fit a process argument; the output pattern must compile."""
    for arg_index, arg in enumerate(check.run):
        found.argument(arg, f"{where}.run[{arg_index}]", "the command argument")
    if check.outputMatches is not None:
        found.pattern(check.outputMatches, f"{where}.outputMatches")


def run(index: int, check: CommandCheck, ctx: CheckContext) -> CheckResult:
    shown = f"command `{shorten(shlex.join(check.run), 120)}`"
    result = run_process(check.run, cwd=ctx.sandbox.root, env=ctx.env, timeout_s=check.timeoutMs / 1000,
                         wrap=ctx.wrap)
    combined = result.stdout
    if combined and result.stderr and not combined.endswith("\n"):
        combined += "\n"
    combined += result.stderr
    matched_on = combined  # the pattern sees the real output; what is kept is redacted
    combined = ctx.redact(combined)
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
        shown_pattern = quote(check.outputMatches)
        if re.search(check.outputMatches, matched_on) is None:
            why = f"output does not match {shown_pattern}{_last_line(combined)}"
            return outcome(False, f"exit {check.expectExit} as expected, but {why}")
        return outcome(True, f"exit {check.expectExit} and output matches {shown_pattern}")
    return outcome(True, f"exit {check.expectExit} as expected")


def _last_line(output: str) -> str:
    """The last non-empty output line, as a hint in a failure message."""
    for line in reversed(output.splitlines()):
        if line.strip():
            return f"; last output: {shorten(line.strip(), 160)}"
    return ""


KIND = CheckKind(CommandCheck, run, rules)
