"""``atlante build``: host-neutral harness sources → native host trees, plus a digest manifest.

Eval never builds; it calls ``verify`` and refuses to run on a missing, modified or stale build.
Outputs are byte-stable: the same sources give the same bytes (sorted keys, no timestamps), so the
manifest digests only change when a source does.

Host-neutral tool names (``tools`` of an agent) are ``read, write, edit, bash, glob, grep, skill,
task``; each host's renderer maps them to its own vocabulary.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pytest_atlante import __version__
from pytest_atlante.checks.base import unsafe_path_reason
from pytest_atlante.diagnostics import Diagnostic, DiagnosticError
from pytest_atlante.fsutil import MAX_DOCUMENT_BYTES, UnreadableFile, atomic_write_text, read_capped, sha256_file
from pytest_atlante.hosts.base import AgentSpec, frontmatter
from pytest_atlante.hosts.names import HOST_NAMES, HostName
from pytest_atlante.hosts.registry import host_for
from pytest_atlante.suite.config import CONFIG_FILE, AgentSource, Harness, SkillSource, load_project_config
from pytest_atlante.suite.packs import harness_layers, resolve_packages

MANIFEST_SCHEMA = "atlante/build-manifest-v1"
HOSTS: tuple[HostName, ...] = HOST_NAMES
HARNESS_SOURCE = CONFIG_FILE + "#harness"


def build_dir(project_root: Path, host: HostName) -> Path:
    return project_root / ".atlante" / "build" / host


def tree_dir(project_root: Path, host: HostName) -> Path:
    return build_dir(project_root, host) / "tree"


@dataclass(frozen=True)
class HarnessInput:
    origin: str          # "local" or the pack locator
    base: Path           # where its relative paths resolve from
    harness: Harness


def _rel(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.resolve().as_posix()


def gather(project_root: Path) -> tuple[list[HarnessInput], list[Diagnostic]]:
    config, loaded, problems = load_project_config(project_root)
    if config is None or loaded is None:
        return [], problems
    inputs = [HarnessInput("local", project_root, config.harness)]
    packs, pack_problems = resolve_packages(project_root, config.packages, loaded.display)
    problems = problems + pack_problems
    inputs.extend(HarnessInput(origin, base, harness) for origin, base, harness in harness_layers(packs))
    return inputs, problems


def agent_spec(agent: AgentSource) -> AgentSpec:
    """A configured agent as the host adapters see it (they know nothing of the configuration)."""
    return AgentSpec(description=agent.description, model=agent.model,
                     tools=tuple(agent.tools) if agent.tools is not None else None)


def _skill_file(name: str, skill: SkillSource, body: str) -> str:
    return frontmatter([("name", name), ("description", skill.description)]) + body


def _check_source(base: Path, value: str, file: str, location: str, kind: Literal["file", "dir"]) -> tuple[Path | None, list[Diagnostic]]:
    reason = unsafe_path_reason(value)
    if reason:
        return None, [Diagnostic(file, location, "eval-path-unsafe", f"harness path {value!r}: {reason}",
                                 "harness paths are relative to the project (or pack) root")]
    path = base / value
    try:
        ok = path.is_file() if kind == "file" else (path.is_dir() and (path / "SKILL.md").is_file())
        ok = ok and path.resolve().is_relative_to(base.resolve())
    except OSError:  # e.g. a name longer than the filesystem allows
        ok = False
    if not ok:
        want = "a file" if kind == "file" else "a directory holding SKILL.md"
        return None, [Diagnostic(file, location, "eval-harness-invalid", f"{value!r} is not {want} inside its root",
                                 "fix the path in the harness section")]
    return path, []


def _unreadable(file: str, location: str, exc: Exception) -> Diagnostic:
    why = "is not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else f"cannot be read ({exc})"
    return Diagnostic(file, location, "eval-harness-invalid", f"a harness source {why}",
                      "harness prompts and SKILL.md files are UTF-8 text files inside the project (or pack)")


def _claim(owners: dict[str, str], problems: list[Diagnostic], kind: str, name: str, origin: str, file: str) -> bool:
    """Record that ``origin`` defines agent/skill ``name``; a second origin is a conflict."""
    key = f"{kind} {name}"
    if owners.setdefault(key, origin) != origin:
        problems.append(Diagnostic(file, f"$.harness.{kind}s.{name}", "eval-harness-conflict",
                                   f"{kind} {name!r} is also defined by {owners[key]}", f"rename one of the {kind}s"))
        return False
    return True


def render(project_root: Path, host: HostName, inputs: list[HarnessInput]) -> tuple[dict[str, bytes], dict[str, str], list[Diagnostic]]:
    """Outputs (tree-relative path → bytes) and sources (path → sha256) for one host."""
    outputs: dict[str, bytes] = {}
    sources: dict[str, str] = {}
    problems: list[Diagnostic] = []
    owners: dict[str, str] = {}
    adapter = host_for(host)
    owned = adapter.owned_dir
    canonical = json.dumps([[i.origin, i.harness.model_dump(mode="json")] for i in inputs], sort_keys=True)
    sources[HARNESS_SOURCE] = hashlib.sha256(canonical.encode()).hexdigest()
    for item in inputs:
        file = CONFIG_FILE if item.origin == "local" else _rel(item.base / CONFIG_FILE, project_root)
        for name, agent in sorted(item.harness.agents.items()):
            path = _claimed_source(owners, problems, item, file, ("agent", name), agent.prompt)
            if path is None:
                continue
            try:
                raw = read_capped(path, MAX_DOCUMENT_BYTES)
                body = raw.decode("utf-8")
                sources[_rel(path, project_root)] = hashlib.sha256(raw).hexdigest()
            except (UnreadableFile, UnicodeDecodeError) as exc:
                problems.append(_unreadable(file, f"$.harness.agents.{name}.prompt", exc))
                continue
            outputs[f"{owned}/agents/{name}.md"] = adapter.render_agent(name, agent_spec(agent), body).encode()
        for name, skill in sorted(item.harness.skills.items()):
            path = _claimed_source(owners, problems, item, file, ("skill", name), skill.dir)
            if path is None:
                continue
            try:
                for source in sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink()):
                    rel = source.relative_to(path).as_posix()
                    data = read_capped(source, MAX_DOCUMENT_BYTES)
                    sources[_rel(source, project_root)] = hashlib.sha256(data).hexdigest()
                    if rel == "SKILL.md":
                        data = _skill_file(name, skill, data.decode("utf-8")).encode()
                    outputs[f"{owned}/skills/{name}/{rel}"] = data
            except (OSError, UnreadableFile, UnicodeDecodeError) as exc:
                problems.append(_unreadable(file, f"$.harness.skills.{name}.dir", exc))
    return outputs, sources, problems


def _claimed_source(owners: dict[str, str], problems: list[Diagnostic], item: HarnessInput, file: str,
                    claim: tuple[str, str], value: str) -> Path | None:
    """The source path of one agent or skill this input may claim, or None (problems recorded)."""
    what, name = claim
    if not _claim(owners, problems, what, name, item.origin, file):
        return None
    # An agent's source is its prompt file, a skill's its directory.
    if what == "agent":
        path, found = _check_source(item.base, value, file, f"$.harness.agents.{name}.prompt", "file")
    else:
        path, found = _check_source(item.base, value, file, f"$.harness.skills.{name}.dir", "dir")
    problems.extend(found)
    return path


def _manifest(host: HostName, sources: dict[str, str], outputs: dict[str, bytes]) -> str:
    manifest = {
        "schema": MANIFEST_SCHEMA,
        "host": host,
        "atlanteVersion": __version__,
        "sources": [{"path": p, "sha256": d} for p, d in sorted(sources.items())],
        "outputs": [{"path": p, "sha256": hashlib.sha256(b).hexdigest()} for p, b in sorted(outputs.items())],
    }
    return json.dumps(manifest, indent=2, sort_keys=True) + "\n"


def build(project_root: Path, hosts: tuple[HostName, ...] = HOSTS) -> list[Path]:
    """Compile and write the native trees; raises ``DiagnosticError`` on bad sources."""
    inputs, problems = gather(project_root)
    rendered = {host: render(project_root, host, inputs) for host in hosts} if not problems else {}
    for _, _, found in rendered.values():
        problems.extend(found)
    if problems:
        raise DiagnosticError(sorted(set(problems)))
    written = []
    for host, (outputs, sources, _) in rendered.items():
        tree = tree_dir(project_root, host)
        if tree.exists():
            shutil.rmtree(tree)
        for rel, data in outputs.items():
            target = tree / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        tree.mkdir(parents=True, exist_ok=True)
        manifest = build_dir(project_root, host) / "manifest.json"
        atomic_write_text(manifest, _manifest(host, sources, outputs))
        written.append(manifest)
    return written


def verify(project_root: Path, host: HostName) -> list[Diagnostic]:
    """Diagnostics when the build for ``host`` is missing, modified or stale (empty when sound)."""
    manifest_path = build_dir(project_root, host) / "manifest.json"
    display = _rel(manifest_path, project_root)
    hint = "run `atlante build` and commit nothing under .atlante/build by hand"
    try:
        manifest = json.loads(read_capped(manifest_path, MAX_DOCUMENT_BYTES))
        recorded_outputs = {o["path"]: o["sha256"] for o in manifest["outputs"]}
        recorded_sources = {s["path"]: s["sha256"] for s in manifest["sources"]}
    except UnreadableFile as exc:
        if exc.missing:
            return [Diagnostic(display, "", "eval-build-missing", f"no native build for host {host!r}", "run `atlante build`")]
        return [Diagnostic(display, "", "eval-build-modified", f"the build manifest {exc.reason}", "run `atlante build`")]
    except (ValueError, KeyError, TypeError):
        return [Diagnostic(display, "", "eval-build-modified", "the build manifest is unreadable", "run `atlante build`")]
    problems: list[Diagnostic] = []
    tree = tree_dir(project_root, host)
    present = {p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()} if tree.is_dir() else set()
    for rel in sorted(present | set(recorded_outputs)):
        path = tree / rel
        if rel not in recorded_outputs:
            problems.append(Diagnostic(_rel(path, project_root), "", "eval-build-modified", "file is not part of the build", hint))
        elif rel not in present or sha256_file(path) != recorded_outputs[rel]:
            problems.append(Diagnostic(_rel(path, project_root), "", "eval-build-modified",
                                       "native output was edited or removed after the build", hint))
    inputs, gather_problems = gather(project_root)
    if gather_problems:
        return problems + gather_problems
    _, sources, render_problems = render(project_root, host, inputs)
    if render_problems:
        return problems + render_problems
    for rel in sorted(set(sources) | set(recorded_sources)):
        if sources.get(rel) != recorded_sources.get(rel):
            what = "was added" if rel not in recorded_sources else "was removed" if rel not in sources else "changed"
            problems.append(Diagnostic(rel.split("#")[0], "$.harness" if "#" in rel else "", "eval-build-stale",
                                       f"harness source {what} since the last build", "run `atlante build`"))
    return problems


def build_command(project_root: Path, host: str) -> int:
    hosts: tuple[HostName, ...] = HOSTS if host == "all" else (host,)  # type: ignore[assignment]
    for manifest in build(project_root.resolve(), hosts):
        data = json.loads(manifest.read_text())
        print(f"atlante build: {data['host']}: {len(data['outputs'])} outputs from {len(data['sources'])} sources "
              f"-> {_rel(manifest.parent, project_root)}")
    return 0
