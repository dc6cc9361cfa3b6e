"""Find and kill every process a run started, including ones that left its process group.

Why this module exists (host-facts §6, §10): both host CLIs start their tool shells with ``setsid``, so
the shells live in their own session and process group. Killing the CLI's group does not reach
them, and SIGTERM to Claude Code 2.1.197 or to OpenCode leaves them running, re-parented to pid 1.

Mechanism and its trade-offs
----------------------------
1. **Membership.** The run is the process tree below the children this process gained since the
   run started (``current_children`` before it, pid *and* start time, so a recycled pid is not
   mistaken for an old child).  We are a child subreaper (point 3), so no process of the run can
   leave that tree: when a parent dies, its children re-parent to us, not to pid 1.  That catches
   the shells the host CLIs start with ``setsid``, and descendants that also exec'd with ``env -i``
   *and* left the group (``setsid env -i …``, a double fork with an empty environment).  The tree is
   read from the kernel's per-thread child lists (``/proc/<pid>/task/*/children``), starting at our
   own: the cost grows with the run's processes, not with the machine's (measured in
   docs/benchmarks.md "Process sweeps").  Under namespace isolation (``isolation``) the trial's
   processes live in their own PID namespace and die with it; the tree is then just the
   bubblewrap process (a zombie by the time of the sweep) and its sandbox init: bubblewrap exits
   as soon as that init reports the command's status, so the init is re-parented to us and dies a
   moment later, usually before the sweep sees it (``reap_session`` reaps it by its session).
   Where the kernel lists no children (built without ``CONFIG_PROC_CHILDREN``) or this process
   could not become a subreaper, a process belongs to the run if any of these holds, found by a
   scan of every process in ``/proc``:
   - it carries the **environment token**: ``process.run`` puts ``ATLANTE_RUN_TOKEN=<uuid4>`` into
     the child's environment, every descendant inherits it unless it deliberately execs with a
     rewritten environment, and ``/proc/<pid>/environ`` keeps showing the environment a process was
     exec'd with even after ``setsid`` or ``unsetenv``;
   - it is a live member of the run's original **process group** other than the leader (safe
     because the caller keeps the leader unreaped, so the group id is not recycled);
   - it was **adopted** by this process: its parent is us and it is not one of the children we
     already had when the run started.
   **Runs in flight.** Several runs can be in flight at once, from threads of this process
   (several trials per worker), and then "a child gained since the run started" is also another
   run's leader, its re-parented tool shells or sandbox init.  ``RUNS_IN_FLIGHT`` lists every run
   in flight: its token, its leader (whose pid is the run's session id and original process group
   id, ``start_new_session``) and the children this process had before it started.  A child of
   ours (in the tree: a root, and with it everything below it) is *not* this run's when it is:
   - in this process's own session: every process of a run descends from its leader, which made a
     session of its own, and no process can join a session it did not create or inherit (a git
     another thread runs, a test's own ``Popen``);
   - another run's leader, or in its session or original process group (neither id can be taken
     by a process of another run), or carrying its token — unless it was already our child when
     that run started, so it cannot be that run's (a token can be copied from another run's
     ``/proc/<pid>/environ`` where there is no namespace isolation; a session cannot).
   A run is registered in the same hold of the registry's lock as its leader's ``Popen``, and a
   sweep reads the registry after it read our children, so a sweep that sees a leader sees it
   registered; it is unregistered after its sweep, before its leader is reaped, so the leader's
   pid is never recycled while listed.  What stays ambiguous — a process that left its run's
   session and group *and* dropped the token (``setsid env -i`` behind a double fork), then was
   re-parented to us — counts for every run in flight that started before it became our child,
   so the first of them to end kills it (and counts it in its ``orphans_killed``): it is
   deliberately escaping, and no run in flight is the worse for its death.  With one run in
   flight only the first rule is new: before it, a child another thread started during the run
   (a git of the next trial's setup) was killed as the run's.
   After the run's main process has ended we SIGKILL every member, repeating until none remains
   (bounded): a dying process may fork once more, and killing one hands its children to us.
   - Processes of other users are unreadable to a non-root caller and so never matched or killed.
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
   descendant that exits and is orphaned before any scan saw it alive is reaped by
   ``reap_session`` while it stayed in the run's session; one that had left it (``setsid``)
   likewise stays a zombie.
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
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, TypeVar

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


def _read_proc(pid: int | str, name: str) -> bytes | None:
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
    session: int
    start: int  # clock ticks after boot: with the pid, identifies a process across pid reuse


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after the command name, state first; None if gone."""
    stat = _read_proc(pid, "stat")
    if stat is None:
        return None
    # "pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime
    # stime cutime cstime priority nice num_threads itrealvalue starttime ...": comm may contain
    # spaces and parentheses, so split after its last ")".
    return stat[stat.rfind(b")") + 2 :].split()


