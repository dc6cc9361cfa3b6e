"""Clean sources: every trial copies its fixture and the build tree from the run's pristine copy.

A trial's agent can write anywhere its user can, through absolute paths: into the project's fixture
or its verified build tree, which the next trial would copy.  So the controller copies each
scenario fixture and the build tree once per run, before any trial, into ``<run dir>/sources/``,
and records the fingerprint and sha256 of every file of the copy
(:func:`prepare_sources`; xdist workers receive the record through ``workerinput``).  Each trial
assembles its sandbox from those copies and then checks them against the record
(:func:`changed_in_copy`): an entry whose fingerprint moved is re-hashed (a ``touch`` is no change);
a changed, added or removed file makes the trial ``infra-error`` naming it, never silently used.

A write into the project's own fixture or build tree is an escape of the trial that made it
(:mod:`pytest_atlante.sandbox.audit`); the trials after it still start from the pristine copy.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pytest_atlante.fsutil import sha256_file
from pytest_atlante.pathnames import escape_path
from pytest_atlante.sandbox.audit import Fingerprint, Stat, Watched, fingerprint
from pytest_atlante.sandbox.trialdir import copy_sparse, remove_tree, run_dir

__all__ = ["RunSources", "changed_in_copy", "copy_of", "prepare_sources", "remove_sources"]

# {"copies": {original root: copy root}, "record": {copy root: {rel: [*Stat, sha256]}}}: plain JSON,
# so the controller can hand it to xdist workers.
RunSources = dict[str, Any]
_NOTHING_SKIPPED = frozenset[str]()


def prepare_sources(roots: Iterable[Path], run_id: str) -> RunSources:
    """Copy each root into the run directory and record what the copy holds.

    The copies keep their permissions (the sandbox is copied from them, executable bits and all).
    """
    base = run_dir(run_id) / "sources"
    parent = base.parent
    parent.mkdir(mode=0o700, exist_ok=True)
    info = os.lstat(parent)
    if stat.S_ISLNK(info.st_mode) or info.st_uid != os.getuid():  # /tmp is shared
        raise OSError(f"{parent} is not a directory owned by this user")
    base.mkdir(mode=0o700, exist_ok=True)
    copies: dict[str, str] = {}
    record: dict[str, dict[str, list[int | str]]] = {}
    for index, root in enumerate(sorted(set(roots))):
        copy = base / f"{index}-{root.name}"
        shutil.copytree(root, copy, symlinks=True, copy_function=copy_sparse)
        copies[str(root)] = str(copy)
        record[str(copy)] = {rel: [*entry, _content(copy, rel, entry)] for rel, entry in _scan(copy).items()}
    return {"copies": copies, "record": record}


def copy_of(sources: RunSources, original: Path) -> Path:
    """The run's copy of ``original`` (``original`` itself when the run made none)."""
    copy = sources.get("copies", {}).get(str(original))
    return Path(copy) if copy else original


def changed_in_copy(sources: RunSources, original: Path) -> list[str]:
    """Paths of the run's copy of ``original`` that differ from what was recorded (shown form)."""
    copy = copy_of(sources, original)
    reference = sources.get("record", {}).get(str(copy))
    if reference is None:
        return []
    return sorted(escape_path(rel) for rel in _differences(copy, reference, _scan(copy)))


def remove_sources(run_id: str) -> None:
    remove_tree(run_dir(run_id) / "sources")


def _scan(root: Path) -> Fingerprint:
    return fingerprint(Watched(root, "", skip_names=_NOTHING_SKIPPED))


def _differences(root: Path, reference: Mapping[str, list[Any]], now: Fingerprint) -> Iterator[str]:
    for rel in reference.keys() | now.keys():
        before, after = reference.get(rel), now.get(rel)
        if before is None or after is None:
            yield rel
            continue
        if tuple(before[:6]) == after:
            continue
        # The fingerprint moved (a touch, a chmod, a rewrite with the same bytes): compare contents.
        if before[0] != after[0] or before[6] != _content(root, rel, after):
            yield rel


def _content(root: Path, rel: str, entry: Stat) -> str:
    try:
        if entry[0] == "l":
            return "link:" + os.readlink(root / rel)
        return sha256_file(root / rel)
    except OSError:
        return "<unreadable>"
