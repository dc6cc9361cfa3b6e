"""Find and kill every process a run started, including ones that left its process group.

Why this module exists (host-facts §6, §10): both host CLIs start their tool shells with ``setsid``, so
the shells live in their own session and process group. Killing the CLI's group does not reach
them, and SIGTERM to Claude Code 2.1.197 or to OpenCode leaves them running, re-parented to pid 1.

Mechanism and its trade-offs
----------------------------
1. **Membership.** A process belongs to the run if any of these holds:
   - it carries the **environment token**: ``process.run`` puts ``ATLANTE_RUN_TOKEN=<uuid4>`` into
     the child's environment, every descendant inherits it unless it deliberately execs with a
     rewritten environment, and ``/proc/<pid>/environ`` keeps showing the environment a process was
     exec'd with even after ``setsid`` or ``unsetenv``;
   - it is a live member of the run's original **process group** other than the leader (safe
     because the caller keeps the leader unreaped, so the group id is not recycled);
   - it was **adopted** by this process: its parent is us (we are a child subreaper, point 3), and
     it is not one of the children we already had when the run started (pid *and* start time, so a
     recycled pid is not mistaken for an old child).  This catches what the first two cannot: a
     descendant that exec'd with ``env -i`` *and* left the group (``setsid env -i …``, a double
     fork with an empty environment).  Its parent chain ends at us once the processes in between
     died; killing an adopted process re-parents its own children to us, so the repeated scan
     catches the whole subtree.  Limitation: a child that *another thread* of this process starts
     while a run is being swept counts as adopted; atlante starts processes from one thread.
   After the run's main process has ended we SIGKILL every member, repeating the scan until none
   remains (bounded).  Under namespace isolation (``isolation``) every process of the trial lives in
   a PID namespace and dies with it; the sweep still runs and normally finds nothing.
   - Cost: two or three small reads per process in ``/proc`` per scan (about 5 ms per run with ~80
     processes, measured).  Processes of other users are unreadable to a non-root caller and so
     never matched or killed.
   - Linux >= 5.4 only (``/proc``, pidfds with ``P_PIDFD``, ``prctl``), where the host CLIs'
     behaviour was measured (docs/host-facts.md).
2. **pidfds pin identity.** Between reading ``/proc/<pid>/…`` and signalling, the pid could be
   recycled. We open a pidfd, re-check membership after pinning, and signal with
   ``pidfd_send_signal``, so we never kill an unrelated process that inherited a recycled pid.
3. **Child subreaper.** ``ensure_child_subreaper`` sets ``PR_SET_CHILD_SUBREAPER`` on the calling
   process (process-wide, idempotent, permanent for the process lifetime). Orphaned descendants
   then re-parent to us instead of to pid 1, so after killing them we can reap them and they do
   not linger as zombies. We reap only processes whose pidfd we opened because they belonged to
   the run (``waitid(P_PIDFD, …)``); we never call ``waitpid(-1)``, so the exit status of
   unrelated children (pytest-xdist/execnet, a test's own ``subprocess.Popen``) is never stolen.
   Trade-offs: orphans of *unrelated* subprocess trees started from this process (for example a
   daemon another test double-forks) also re-parent here; we cannot prove they are ours, so they
   stay zombies until this process exits (a pid-table slot each, nothing else). Code that reaps
   with ``waitpid(-1)`` (asyncio's FastChildWatcher) would see those extra children. A run's
   descendant that exits and is orphaned before any scan saw it alive likewise stays a zombie.
   Why not only a PID namespace: it needs bubblewrap and working user namespaces, which not every
   machine has (``isolation`` probes for them); this sweep is the fallback that always works.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

TOKEN_VARIABLE = "ATLANTE_RUN_TOKEN"

_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
# How long one sweep keeps scanning for survivors before it gives up (a process stuck in
# uninterruptible sleep cannot die sooner, and the run must still end).
_SWEEP_BUDGET_S = 5.0
_SCAN_INTERVAL_S = 0.02


def ensure_child_subreaper() -> bool:
    """Make this process a child subreaper (Linux). Returns whether it is one afterwards."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    current = ctypes.c_int(0)
    if libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(current), 0, 0, 0) == 0 and current.value:
        return True
    return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


