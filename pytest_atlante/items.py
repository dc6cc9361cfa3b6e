"""pytest nodes for eval trials: one ``ScenarioFile`` per document, one ``TrialItem`` per trial.

A trial is a ``pytest.Function`` whose callable is ``_trial``: that gives trials the whole fixture
machinery (a user's ``conftest.py`` can request ``atlante_budget`` in autouse fixtures), marks,
``-k`` and ``--lf`` for free, with node ids ``<document>::<name>[trial-N]``.
"""

from __future__ import annotations

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


class TrialItem(pytest.Function):
    def reportinfo(self) -> tuple[Path, int, str]:
        entry = self.stash[ENTRY_KEY]
        trial = self.stash[TRIAL_KEY]
        return entry.file, entry.line - 1, f"{entry.scenario.name} " + (f"trial {trial}" if trial else "self-test")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, TrialFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class ScenarioFile(pytest.File):
    def collect(self) -> Iterator[TrialItem]:
        session: EvalSession = self.config.stash[SESSION_KEY]
        for entry in session.entries_for(self.path):
            for name, trial in session.item_keys(entry):
                # No ``originalname``: pytest >= 9.2 builds a Function's node id from it (plus a
                # callspec we do not have), which would drop the "[trial-N]" part.
                item = TrialItem.from_parent(self, name=name, callobj=_trial)
                item.stash[ENTRY_KEY] = entry
                item.stash[TRIAL_KEY] = trial
                item.add_marker(pytest.mark.atlante)
                if entry.source != "local":
                    item.add_marker(pytest.mark.atlante_pack)
                yield item


# Defined here (not in session.py) so items and fixtures can reach the session without a cycle.
SESSION_KEY = pytest.StashKey["EvalSession"]()
