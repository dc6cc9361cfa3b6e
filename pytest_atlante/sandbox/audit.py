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
- the report directory: every file in it except under ``trials/`` (per-trial artifacts the runner
  itself writes for other trials); its creation is not a change (nor, when it lies in HOME, the
  appearance of the top HOME entry that holds it).

Every difference becomes an *escape*: a project-relative path, ``~/name`` for HOME, or the
absolute path for anything else, in its shown form (:func:`pytest_atlante.pathnames.escape_path`).
Under ``pytest -n`` several trials run at once and the audit
cannot tell whose process wrote a file: a change is reported by every trial whose window saw it.
Setup commands run outside their own trial's window; one that writes into a watched place (say a
package manager creating ``~/.npm`` for the first time) while another trial runs shows up in that
trial.  So does a user editing the project while an eval runs.

The sources every trial copies are kept clean by :mod:`pytest_atlante.sandbox.sources`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pytest_atlante.pathnames import escape_path

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


def fingerprint(watched: Watched) -> Fingerprint:
    """``{root-relative path: Stat}`` of everything watched under ``watched.root`` (empty if absent)."""
    found: Fingerprint = {}
    stack = [("", str(watched.root))]
    while stack:
        prefix, directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue  # absent or unreadable: nothing the agent could have written either
        for entry in entries:
            rel = prefix + entry.name
            if rel in watched.skip or entry.name in watched.skip_names:
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


def _changed(before: Fingerprint, after: Fingerprint) -> list[str]:
    return sorted(path for path in before.keys() | after.keys() if before.get(path) != after.get(path))


class Audit:
    """Fingerprints every watched place; ``escapes`` lists what changed since ``start``."""

    def __init__(self, watched: Iterable[Watched]) -> None:
        self.watched = list(watched)

    @classmethod
    def for_run(cls, project_root: Path, *, home: Path, report_dir: Path, run_temp: Path,
                extra_roots: Iterable[Path] = ()) -> Audit:
        project = Path(os.path.realpath(project_root))
        report = Path(os.path.realpath(report_dir))
        skip = {".git/objects"}
        for inside in (report, Path(os.path.realpath(run_temp))):
            if inside.is_relative_to(project) and inside != project:
                skip.add(inside.relative_to(project).as_posix())
        report_label = report.relative_to(project).as_posix() + "/" if report.is_relative_to(project) else f"{report}/"
        watched = [Watched(project, "", skip=frozenset(skip)),
                   Watched(report, report_label, skip=frozenset({"trials"}))]
        for root in sorted({Path(os.path.realpath(r)) for r in extra_roots}):
            if not root.is_relative_to(project):
                watched.append(Watched(root, f"{root}/"))
        home_real = Path(os.path.realpath(home))
        if home_real != project:  # a project at $HOME is watched whole already
            # The run itself creates its report directory (and temp dir) when they live in HOME
            # (``--atlante-out ~/out``): the top entry holding them appears legitimately mid-run.
            home_skip = set(HOME_VOLATILE)
            for inside in (report, Path(os.path.realpath(run_temp))):
                if inside.is_relative_to(home_real) and inside != home_real:
                    home_skip.add(inside.relative_to(home_real).parts[0])
            watched.append(Watched(home_real, "~/", top_only=True, skip=frozenset(home_skip)))
        return cls(watched)

    def start(self) -> list[Fingerprint]:
        return [fingerprint(w) for w in self.watched]

    def escapes(self, started: list[Fingerprint]) -> list[str]:
        found: list[str] = []
        for watched, before in zip(self.watched, started, strict=True):
            found += [escape_path(watched.label + path) for path in _changed(before, fingerprint(watched))]
        return sorted(set(found))
