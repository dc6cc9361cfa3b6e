"""The controller's start-up work that needs the machine but not the suite, run beside the rest.

Two pieces of a run's start-up ask only the machine: the bubblewrap probe (``bwrap … true``, a
child process: 50–70 ms, more under load) and the sweep of dead runs' directories
(``rundirs.remove_dead``: a listing of ``$TMPDIR`` and, now and then, a dead run's tree to remove).
Done in line they came after validation, discovery and the sources copy, adding their whole time
to the wait before the first trial.  Here both start in threads as the controller's session
starts, so they overlap the CPU-bound validation and discovery: the probe waits on its child
process and the sweep on filesystem calls, which leave the interpreter free.

- The probe is joined where the isolation is decided, before any trial (a trial needs the mode),
  or at the end of a run stopped before that.
  It is started only when isolation may be wanted (the option is not ``off``); a suite whose
  configuration then says ``off`` ignores its answer, as the in-line code never asked it.
- The sweep touches only other runs' directories that no live process holds (the run's own is
  claimed and held from before its first trial), so it may go on beside the first trial; it is
  joined when the run ends, so the process never exits with a removal half done.

An exception in either thread is raised again where the thread is joined, as it would have been
in line.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from pytest_atlante.sandbox import isolation as isolations
from pytest_atlante.sandbox import rundirs

__all__ = ["StartupWork"]

T = TypeVar("T")


class _Background(Generic[T]):
    """One call in a daemon thread; :meth:`result` waits for it and returns (or raises) what it did."""

    def __init__(self, name: str, call: Callable[[], T]) -> None:
        self._call = call
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._call()
        except BaseException as exc:  # noqa: BLE001 - raised again in the joining thread
            self._error = exc

    def join(self) -> None:
        self._thread.join()

    def result(self) -> T | None:
        self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return self._value


class StartupWork:
    """The bubblewrap probe and the dead-run sweep, started at once, each joined where it is needed."""

    def __init__(self, *, probe_isolation: bool) -> None:
        self._sweep: _Background[list[Path]] | None = _Background("atlante-dead-run-sweep", rundirs.remove_dead)
        self._probe = _Background("atlante-bwrap-probe", isolations.probe) if probe_isolation else None

    def isolation_probe(self) -> str | None:
        """The probe's answer (None: bubblewrap works); probed now if it was not started."""
        if self._probe is None:
            return isolations.probe()
        return self._probe.result()

    def finish(self) -> None:
        """At the end of the run: wait for the sweep (raising what it raised) and for a probe no one
        asked for (a run stopped before its isolation was decided); a second call does nothing."""
        probe, self._probe = self._probe, None
        if probe is not None:
            probe.join()
        sweep, self._sweep = self._sweep, None
        if sweep is not None:
            sweep.result()