def _stat_if_alive(pid: int) -> _Stat | None:
    """Parent, group and start time of ``pid`` per /proc/<pid>/stat; None if gone or a zombie."""
    fields = _stat_fields(pid)
    if fields is None or fields[0] in (b"Z", b"X"):
        return None
    return _Stat(ppid=int(fields[1]), pgrp=int(fields[2]), session=int(fields[3]), start=int(fields[19]))


def _children_of(pid: int | str) -> list[int] | None:
    """``pid``'s children as the kernel lists them per thread (``/proc/<pid>/task/*/children``):
    no scan of the machine's processes.  None when the kernel has no such files (built without
    CONFIG_PROC_CHILDREN) or ``pid`` is gone."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    found: list[int] = []
    for thread in threads:
        listed = _read_proc(f"{pid}/task/{thread}", "children")
        if listed is None:
            if not os.path.exists(f"/proc/{pid}/task/{thread}"):
                continue  # the thread ended meanwhile
            return None
        found.extend(int(child) for child in listed.split())
    return found


def current_children() -> frozenset[tuple[int, int]]:
    """(pid, start time) of this process's live children: pass to ``kill_processes_with_token`` as
    ``known_children`` so that only children adopted after this call count as the run's."""
    own = os.getpid()
    listed = _children_of("self")
    candidates = listed if listed is not None else _proc_pids()
    found = set()
    for pid in candidates:
        stat = _stat_if_alive(pid)
        if stat is not None and stat.ppid == own:
            found.add((pid, stat.start))
    return frozenset(found)


class _Started(Protocol):
    pid: int


_StartedT = TypeVar("_StartedT", bound=_Started)


@dataclass(frozen=True)
class _InFlight:
    entry: bytes  # the run's token as it appears in /proc/<pid>/environ
    leader: int  # also the run's session id and original process group id
    known_children: frozenset[tuple[int, int]]  # our children before it started: none of them is its


