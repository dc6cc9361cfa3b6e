"""A project's existing native harness: which agent, skill, command and instruction files it has.

``atlante init`` adopts a harness the user already keeps in a host's own layout: it calls
:func:`discover_native_harness` on the project root and writes :func:`harness_section_for`'s
result as the ``harness`` section of ``atlante.jsonc``. The files are adopted *in place* (the
section names them; nothing is copied or rewritten), so the native files stay the one source and
``atlante build`` reads their frontmatter itself (``suite/frontmatter.py``, docs/design.md §9).

Layouts found (host-facts §5, §8 and §11):

- Claude Code: ``.claude/agents/*.md``, ``.claude/skills/*/SKILL.md``, ``.claude/commands/**/*.md``,
  ``CLAUDE.md``; a plugin directory (``.claude-plugin/plugin.json`` beside ``agents/``,
  ``commands/``, ``skills/``) at the root;
- OpenCode: ``.opencode/agent(s)/*.md``, ``.opencode/command(s)/*.md``,
  ``.opencode/skill(s)/*/SKILL.md``, ``AGENTS.md``.

What eval cannot run is listed, never adopted: hooks, MCP servers and settings files (the eval
reference has the runner author a fresh configuration and forbids merging the project's).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pytest_atlante.fsutil import MAX_DOCUMENT_BYTES, UnreadableFile, read_capped
from pytest_atlante.hosts.names import HostName
from pytest_atlante.suite import frontmatter
from pytest_atlante.suite.frontmatter import FrontmatterError

NativeKind = Literal["agent", "skill", "command", "instructions"]

#: The memory file each host loads from the sandbox root (host-facts §5, §8).
INSTRUCTION_FILES: dict[HostName, str] = {"claude-code": "CLAUDE.md", "opencode": "AGENTS.md"}

_SLUG_UNSAFE = re.compile(r"[^a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


@dataclass(frozen=True)
class NativePart:
    kind: NativeKind
    name: str          # slug as the harness section names it
    path: str          # posix, relative to the scanned root (a skill: its directory)
    host: HostName     # the host whose layout it was found in


@dataclass(frozen=True)
class NativeHarness:
    parts: tuple[NativePart, ...]
    unsupported: tuple[str, ...]   # one warning line each: hooks, MCP servers, settings found (with paths)


def slug_for(stem: str) -> str:
    """A harness name (``a-z0-9-``) for a name or file stem: ``Code_Reviewer``, ``CodeReviewer`` →
    ``code-reviewer``."""
    words = _CAMEL.sub("-", stem)
    return _SLUG_UNSAFE.sub("-", words.lower()).strip("-") or "unnamed"


def _named(path: Path, fallback: str) -> str:
    """The frontmatter ``name`` of an agent or skill file (what its host selects it by), if any."""
    try:
        fields = frontmatter.split(read_capped(path, MAX_DOCUMENT_BYTES).decode("utf-8")).fields
    except (UnreadableFile, UnicodeDecodeError, FrontmatterError):
        return fallback  # the build reports what is wrong with it
    name = frontmatter.as_text((fields or {}).get("name"))
    return name if name else fallback


def _files(directory: Path, pattern: str) -> list[Path]:
    if not directory.is_dir() or directory.is_symlink():
        return []
    return sorted(p for p in directory.glob(pattern) if p.is_file() and not p.is_symlink())


def _layout_parts(root: Path, base: str, host: HostName, dirs: dict[NativeKind, tuple[str, ...]]) -> list[NativePart]:
    """Agents, commands and skills under ``root/base`` in one host's directory names."""
    parts: list[NativePart] = []
    top = root / base if base else root
    for kind, names in dirs.items():
        for dirname in names:
            directory = top / dirname
            if kind == "skill":
                found = [(p.parent, _named(p, p.parent.name)) for p in _files(directory, "*/SKILL.md")]
            elif kind == "agent":
                # Both CLIs load nested agent files and name an agent by its `name` (host-facts §11).
                found = [(p, _named(p, p.stem)) for p in _files(directory, "**/*.md")]
            else:
                # Nested commands are namespaced by their directory (host-facts §11); the build keeps it.
                found = [(p, p.stem) for p in _files(directory, "**/*.md")]
            parts.extend(NativePart(kind, slug_for(stem), path.relative_to(root).as_posix(), host)
                         for path, stem in found)
    return parts


