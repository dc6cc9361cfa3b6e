"""The ``usage-within`` check: the session stayed inside the bounds a scenario sets on what it used.

Bounds (any subset, at least one): ``turns`` (model responses of the main session: the transcript's
``result`` event, else its highest ``turn``), ``inputTokens``, ``outputTokens`` (the trial record's
``usage`` fields), ``totalTokens`` (all four token counts, cache reads and writes included, as the
budget counts them), ``costUsd`` and ``durationMs`` (the host session's wall time,
``hostDurationMs``).  Each bound is inclusive.

A figure the host did not report makes the check an error, not a pass (as ``budgetUnmonitored``
marks a session whose tokens nobody could watch): no usage for a token bound, no cost for
``costUsd``, no transcript for ``turns``.  The self-test's no-op trial had no session, so the check
fails there: it is a check only a real session can pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Literal

from pydantic import Field, model_validator

from pytest_atlante.checks.base import CheckContext, CheckKind, Rules, SessionView
from pytest_atlante.models import StrictModel
from pytest_atlante.records import CheckResult

Bound = Annotated[int, Field(ge=0, strict=True)]


class UsageWithinCheck(StrictModel):
    type: Literal["usage-within"]
    turns: Bound | None = None
    inputTokens: Bound | None = None
    outputTokens: Bound | None = None
    totalTokens: Bound | None = None
    costUsd: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    durationMs: Bound | None = None

    @model_validator(mode="after")
    def _some_bound(self) -> UsageWithinCheck:
        if not self.bounds():
            raise ValueError("usage-within needs at least one of turns, inputTokens, outputTokens, totalTokens, "
                             "costUsd, durationMs")
        return self

    def bounds(self) -> dict[str, float]:
        return {name: value for name in _FIGURES if (value := getattr(self, name)) is not None}


def _turns(session: SessionView) -> float | None:
    if session.events is None:
        return None
    for event in reversed(session.events):
        if event.get("type") == "result" and isinstance(event.get("turns"), int) and event.get("unverified") is not True:
            return float(event["turns"])
    turns = [e["turn"] for e in session.events if isinstance(e.get("turn"), int)]
    return float(max(turns, default=0))


def _tokens(field: str) -> Callable[[SessionView], float | None]:
    def read(session: SessionView) -> float | None:
        if session.usage is None:
            return None
        return float(session.usage.total if field == "total" else getattr(session.usage, field))
    return read


# bound name → (how to read it off the session, what to say when the host did not report it)
_FIGURES: dict[str, tuple[Callable[[SessionView], float | None], str]] = {
    "turns": (_turns, "the trial has no transcript to count turns on"),
    "inputTokens": (_tokens("inputTokens"), "the host reported no usage"),
    "outputTokens": (_tokens("outputTokens"), "the host reported no usage"),
    "totalTokens": (_tokens("total"), "the host reported no usage"),
    "costUsd": (lambda session: session.cost_usd, "the host reported no cost"),
    "durationMs": (lambda session: float(session.duration_ms), ""),
}


def _shown(value: float) -> str:
    return f"{value:g}" if value != int(value) else str(int(value))


def rules(check: UsageWithinCheck, where: str, found: Rules) -> None:
    """Structure (a bound or more, none negative) is all pydantic's."""


def run(index: int, check: UsageWithinCheck, ctx: CheckContext) -> CheckResult:
    session = ctx.session
    if not session.had_session:
        return CheckResult(index=index, type=check.type, passed=False,
                           message="usage-within: no host session, so no usage to bound")
    parts, over, missing = [], [], []
    for name, limit in check.bounds().items():
        read, unreported = _FIGURES[name]
        value = read(session)
        if value is None:
            missing.append(f"{name}: {unreported}")
            continue
        within = value <= limit
        parts.append(f"{name} {_shown(value)} {'≤' if within else '>'} {_shown(limit)}")
        if not within:
            over.append(name)
    if missing:
        return CheckResult(index=index, type=check.type, passed=False, error=True,
                           message="usage-within: cannot tell; " + "; ".join(missing + parts))
    return CheckResult(index=index, type=check.type, passed=not over,
                       message="usage-within: " + ", ".join(parts))


KIND: CheckKind[UsageWithinCheck] = CheckKind(UsageWithinCheck, run, rules)