def _token_entry(token: str) -> bytes:
    return f"\0{TOKEN_VARIABLE}={token}\0".encode()


def _read_proc(pid: int, name: str) -> bytes | None:
    """``/proc/<pid>/<name>``, or None if the process is gone or the file unreadable.

    Plain ``os`` calls rather than ``Path.read_bytes``: every trial scans every process of the
    machine twice or more, and the ``Path`` objects were most of that scan's cost.
    """
    try:
        fd = os.open(f"/proc/{pid}/{name}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:  # a zombie's environ, or the process exited while being read
        return None
    finally:
        os.close(fd)


def _carries_token(pid: int, entry: bytes) -> bool:
    environ = _read_proc(pid, "environ")  # None: gone, a zombie, or another user's process
    return environ is not None and entry in b"\0" + environ


def live_processes_with_token(token: str) -> list[int]:
    """Pids of live (non-zombie) processes whose environment carries ``ATLANTE_RUN_TOKEN=token``.

    The calling process is never included. Zombies have no readable environment, so they never
    match: a dead-but-unreaped process is not "alive" here.
    """
    entry = _token_entry(token)
    own = os.getpid()
    return sorted(pid for pid in _proc_pids() if pid != own and _carries_token(pid, entry))


def _proc_pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:  # no /proc (not Linux): nothing can be found
        return []


@dataclass(frozen=True)
class _Stat:
    ppid: int
    pgrp: int
    start: int  # clock ticks after boot: with the pid, identifies a process across pid reuse


def _stat_if_alive(pid: int) -> _Stat | None:
    """Parent, group and start time of ``pid`` per /proc/<pid>/stat; None if gone or a zombie."""
    stat = _read_proc(pid, "stat")
    if stat is None:
        return None
    # "pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime
    # stime cutime cstime priority nice num_threads itrealvalue starttime ...": comm may contain
    # spaces and parentheses, so split after its last ")".
    fields = stat[stat.rfind(b")") + 2 :].split()
    if fields[0] in (b"Z", b"X"):
        return None
    return _Stat(ppid=int(fields[1]), pgrp=int(fields[2]), start=int(fields[19]))


def current_children() -> frozenset[tuple[int, int]]:
    """(pid, start time) of this process's live children: pass to ``kill_processes_with_token`` as
    ``known_children`` so that only children adopted after this call count as the run's."""
    own = os.getpid()
    found = set()
    for pid in _proc_pids():
        stat = _stat_if_alive(pid)
        if stat is not None and stat.ppid == own:
            found.add((pid, stat.start))
    return frozenset(found)


@dataclass(frozen=True)
class _RunMembership:
    """Decides whether a pid belongs to the run (module docstring, point 1): it carries the token,
    it is a live member of the run's original process group other than the leader (which the caller
    reaps itself), or it is a child of ours that is not among ``known_children``."""

    entry: bytes
    group: int | None
    known_children: frozenset[tuple[int, int]] | None

    def includes(self, pid: int) -> bool:
        if _carries_token(pid, self.entry):
            return True
        if self.group is None and self.known_children is None:
            return False
        stat = _stat_if_alive(pid)
        if stat is None:
            return False
        if self.group is not None and pid != self.group and stat.pgrp == self.group:
            return True
        return (
            self.known_children is not None
            and stat.ppid == os.getpid()
            and pid != self.group
            and (pid, stat.start) not in self.known_children
        )

    def live_members(self) -> list[int]:
        own = os.getpid()
        return [pid for pid in _proc_pids() if pid != own and self.includes(pid)]


def _kill_pinned(pid: int, membership: _RunMembership, pinned: dict[int, int]) -> bool:
    """SIGKILL ``pid`` through a pidfd if it still belongs to the run; keep the pidfd to reap."""
    fd = pinned.get(pid)
    if fd is None:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            return False
        # Re-check after pinning: the pid seen in the scan may belong to a new process by now.
        if not membership.includes(pid):
            os.close(fd)
            return False
        pinned[pid] = fd
    with contextlib.suppress(ProcessLookupError, PermissionError):
        signal.pidfd_send_signal(fd, signal.SIGKILL)
    return True


def _wait_until_dead(fds: list[int], deadline: float) -> None:
    """Block until every pidfd reports its process exited, or until ``deadline``.

    poll, not select: pidfds of a busy pytest worker can be numbered above FD_SETSIZE (1024).
    """
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    pending = set(fds)
    while pending and (remaining := deadline - time.monotonic()) > 0:
        for fd, _ in poller.poll(remaining * 1000):
            poller.unregister(fd)
            pending.discard(fd)


def _reap_if_ours(fd: int) -> None:
    """Collect the exit status of a pinned process if it is (by now) our child; else leave it."""
    with contextlib.suppress(ChildProcessError):
        os.waitid(os.P_PIDFD, fd, os.WEXITED | os.WNOHANG)


@contextlib.contextmanager
def _pidfds() -> Iterator[dict[int, int]]:
    pinned: dict[int, int] = {}
    try:
        yield pinned
    finally:
        for fd in pinned.values():
            os.close(fd)


def kill_processes_with_token(
    token: str,
    *,
    process_group: int | None = None,
    known_children: frozenset[tuple[int, int]] | None = None,
) -> int:
    """SIGKILL every live member of the run (module docstring, point 1), then reap ours.

    Members carry ``token``, or sit in ``process_group``, or — when ``known_children`` (from
    ``current_children`` before the run started) is given — are children of this process that were
    not among them: descendants that escaped both token and group and were adopted by us.  Scans
    repeatedly until no member remains or the sweep budget is spent, because a dying process may
    fork once more before the signal lands, and killing an adopted process hands its children to
    us.  ``process_group`` is the run's original group; its leader is excluded and must be kept
    unreaped by the caller, so the group id cannot have been recycled.  Returns how many distinct
    processes were found alive and killed.
    """
    membership = _RunMembership(_token_entry(token), process_group, known_children)
    deadline = time.monotonic() + _SWEEP_BUDGET_S
    with _pidfds() as pinned:
        killed: set[int] = set()
        while True:
            survivors = membership.live_members()
            killed.update(pid for pid in survivors if _kill_pinned(pid, membership, pinned))
            if not survivors or time.monotonic() >= deadline:
                break
            time.sleep(_SCAN_INTERVAL_S)
        # Re-parenting of a killed process's children happens before its pidfd turns readable,
        # so once all are dead every orphan that became our child can be reaped.
        _wait_until_dead(list(pinned.values()), deadline)
        for fd in pinned.values():
            _reap_if_ours(fd)
        return len(killed)


def signal_group_except_leader(group: int, signum: int) -> None:
    """Send ``signum`` to every live member of ``group`` but its leader (pid == ``group``).

    For a run wrapped in bubblewrap: the leader is ``bwrap`` itself, which dies of SIGINT and
    SIGTERM at once and takes the sandbox down with it (``--die-with-parent``), so the command
    inside would never get to handle the signal (Claude Code's final ``result`` event, host-facts §6).
    The leader must be kept unreaped by the caller, so ``group`` cannot have been recycled.
    """
    for pid in _proc_pids():
        if pid == group:
            continue
        stat = _stat_if_alive(pid)
        if stat is None or stat.pgrp != group:
            continue
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            # Re-check after pinning: the pid may have been reused since the scan.
            again = _stat_if_alive(pid)
            if again is not None and again.pgrp == group and again.start == stat.start:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    signal.pidfd_send_signal(fd, signum)
        finally:
            os.close(fd)
