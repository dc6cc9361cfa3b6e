"""Budgets: deterministic session allocation and the per-trial budget handed to each trial.

``maxSessions`` is allocated in collection order after deselection, by a pure function of the
ordered item list, so every xdist worker (each collects the whole suite) and a serial run compute
the same allocation without talking to each other.  ``maxTokens`` and ``timeoutMs`` are per trial;
the token threshold is enforced by the trial engine while the host's stream flows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from pytest_atlante.suite.config import Budget

T = TypeVar("T")


@dataclass(frozen=True)
class TrialBudget:
    """What one trial may spend; exposed to users through the ``atlante_budget`` fixture."""

    timeoutMs: int          # host-session wall clock (scenario override already applied)
    maxTokens: int          # cumulative host usage threshold for this trial
    maxSessions: int        # the run's session cap
    trials: int             # trials per scenario
    allocated: bool         # False when the session cap left this trial without a session


def allocate(items: Sequence[T], max_sessions: int) -> list[tuple[T, bool]]:
    """The first ``max_sessions`` items get a session; later ones are skipped-budget."""
    return [(item, index < max_sessions) for index, item in enumerate(items)]


def trial_budget(budget: Budget, timeout_ms: int, allocated: bool) -> TrialBudget:
    return TrialBudget(timeout_ms, budget.maxTokens, budget.maxSessions, budget.trials, allocated)


class TokenGate:
    """Decides, event by event, when cumulative usage has crossed ``maxTokens``.

    The gate trips on the first observed cumulative value above the threshold; that event is the
    only overshoot allowed, because the session is aborted before the next one is read.
    """

    def __init__(self, max_tokens: int) -> None:
        self.max_tokens = max_tokens
        self.tripped_at: int | None = None

    def observe(self, cumulative: int | None) -> bool:
        if self.tripped_at is None and cumulative is not None and cumulative > self.max_tokens:
            self.tripped_at = cumulative
        return self.tripped_at is not None
