"""The cyclic garbage collector paused while an eval run loads and collects its documents.

Loading the run's modules, validating every scenario document and building its trial items only
allocate: the objects live for the whole run, and no reference cycle becomes garbage there worth
collecting.  Yet each of CPython's full collections walks every live object, so their number
grows with the suite: at 5,000 scenario documents the collector took about 0.5 s of a 2.1 s
``--collect-only`` (measured, benchmarks/collect_scale.py, docs/benchmarks.md).  Plain reference
counting still frees what dies in that window.  Once collection is over (or the run stopped before
it) the collector runs again, with what is alive by then frozen (``gc.freeze``): the suite's
documents and items stay for the run, so walking them in every later full collection (the trials',
pytest's own at exit) would only repeat the cost; they are unfrozen as the run ends, so an
in-process run (pytester) leaves its caller's collector as it was.  A collector the user had
switched off stays off and nothing is frozen.
"""

from __future__ import annotations

import gc

import pytest


class CollectionGcPause:
    """Registered first by an eval run's ``pytest_configure``: the collector is off from there to
    the end of collection."""

    def __init__(self, config: pytest.Config) -> None:
        self._paused = gc.isenabled()
        self._frozen = False
        if self._paused:
            gc.disable()
        # The thaw is a cleanup, not an unconfigure hook: pytest collects once more in its own
        # cleanups (unraisableexception's, registered as built-in plugins configure, after this
        # one: the stack unwinds last-in first), and with the run unfrozen there that collection
        # walked every document and item, 0.15 s at 5,000 documents.
        config.add_cleanup(self.thaw)

    def resume(self) -> None:
        if self._paused:
            self._paused = False
            gc.freeze()
            self._frozen = True
            gc.enable()

    def thaw(self) -> None:
        self.resume()
        if self._frozen:
            self._frozen = False
            gc.unfreeze()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.resume()

    # A run that stops before collecting (a validation stop, a forecast) and xdist's controller,
    # which collects nothing itself, never reach pytest_collection_finish.
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        self.resume()

    # A run stopped by an error before its test loop resumes here, ahead of pytest's collections
    # at exit.
    @pytest.hookimpl(tryfirst=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.resume()