class RunsInFlight:
    """The runs this process has in flight (module docstring, point 1, "Runs in flight").

    One per process, not per caller, because what it describes is process-wide: every thread's
    runs are children of this one process, and every sweep reads this process's children.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, _InFlight] = {}

    def start(self, token: str, known_children: frozenset[tuple[int, int]],
              popen: Callable[[], _StartedT]) -> _StartedT:
        """Start a run's leader with ``popen`` (a new session) and register it, in one hold of the
        lock: no sweep can see the leader as our child before it is registered.  ``popen``'s
        exception propagates with nothing registered."""
        with self._lock:
            started = popen()
            self._runs[token] = _InFlight(_token_entry(token), started.pid, known_children)
        return started

    def end(self, token: str) -> None:
        """Unregister the run (idempotent).  Before its leader is reaped: a listed leader's pid
        must not be recycled."""
        with self._lock:
            self._runs.pop(token, None)

    def others(self, token: str) -> tuple[_InFlight, ...]:
        """The runs in flight but ``token``'s.  Read it *after* reading the processes it is to
        classify: a leader seen as our child is then certainly registered (``start``)."""
        with self._lock:
            return tuple(run for key, run in self._runs.items() if key != token)

    def tokens(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._runs)

    def locked(self) -> bool:
        return self._lock.locked()


RUNS_IN_FLIGHT = RunsInFlight()


def _not_this_runs(pid: int, stat: _Stat, token: str) -> bool:
    """Is ``pid``, a child of ours (``stat`` read just before), provably not the run's with
    ``token``: in this process's own session, or another run in flight's (module docstring,
    point 1, "Runs in flight")?"""
    if stat.session == os.getsid(0):
        return True
    environ: bytes | None = None
    for other in RUNS_IN_FLIGHT.others(token):
        if (pid, stat.start) in other.known_children:
            continue  # our child before that run started: none of its processes
        if other.leader in (pid, stat.session, stat.pgrp):
            return True
        if environ is None:
            environ = b"\0" + (_read_proc(pid, "environ") or b"")
        if other.entry in environ:
            return True
    return False


def _descendants(roots: list[int], exclude: int | None) -> dict[int, int] | None:
    """Every live process below ``roots`` (the roots included), as pid → start time; None when the
    kernel lists no children (the caller then scans ``/proc``).  Zombies are skipped: a process that
    exited has no children left (they were re-parented at its exit)."""
    found: dict[int, int] = {}
    pending = list(roots)
    while pending:
        pid = pending.pop()
        if pid in found or pid == exclude:
            continue
        stat = _stat_if_alive(pid)
        if stat is None:
            continue
        children = _children_of(pid)
        if children is None:
            if _stat_if_alive(pid) is None:
                continue  # it died between the two reads
            return None
        found[pid] = stat.start
        pending.extend(children)
    return found


@dataclass(frozen=True)
class _RunMembership:
    """Decides whether a pid belongs to the run (module docstring, point 1): it carries the token,
    it is a live member of the run's original process group other than the leader (which the caller
    reaps itself), or it is a child of ours that is not among ``known_children`` and not provably
    another's (``_not_this_runs``)."""

    token: str
    entry: bytes  # the token as /proc/<pid>/environ shows it
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
            and not _not_this_runs(pid, stat, self.token)
        )

    def live_members(self) -> list[int]:
        own = os.getpid()
        return [pid for pid in _proc_pids() if pid != own and self.includes(pid)]


class _RunTree:
    """The run as the kernel's process tree shows it (module docstring, point 1): every live
    descendant of the children this process adopted or started since ``known_children`` was taken,
    but those that are provably not the run's (``_not_this_runs``: another run's in flight).

    We are a child subreaper, so each of the run's processes is below one of our children: the run's
    main process (a zombie by the time of a sweep, its children re-parented to us), a tool shell that
    left with ``setsid``, a double-forked ``env -i`` sleeper.  Identity is (pid, start time), so a
    recycled pid is never taken for a member.  Reading the children of the run's processes costs
    nothing that grows with the machine; :class:`_RunMembership` scans ``/proc`` where the kernel
    lists no children."""

    def __init__(self, token: str, known_children: frozenset[tuple[int, int]], leader: int | None) -> None:
        self._token = token
        self._known = known_children
        self._leader = leader
        self._starts: dict[int, int] = {}

    def live_members(self) -> list[int] | None:
        own = os.getpid()
        children = _children_of("self")
        if children is None:
            return None
        roots = [pid for pid in children if (stat := _stat_if_alive(pid)) is not None
                 and stat.ppid == own and (pid, stat.start) not in self._known
                 and not _not_this_runs(pid, stat, self._token)]
        found = _descendants(roots, self._leader)
        if found is None:
            return None
        self._starts.update(found)
        return sorted(found)

    def includes(self, pid: int) -> bool:
        stat = _stat_if_alive(pid)
        return stat is not None and self._starts.get(pid) == stat.start


def _members(tree: _RunTree | None, scan: _RunMembership) -> tuple[list[int], _RunMembership | _RunTree]:
    """The run's live members, from the process tree where the kernel lists children, else from a
    scan of ``/proc``; with the membership that re-checks a pid after it was pinned."""
    if tree is not None and (found := tree.live_members()) is not None:
        return found, tree
    return scan.live_members(), scan


