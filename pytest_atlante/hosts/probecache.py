"""The host version probe's cache: ``--version`` once per executable file, not once per run.

``claude --version`` costs 0.2 s on a quiet machine and over 1 s under load; ``opencode --version``
1.7–2.3 s — every run paid it before its first trial.  The answer only changes when the file
changes, so it is kept per executable in the user's cache directory
(``$ATLANTE_CACHE_DIR``, else ``$XDG_CACHE_HOME/pytest-atlante``, else
``~/.cache/pytest-atlante``), in ``host-probes.json``.

An entry is keyed by the executable's absolute path and holds the identity of the file it names
and of the file that path finally resolves to (npm puts a symlink on PATH): device, inode, size,
modification *and* change time in nanoseconds.  A binary swapped in place — a new file under the
old name, or the old file rewritten with its size and modification time restored — changes the
inode or the change time (which no unprivileged call can set back), so the entry no longer matches
and the probe runs again.  Only successful probes are stored; a missing, unreadable, oversized or
malformed cache is the same as an empty one, and a cache that cannot be written costs the run
nothing but the next run's probe.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from pytest_atlante.fsutil import UnreadableFile, atomic_write_text, read_capped

CACHE_DIR_VARIABLE = "ATLANTE_CACHE_DIR"
CACHE_FILE = "host-probes.json"
_SCHEMA = "atlante/host-probes-v1"
_CACHE_LIMIT = 1024 * 1024
_MAX_ENTRIES = 64  # one per executable a user runs eval with; the oldest go first

Version = tuple[int, int, int]


def cache_path(env: Mapping[str, str]) -> Path | None:
    """Where the cache lives for ``env``; None when no directory can be named."""
    override = env.get(CACHE_DIR_VARIABLE)
    if override:
        return Path(override) / CACHE_FILE
    xdg = env.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "pytest-atlante" / CACHE_FILE
    home = env.get("HOME")
    return Path(home) / ".cache" / "pytest-atlante" / CACHE_FILE if home else None


def file_identity(executable: str) -> list[int] | None:
    """Device, inode, size, mtime and ctime (ns) of ``executable`` and of what it resolves to."""
    try:
        named = os.stat(executable, follow_symlinks=False)
        target = os.stat(executable)
    except OSError:
        return None
    return [value for info in (named, target)
            for value in (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)]


def cached_version(env: Mapping[str, str], executable: str, identity: list[int]) -> Version | None:
    """The version stored for ``executable`` if the file (``identity``, now) is still the one it
    was probed as."""
    path = cache_path(env)
    if path is None:
        return None
    entry = _entries(path).get(executable)
    if not isinstance(entry, dict) or entry.get("identity") != identity:
        return None
    version = entry.get("version")
    if (isinstance(version, list) and len(version) == 3
            and all(isinstance(part, int) and not isinstance(part, bool) and part >= 0 for part in version)):
        return (version[0], version[1], version[2])
    return None


def remember_version(env: Mapping[str, str], executable: str, identity: list[int], version: Version) -> None:
    """Store a successful probe; ``identity`` is the file's as taken *before* it was run, so a file
    swapped while it ran is not recorded under the new file's identity."""
    path = cache_path(env)
    if path is None:
        return
    entries = {name: entry for name, entry in _entries(path).items() if name != executable}
    entries[executable] = {"identity": identity, "version": list(version)}
    kept = dict(list(entries.items())[-_MAX_ENTRIES:])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({"schema": _SCHEMA, "entries": kept}, indent=1) + "\n")
    except OSError:
        pass  # a read-only or full cache directory: the next run probes again


def _entries(path: Path) -> dict[str, object]:
    try:
        document = json.loads(read_capped(path, _CACHE_LIMIT, follow_symlinks=False))
    except (UnreadableFile, ValueError, RecursionError):
        return {}
    if not isinstance(document, dict) or document.get("schema") != _SCHEMA:
        return {}
    entries = document.get("entries")
    return entries if isinstance(entries, dict) else {}
