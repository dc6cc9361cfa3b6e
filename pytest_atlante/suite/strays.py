"""Scenario-looking files the configured glob does not match: said, never silently left out.

A second scenario saved as ``*.eval.jsonc`` under a glob of ``*.eval.json`` used to be simply not
collected.  Before a run (and ``--collect-only``), the project is walked for files that look like
scenario documents — a ``*.eval.json*`` name, or a ``.json``/``.jsonc`` document whose ``$schema``
is a scenario URI — and each one the suite did not load is named in a warning with the glob to fix.

The walk skips what is no part of the project's own documents: hidden directories (``.git``,
``.atlante``, ``.venv``), ``node_modules``, ``__pycache__``, virtual environments (a ``pyvenv.cfg``),
projects of their own nested inside (a directory with its own ``atlante.jsonc``: its scenarios are
its glob's, as the example project's ``selftest-demo/`` and ``trigger-suite/`` are) and the pack roots (a pack's suite is chosen by ``eval.include``, not by the glob); it follows no
symlink, reads at most the first ``HEAD_BYTES`` of a JSON file, and stops after ``MAX_ENTRIES``
entries so a huge tree costs a bounded time.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

from pytest_atlante.projectroot import CONFIG_FILE
from pytest_atlante.suite.discovery import ValidSuite, expand_glob

__all__ = ["HEAD_BYTES", "MAX_ENTRIES", "looks_like_scenario", "stray_warnings", "suite_strays", "unmatched_scenarios"]

HEAD_BYTES = 4096
MAX_ENTRIES = 50_000
_SKIPPED = frozenset({"node_modules", "__pycache__"})
_SCENARIO_SCHEMA = re.compile(rb'"\$schema"\s*:\s*"https://atlante\.sh/schema/[^"]*scenario[^"]*"')


def looks_like_scenario(path: Path) -> bool:
    name = path.name
    if fnmatch.fnmatchcase(name, "*.eval.json*"):
        return True
    if not name.endswith((".json", ".jsonc")):
        return False
    return _SCENARIO_SCHEMA.search(_head(path)) is not None


def _head(path: Path) -> bytes:
    """The first ``HEAD_BYTES`` of a regular file (nothing for anything else: a FIFO never blocks)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        return os.read(fd, HEAD_BYTES) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError:
        return b""
    finally:
        os.close(fd)


def unmatched_scenarios(root: Path, loaded: Iterable[Path], skip: Iterable[Path] = ()) -> list[Path]:
    """Files under ``root`` that look like scenario documents and are not among ``loaded``."""
    taken = {Path(os.path.abspath(p)) for p in loaded}
    skipped = {Path(os.path.abspath(p)) for p in skip}
    found: list[Path] = []
    seen = 0
    for directory, dirs, files in os.walk(root):
        here = Path(directory)
        seen += len(dirs) + len(files)
        if seen > MAX_ENTRIES:
            break
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIPPED and here / d not in skipped
                         and not (here / d / "pyvenv.cfg").exists() and not (here / d / CONFIG_FILE).exists())
        for name in sorted(files):
            path = here / name
            if path not in taken and not path.is_symlink() and looks_like_scenario(path):
                found.append(path)
    return found


def stray_warnings(root: Path, pattern: str | None, loaded: Iterable[Path], skip: Iterable[Path] = ()) -> list[str]:
    """One warning per scenario-looking file the suite did not load."""
    shown = f"eval.scenarios ({pattern!r})" if pattern else "eval.scenarios (not set)"
    return [f"atlante: warning: {path.relative_to(root).as_posix()} looks like a scenario document but "
            f"{shown} does not match it, so it is not collected; widen the glob (e.g. \"*.eval.json*\" takes "
            ".eval.jsonc too) or rename the file"
            for path in unmatched_scenarios(root, loaded, skip)]


def suite_strays(suite: ValidSuite) -> list[str]:
    """The warnings for a validated suite: what its glob matches (every scenario, before a
    ``--atlante-scenario`` filter) and its scenarios' files count as loaded; pack roots are skipped."""
    pattern = suite.eval.scenarios
    loaded = [entry.file for entry in suite.scenarios]
    if pattern is not None:
        try:
            loaded += expand_glob(suite.project_root, pattern)
        except ValueError:  # reported by validation already
            return []
    return stray_warnings(suite.project_root, pattern, loaded, [pack.root for pack in suite.packs])
