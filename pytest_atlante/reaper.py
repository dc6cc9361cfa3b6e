"""Find and kill every process a run started, including ones that left its process group.

Why this module exists (FACTS §6, §10): both host CLIs start their tool shells with ``setsid``, so
the shells live in their own session and process group. Killing the CLI's group does not reach
them, and SIGTERM to Claude Code 2.1.197 or to OpenCode leaves them running, re-parented to pid 1.

Mechanism and its trade-offs
----------------------------
1. **Environment token.** ``process.run`` puts ``ATLANTE_RUN_TOKEN=<uuid4>`` into the child's
   environment. Every descendant inherits it unless something deliberately execs with a rewritten
   environment, and ``/proc/<pid>/environ`` keeps showing the environment a process was exec'd
   with even after it calls ``setsid`` or ``unsetenv``. After the run's main process has ended we
   scan ``/proc/*/environ`` and SIGKILL every match, repeating until none remains (bounded).
   - Catches: setsid'd tool shells, double-forked daemons, anything re-parented to pid 1.
   - Also caught: token-less processes (exec'd with ``env -i``) that stayed in the run's
     original process group — the sweep matches that group too (``/proc/<pid>/stat``), which is
     safe because the caller keeps the group leader unreaped, so the group id is not recycled.
   - Misses: a descendant that execs with a cleaned environment *and* leaves the group. A PID
     namespace (``unshare --pid --kill-child``) would close that gap but needs root or user
     namespaces, and makes the CLI PID 1, which ignores SIGTERM (FACTS §10); not used here.
   - Cost: two small reads per process in ``/proc`` per scan (about 5 ms per run with ~80
     processes, measured). Processes of other users are unreadable to a non-root caller and so
     never matched or killed.
   - Linux >= 5.4 only (``/proc``, pidfds with ``P_PIDFD``, ``prctl``), where the host CLIs'
     behaviour was measured (FACTS).
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
   Why not only a PID namespace: see point 1.
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
from pathlib import Path

TOKEN_VARIABLE = "ATLANTE_RUN_TOKEN"

_PROC = Path("/proc")
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


def _carries_token(pid: int, entry: bytes) -> bool:
    try:
        environ = (_PROC / str(pid) / "environ").read_bytes()
    except OSError:  # gone, a zombie's unreadable memory, or another user's process
        return False
    return entry in b"\0" + environ


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
        return [int(p.name) for p in _PROC.iterdir() if p.name.isdigit()]
    except OSError:  # no /proc (not Linux): nothing can be found
        return []


def _process_group_if_alive(pid: int) -> int | None:
    """The process group of ``pid`` per /proc/<pid>/stat; None if it is gone or a zombie."""
    try:
        stat = (_PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    # "pid (comm) state ppid pgrp ...": comm may contain spaces and parentheses.
    state, _ppid, pgrp = stat[stat.rfind(b")") + 2 :].split()[:3]
    return None if state in (b"Z", b"X") else int(pgrp)


@dataclass(frozen=True)
class _RunMembership:
    """Decides whether a pid belongs to the run: it carries the token, or it is a live member of
    the run's original process group other than the leader (which the caller reaps itself)."""

    entry: bytes
    group: int | None

    def includes(self, pid: int) -> bool:
        if _carries_token(pid, self.entry):
            return True
        return self.group is not None and pid != self.group and (
            _process_group_if_alive(pid) == self.group
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


def kill_processes_with_token(token: str, *, process_group: int | None = None) -> int:
    """SIGKILL every live process carrying ``token`` or in ``process_group``, then reap ours.

    Scans repeatedly until no member remains or the sweep budget is spent, because a dying
    process may fork once more before the signal lands. ``process_group`` is the run's original
    group (it also catches members that exec'd without the token); its leader is excluded and
    must be kept unreaped by the caller, so the group id cannot have been recycled. Returns how
    many distinct processes were found alive and killed.
    """
    membership = _RunMembership(_token_entry(token), process_group)
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
