"""Paths a skill or memory file names that would dangle in the trial: build warnings with the line.

A skill's text often runs or reads its own files by their project path
(``.agents/skills/release/scripts/run.sh``), and a memory file pulls others in with ``@`` imports
(``@./notes/style.md``: Gemini CLI's ``GEMINI.md``, Claude Code's ``CLAUDE.md``).  The trial's
sandbox holds the fixture and the build tree only, so such a path works there only if the build
carries the file to that path (``suite/parts.py`` puts a skill where its text says,
docs/reference.md "Where a skill lands"; a skill whose source path another text names is copied
there too, ``carry_named_skills``).  What the build does not carry is named here, one warning per
reference: the source file, the line, the path and why it dangles.

Two kinds of references are read, so that ordinary prose is never taken for one:
- ``@`` imports in a memory file (not inside code): ``@./x``, ``@../x``, ``@~/x``, ``@/x`` or a
  relative path whose last part has a suffix (``@notes/style.md``); ``@scope/package`` is no import;
- paths into a host's harness folders (``.claude/skills/…``, ``.agents/skills/…``,
  ``.gemini/commands/…``: every host's native layout) in a skill's text files or a memory file.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pytest_atlante.hosts.names import HOST_NAMES
from pytest_atlante.hosts.registry import host_for

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"`[^`]*`")
_IMPORT = re.compile(r"(?:(?<=\s)|^)@(\S+)")
_TRAILING = ".,;:!?)]}>\"'"


@dataclass(frozen=True)
class ScannedText:
    """One text file the build carries: where it came from, where it lands, what it says."""

    source: str        # the source file as warnings name it (project-relative)
    built: str         # its path in the build tree
    text: str
    memory: bool       # a memory file (CLAUDE.md, GEMINI.md, AGENTS.md): ``@`` imports are read


def harness_folders() -> tuple[str, ...]:
    """Every host's harness folders (``.claude/skills``, ``.agents/skills``, ``.gemini/commands``…):
    a path under one of them names a harness file, which the build must carry."""
    found: dict[str, None] = {}
    for name in HOST_NAMES:
        for layout in getattr(host_for(name), "native_layouts", ()):
            if layout.base:
                for names in layout.dirs.values():
                    found.update({f"{layout.base}/{dirname}": None for dirname in names})
    return tuple(found)


def _harness_path_pattern() -> re.Pattern[str]:
    folders = "|".join(re.escape(folder) for folder in sorted(harness_folders(), key=len, reverse=True))
    # After an @ it is an import, read as one (memory files) or not at all.
    return re.compile(rf"(?<![\w./$@-])(?:\./)?((?:{folders})/[\w./-]*[\w-])")


def _carried(path: str, outputs: Mapping[str, bytes]) -> bool:
    """``path`` is a built file, or a directory holding one."""
    prefix = path.rstrip("/") + "/"
    return path in outputs or any(out.startswith(prefix) for out in outputs)


def _import_target(token: str) -> str | None:
    """The path an ``@`` token imports, or None when it is no import (a mention, a package)."""
    token = token.rstrip(_TRAILING)
    if token.startswith(("./", "../", "~/", "/")):
        return token
    if "/" in token or token.endswith(".md"):
        last = token.rsplit("/", 1)[-1]
        if "." in last.strip(".") and not token.startswith("@"):
            return token
    return None


def _prose_lines(text: str) -> Iterable[tuple[int, str]]:
    """(line number, line with code spans blanked) outside fenced code: where imports are read."""
    fenced = False
    for number, line in enumerate(text.splitlines(), start=1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, _CODE_SPAN.sub("", line)


@dataclass(frozen=True)
class Reference:
    """One path a built text names: its file and line, and the tree path it resolves to (or, for an
    import of a file outside the project, the path as written, ``outside``)."""

    source: str
    line: int
    written: str       # as the text writes it (``@./notes/style.md``, ``.agents/skills/x/run.sh``)
    path: str          # the build-tree path it names
    outside: bool = False


def _imports(scanned: ScannedText) -> Iterable[Reference]:
    base = posixpath.dirname(scanned.built)
    for number, line in _prose_lines(scanned.text):
        for match in _IMPORT.finditer(line):
            target = _import_target(match.group(1))
            if target is None:
                continue
            if target.startswith(("~/", "/")):
                yield Reference(scanned.source, number, f"@{target}", target, outside=True)
                continue
            resolved = posixpath.normpath(posixpath.join(base, target))
            yield Reference(scanned.source, number, f"@{target}", resolved, outside=resolved.startswith("../"))


def _paths(scanned: ScannedText, pattern: re.Pattern[str]) -> Iterable[Reference]:
    for number, line in enumerate(scanned.text.splitlines(), start=1):
        for match in pattern.finditer(line):
            path = match.group(1).rstrip(".")
            yield Reference(scanned.source, number, path, path)


def references(texts: Iterable[ScannedText]) -> list[Reference]:
    """Every ``@`` import (memory files) and harness path (all) the texts name."""
    pattern = _harness_path_pattern()
    found: list[Reference] = []
    for scanned in texts:
        if scanned.memory:
            found += _imports(scanned)
        found += _paths(scanned, pattern)
    return found


def carry_named_skills(found: Iterable[Reference], skill_homes: Mapping[str, str], outputs: dict[str, bytes],
                       executable: set[str]) -> None:
    """A built skill's files, also at its source path where a text names a file there that the
    build does not carry otherwise (``GEMINI.md``'s ``@./skills/x/SKILL.md`` once the skill is in
    the host's folder): ``skill_homes`` maps a skill's source path to where it was built."""
    for ref in found:
        if ref.outside or _carried(ref.path, outputs):
            continue
        source = next((rel for rel in skill_homes if ref.path == rel or ref.path.startswith(rel + "/")), None)
        if source is None:
            continue
        home = skill_homes[source]
        for built in [key for key in outputs if key.startswith(home + "/")]:
            copy = source + built[len(home):]
            outputs.setdefault(copy, outputs[built])
            if built in executable:
                executable.add(copy)


def dangling_warnings(found: Iterable[Reference], outputs: Mapping[str, bytes], host: str) -> list[str]:
    """One warning per reference that no output of the build is at."""
    warnings = []
    for ref in found:
        where = f"{ref.source} line {ref.line}: {ref.written}"
        if ref.outside and ref.written.startswith("@") and ref.path.startswith(("~/", "/")):
            warnings.append(f"{where} imports a file outside the project, which no trial of {host} has")
        elif ref.outside or not _carried(ref.path, outputs):
            what = "import" if ref.written.startswith("@") else "path"
            fix = ("make it a skill's file, put it in the fixture, or inline it" if what == "import"
                   else "adopt the part it names in the harness section, or change the path")
            warnings.append(f"{where} is not in the build for {host}: the {what} would dangle in the trial ({fix})")
    return warnings
