"""Who owns a run directory in ``$TMPDIR``, and removing the ones whose runs died.

A run keeps its trial directories in ``$TMPDIR/atlante-eval-<run id>/`` and removes them as each
trial ends.  A run killed with SIGKILL (or a crashed machine) cannot, and its trial directories
hold a copy of the login.  So every process that runs trials holds a shared ``flock`` on the run
directory for as long as it lives (``claim``); the kernel drops the lock when the process dies,
however it dies.  At the start of each run the controller removes every run directory of this user
that nobody holds (``remove_dead``) — other runs on the same machine are live and hold theirs.

Three details keep a live run safe:
- only directories carrying ``CLAIMED_MARKER`` are considered: a run of an older pytest-atlante
  (which takes no lock) may be using the others right now;
- a run directory younger than ``_YOUNG_S`` is never removed: between its ``mkdir`` and its first
  lock there is a moment when nobody holds it yet;
- a run finished with ``--atlante-keep`` leaves ``KEPT_MARKER`` in its directory: the user asked
  for those sandboxes, and they stay until removed by hand.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import tempfile
import time
from pathlib import Path

from .report import SANDBOX_DIR_PREFIX
from .sandbox import remove_run_dir, remove_tree, run_dir

__all__ = ["CLAIMED_MARKER", "KEPT_MARKER", "RunClaim", "claim", "finish", "remove_dead"]

KEPT_MARKER = "KEPT"
CLAIMED_MARKER = ".claimed"
_YOUNG_S = 60.0


class RunClaim:
    """A shared lock on a run directory, held until ``release`` or the process ends."""

    def __init__(self, fd: int, run_id: str) -> None:
        self._fd: int | None = fd
        self._run_id = run_id

    def release(self) -> None:
        """Drop the lock; the last process of the run out removes the run directory if nothing is
        left in it.  Under xdist a worker can finish cleaning up its trial after the controller
        finished the run (SIGTERM or Ctrl-C stops the controller first), and the controller's own
        ``finish`` then found the directory still in use."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # another process of this run still holds it: the last one out cleans up
            if not (run_dir(self._run_id) / KEPT_MARKER).exists():
                finish(self._run_id, keep=False)
        finally:
            os.close(fd)  # closing the only descriptor drops the lock


def claim(run_id: str) -> RunClaim:
    """Create the run directory if needed and hold a shared lock on it."""
    path = run_dir(run_id)
    path.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)
    fcntl.flock(fd, fcntl.LOCK_SH)
    (path / CLAIMED_MARKER).touch()  # after the lock: a marked directory is always held while live
    return RunClaim(fd, run_id)


def finish(run_id: str, *, keep: bool) -> None:
    """At the end of a run (controller, after every trial): remove the run directory if no trial
    left anything in it; with ``keep`` protect what was kept from ``remove_dead``."""
    path = run_dir(run_id)
    if not path.is_dir():
        return
    if keep:
        (path / KEPT_MARKER).touch()
        return
    if [entry.name for entry in path.iterdir()] == [CLAIMED_MARKER]:
        (path / CLAIMED_MARKER).unlink()
    remove_run_dir(run_id)  # only if empty


def remove_dead(parent: Path | None = None) -> list[Path]:
    """Remove this user's run directories in ``parent`` (default ``$TMPDIR``) that no live process
    holds; returns what was removed.  Never follows a symlink, never touches another user's files."""
    top = parent if parent is not None else Path(os.path.realpath(tempfile.gettempdir()))
    removed = []
    try:
        candidates = sorted(p for p in top.iterdir() if p.name.startswith(SANDBOX_DIR_PREFIX))
    except OSError:
        return []
    for path in candidates:
        if _is_dead(path):
            remove_tree(path)
            removed.append(path)
    return removed


def _is_dead(path: Path) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        return False
    if time.time() - info.st_mtime < _YOUNG_S or (path / KEPT_MARKER).exists():
        return False
    if not (path / CLAIMED_MARKER).exists():
        return False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a live process holds it
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    finally:
        os.close(fd)
