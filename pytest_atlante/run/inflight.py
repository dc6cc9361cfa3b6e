"""Several trials of one process at once: ``--atlante-in-flight N``.

A trial spends nearly all its wall time waiting — on the host CLI, which waits on the model — and
the runner's own work per trial is a few hundredths of a CPU second.  Widening a run with xdist
(``-n 32``) starts one Python process per trial in flight, each importing pytest, the plugin and
pydantic and collecting the suite: measured at about 0.45 CPU seconds per worker, which at
``-n 32`` on two cores is most of what the run spends outside the CLIs (docs/benchmarks.md,
"Many trials at once").  Here one process keeps ``N`` trials running in threads instead.

How it fits pytest's protocol: items still run one after the other in pytest's order, each in its
own ``runtest``, so reports, fixtures' teardown, ``-x``, JUnit and the terminal see the usual
sequence.  The first trial item to run starts this process's remaining trial items (in item
order) in a pool of ``N`` threads; each item's ``runtest`` then waits for its own trial and
raises what the trial raised.  So a slow trial holds back its item's *report*, never the trials
behind it: ``N`` stay in flight as long as any are left.

What that changes, and why it is kept:
- a trial starts before its item's fixtures are set up (a ``conftest.py`` fixture can still read
  ``atlante_budget``; it could never change what a trial runs with);
- under ``--atlante-max-cost`` up to ``N - 1`` trials may already be running when the spend
  crosses the cap, as with ``N`` xdist workers; each trial checks the spend when it starts;
- Ctrl-C or SIGTERM interrupts the trials in flight: each is recorded as interrupted, as a serial
  run records the one it was running; a stop pytest chose (``-x``, ``--maxfail``, ``--sw``) also
  interrupts them, and they are not run, as in a serial run, which would not have started them;
- the live line says how many trials are in flight and done while an item waits; one trial's
  phases are not shown (several run at once).

Threads, not processes: everything a trial starts is a separate process (the host CLI, the
scripted model's and the proxy's servers run in threads of their own), the runner's part holds the
GIL for little, and ``sandbox/process.py`` keeps each run's process tree apart from the others'.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from typing import Any

import pytest

from pytest_atlante.run.items import TrialItem
from pytest_atlante.sandbox.process import interrupt_runs, resume_runs

__all__ = ["IN_FLIGHT_XDIST_REFUSED", "TrialsInFlight"]

IN_FLIGHT_XDIST_REFUSED = ("--atlante-in-flight keeps several trials running in one process; with -n each xdist "
                           "worker would start trials it was never handed")
# How long a stop waits for the interrupted trials to record themselves (each stops its host with a
# short grace and sweeps its process tree; process.py).
_STOP_WAIT_S = 30.0


class TrialsInFlight:
    """Up to ``width`` trials of this process running at once, reported in pytest's item order.

    A plugin object of its own (registered by the role that runs trials), so the stop at the end of
    the test loop is a hook, not a branch in the role.
    """

    def __init__(self, width: int, work: Callable[[TrialItem], None], before_start: Callable[[Sequence[TrialItem]], None],
                 forget: Callable[[Sequence[TrialItem]], None],
                 waiting: Callable[[Callable[[], str]], None] = lambda detail: None) -> None:
        """``work`` runs one item's trial(s) (the plan's ``run_item``); ``before_start`` is told the
        items about to start, in the main thread (the role builds each arm's runner there once);
        ``forget`` is told the items whose trials a stop pytest chose (``-x``) cut short;
        ``waiting`` that an item waits for its trial, with what says how the others fare."""
        self.width = width
        self._work = work
        self._before_start = before_start
        self._forget = forget
        self._waiting = waiting
        self._futures: dict[str, tuple[TrialItem, Future[None]]] = {}   # by node id, in item order
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def run(self, item: TrialItem) -> None:
        """``item``'s outcome: started now with the trials behind it, or earlier; re-raises its exception."""
        if self._pool is None:
            self._start(item)
        started = self._futures.get(item.nodeid)
        if started is None:
            # Not among the items seen at the start (a plugin added it later): run it here.
            self._work(item)
            return
        future = started[1]
        if not future.done():
            self._waiting(self.status)
        try:
            future.result()
        except KeyboardInterrupt as exc:
            if not (future.done() and not future.cancelled() and future.exception() is exc):
                # Ctrl-C or SIGTERM reached the main thread while it waited: every trial in flight
                # is interrupted and records itself so (this item's too), then the run stops.
                self.stop()
            raise

    def _start(self, first: TrialItem) -> None:
        session = first.session
        items = list(session.items)
        start = next((i for i, it in enumerate(items) if it is first), 0)
        trials = [it for it in items[start:] if isinstance(it, TrialItem)]
        self._before_start(trials)
        self._pool = ThreadPoolExecutor(max_workers=self.width, thread_name_prefix="atlante-trial")
        for trial in trials:
            # Submitted in item order: the pool's queue starts them in that order as slots free up.
            self._futures[trial.nodeid] = (trial, self._pool.submit(self._work, trial))

    def status(self) -> str:
        """`4 in flight, 9 of 32 done`: the trials running now and those finished, of this process."""
        futures = [future for _, future in self._futures.values()]
        done = sum(f.done() for f in futures)
        running = sum(f.running() for f in futures)
        return f"{running} in flight, {done} of {len(futures)} done"

    def stop(self) -> list[TrialItem]:
        """Cancel the trials not started, interrupt those in flight, wait for them to record it;
        the items whose trials were in flight."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is None:
            return []
        pending = [(item, future) for item, future in self._futures.values() if not future.done()]
        for _, future in pending:
            future.cancel()
        running = [(item, future) for item, future in pending if not future.cancelled()]
        if running:
            interrupt_runs()
            try:
                wait_for([future for _, future in running], timeout=_STOP_WAIT_S)
            finally:
                resume_runs()
        pool.shutdown(wait=False, cancel_futures=True)
        return [item for item, _ in running]

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, Any, Any]:
        try:
            return (yield)
        finally:
            # -x, --maxfail, --sw: pytest stopped calling items whose trials may be running.  A
            # serial run would never have started them: not run, as there (not "interrupted",
            # which is what Ctrl-C makes of the trials it cuts short).
            with contextlib.suppress(Exception):
                self._forget(self.stop())
