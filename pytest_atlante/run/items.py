"""pytest nodes for eval trials: one ``ScenarioFile`` per document, one ``TrialItem`` per trial.

Items carry their inputs as attributes, the way pytest's ``DoctestItem`` does: a ``ScenarioFile``
is built with its scenario entries and trial count, a ``TrialItem`` with its ``entry``, ``trial``
and (from collection's ``maxSessions`` allocation) its ``budget``.  ``runtest`` hands the item to
the ``TrialRunner`` protocol stored in ``config.stash`` by the role object, so this module imports
no role and no engine.

A trial is still a ``pytest.Function`` (whose callable only declares fixtures): that gives trials
the whole fixture machinery (a user's ``conftest.py`` can request ``atlante_budget`` in autouse
fixtures), marks, ``-k`` and ``--lf`` for free, with node ids ``<document>::<name>[trial-N]``.

Trials are *parametrized* items as pytest understands them (``originalname`` plus a callspec whose
id is ``trial-N``): pytest >= 9.2 compares node ids as parsed structures (path, names, params), and
parses ``x::name[trial-1]`` from its cache (``--lf``, ``--ff``, ``--nf``, ``--sw``) or a command line
(``--deselect``) into the name ``name`` with the parameter ``trial-1``.  An item named
``name[trial-1]`` without a callspec would print the same string but never compare equal to it.

The callspec is needed only while the node id is built (pytest 9.2 builds it in
``Function.__init__``); ``TrialItem`` drops the attribute afterwards.  IDE adapters read a
``callspec`` attribute as "a parametrized Python test" and take its node id apart at ``.py``
(VS Code's ``vscode_pytest``: an ``IndexError`` for a ``.json`` document, and an empty test tree);
without it, a trial is a plain item under its ``ScenarioFile``, listed at its scenario's line.
pytest's own readers of ``callspec`` (parametrized fixtures) treat a missing one as "no params",
which is what a trial has.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from pytest_atlante.suite.discovery import is_within

if TYPE_CHECKING:
    from pytest_atlante.suite.discovery import ScenarioEntry
    from pytest_atlante.trial.budget import TrialBudget


class ItemRunner(Protocol):
    """What a role object offers items: run one trial (an unallocated one only records skipped-budget)."""

    def run_item(self, item: TrialItem) -> None: ...


RUNNER_KEY = pytest.StashKey[ItemRunner]()


class TrialFailed(Exception):
    """A trial whose verdict is not ``pass``; its message is the whole readable failure.

    Raised as is when the trial measured nothing about the harness (``infra-error``,
    ``skipped-budget``, a refused rerun): reporters that tell an error from a failed assertion
    (Allure's ``broken``) file it as an error.  See :class:`TrialAssertionFailed` and docs/reports.md.
    """


class TrialAssertionFailed(TrialFailed, AssertionError):
    """A measured verdict (``fail``, ``timeout``, ``budget-exceeded``): the harness did not meet the
    scenario.  An ``AssertionError``, so Allure files it as ``failed``, as it does a failed ``assert``."""


# The verdicts that are the harness's result (counted against its pass rate as measured outcomes).
MEASURED_FAILURES = frozenset({"fail", "timeout", "budget-exceeded"})


def trial_failure(verdict: str, text: str) -> TrialFailed:
    """The exception a trial that did not pass raises (never for ``pass``)."""
    return TrialAssertionFailed(text) if verdict in MEASURED_FAILURES else TrialFailed(text)


SELFTEST_TRIAL = 0   # the trial number of a self-test item (one per scenario, see plan.SelftestPlan)


def scenario_file_id(entry: ScenarioEntry, rootpath: Path) -> str:
    """The node id of a scenario document's collector: its path from pytest's rootdir, or (a file
    outside it: a pack's, or the project's seen from a run started in a subdirectory) its path as the
    project shows it, which pytest would otherwise shorten to nothing."""
    if is_within(entry.file, rootpath):
        return os.path.relpath(entry.file, rootpath).replace(os.sep, "/")
    return entry.display


def trial_name(entry: ScenarioEntry, trial: int, arm: str | None = None) -> str:
    # The one place that names a trial item (the controller maps xdist's ids back through it);
    # "trial-N" (or "selftest"; "<variant>:trial-N" in a variant run) is TrialCallSpec's id.
    return f"{entry.scenario.name}[{TrialCallSpec(trial, arm).id}]"


def _declares_fixtures(description: str | None) -> Callable[[], None]:
    """The trial's callable: never called (``TrialItem.runtest`` runs the trial); its arguments would
    be the trial's fixtures.  One per trial, whose docstring is the scenario's ``description``:
    reporters that show a test's docstring (Allure reads ``item.function.__doc__``) show that."""

    def trial() -> None:
        return None  # never called: TrialItem.runtest runs the trial

    trial.__doc__ = description
    return trial


@dataclass(frozen=True)
class TrialCallSpec:
    """The parametrization of one trial, in the shape pytest reads from ``Function.callspec``.

    pytest's own class is not public API; these are the attributes pytest (8.0 to 9.x) and
    plugins read: no parameter values (a trial takes none), one id.  Covered on the lowest and
    newest supported pytest by the selection tests.
    """

    trial: int
    arm: str | None = None   # the variant run's arm, part of the id ("control:trial-1")
    params: dict[str, object] = field(default_factory=dict)
    indices: dict[str, int] = field(default_factory=dict)
    _arg2scope: dict[str, object] = field(default_factory=dict)
    marks: list[pytest.Mark] = field(default_factory=list)

    @property
    def _idlist(self) -> tuple[str, ...]:
        return (self.id,)

    @property
    def id(self) -> str:
        own = "selftest" if self.trial == SELFTEST_TRIAL else f"trial-{self.trial}"
        return own if self.arm is None else f"{self.arm}:{own}"


class TrialItem(pytest.Function):
    def __init__(self, *, entry: ScenarioEntry, trial: int, arm: str | None = None, **kwargs: Any) -> None:
        super().__init__(callobj=_declares_fixtures(entry.scenario.description), **kwargs)
        # The node id is built: see the module docstring for why the callspec must not stay.
        vars(self).pop("callspec", None)
        self.entry = entry
        self.trial = trial
        # The arm of a variant run (``control`` or a variant's name); None without variants.
        self.arm = arm
        # Decided at collection (``allocate``); None until then, e.g. for an item built by hand.
        self.budget: TrialBudget | None = None

    def runtest(self) -> None:
        self.config.stash[RUNNER_KEY].run_item(self)

    def reportinfo(self) -> tuple[Path, int, str]:
        # The third element is the test's name within its file, as for a parametrized Python test
        # (``test_x[2]``): PyCharm re-runs one test from it (teamcity-messages' ``metainfo``, fed back
        # as ``<file>::<metainfo>``), and pytest heads a failure section with it.
        return self.entry.file, self.entry.line - 1, self.name

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, TrialFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


# The resolved fixtures of a trial, per directory of scenario documents (see ScenarioFile._shared_fixtures).
_FIXTURES_KEY = pytest.StashKey[dict[str, Any]]()


class ScenarioFile(pytest.File):
    def __init__(self, *, entries: Sequence[ScenarioEntry], trials: Sequence[int],
                 arms: Sequence[str | None] = (None,), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.entries = list(entries)
        self.trials = list(trials)   # the trial numbers each scenario contributes
        # A variant run's arms; ``(None,)`` without variants.  Trials are interleaved across arms
        # (control trial 1, variant trial 1, control trial 2 …), so drift in the provider over the
        # run hits every arm alike and maxSessions, allocated in item order, reaches every arm.
        self.arms = list(arms)

    def collect(self) -> Iterator[TrialItem]:
        shared = self._shared_fixtures()
        place = self.parent.nodeid if self.parent is not None else ""
        atlante, pack = pytest.mark.atlante, pytest.mark.atlante_pack
        for entry in self.entries:
            for trial, arm in ((t, a) for t in self.trials for a in self.arms):
                item = TrialItem.from_parent(self, name=trial_name(entry, trial, arm), entry=entry, trial=trial, arm=arm,
                                             originalname=entry.scenario.name, callspec=TrialCallSpec(trial, arm),
                                             fixtureinfo=shared.get(place) if shared is not None else None)
                if shared is not None:
                    shared.setdefault(place, getattr(item, "_fixtureinfo", None))
                item.add_marker(atlante)
                if entry.source != "local":
                    item.add_marker(pack)
                yield item

    def _shared_fixtures(self) -> dict[str, Any] | None:
        """Resolved fixtures that this file's trials may share, by parent node id; None: resolve each.

        Which fixtures a trial gets depends on where it sits — the conftest files and autouse
        fixtures above it, the ``usefixtures`` marks of its parents — and on its callable's
        arguments (a trial's take none), never on which trial it is: pytest itself gives every
        parametrized instance of a test one resolved set.  Scenario files of one directory sit in
        the same place but for their own node, which defines no fixture; only a file node with
        marks of its own (a plugin's) could differ, and its trials resolve their own.  Resolving
        once per directory instead of once per trial is most of what a trial item costs to
        collect (1,000 scenario files: one resolution instead of 1,000)."""
        if self.own_markers or self.parent is None:
            return None
        return self.config.stash.setdefault(_FIXTURES_KEY, {})
