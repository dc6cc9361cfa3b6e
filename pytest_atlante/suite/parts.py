"""One harness's parts rendered for one host: agents, skills, commands and instructions.

Each part is read from its source — a native file's frontmatter is its fields (``frontmatter``),
and what ``atlante.jsonc`` also says must agree with it — and handed to the host adapter as a
neutral spec; the adapter says which fields it keeps and what it drops.  For the host a native
file came from, the output is that file as the host loads it (docs/design.md §9); every field,
tool, model or file another host cannot take is a warning line, never a silent loss.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from pytest_atlante.checks.base import unsafe_path_reason
from pytest_atlante.diagnostics import Diagnostic
from pytest_atlante.fsutil import MAX_DOCUMENT_BYTES, UnreadableFile, read_capped
from pytest_atlante.hosts.base import (
    AgentSpec,
    CommandReader,
    Host,
    NativeSource,
    PartSpec,
    PluginLoader,
    no_place,
    skill_roots,
)
from pytest_atlante.hosts.names import HOST_NAMES, HostName
from pytest_atlante.hosts.registry import host_for
from pytest_atlante.suite import frontmatter
from pytest_atlante.suite.config import AgentSource, CommandSource, Harness, PerHost, SkillSource
from pytest_atlante.suite.frontmatter import FrontmatterError, NativeFile
from pytest_atlante.suite.plugins import Plugin, built_manifest, plugin_of
from pytest_atlante.suite.references import ScannedText
from pytest_atlante.suite.scenario import SLUG_PATTERN

INVALID = "eval-harness-invalid"
CONFLICT = "eval-harness-conflict"


@dataclass
class Rendered:
    """What one host's build holds: outputs (tree path → bytes), which are executable, the
    sources read (path → sha256), problems (the build stops) and warnings (it goes on)."""

    outputs: dict[str, bytes] = field(default_factory=dict)
    executable: set[str] = field(default_factory=set)
    sources: dict[str, str] = field(default_factory=dict)
    executable_sources: set[str] = field(default_factory=set)
    problems: list[Diagnostic] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # Harness agent → the name its host knows it by, where they differ: a file built for its own host
    # keeps its frontmatter ``name`` (``PatternAnalyst``), which the host selects it by.
    agent_names: dict[str, str] = field(default_factory=dict)
    # The skill and memory files built, read for paths that would dangle (``suite/references.py``).
    texts: list[ScannedText] = field(default_factory=list)
    # Harness skill → the name its host loads it by, where they differ (a plugin's: ``plugin:name``).
    skill_names: dict[str, str] = field(default_factory=dict)
    # A skill's source path → where this build put it (``references.carry_named_skills``).
    skill_homes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Origin:
    """Where one harness section came from: its file as diagnostics name it, and its root."""

    file: str         # atlante.jsonc, or the pack's
    base: Path        # relative harness paths resolve from here
    project_root: Path

    def rel(self, path: Path) -> str:
        try:
            return path.resolve().relative_to(self.project_root.resolve()).as_posix()
        except ValueError:
            return path.resolve().as_posix()


# Claude Code's ``model: inherit`` (agents): the session's model, which every host uses for a part
# given no model.  Built for another host it is left out, nothing dropped (a host would read it as
# a model id, and a warning would ask for a model no one wanted).
SESSION_MODEL = "inherit"


def model_for(value: PerHost | None, host: Host) -> tuple[str | None, str | None]:
    """(the model for ``host``, a model given that ``host`` cannot use)."""
    if value is None or value == SESSION_MODEL:
        return None, None
    if isinstance(value, dict):
        return value.get(host.name), None  # type: ignore[call-overload]
    return (value, None) if host.model_fits(value) else (None, value)


def _source_host(declared: HostName | None, rel: str, base: Path, path: Path) -> HostName | None:
    """The host whose format a native file is in: declared, else the host whose layout holds it
    (its folder, or a plugin/extension manifest above it: each adapter's ``native_layouts``)."""
    if declared is not None:
        return declared
    first = rel.split("/", 1)[0]
    layouts = [(name, layout) for name in HOST_NAMES for layout in getattr(host_for(name), "native_layouts", ())]
    for name, layout in layouts:
        if layout.base and first == layout.base:
            return name
    for parent in path.parents:
        for name, layout in layouts:
            if layout.manifest is not None and not layout.base and (parent / layout.manifest).is_file():
                return name
        if parent == base:
            break
    return None


def _safe_path(origin: Origin, value: str, location: str, want_dir: bool, problems: list[Diagnostic]) -> Path | None:
    reason = unsafe_path_reason(value)
    if reason:
        problems.append(Diagnostic(origin.file, location, "eval-path-unsafe", f"harness path {value!r}: {reason}",
                                   "harness paths are relative to the project (or pack) root"))
        return None
    path = origin.base / value
    try:
        ok = (path.is_dir() and (path / "SKILL.md").is_file()) if want_dir else path.is_file()
        ok = ok and path.resolve().is_relative_to(origin.base.resolve())
    except OSError:  # e.g. a name longer than the filesystem allows
        ok = False
    if not ok:
        what = "a directory holding SKILL.md" if want_dir else "a file"
        problems.append(Diagnostic(origin.file, location, INVALID, f"{value!r} is not {what} inside its root",
                                   "fix the path in the harness section"))
        return None
    return path


def _read(origin: Origin, path: Path, location: str, out: Rendered) -> bytes | None:
    try:
        data = read_capped(path, MAX_DOCUMENT_BYTES)
    except UnreadableFile as exc:
        out.problems.append(Diagnostic(origin.file, location, INVALID, f"a harness source cannot be read ({exc})",
                                       "harness files are regular files inside the project (or pack)"))
        return None
    out.sources[origin.rel(path)] = hashlib.sha256(data).hexdigest()
    return data


def _native(origin: Origin, path: Path, location: str, out: Rendered) -> NativeFile | None:
    """A Markdown source split into frontmatter and body, or None (a problem recorded)."""
    data = _read(origin, path, location, out)
    if data is None:
        return None
    try:
        return frontmatter.split(data.decode("utf-8"))
    except UnicodeDecodeError:
        out.problems.append(Diagnostic(origin.file, location, INVALID, f"a harness source is not UTF-8 text: {origin.rel(path)}",
                                       "harness prompts and SKILL.md files are UTF-8 text files inside the project (or pack)"))
    except FrontmatterError as exc:
        out.problems.append(Diagnostic(origin.rel(path), f"line {exc.line}", INVALID, exc.message,
                                       "fix the frontmatter: a '---' line, a YAML mapping, a closing '---' line"))
    return None


class _Agreement:
    """Fields both ``atlante.jsonc`` and a file's frontmatter give must be equal (design.md §9)."""

    def __init__(self, origin: Origin, where: str, native: NativeFile, path: Path, out: Rendered) -> None:
        self.origin, self.where, self.native, self.path, self.out = origin, where, native, path, out

    def text(self, key: str, configured: str | None, *, required: bool = True) -> str | None:
        fields = self.native.fields or {}
        found = frontmatter.as_text(fields[key]) if key in fields else None
        if key in fields and found is None:
            self._problem(key, f"its {key!r} is not text: {fields[key]!r}", "write it as a string")
        if configured is not None and found is not None and configured != found:
            self._problem(key, f"{self.where}.{key} is {configured!r} but the frontmatter of "
                               f"{self.origin.rel(self.path)} says {found!r}",
                          f"say it in one place (remove it from {self.origin.file}) or make them equal")
        value = configured if configured is not None else found
        if value is None and required:
            self.out.problems.append(Diagnostic(self.origin.file, self.where, INVALID,
                                                f"no {key}: neither {self.origin.file} nor the frontmatter of "
                                                f"{self.origin.rel(self.path)} gives one",
                                                f"add {key!r} to the file's frontmatter or to the harness entry"))
        return value

    def same(self, key: str, configured: object, found: object) -> None:
        if configured is not None and found is not None and configured != found:
            self._problem(key, f"{self.where}.{key} is {configured!r} but the frontmatter of "
                               f"{self.origin.rel(self.path)} says {found!r}",
                          f"say it in one place (remove it from {self.origin.file}) or make them equal")

    def _problem(self, key: str, message: str, hint: str) -> None:
        line = self.native.lines.get(key)
        where = f"{self.where}.{key}" + (f" (and {self.origin.rel(self.path)} line {line})" if line else "")
        self.out.problems.append(Diagnostic(self.origin.file, where, CONFLICT, message, hint))


@dataclass(frozen=True)
class _OpenedPart:
    """A harness part's source, read: what every kind needs before its own fields."""

    path: Path            # the prompt file, command file or skill directory
    native: NativeFile    # its Markdown (a skill's SKILL.md) split into frontmatter and body
    rel: str              # ``path`` as the user wrote it, relative to the origin
    source_host: HostName | None
    agree: _Agreement
    plugin: Plugin | None  # the plugin whose folder holds it


def _open_part(origin: Origin, where: str, key: str, value: str, declared: HostName | None,
               out: Rendered, skill: bool = False) -> _OpenedPart | None:
    """Resolve ``$.harness.<kind>.<name>.<key>`` inside the origin and read its Markdown, or None
    (a problem recorded).  A skill's value is its directory; its Markdown is the SKILL.md inside."""
    path = _safe_path(origin, value, f"{where}.{key}", skill, out.problems)
    if path is None:
        return None
    markdown = path / "SKILL.md" if skill else path
    native = _native(origin, markdown, f"{where}.{key}", out)
    if native is None:
        return None
    rel = origin.rel(path)
    return _OpenedPart(path, native, rel, _source_host(declared, rel, origin.base, path),
                       _Agreement(origin, where, native, markdown, out), plugin_of(path, origin.base))


def part_home(host: Host, part: _OpenedPart, kind: str, name: str, out: Rendered) -> tuple[str, str | None]:
    """(the folder ``host`` loads the part from, its plugin's namespace there or None).

    A plugin's part goes to the plugin's own folder on a host that loads that plugin format under
    its namespace (its manifest written beside it); on any other host to the host's folder, where
    it loads under its plain name: that loss is a warning (``suite/plugins.py``)."""
    plugin = part.plugin
    if plugin is None:
        return host.owned_dir, None
    if isinstance(host, PluginLoader) and plugin.host == host.name:
        home = f"{host.plugin_dir}/{plugin.name}"
        manifest, dropped = built_manifest(plugin)
        out.outputs[f"{home}/{plugin.manifest}"] = manifest
        if dropped:
            out.warnings.append(f"{plugin.display}: {', '.join(dropped)} not evaluated "
                                f"(the built plugin keeps its name, description and version)")
        return home, plugin.name
    out.warnings.append(f"{part.rel}: {kind} {name!r} of plugin {plugin.name!r} loads as {name!r} on {host.name}, "
                        f"without the plugin's namespace: the build gives {host.name} its own folders, not the "
                        f"plugin ({plugin.host} loads it as {plugin.namespaced(name)!r}); "
                        f"a check may name it either way")
    return host.owned_dir, None


def _source(native: NativeFile, host: HostName | None, rel: str) -> NativeSource | None:
    return NativeSource(host, native.fields, rel) if native.fields is not None else None


def add_agent(host: Host, origin: Origin, name: str, agent: AgentSource, out: Rendered) -> None:
    where = f"$.harness.agents.{name}"
    part = _open_part(origin, where, "prompt", agent.prompt, agent.host, out)
    if part is None:
        return
    native, rel, source_host, agree = part.native, part.rel, part.source_host, part.agree
    if (why := no_place(host, "agent")) is not None:
        out.warnings.append(f"{rel}: agent {name!r} not rendered for {host.name} ({why})")
        return
    native_fields = _agent_name(native, name, rel, agree, out, own=source_host == host.name)
    home, namespace = part_home(host, part, "agent", name, out)
    if namespace is not None:  # the host selects it, and counts its delegations, as plugin:name
        out.agent_names[name] = f"{namespace}:{out.agent_names.get(name, name)}"
    # A plain prompt needs its description from atlante.jsonc; a native file is built as it is.
    description = agree.text("description", agent.description, required=native.fields is None)
    model, dropped_model = _model(agree, agent.model, source_host, host)
    tools = tuple(agent.tools) if agent.tools is not None else None
    if native.fields is not None:
        found = _frontmatter_tools(native.fields, source_host, rel, out)
        if tools is not None and found is not None and set(tools) != set(found):
            agree.same("tools", list(tools), list(found))
        tools = tools if tools is not None else found
    if description is None and native.fields is None:
        return
    source = NativeSource(source_host, native_fields, rel) if native_fields is not None else None
    spec = AgentSpec(description, model, tools, source, dropped_model)
    rendered = host.agent_frontmatter(name, spec)
    out.warnings += rendered.dropped
    own = source_host == host.name
    text = frontmatter.render(native if own else None, rendered.fields, native.body)
    out.outputs[f"{home}/agents/{name}.md"] = text.encode()


def _model(agree: _Agreement, configured: PerHost | None, source_host: HostName | None,
           host: Host) -> tuple[str | None, str | None]:
    """(the model ``host`` gets, a model it cannot use) from ``atlante.jsonc`` and the frontmatter.

    The frontmatter's model is its host's (a host-neutral file's: any host it fits); what
    ``atlante.jsonc`` gives that host must agree with it."""
    model, dropped = model_for(configured, host)
    found = frontmatter.as_text((agree.native.fields or {}).get("model"))
    if found is None:
        return model, dropped
    if source_host is not None:
        agree.same("model", model_for(configured, host_for(source_host))[0], found)
    if source_host == host.name:
        return model or found, None  # its own file, built as it is
    if found == SESSION_MODEL:
        return model, dropped
    if source_host is None and host.model_fits(found):
        return model or found, None
    return model, (dropped or found) if model is None else None


def _frontmatter_tools(fields: dict[str, object], source_host: HostName | None, rel: str,
                       out: Rendered) -> tuple[str, ...] | None:
    """The tools a native file names, read in its host's format (a host-neutral file's: the first
    format they parse in), as neutral names where one exists."""
    readers = [host_for(source_host)] if source_host is not None else [host_for(h) for h in HOST_NAMES]
    for reader in readers:
        found, notes = reader.frontmatter_tools(fields)
        out.warnings += [f"{rel}: {note}" for note in notes]
        if found is not None:
            return found
    return None


def _agent_name(native: NativeFile, name: str, rel: str, agree: _Agreement, out: Rendered, *,
                own: bool) -> dict[str, object] | None:
    """Both CLIs select an agent by its frontmatter ``name`` (host-facts §5, §11), a scenario by
    the harness name: a slug there must be the harness name.  Anything else (``PatternAnalyst``)
    stays as it is in a file built for its own host — the same file, as that host loads it — and
    the build records the name the host knows the agent by (``agent_names``: the runner selects it
    and ``agent-used`` counts it under that name); a file translated for another host carries the
    harness name instead, said so."""
    fields = native.fields
    found = frontmatter.as_text(fields.get("name")) if fields is not None and "name" in fields else None
    if fields is None or found is None or found == name:
        return fields
    if re.fullmatch(SLUG_PATTERN, found):
        agree.text("name", name, required=False)
        return fields
    if own:
        out.agent_names[name] = found
        return fields
    out.warnings.append(f"{rel}: its name {found!r} is no harness name (a-z, 0-9, -); the built agent is {name!r}")
    return fields | {"name": name}


def add_command(host: Host, origin: Origin, name: str, command: CommandSource, out: Rendered) -> None:
    where = f"$.harness.commands.{name}"
    part = _open_part(origin, where, "file", command.file, command.host, out)
    if part is None:
        return
    native, rel, source_host, agree = part.native, part.rel, part.source_host, part.agree
    if (why := no_place(host, "command")) is not None:
        out.warnings.append(f"{rel}: command {name!r} not rendered for {host.name} ({why})")
        return
    lost: list[str] = []
    home = part_home(host, part, "command", name, out)[0]
    reader = _command_reader(rel)
    if reader is not None:  # a command in a host's own format other than Markdown (Gemini CLI's TOML)
        try:
            fields_read, body, lost = reader.read_command(native.text)
        except ValueError as exc:
            out.problems.append(Diagnostic(origin.file, f"{where}.file", INVALID, f"{rel} {exc}",
                                           f"give the command a {reader.name} command file or a Markdown one"))
            return
        native = NativeFile(fields_read, body, native.text)
        source_host = reader.name
        agree = _Agreement(origin, where, native, part.path, out)
        if host.name == reader.name:  # its own host loads the file as it is
            target = f"{home}/commands/{_command_path(rel, name, reader.command_suffix)}"
            agree.text("description", command.description, required=False)
            _add_command_output(origin, where, name, target, native.text, out)
            return
    description = agree.text("description", command.description, required=False)
    model, dropped_model = _model(agree, command.model, source_host, host)
    spec = PartSpec(description, model, _source(native, source_host, rel), dropped_model)
    rendered = host.command_frontmatter(name, spec)
    out.warnings += rendered.dropped
    fields = rendered.fields
    own = source_host == host.name
    text = frontmatter.render(native if own else None, fields, native.body) if fields or native.fields else native.body
    target = f"{home}/commands/{_command_path(rel, name)}"
    # A host whose commands are no Markdown files writes its own format (Gemini CLI: TOML).
    command_document = getattr(host, "command_document", None)
    if command_document is not None:
        suffix, text, notes = command_document(name, fields, native.body)
        target = f"{target.removesuffix('.md')}{suffix}"
        out.warnings += [f"{rel}: {note}" for note in notes]
    out.warnings += [f"{rel}: {note}; dropped for {host.name}" for note in lost]
    _add_command_output(origin, where, name, target, text, out)


def _add_command_output(origin: Origin, where: str, name: str, target: str, text: str, out: Rendered) -> None:
    if target in out.outputs:
        out.problems.append(Diagnostic(origin.file, where, CONFLICT, f"command {name!r} would be written over "
                                       f"another command at {target}", "rename one of the command files"))
        return
    out.outputs[target] = text.encode()


def _command_reader(rel: str) -> CommandReader | None:
    """The host whose command format a file of this suffix is, when that is not Markdown."""
    suffix = Path(rel).suffix
    if suffix in ("", ".md"):
        return None
    for name in HOST_NAMES:
        reader: object = host_for(name)
        if isinstance(reader, CommandReader) and reader.command_suffix == suffix:
            return reader
    return None


def _command_path(rel: str, name: str, suffix: str = ".md") -> str:
    """Where a command goes under the host's ``commands/`` (``suffix`` appended: ``.md`` unless
    the caller adds the host's own): a file kept in a host's ``commands/`` tree keeps its place
    there, because Claude Code names a nested command by its directory (``frontend/component.md``
    is ``/frontend:component``, host-facts §11), under its own name without its source suffix; any
    other by its name."""
    parts = rel.split("/")
    for index in range(len(parts) - 2, -1, -1):
        if parts[index] in ("commands", "command"):
            kept = "/".join(parts[index + 1:])
            return f"{kept.removesuffix(Path(kept).suffix) if Path(kept).suffix in ('.md', '.toml') else kept}{suffix}"
    return f"{name}{suffix}"


def skill_places(host: Host, name: str, rel: str, names_itself: bool, home: str | None = None) -> tuple[str, str | None]:
    """(where ``host`` loads the skill from, where its files also go) in the build tree.

    A skill kept in a folder ``host`` loads skills from (``.agents/skills/<dir>`` for Codex) stays
    at its source path, so every path its text names keeps working; any other goes to the host's
    own folder under its harness name and, when its text names its own source path
    (``.agents/skills/release/scripts/run.sh``), is also copied there (docs/reference.md, "Where a
    skill lands").  The copy is never in a folder ``host`` loads skills from: it loads once.
    ``home``: a plugin's folder (``part_home``), where the host loads the plugin's skills from."""
    parent = rel.rsplit("/", 1)[0] if "/" in rel else ""
    if home is None and parent in skill_roots(host):
        return rel, None
    loaded = f"{home or host.owned_dir}/skills/{name}"
    return loaded, rel if names_itself and rel != loaded else None


def _names_path(rel: str, texts: list[str]) -> bool:
    """A text names ``rel`` as a path (``rel`` or ``rel/…``), not as part of a longer one."""
    pattern = re.compile(rf"(?<![\w./-]){re.escape(rel)}(?![\w.-])")
    return any(pattern.search(text) for text in texts)


def add_skill(host: Host, origin: Origin, name: str, skill: SkillSource, out: Rendered) -> None:
    """SKILL.md rendered; every other file of the directory byte for byte, with its mode."""
    where = f"$.harness.skills.{name}"
    part = _open_part(origin, where, "dir", skill.dir, skill.host, out, skill=True)
    if part is None:
        return
    path, native, rel, source_host, agree = part.path, part.native, part.rel, part.source_host, part.agree
    agree.text("name", name, required=False)
    description = agree.text("description", skill.description)
    if description is None:
        return
    spec = PartSpec(description, None, _source(native, source_host, origin.rel(path / "SKILL.md")))
    rendered = host.skill_frontmatter(name, spec)
    out.warnings += rendered.dropped
    own = source_host == host.name
    files: dict[str, bytes] = {"SKILL.md": frontmatter.render(native if own else None, rendered.fields,
                                                             native.body).encode()}
    executable: set[str] = set()
    try:
        sources = sorted(p for p in path.rglob("*") if not p.is_dir())
    except OSError as exc:
        out.problems.append(Diagnostic(origin.file, f"{where}.dir", INVALID, f"the skill cannot be listed ({exc})", ""))
        return
    for source in sources:
        inner = source.relative_to(path).as_posix()
        if inner == "SKILL.md":
            continue
        if source.is_symlink() or not source.is_file():
            # The copy is byte for byte or not at all: a link would point out of the sandbox.
            out.warnings.append(f"{rel}/{inner}: not a regular file, left out of skill {name!r}")
            continue
        data = _read(origin, source, f"{where}.dir", out)
        if data is None:
            continue
        files[inner] = data
        if os.stat(source).st_mode & stat.S_IXUSR:
            executable.add(inner)
            out.executable_sources.add(origin.rel(source))
    texts = {inner: data.decode("utf-8", "replace") for inner, data in files.items() if b"\0" not in data}
    home, namespace = part_home(host, part, "skill", name, out)
    if namespace is not None:
        out.skill_names[name] = f"{namespace}:{name}"
    loaded, also = skill_places(host, name, rel, _names_path(rel, list(texts.values())),
                                home if namespace is not None else None)
    for prefix in (loaded, also):
        if prefix is None:
            continue
        if any(key == prefix or key.startswith(prefix + "/") for key in out.outputs):
            out.problems.append(Diagnostic(origin.file, f"{where}.dir", CONFLICT,
                                           f"skill {name!r} would be written over other outputs at {prefix}",
                                           "give the skills distinct directories"))
            return
        for inner, data in files.items():
            out.outputs[f"{prefix}/{inner}"] = data
            if inner in executable:
                out.executable.add(f"{prefix}/{inner}")
    out.skill_homes[rel] = loaded
    out.texts += [ScannedText(origin.rel(path / inner), f"{loaded}/{inner}", text, memory=False)
                  for inner, text in sorted(texts.items())]


def add_instructions(host: Host, origin: Origin, value: PerHost, out: Rendered) -> None:
    """The memory file the host loads at the sandbox root, byte for byte."""
    chosen = value.get(host.name) if isinstance(value, dict) else value  # type: ignore[call-overload]
    if chosen is None:
        others = ", ".join(h for h in HOST_NAMES if isinstance(value, dict) and h in value)
        out.warnings.append(f"{origin.file}: instructions are given for {others} only; {host.name} gets none")
        return
    location = "$.harness.instructions" + (f"[{host.name!r}]" if isinstance(value, dict) else "")
    path = _safe_path(origin, chosen, location, False, out.problems)
    data = _read(origin, path, location, out) if path is not None else None
    if data is not None:
        out.outputs[host.instructions_file] = data
        out.texts.append(ScannedText(origin.rel(path) if path is not None else chosen, host.instructions_file,
                                     data.decode("utf-8", "replace"), memory=True))


def add_harness(host: Host, origin: Origin, harness: Harness, out: Rendered) -> None:
    for name, agent in sorted(harness.agents.items()):
        add_agent(host, origin, name, agent, out)
    for name, skill in sorted(harness.skills.items()):
        add_skill(host, origin, name, skill, out)
    for name, command in sorted(harness.commands.items()):
        add_command(host, origin, name, command, out)
    if harness.instructions is not None:
        add_instructions(host, origin, harness.instructions, out)
