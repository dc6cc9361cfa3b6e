"""A project's existing native harness: which agent, skill, command and instruction files it has.

``atlante init`` adopts a harness the user already keeps in a host's own layout: it calls
:func:`discover_native_harness` on the project root and writes :func:`harness_section_for`'s
result as the ``harness`` section of ``atlante.jsonc``. The files are adopted *in place* (the
section names them; nothing is copied or rewritten), so the native files stay the one source and
``atlante build`` reads their frontmatter itself (``suite/frontmatter.py``, docs/design.md §9).

The layouts are the hosts' own (each adapter's ``native_layouts``, ``hosts.base.NativeLayout``):
Claude Code's ``.claude/`` and plugins, OpenCode's ``.opencode/``, Codex's ``.agents/skills`` and
``.codex/skills``, Gemini CLI's ``.gemini/`` (TOML commands) and extensions, and the memory file each
loads (``CLAUDE.md``, ``AGENTS.md``, ``GEMINI.md``).  Nothing here names a host.

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
from pytest_atlante.hosts.base import NativeLayout, PluginLoader
from pytest_atlante.hosts.names import HOST_NAMES, HostName
from pytest_atlante.hosts.registry import host_for
from pytest_atlante.suite import frontmatter
from pytest_atlante.suite.frontmatter import FrontmatterError

NativeKind = Literal["agent", "skill", "command", "instructions"]


def host_layouts() -> list[tuple[HostName, NativeLayout]]:
    """Every host's native layouts, in the hosts' order (the first host to claim a file wins)."""
    return [(name, layout) for name in HOST_NAMES for layout in getattr(host_for(name), "native_layouts", ())]

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


def _layout_parts(root: Path, host: HostName, layout: NativeLayout) -> list[NativePart]:
    """Agents, commands and skills under ``root/base`` in one host's directory names."""
    parts: list[NativePart] = []
    top = root / layout.base if layout.base else root
    if layout.manifest is not None and not (top / layout.manifest).is_file():
        return parts
    for kind, names in layout.dirs.items():
        for dirname in names:
            directory = top / dirname
            if kind == "skill":
                found = [(p.parent, _named(p, p.parent.name)) for p in _files(directory, "*/SKILL.md")]
            elif kind == "agent":
                # Both CLIs load nested agent files and name an agent by its `name` (host-facts §11).
                found = [(p, _named(p, p.stem)) for p in _files(directory, "**/*.md")]
            else:
                # Nested commands are namespaced by their directory (host-facts §11); the build keeps it.
                found = [(p, p.stem) for p in _files(directory, layout.command_glob)]
            parts.extend(NativePart(kind, slug_for(stem), path.relative_to(root).as_posix(), host)  # type: ignore[arg-type]
                         for path, stem in found)
    return parts


def _unique(parts: list[NativePart]) -> tuple[NativePart, ...]:
    """One part per file and one per (kind, name): a file two layouts load (a plugin's ``skills/``
    that is also its Gemini CLI extension's) is the first layout's part only (instructions excepted:
    a memory file is named after each host that loads it); a name found twice
    for different files gets a numbered name."""
    seen: set[tuple[str, str]] = set()
    adopted: set[tuple[str, str]] = set()
    kept: list[NativePart] = []
    for part in parts:
        if part.kind != "instructions":  # one memory file per host, named after it: kept each
            if (part.kind, part.path) in adopted:
                continue
            adopted.add((part.kind, part.path))
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
    named = {line.split(":", 1)[0] for line in lines}
    for host, layout in host_layouts():
        for rel in layout.settings:
            if rel not in named and (root / rel).is_file():
                lines.append(f"{rel}: settings are not evaluated (eval writes {host}'s configuration afresh)")
    return lines


def _plugin_notes(root: Path, parts: list[NativePart]) -> list[str]:
    """What init adopts of each plugin or extension at the root (its manifest, per host's layout),
    and the plugins it cannot adopt: code the host runs (OpenCode's JavaScript plugins)."""
    lines: list[str] = []
    for host, layout in host_layouts():
        if layout.manifest is not None and not layout.base and (root / layout.manifest).is_file():
            lines += _manifest_notes(root, host, layout, parts)
        for folder in layout.code_plugins:
            found = _files(root / folder, "*")
            if found:
                shown = ", ".join(p.relative_to(root).as_posix() for p in found[:5])
                lines.append(f"{folder}: {host} plugins are code the host runs ({shown}); eval cannot adopt "
                             f"them and runs none")
    return lines


def _manifest_notes(root: Path, host: HostName, layout: NativeLayout, parts: list[NativePart]) -> list[str]:
    """The parts adopted from one plugin or extension's folders (under whichever host's layout
    claimed them first), its memory file, its namespace, and what of it is not evaluated."""
    assert layout.manifest is not None
    manifest = _json_object(root / layout.manifest) or {}
    name = manifest.get("name")
    folders = {d for names in layout.dirs.values() for d in names}
    owned = [p for p in parts if p.kind != "instructions" and p.path.split("/", 1)[0] in folders]
    kinds = ", ".join(sorted({f"{p.kind}s" for p in owned})) or "nothing"
    others = sorted({p.host for p in owned} - {host})
    claimed = f", as {' and '.join(others)} parts (the same files)" if others else ""
    what = "plugin" if isinstance(host_for(host), PluginLoader) else "extension"
    namespace = (f"; {host} loads them as '{name}:NAME', other hosts by their plain names (a build warning each)"
                 if what == "plugin" and isinstance(name, str) else "")
    lines = [f"{layout.manifest}: {host} {what} {name!r}: adopted its {kinds} ({len(owned)} parts{claimed}){namespace}"]
    context = manifest.get("contextFileName")
    if isinstance(context, str):
        adopted = any(p.kind == "instructions" and p.path == context for p in parts)
        lines.append(f"{layout.manifest}: its contextFileName {context} "
                     + ("adopted as the instructions" if adopted else "is not adopted (not at the root)"))
    for key in sorted(k for k in manifest if k in ("mcpServers", "hooks", "excludeTools", "settings")):
        lines.append(f"{layout.manifest}: its {key} are not evaluated (eval runs no plugin hooks, "
                     f"MCP servers or settings)")
    return lines


def discover_native_harness(root: Path) -> NativeHarness:
    """Every agent, skill, command and instruction file in ``root``'s native layouts.

    A part's name is a slug of its frontmatter ``name`` (agents, skills: what the CLIs select them
    by), else of its file or directory name; a name found twice gets ``-2``, ``-3``…  Instructions
    are named after the host whose memory file they are (``claude-code``: ``CLAUDE.md``)."""
    parts: list[NativePart] = []
    layouts = host_layouts()
    for host, layout in layouts:
        parts += _layout_parts(root, host, layout)
    for host, layout in layouts:
        filename = layout.instructions
        if filename is not None and (root / filename).is_file() and not (root / filename).is_symlink():
            parts.append(NativePart("instructions", host, filename, host))
    kept = _unique(parts)
    return NativeHarness(kept, tuple(_unsupported(root) + _plugin_notes(root, list(kept))))


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
    if len(set(instructions.values())) == 1:
        section["instructions"] = next(iter(instructions.values()))
    elif instructions:
        section["instructions"] = dict(sorted(instructions.items()))
    return section
