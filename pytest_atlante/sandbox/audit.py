"""What a trial must not change: the hermeticity audit and the clean-sources check.

Both work on *fingerprints*: one ``lstat`` per entry, ``(kind, mode, size, mtime, ctime, inode)``.
A write, a chmod, a rename or a hard link changes the ctime, which no unprivileged process can
set back, so comparing fingerprints finds every change without reading file contents.

**The audit** (always on) fingerprints, right before the host session starts and again after the
checks ran:

- the project tree, whole (fixtures, packs, the build tree, the user's sources and ``.git``),
  except what legitimately changes while a run goes on: ``__pycache__``, ``.pytest_cache``,
  ``.mypy_cache`` and ``.ruff_cache`` directories anywhere, ``.git/objects`` (content-addressed:
  an added object changes nothing until a ref, which is watched, names it), the run's own temp
  directory (when ``$TMPDIR`` is inside the project), and this run's report directory, which is
  watched on its own;
- pack directories outside the project, the same way;
- the top of the invoking user's HOME: every entry directly in it; dotfiles (``.bashrc``,
  ``.gitconfig``, ``.npmrc`` ...) by content fingerprint, other files and directories only by their
  existence (what tools keep inside ``~/.cache`` or ``~/.claude`` is not watched, nor a log file the
  run's own output is redirected into), except the history and state files interactive tools
  rewrite all the time (``.claude.json``, ``.bash_history``, ... :data:`HOME_VOLATILE`);
- the report directory: every file in it; under ``trials/`` (per-trial artifacts the runner writes,
  each file once, for this and other trials while the window is open) a new file is not a change,
  but one that was there when the window opened must stay as it was (a trial that rewrites another
  trial's transcript or host stream is caught); its creation is not a change (nor, when it lies in
  HOME, the appearance of the top HOME entry that holds it).

What other writers of the run are configured to write (pytest's and its plugins' outputs, other
runs' reports: ``outputs``, read from the pytest config in ``run/outputs.py``) is skipped wherever it
lies.  Under namespace isolation a place the trial's confinement cannot write
(:meth:`Confinement.may_write <pytest_atlante.sandbox.isolation.Confinement.may_write>`) is not
watched for that trial at all: a change there is not the trial's (docs/integrity.md says what is and
is not attributed).

Every difference becomes an *escape*: a project-relative path, ``~/name`` for HOME, or the
absolute path for anything else, in its shown form (:func:`pytest_atlante.pathnames.escape_path`).
With isolation off, under ``pytest -n`` several trials run at once and the audit
cannot tell whose process wrote a file: a change is reported by every trial whose window saw it.
Setup commands run outside their own trial's window; one that writes into a watched place (say a
package manager creating ``~/.npm`` for the first time) while another trial runs shows up in that
trial.  So does a user editing the project while an eval runs.

The sources every trial copies are kept clean by :mod:`pytest_atlante.sandbox.sources`.
"""

from __future__ import annotations

import fnmatch
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from pytest_atlante.pathnames import escape_path
from pytest_atlante.sandbox.isolation import Confinement
from pytest_atlante.sandbox.trialdir import SANDBOX_DIR_PREFIX

__all__ = ["HOME_VOLATILE", "Audit", "Fingerprint", "Stat", "Watched", "fingerprint"]

# (kind, mode, size, mtime_ns, ctime_ns, inode); directories keep only kind, mode and inode.
Stat = tuple[str, int, int, int, int, int]
Fingerprint = dict[str, Stat]

# Skipped by name at any depth of a watched tree: caches written by the test run itself.
SKIPPED_NAMES = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
# Files at the top of HOME that interactive shells and CLIs rewrite on their own.
HOME_VOLATILE = frozenset({
    ".claude.json", ".bash_history", ".zsh_history", ".python_history", ".node_repl_history",
    ".lesshst", ".viminfo", ".wget-hsts", ".sqlite_history", ".psql_history", ".Xauthority", ".ICEauthority",
})  # fmt: skip


@dataclass(frozen=True)
class Watched:
    """One watched place: its root, the prefix its paths are shown with, and what is skipped."""

    root: Path
    label: str  # "" (project-relative), "~/" (HOME) or an absolute path followed by "/"
    top_only: bool = False  # HOME: the entries directly in it, directories by existence only
    skip: frozenset[str] = frozenset()  # root-relative paths skipped with everything below them
    skip_names: frozenset[str] = SKIPPED_NAMES
    # root-relative paths whose last segment is an ``fnmatch`` pattern (``.coverage.*``): the
    # entries of that one directory it matches are skipped with everything below them
    skip_globs: frozenset[str] = frozenset()
    # root-relative subtrees where an entry may appear (the runner writes there meanwhile) but one
    # that was there at the window's start may not change or go
    grow_only: frozenset[str] = frozenset()

    def skipped_paths(self) -> list[Path]:
        """The skipped subtrees as absolute paths (globs by their directory: what may be written there)."""
        return [self.root / rel for rel in self.skip] + [self.root / rel.rpartition("/")[0] for rel in self.skip_globs]


