"""pytest nodes for eval trials: one ``ScenarioFile`` per document, one ``TrialItem`` per trial.

A trial is a ``pytest.Function`` whose callable is ``_trial``: that gives trials the whole fixture
machinery (a user's ``conftest.py`` can request ``atlante_budget`` in autouse fixtures), marks,
``-k`` and ``--lf`` for free, with node ids ``<document>::<name>[trial-N]``.

Trials are *parametrized* items as pytest understands them (``originalname`` plus a callspec whose
id is ``trial-N``): pytest >= 9.2 compares node ids as parsed structures (path, names, params), and
parses ``x::name[trial-1]`` from its cache (``--lf``, ``--ff``, ``--nf``, ``--sw``) or a command line
(``--deselect``) into the name ``name`` with the parameter ``trial-1``.  An item named
``name[trial-1]`` without a callspec would print the same string but never compare equal to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import pytest

from .discovery import ScenarioEntry

if TYPE_CHECKING:
    from .session import EvalSession

ENTRY_KEY = pytest.StashKey[ScenarioEntry]()
TRIAL_KEY = pytest.StashKey[int]()
ALLOCATED_KEY = pytest.StashKey[bool]()


class TrialFailed(Exception):
    """A trial whose verdict is not ``pass``; its message is the whole readable failure."""


def _trial(request: pytest.FixtureRequest, atlante_budget: Any) -> None:
    item = request.node
    session: EvalSession = item.config.stash[SESSION_KEY]
    session.run_item(item, atlante_budget)


@dataclass(frozen=True)
class TrialCallSpec:
    """The parametrization of one trial, in the shape pytest reads from ``Function.callspec``.

    pytest's own class is not public API; these are the attributes pytest (8.0 to 9.x) and
    plugins read: no parameter values (a trial takes none), one id.  Covered on the lowest and
    newest supported pytest by the selection tests.
    """

    trial: int
    params: dict[str, object] = field(default_factory=dict)
    indices: dict[str, int] = field(default_factory=dict)
    _arg2scope: dict[str, object] = field(default_factory=dict)
    marks: list[pytest.Mark] = field(default_factory=list)

    @property
    def _idlist(self) -> tuple[str, ...]:
        return (self.id,)

    @property
    def id(self) -> str:
        return f"trial-{self.trial}"


class TrialItem(pytest.Function):
    def reportinfo(self) -> tuple[Path, int, str]:
        entry = self.stash[ENTRY_KEY]
        return entry.file, entry.line - 1, f"{entry.scenario.name} trial {self.stash[TRIAL_KEY]}"

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, TrialFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class ScenarioFile(pytest.File):
    def collect(self) -> Iterator[TrialItem]:
        session: EvalSession = self.config.stash[SESSION_KEY]
        for entry in session.entries_for(self.path):
            for trial in range(1, session.trials_per_scenario + 1):
                spec = TrialCallSpec(trial)
                item = TrialItem.from_parent(self, name=f"{entry.scenario.name}[{spec.id}]", callobj=_trial,
                                             originalname=entry.scenario.name, callspec=spec)
                item.stash[ENTRY_KEY] = entry
                item.stash[TRIAL_KEY] = trial
                item.add_marker(pytest.mark.atlante)
                if entry.source != "local":
                    item.add_marker(pytest.mark.atlante_pack)
                yield item


# Defined here (not in session.py) so items and fixtures can reach the session without a cycle.
SESSION_KEY = pytest.StashKey["EvalSession"]()
