"""The cyclic garbage collector paused while an eval run loads and collects its documents.

Loading the run's modules, validating every scenario document and building its trial items only
allocate: the objects live for the whole run, and no reference cycle becomes garbage there worth
collecting.  Yet each of CPython's full collections walks every live object, so their number
grows with the suite: at 5,000 scenario documents the collector took about 0.5 s of a 2.1 s
``--collect-only`` (measured, benchmarks/collect_scale.py, docs/benchmarks.md).  Plain reference
counting still frees what dies in that window.  Once collection is over (or the run stopped before
it) the collector runs again, with what is alive by then frozen (``gc.freeze``): the suite's
documents and items stay for the run, so walking them in every later full collection (the trials',
pytest's own at exit) would only repeat the cost.  A collector the user had switched off stays off
and nothing is frozen.

The run stays frozen after pytest returns, until the next *full* collection, which thaws it first
(a ``gc.callbacks`` entry) and so frees the run's cycles just as it would have without the freeze:
objects that lived through a run are old, and only a full collection looks at old objects.  An
in-process run (pytester, ``pytest.main``) therefore leaves its caller's collector as it was.  The
one full collection that does not thaw is the interpreter's own at exit: thawing there walked every
document and item only to free memory the process was returning anyway (0.23 s of a 1.2 s
collection of 5,000 documents).
"""

from __future__ import annotations

import gc
import sys
from typing import Any

import pytest

FULL_COLLECTION = 2   # gc's oldest generation: a collection of it walks every object not frozen


class CollectionGcPause:
    """Registered first by an eval run's ``pytest_configure``: the collector is off from there to
    the end of collection."""

    def __init__(self, config: pytest.Config) -> None:
        _drop_finished_thaws()
        self._paused = gc.isenabled()
        self._frozen = False
        if self._paused:
            gc.disable()
        # A cleanup, not an unconfigure hook: pytest collects once more in its own cleanups
        # (unraisableexception's, registered after this one as built-in plugins configure; the
        # stack unwinds last-in first), and that collection must find the run still frozen.
        config.add_cleanup(self.release)

    def resume(self) -> None:
        if self._paused:
            self._paused = False
            gc.freeze()
            self._frozen = True
            gc.enable()

    def release(self) -> None:
        """The run is over: the collector is on, and the next full collection thaws the run."""
        self.resume()
        if self._frozen:
            gc.callbacks.append(self.thaw_before_full_collection)

    def thaw_before_full_collection(self, phase: str, info: dict[str, Any]) -> None:
        if (not self._frozen or phase != "start" or info.get("generation") != FULL_COLLECTION
                or sys.is_finalizing()):
            return
        self._frozen = False
        gc.unfreeze()   # before the collection walks anything: it sees the run as unfrozen

    @property
    def finished(self) -> bool:
        return not self._paused and not self._frozen

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.resume()

    # A run that stops before collecting (a validation stop, a forecast) and xdist's controller,
    # which collects nothing itself, never reach pytest_collection_finish.
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        self.resume()

    # A run stopped by an error before its test loop resumes here, before pytest's collections at exit.
    @pytest.hookimpl(tryfirst=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.resume()


def _drop_finished_thaws() -> None:
    # A callback cannot take itself out of gc.callbacks (CPython walks the list by index while it
    # calls them: removing one would skip the next callback's call), so the next run's pause takes
    # out those of earlier in-process runs that have thawed; thaws do not pile up in a caller
    # that runs pytest many times (pytester).
    def finished_thaw(callback: object) -> bool:
        owner = getattr(callback, "__self__", None)
        return isinstance(owner, CollectionGcPause) and owner.finished

    gc.callbacks[:] = [callback for callback in gc.callbacks if not finished_thaw(callback)]