def fingerprint(watched: Watched) -> Fingerprint:
    """``{root-relative path: Stat}`` of everything watched under ``watched.root`` (empty if absent)."""
    found: Fingerprint = {}
    globs: dict[str, list[str]] = {}
    for pattern in watched.skip_globs:
        directory, _, name = pattern.rpartition("/")
        globs.setdefault(directory + "/" if directory else "", []).append(name)
    stack = [("", str(watched.root))]
    while stack:
        prefix, directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue  # absent or unreadable: nothing the agent could have written either
        patterns = globs.get(prefix)  # once per directory: most have none
        for entry in entries:
            rel = prefix + entry.name
            if rel in watched.skip or entry.name in watched.skip_names:
                continue
            if patterns and any(fnmatch.fnmatchcase(entry.name, name) for name in patterns):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                # Directories count by their contents (an empty one is no change, as in git),
                # except at the top of HOME, where only their existence is watched.
                if watched.top_only:
                    found[rel] = ("d", info.st_mode, 0, 0, 0, info.st_ino)
                else:
                    stack.append((rel + "/", entry.path))
            elif watched.top_only and not entry.name.startswith("."):
                # A plain file at the top of HOME (a log the user's shell redirects pytest's output
                # into, pytester's ``stdout``) grows while the run goes on: existence only.
                found[rel] = ("f", info.st_mode, 0, 0, 0, info.st_ino)
            else:
                kind = "l" if stat.S_ISLNK(info.st_mode) else "f"
                found[rel] = (kind, info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
    return found


def _changed(before: Fingerprint, after: Fingerprint, grow_only: frozenset[str] = frozenset()) -> list[str]:
    def appeared_where_allowed(path: str) -> bool:
        if not any(path.startswith(top + "/") for top in grow_only):
            return False
        # The runner's own atomic writes there (another worker's transcript) pass through a
        # ``.<name>.<random>.tmp`` file that appears and goes; no reader ever opens one.
        name = path.rpartition("/")[2]
        return path not in before or (name.startswith(".") and name.endswith(".tmp"))

    return sorted(path for path in before.keys() | after.keys()
                  if before.get(path) != after.get(path) and not appeared_where_allowed(path))


class Audit:
    """Fingerprints every watched place; ``escapes`` lists what changed since ``start``."""

    def __init__(self, watched: Iterable[Watched]) -> None:
        self.watched = list(watched)

    @classmethod
    def for_run(cls, project_root: Path, *, home: Path, report_dir: Path, run_temp: Path,
                extra_roots: Iterable[Path] = (), outputs: Iterable[Path] = ()) -> Audit:
        """The run's watched places.  ``outputs`` are what other writers of the same run are
        configured to write (pytest's and its plugins' files, other runs' report directories): plain
        absolute paths, each a file or a directory skipped with everything below it, or, when its
        last segment is an ``fnmatch`` pattern (``/p/.coverage.*``), the entries of its directory
        that match.  They are skipped wherever they lie (project, packs, HOME's top, the report)."""
        project = Path(os.path.realpath(project_root))
        report = Path(os.path.realpath(report_dir))
        temp = Path(os.path.realpath(run_temp))
        # Other runs' temp directories beside this one's (``$TMPDIR`` inside the project, two runs).
        written = [temp.parent / f"{SANDBOX_DIR_PREFIX}*", *(_real_output(path) for path in outputs)]
        report_label = report.relative_to(project).as_posix() + "/" if report.is_relative_to(project) else f"{report}/"
        watched = [_place(project, "", [report, temp, *written], skip={".git/objects"}),
                   replace(_place(report, report_label, written), grow_only=frozenset({"trials"}))]
        for root in sorted({Path(os.path.realpath(r)) for r in extra_roots}):
            if not root.is_relative_to(project):
                watched.append(_place(root, f"{root}/", [temp, *written]))
        home_real = Path(os.path.realpath(home))
        if home_real != project:  # a project at $HOME is watched whole already
            # The run itself creates its report directory (and temp dir) when they live in HOME
            # (``--atlante-out ~/out``): the top entry holding them appears legitimately mid-run.
            watched.append(_place(home_real, "~/", [report, temp, *written], skip=set(HOME_VOLATILE), top_only=True))
        return cls(watched)

    def start(self, confined: Confinement | None = None) -> list[Fingerprint | None]:
        """The fingerprints a trial's window starts from.  Under namespace isolation (``confined``)
        a place the trial's processes cannot write (:meth:`Confinement.may_write`, outside what
        the place skips anyway) is not watched for that trial: ``None``, nothing is attributed."""
        return [None if confined is not None and not confined.may_write(w.root, except_under=w.skipped_paths())
                else fingerprint(w) for w in self.watched]

    def escapes(self, started: list[Fingerprint | None]) -> list[str]:
        found: list[str] = []
        for watched, before in zip(self.watched, started, strict=True):
            if before is None:
                continue
            found += [escape_path(watched.label + path)
                      for path in _changed(before, fingerprint(watched), watched.grow_only)]
        return sorted(set(found))


def _is_pattern(name: str) -> bool:
    return any(char in name for char in "*?[")


def _real_output(path: Path) -> Path:
    """An output path with its real directory (a pattern in the last segment kept as it is)."""
    if _is_pattern(path.name):
        return Path(os.path.realpath(path.parent)) / path.name
    return Path(os.path.realpath(path))


def _place(root: Path, label: str, inside: Iterable[Path], *, skip: Iterable[str] = (), top_only: bool = False) -> Watched:
    """``root`` watched with ``skip`` and every path of ``inside`` that lies in it skipped (at the top
    of HOME, the top entry that holds it; a path that is ``root`` itself or holds it skips nothing)."""
    skipped, globs = set(skip), set()
    for path in inside:
        pattern = _is_pattern(path.name)
        directory = path.parent if pattern else path
        if not directory.is_relative_to(root) or (directory == root and not pattern):
            continue
        rel = directory.relative_to(root).as_posix()
        if top_only and rel != ".":
            skipped.add(rel.split("/")[0])
        elif pattern:
            globs.add(path.name if rel == "." else f"{rel}/{path.name}")
        else:
            skipped.add(rel)
    return Watched(root, label, top_only=top_only, skip=frozenset(skipped), skip_globs=frozenset(globs))
