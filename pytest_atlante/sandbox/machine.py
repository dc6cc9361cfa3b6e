"""What a ``model-only`` trial sees of the machine: its programs, none of its services (docs/design.md §11).

A network namespace of its own stops TCP, UDP and abstract unix sockets, but a **pathname** unix
socket is a file: whoever sees it can connect to it (a read-only bind guards file contents, not
``connect``), whatever network namespace it is in.  A machine keeps them in many places — the
system bus and container runtimes in ``/run`` (``/var/run``), databases in ``/var/run/postgresql``
or ``/tmp``, a session's agents in ``/run/user/<uid>``, services of their own under ``/srv``,
``/var/lib``, ``/home`` — and a rule that hides a list of known socket places misses the next one.

So the decision: under ``model-only`` the trial gets an **empty root with the program trees put
back** rather than the machine's root with socket places hidden.  Every top-level directory of
``/`` except the ones that hold programs, their libraries and the system's configuration
(``PROGRAM_TREES``) is covered by an empty tmpfs, and what the command needs from a covered
directory is put back by itself, the way the user's HOME already is (``isolation._put_backs``):
the project, its virtualenv, the PATH directories and the packages their links point into.
``/run``, ``/var``, ``/tmp``, ``/srv``, ``/home``, ``/mnt``, ``/media`` and ``/root`` are gone.

What stays visible can still hold a socket (a service's socket inside the project, one in ``/etc``
or ``/opt``): every pathname socket the machine's processes are listening on (``/proc/net/unix``)
that the trial would see is covered by ``/dev/null`` (``connect`` then fails with
``ECONNREFUSED``).  Not covered: a socket bound after the trial's command started, and a socket of
another network namespace (a container's) inside a program tree or the project.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["PROGRAM_TREES", "hidden_tops", "listening_sockets", "socket_covers"]

#: The top-level directories a ``model-only`` trial keeps (read-only): programs, their libraries,
#: the system's configuration and package stores; ``/proc``, ``/dev`` and ``/sys`` are the kernel's
#: (bubblewrap mounts fresh ``/proc`` and ``/dev``).  Everything else at the top is hidden.
PROGRAM_TREES = frozenset({
    "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt", "nix", "gnu", "snap",
    "proc", "dev", "sys",
})  # fmt: skip
#: ``/proc/net/unix`` of a busy machine is a few thousand lines; more than this is not read.
_MAX_SOCKET_LINES = 100_000


def hidden_tops(root: Path = Path("/")) -> tuple[Path, ...]:
    """The top-level directories of ``root`` a ``model-only`` trial does not see (real directories
    only: a top-level symlink into a hidden one dangles inside, a mount over it would follow it)."""
    found = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return ()
    for entry in entries:
        if entry.name in PROGRAM_TREES or entry.is_symlink():
            continue
        if entry.is_dir(follow_symlinks=False):
            found.append(Path(entry.path))
    return tuple(sorted(found))


def listening_sockets(table: Path = Path("/proc/net/unix")) -> Iterator[Path]:
    """The pathname unix sockets of this network namespace's listeners, as ``/proc/net/unix``
    names them (abstract ones, starting with ``@``, are per network namespace and need nothing)."""
    try:
        with open(table, encoding="utf-8", errors="replace") as lines:
            next(lines, None)  # the header
            for number, line in enumerate(lines):
                if number >= _MAX_SOCKET_LINES:
                    return
                fields = line.split(None, 7)
                if len(fields) == 8 and fields[7].startswith("/"):
                    yield Path(fields[7].rstrip("\n"))
    except OSError:
        return


def socket_covers(visible: Callable[[Path], bool], sockets: Iterator[Path] | None = None) -> list[Path]:
    """The machine's listening sockets the trial would see: each is still a socket at its path
    (a listener whose file was removed or replaced needs no cover, and bubblewrap cannot mount
    over a missing file under a read-only root)."""
    covers = set()
    for listed in listening_sockets() if sockets is None else sockets:
        # Where the file really is (``/var/run`` is a link to ``/run``): bubblewrap resolves the
        # mount point inside, where that link may lead nowhere.
        path = Path(os.path.realpath(listed.parent)) / listed.name
        try:
            if not stat.S_ISSOCK(os.lstat(path).st_mode):
                continue
        except OSError:
            continue
        if visible(path):
            covers.add(path)
    return sorted(covers)
