"""Who owns a run directory in ``$TMPDIR``, and removing the ones whose runs died.

A run keeps its trial directories in ``$TMPDIR/atlante-eval-<run id>/`` and removes them as each
trial ends.  A run killed with SIGKILL (or a crashed machine) cannot, and its trial directories
hold a copy of the login.  So every process of a run holds a shared ``flock`` on the run directory
(``claim``); the kernel drops the lock when the process dies, however it dies.  At the start of
each run the controller removes every run directory of this user that nobody holds
(``remove_dead``), whatever its age: other runs on the same machine are live and hold theirs.

The rule that makes this safe: **a run directory carrying ``CLAIMED_MARKER`` is held by some
process of its run for as long as the run is alive.**  Four details keep it:

- a new run directory never appears unheld: ``claim`` makes it under a temporary name the sweeper
  does not take for a run directory (``.atlante-claiming-…``), locks it, marks it, and only then
  ``rename``\\ s it into place, atomically; so there is no moment between ``mkdir`` and the first
  lock for a sweeper to see.  (A directory made by a plain ``mkdir`` elsewhere carries no marker,
  and an unmarked directory is never removed: a run of an older pytest-atlante, which takes no
  lock, may be using it right now.)
- the controller holds its run directory from before anything is copied into it until the run has
  finished (its ``claim`` ... ``finish(held=...)``), so it stays held between the trials of different processes
  (xdist workers start and stop at different times) and while ``--atlante-keep`` marks it kept;
- the sweeper decides and removes under an exclusive lock: it checks the marker only once it holds
  the lock, and renames the directory out of the way (``.atlante-removing-…``) before it lets go.
  A process that opened the directory just before waits for the lock, then finds the name no
  longer leads to what it locked, and starts over with a new directory (``claim`` checks that);
- a run finished with ``--atlante-keep`` leaves ``KEPT_MARKER`` in its directory: the user asked
  for those sandboxes, and they stay until removed by hand.

A sweeper killed half-way leaves a ``.atlante-removing-…`` directory behind, nobody holding it: the
next ``remove_dead`` removes it.  A ``claim`` killed half-way leaves a ``.atlante-claiming-…`` one,
holding nothing but the marker: it is removed once unheld and a minute old (between its ``mkdtemp``
and its ``flock`` a claim's half-made directory is not locked yet; no login is ever in one).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import stat
import tempfile
import time
from pathlib import Path

from pytest_atlante.sandbox.trialdir import SANDBOX_DIR_PREFIX, remove_run_dir, remove_tree, run_dir

__all__ = ["CLAIMED_MARKER", "KEPT_MARKER", "RunClaim", "claim", "finish", "remove_dead"]

KEPT_MARKER = "KEPT"
CLAIMED_MARKER = ".claimed"
# Never SANDBOX_DIR_PREFIX: a name being created or removed is not a run directory.
_CLAIMING_PREFIX = ".atlante-claiming-"
_REMOVING_PREFIX = ".atlante-removing-"
_ATTEMPTS = 50
_HALF_MADE_S = 60.0
_OPEN_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW


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
                _clean(self._run_id, keep=False)
        finally:
            os.close(fd)  # closing the only descriptor drops the lock


def claim(run_id: str) -> RunClaim:
    """Hold a shared lock on the run directory, creating it (already held and marked) if needed.

    OSError if the name is taken by something this user cannot use as a run directory (a symlink,
    another user's directory)."""
    path = run_dir(run_id)
    for _ in range(_ATTEMPTS):
        fd = _lock_existing(path)
        if fd is None:
            fd = _create_locked(path)
        if fd is not None:
            return RunClaim(fd, run_id)
    raise OSError(errno.EAGAIN, f"cannot claim {path}: it keeps being created and removed")


def finish(run_id: str, *, keep: bool, held: RunClaim | None = None) -> None:
    """At the end of a run (controller, after every trial): remove the run directory if no trial
    left anything in it; with ``keep`` protect what was kept from ``remove_dead``.  Then drop the
    controller's claim on the run directory (``held``, taken with ``claim`` before anything was put
    in it, so the directory is never unheld while the run lives)."""
    try:
        _clean(run_id, keep=keep)
    finally:
        if held is not None:
            held.release()


def remove_dead(parent: Path | None = None) -> list[Path]:
    """Remove this user's run directories in ``parent`` (default ``$TMPDIR``) that no live process
    holds, however young; returns what was removed.  Never follows a symlink, never touches another
    user's files, never an unmarked or kept run directory."""
    top = parent if parent is not None else Path(os.path.realpath(tempfile.gettempdir()))
    removed = []
    try:
        candidates = sorted(p for p in top.iterdir() if p.name.startswith(SANDBOX_DIR_PREFIX))
        leftovers = sorted(p for p in top.iterdir() if p.name.startswith((_CLAIMING_PREFIX, _REMOVING_PREFIX)))
    except OSError:
        return []
    for path in candidates:
        if _remove_if_unheld(path, run_directory=True):
            removed.append(path)
    for path in leftovers:
        # A half-made directory holds nothing but the marker; a fresh one is left alone, as it is
        # not locked yet between ``mkdtemp`` and ``flock`` (its claim would have to start over).
        if path.name.startswith(_CLAIMING_PREFIX) and _younger_than(path, _HALF_MADE_S):
            continue
        if _remove_if_unheld(path, run_directory=False):
            removed.append(path)
    return removed


# --------------------------------------------------------------------------- the steps


def _clean(run_id: str, *, keep: bool) -> None:
    path = run_dir(run_id)
    if not path.is_dir():
        return
    if keep:
        (path / KEPT_MARKER).touch()
        return
    if [entry.name for entry in path.iterdir()] == [CLAIMED_MARKER]:
        (path / CLAIMED_MARKER).unlink()
    remove_run_dir(run_id)  # only if empty


def _same(fd: int, path: Path) -> bool:
    """Whether ``path`` (not followed) is still the directory ``fd`` has open, and this user's."""
    try:
        now, opened = os.lstat(path), os.fstat(fd)
    except OSError:
        return False
    return (stat.S_ISDIR(now.st_mode) and (now.st_dev, now.st_ino) == (opened.st_dev, opened.st_ino)
            and now.st_uid == os.getuid())


def _lock_existing(path: Path) -> int | None:
    """A descriptor holding a shared lock on the run directory already at ``path``; None if there is
    none, or it was removed while this waited for the lock (the caller starts over)."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        return None
    try:
        if os.fstat(fd).st_uid != os.getuid():  # /tmp is shared: never a directory planted for us
            raise OSError(errno.EPERM, f"{path} is not a directory owned by this user")
        fcntl.flock(fd, fcntl.LOCK_SH)  # waits while a sweeper holds it exclusively
        if not _same(fd, path):
            os.close(fd)
            return None
        # Under the lock, so a marked directory is held; no-op when another process marked it.
        os.close(os.open(CLAIMED_MARKER, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600, dir_fd=fd))
        return fd
    except BaseException:
        os.close(fd)
        raise


def _create_locked(path: Path) -> int | None:
    """Make the run directory already locked and marked, then give it its name; None if the name was
    taken meanwhile (or a sweeper removed the half-made directory): the caller starts over."""
    temp = Path(tempfile.mkdtemp(prefix=f"{_CLAIMING_PREFIX}{path.name}-", dir=path.parent))  # mode 0o700
    fd: int | None = None
    try:
        fd = os.open(temp, _OPEN_FLAGS)
        fcntl.flock(fd, fcntl.LOCK_SH)
        os.close(os.open(CLAIMED_MARKER, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600, dir_fd=fd))
        # Atomic: the name appears with the lock held and the marker in place.  Fails if another
        # process made the name meanwhile (a non-empty directory, or not one); an empty directory
        # made by a plain mkdir there is replaced, and whoever made it goes on in this one by name.
        os.rename(temp, path)
    except OSError as exc:
        if fd is not None:
            os.close(fd)
        with contextlib.suppress(OSError):
            remove_tree(temp)
        if exc.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOENT):
            return None
        raise
    except BaseException:
        if fd is not None:
            os.close(fd)
        with contextlib.suppress(OSError):
            remove_tree(temp)
        raise
    return fd


def _remove_if_unheld(path: Path, *, run_directory: bool) -> bool:
    """Remove ``path`` if nobody holds it (and, for a run directory, it is marked and not kept)."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        return False  # gone, a symlink, not a directory, not ours to read
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a live process holds it
        # Decided under the exclusive lock: no claim can take or mark it meanwhile.
        if not _same(fd, path):
            return False
        if run_directory and (not _exists_in(fd, CLAIMED_MARKER) or _exists_in(fd, KEPT_MARKER)):
            return False
        grave = path.parent / f"{_REMOVING_PREFIX}{path.name.removeprefix(_REMOVING_PREFIX)}-{secrets.token_hex(4)}"
        try:
            os.rename(path, grave)  # still under the lock: a waiting claim then finds the name gone
        except OSError:
            return False
        remove_tree(grave)
        return True
    finally:
        os.close(fd)


def _younger_than(path: Path, seconds: float) -> bool:
    try:
        return time.time() - os.lstat(path).st_mtime < seconds
    except OSError:
        return True  # gone: nothing to remove


def _exists_in(fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True