def _kill_pinned(pid: int, membership: _RunMembership | _RunTree, pinned: dict[int, int]) -> bool:
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

    With ``known_children`` (from ``current_children`` before the run started) and this process a
    child subreaper, the members are the live descendants of the children it gained since
    (:class:`_RunTree`): no scan of the machine.  Otherwise — or where the kernel lists no children —
    members carry ``token``, or sit in ``process_group``, or are children of this process that were
    not among ``known_children`` (:class:`_RunMembership`, a scan of ``/proc``).  In both, a child
    that is provably another run's in flight (``RUNS_IN_FLIGHT``, looked up by ``token``) or none
    (in this process's session) is left alone, and with it what is below it.  Scans
    repeatedly until no member remains or the sweep budget is spent, because a dying process may
    fork once more before the signal lands, and killing an adopted process hands its children to
    us.  ``process_group`` is the run's original group; its leader is excluded and must be kept
    unreaped by the caller, so the group id cannot have been recycled.  Returns how many distinct
    processes were found alive and killed.
    """
    scan = _RunMembership(token, _token_entry(token), process_group, known_children)
    tree = _RunTree(token, known_children, process_group) if known_children is not None and ensure_child_subreaper() else None
    deadline = time.monotonic() + _SWEEP_BUDGET_S
    with _pidfds() as pinned:
        killed: set[int] = set()
        while True:
            survivors, membership = _members(tree, scan)
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


def _session_child(pid: int, session: int) -> bool:
    """Is ``pid`` (alive or a zombie) a child of this process in ``session``, other than its leader?"""
    fields = _stat_fields(pid)
    return (fields is not None and pid != session and fields[0] != b"X"
            and int(fields[1]) == os.getpid() and int(fields[3]) == session)


def reap_session(session: int, *, budget_s: float = _SWEEP_BUDGET_S) -> int:
    """Kill and reap every child of this process in ``session`` but the session's leader.

    Why: a process of the run that became our child (we are a child subreaper) and exited before
    any sweep saw it alive is a zombie no sweep finds, and it holds a process id until this process
    exits.  Bubblewrap makes one on nearly every run: its outer process exits as soon as the
    sandbox's init reports the command's exit status, so that init — still in the run's session —
    is re-parented to us and dies a moment later (measured: 19 zombies of 20 runs, slowed).
    Membership is exact: only the run's own processes can be in the session its main process
    created (``start_new_session``), and that id cannot be recycled while the leader (kept
    unreaped by the caller) or any member exists, so no other child's exit status is taken — not
    even a process another thread starts meanwhile.  A member that left the session with
    ``setsid`` and died unseen is not found here.  Returns how many were reaped.
    """
    own_children = _children_of("self")
    candidates = own_children if own_children is not None else _proc_pids()
    with _pidfds() as pinned:
        for pid in candidates:
            if not _session_child(pid, session):
                continue
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                continue
            if not _session_child(pid, session):  # re-check after pinning: the pid may be new
                os.close(fd)
                continue
            pinned[pid] = fd
            with contextlib.suppress(ProcessLookupError, PermissionError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)  # a zombie already: no effect
        _wait_until_dead(list(pinned.values()), time.monotonic() + budget_s)
        for fd in pinned.values():
            _reap_if_ours(fd)
        return len(pinned)


def signal_group_except_leader(group: int, signum: int) -> None:
    """Send ``signum`` to every live member of ``group`` but its leader (pid == ``group``).

    For a run wrapped in bubblewrap: the leader is ``bwrap`` itself, which dies of SIGINT and
    SIGTERM at once and takes the sandbox down with it (``--die-with-parent``), so the command
    inside would never get to handle the signal (Claude Code's final ``result`` event, host-facts §6).
    The leader must be kept unreaped by the caller, so ``group`` cannot have been recycled.  The
    group's members are the leader's descendants (under bubblewrap an orphan goes to the sandbox's
    own init, itself below the leader), so only those are read, not every process of the machine.
    """
    below = _descendants([group], None)
    for pid in sorted(below) if below is not None else _proc_pids():
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
