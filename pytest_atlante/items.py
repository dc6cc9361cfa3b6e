"""pytest nodes for eval trials: one ``ScenarioFile`` per document, one ``TrialItem`` per trial.

Items carry their inputs as attributes, the way pytest's ``DoctestItem`` does: a ``ScenarioFile``
is built with its scenario entries and trial count, a ``TrialItem`` with its ``entry``, ``trial``
and (from collection's ``maxSessions`` allocation) its ``budget``.  ``runtest`` hands the item to
the ``TrialRunner`` protocol stored in ``config.stash`` by the role object, so this module imports
no role and no engine.

A trial is still a ``pytest.Function`` (whose callable only declares fixtures): that gives trials
the whole fixture machinery (a user's ``conftest.py`` can request ``atlante_budget`` in autouse
fixtures), marks, ``-k`` and ``--lf`` for free, with node ids ``<document>::<name>[trial-N]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Protocol, Sequence

import pytest

if TYPE_CHECKING:
    from .budget import TrialBudget
    from .discovery import ScenarioEntry


class ItemRunner(Protocol):
    """What a role object offers items: run one allocated trial, or record an unallocated one."""

    def run_item(self, item: TrialItem) -> None: ...

    def skip_unallocated(self, item: TrialItem) -> None: ...


RUNNER_KEY = pytest.StashKey[ItemRunner]()


class TrialFailed(Exception):
    """A trial whose verdict is not ``pass``; its message is the whole readable failure."""


def trial_name(entry: ScenarioEntry, trial: int) -> str:
    # The one place that names a trial item (the controller maps xdist's ids back through it).
    return f"{entry.scenario.name}[trial-{trial}]"


def _declares_fixtures(_atlante_session_slot: None) -> None:
    """Never called (``TrialItem.runtest`` runs the trial); its arguments are the trial's fixtures."""


class TrialItem(pytest.Function):
    def __init__(self, *, entry: ScenarioEntry, trial: int, **kwargs: Any) -> None:
        super().__init__(callobj=_declares_fixtures, **kwargs)
        self.entry = entry
        self.trial = trial
        # Decided at collection (``allocate``); None until then, e.g. for an item built by hand.
        self.budget: TrialBudget | None = None

    def runtest(self) -> None:
        self.config.stash[RUNNER_KEY].run_item(self)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.entry.file, self.entry.line - 1, f"{self.entry.scenario.name} trial {self.trial}"

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, TrialFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class ScenarioFile(pytest.File):
    def __init__(self, *, entries: Sequence[ScenarioEntry], trials: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.entries = list(entries)
        self.trials = trials

    def collect(self) -> Iterator[TrialItem]:
        for entry in self.entries:
            for trial in range(1, self.trials + 1):
                # No ``originalname``: pytest >= 9.2 builds a Function's node id from it (plus a
                # callspec we do not have), which would drop the "[trial-N]" part.
                item = TrialItem.from_parent(self, name=trial_name(entry, trial), entry=entry, trial=trial)
                item.add_marker(pytest.mark.atlante)
                if entry.source != "local":
                    item.add_marker(pytest.mark.atlante_pack)
                yield item