def _unique(parts: list[NativePart]) -> tuple[NativePart, ...]:
    """One part per (kind, name): the first found wins, later ones get a numbered name."""
    seen: set[tuple[str, str]] = set()
    kept: list[NativePart] = []
    for part in parts:
        name, n = part.name, 1
        while (part.kind, name) in seen:
            n += 1
            name = f"{part.name}-{n}"
        seen.add((part.kind, name))
        kept.append(NativePart(part.kind, name, part.path, part.host))
    return tuple(kept)


def _json_object(path: Path) -> dict[str, object] | None:
    try:
        value = json.loads(read_capped(path, MAX_DOCUMENT_BYTES))
    except (UnreadableFile, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _unsupported(root: Path) -> list[str]:
    lines: list[str] = []
    for rel in (".claude/settings.json", ".claude/settings.local.json"):
        path = root / rel
        if path.is_file():
            settings = _json_object(path)
            if settings is not None and "hooks" in settings:
                lines.append(f"{rel}: hooks are not evaluated (eval writes a fresh .claude/settings.json)")
            lines.append(f"{rel}: settings are not evaluated (eval writes a fresh .claude/settings.json)")
    for rel in ("hooks/hooks.json", ".claude/hooks/hooks.json"):
        if (root / rel).is_file():
            lines.append(f"{rel}: hooks are not evaluated (eval runs no project hooks)")
    if (root / ".mcp.json").is_file():
        lines.append(".mcp.json: MCP servers are not evaluated (eval omits project MCP servers)")
    for rel in ("opencode.json", "opencode.jsonc", ".opencode/opencode.json", ".opencode/opencode.jsonc"):
        path = root / rel
        if not path.is_file():
            continue
        config = _json_object(path)
        if config is not None and "mcp" in config:
            lines.append(f"{rel}: MCP servers are not evaluated (eval omits project MCP servers)")
        lines.append(f"{rel}: settings are not evaluated (eval writes a fresh .opencode/opencode.jsonc)")
    return lines


def discover_native_harness(root: Path) -> NativeHarness:
    """Every agent, skill, command and instruction file in ``root``'s native layouts.

    A part's name is a slug of its frontmatter ``name`` (agents, skills: what the CLIs select them
    by), else of its file or directory name; a name found twice gets ``-2``, ``-3``…  Instructions
    are named after the host whose memory file they are (``claude-code``: ``CLAUDE.md``)."""
    parts: list[NativePart] = []
    parts += _layout_parts(root, ".claude", "claude-code",
                           {"agent": ("agents",), "skill": ("skills",), "command": ("commands",)})
    if (root / ".claude-plugin" / "plugin.json").is_file():
        parts += _layout_parts(root, "", "claude-code",
                               {"agent": ("agents",), "skill": ("skills",), "command": ("commands",)})
    parts += _layout_parts(root, ".opencode", "opencode",
                           {"agent": ("agent", "agents"), "skill": ("skill", "skills"), "command": ("command", "commands")})
    for host, filename in INSTRUCTION_FILES.items():
        path = root / filename
        if path.is_file() and not path.is_symlink():
            parts.append(NativePart("instructions", host, filename, host))
    return NativeHarness(_unique(parts), tuple(_unsupported(root)))


def harness_section_for(native: NativeHarness) -> dict[str, object]:
    """The ``harness`` section of ``atlante.jsonc`` that adopts ``native``'s files in place.

    Agents name their file in ``prompt``, skills their directory in ``dir``, commands their file in
    ``file``; each carries ``host`` (the layout it was found in), so its frontmatter is read in that
    host's vocabulary. Descriptions, models and tools are *not* repeated: they come from the files.
    Instructions are one file for both hosts, or one per host when both memory files exist.
    """
    section: dict[str, object] = {}
    groups: dict[str, dict[str, object]] = {}
    instructions: dict[str, str] = {}
    for part in native.parts:
        if part.kind == "instructions":
            instructions[part.host] = part.path
            continue
        key = {"agent": "prompt", "skill": "dir", "command": "file"}[part.kind]
        groups.setdefault(part.kind + "s", {})[part.name] = {key: part.path, "host": part.host}
    for kind in ("agents", "skills", "commands"):
        if kind in groups:
            section[kind] = groups[kind]
    if len(instructions) == 1:
        section["instructions"] = next(iter(instructions.values()))
    elif instructions:
        section["instructions"] = dict(sorted(instructions.items()))
    return section
