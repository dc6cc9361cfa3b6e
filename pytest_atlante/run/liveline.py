"""A live status at the end of the terminal's current line while a long host session runs: the
elapsed time and the model turns served so far (`` 12s, 3 turns``); with trials in flight
(``--atlante-in-flight``), while an item waits for its trial, how many run and how many are done
(`` 12s; 4 in flight, 9 of 32 done``).

pytest prints nothing between a trial's start and its result, and a host session can take minutes;
this says it is alive.  It is drawn only on a terminal (``write`` returns False otherwise, and the
line gives up), first after ``FIRST_AFTER`` seconds and then at most once a second, and erased
with backspaces before anything else is written, so the line pytest goes on writing (its progress
letters, ``PASSED``) is the line it would have been.  It knows nothing of pytest: the terminal
reporter hands it ``write``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["FIRST_AFTER", "INTERVAL", "LiveLine", "status"]

FIRST_AFTER = 2.0   # seconds before the first update: a quick session shows nothing
INTERVAL = 1.0      # seconds between updates: at most one a second

Turns = Callable[[], int]
Detail = Callable[[], str]
Write = Callable[[str], bool]   # raw text to the terminal; False: not a terminal, stop drawing


def status(elapsed: float, turns: int | None, detail: str | None = None) -> str:
    """The live text: `` 12s``, `` 12s, 3 turns`` or `` 12s; <detail>``."""
    text = f" {elapsed:.0f}s"
    if turns is not None:
        text += f", {turns} turn{'s' if turns != 1 else ''}"
    if detail:
        text += f"; {detail}"
    return text


class LiveLine:
    """One session's live status; :meth:`start` it when the session starts, :meth:`stop` it (which
    erases it) before anything else is written to the terminal."""

    def __init__(self, write: Write, clock: Callable[[], float] = time.monotonic,
                 first_after: float = FIRST_AFTER, interval: float = INTERVAL) -> None:
        self._write = write
        self._clock = clock
        self._first_after = first_after
        self._interval = interval
        self._shown = ""                  # the text on the terminal now (what stop erases)
        self._started = 0.0
        self._last = -interval            # when the last update was drawn
        self._turns: Turns | None = None
        self._detail: Detail | None = None
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self, turns: Turns | None = None, detail: Detail | None = None) -> None:
        self.stop()
        self._turns, self._detail, self._started, self._last = turns, detail, self._clock(), -self._interval
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, name="atlante-live-line", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        if self._halt.wait(self._first_after):
            return
        while not self._halt.is_set():
            if not self.tick():
                return
            self._halt.wait(self._interval)

    def tick(self) -> bool:
        """Draw the status now unless one was drawn less than ``interval`` ago; False once the
        output is no terminal."""
        with self._lock:
            if self._halt.is_set():
                return False
            now = self._clock()
            if now - self._last < self._interval:
                return True
            turns = self._turns() if self._turns is not None else None
            text = status(now - self._started, turns, self._detail() if self._detail is not None else None)
            pad = max(len(self._shown) - len(text), 0)
            if not self._write("\b" * len(self._shown) + text + " " * pad + "\b" * pad):
                self._shown = ""
                return False
            self._shown, self._last = text, now
            return True

    def stop(self) -> None:
        """Stop updating and erase what is shown (the cursor back where the status began)."""
        with self._lock:
            self._halt.set()
            if self._shown:
                width = len(self._shown)
                self._write("\b" * width + " " * width + "\b" * width)
                self._shown = ""
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._thread = None
