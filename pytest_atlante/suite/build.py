"""``atlante build``: host-neutral harness sources → native host trees, plus a digest manifest.

Eval never builds; it calls ``verify`` and refuses to run on a missing, modified or stale build.
Outputs are byte-stable: the same sources give the same bytes (sorted keys, no timestamps), so the
manifest digests only change when a source does.

Host-neutral tool names (``tools`` of an agent) are ``read, write, edit, bash, glob, grep, skill,
task``; each host's renderer maps them to its own vocabulary.  Native files are read as such
(``suite/parts.py``, docs/design.md §9); what a host cannot take is a warning in the manifest.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import stat
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pytest_atlante import __version__
from pytest_atlante.diagnostics import Diagnostic, DiagnosticError
from pytest_atlante.fsutil import MAX_DOCUMENT_BYTES, UnreadableFile, atomic_write_text, read_capped, sha256_file
from pytest_atlante.hosts.names import HOST_NAMES, HostName
from pytest_atlante.hosts.registry import host_for
from pytest_atlante.projectroot import CONFIG_FILE
from pytest_atlante.suite.config import Harness, ProjectConfig, load_project_config
from pytest_atlante.suite.packs import harness_layers, resolve_packages
from pytest_atlante.suite.parts import Origin, Rendered, add_harness
from pytest_atlante.suite.references import carry_named_skills, dangling_warnings, references
from pytest_atlante.suite.variants import Arm, resolve_arms

MANIFEST_SCHEMA = "atlante/build-manifest-v1"
HOSTS: tuple[HostName, ...] = HOST_NAMES
HARNESS_SOURCE = CONFIG_FILE + "#harness"


VARIANTS_DIR = "variants"


def build_dir(project_root: Path, host: HostName, variant: str | None = None) -> Path:
    """Where the build of ``host`` lives; a variant that patches the harness has its own, beside
    (never inside) the control's, so a control build reads exactly as before variants existed."""
    base = project_root / ".atlante" / "build"
    return base / VARIANTS_DIR / variant / host if variant is not None else base / host


def tree_dir(project_root: Path, host: HostName, variant: str | None = None) -> Path:
    return build_dir(project_root, host, variant) / "tree"


def host_agent_names(project_root: Path, host: HostName, variant: str | None = None,
                     key: str = "agentNames") -> dict[str, str]:
    """Harness agent → the name ``host`` selects it by, where the build kept another one (an
    unreadable manifest gives none: ``verify`` reports it before any trial); ``key="skillNames"``:
    the same for skills (a plugin's skill on a host that namespaces it: ``plugin:name``)."""
    try:
        manifest = json.loads(read_capped(build_dir(project_root, host, variant) / "manifest.json", MAX_DOCUMENT_BYTES))
        names = manifest.get(key) or {}
    except (OSError, UnreadableFile, ValueError, AttributeError):
        return {}
    return {str(k): str(v) for k, v in names.items()} if isinstance(names, dict) else {}


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


def gather(project_root: Path, variant: str | None = None) -> tuple[list[HarnessInput], list[Diagnostic]]:
    """The harness layers to build: the project's (or ``variant``'s patched one) and each pack's."""
    config, loaded, problems = load_project_config(project_root)
    if config is None or loaded is None:
        return [], problems
    harness = config.harness
    if variant is not None:
        arms, arm_problems = _arms(config, loaded.display)
        problems = problems + arm_problems
        harness = next((arm.harness for arm in arms if arm.name == variant), harness)
    inputs = [HarnessInput("local", project_root, harness)]
    packs, pack_problems = resolve_packages(project_root, config.packages, loaded.display)
    problems = problems + pack_problems
    inputs.extend(HarnessInput(origin, base, harness) for origin, base, harness in harness_layers(packs))
    return inputs, problems


def _arms(config: ProjectConfig, display: str) -> tuple[list[Arm], list[Diagnostic]]:
    """The configuration's arms (none beside the control without an eval section to patch)."""
    if config.eval is None:
        return [], []
    return resolve_arms(config, config.eval, display)


def variant_builds(project_root: Path) -> tuple[list[tuple[str, HostName]], list[Diagnostic]]:
    """``(variant, host)`` of every variant with a harness of its own, built for its own host."""
    config, loaded, problems = load_project_config(project_root)
    if config is None or loaded is None:
        return [], problems
    arms, arm_problems = _arms(config, loaded.display)
    return [(arm.name, arm.host) for arm in arms if arm.harness_of == arm.name], problems + arm_problems


def render(project_root: Path, host: HostName, inputs: list[HarnessInput]) -> Rendered:
    """Outputs (tree-relative path → bytes), their modes, sources, problems and warnings for one host."""
    out = Rendered()
    owners: dict[str, str] = {}
    adapter = host_for(host)
    canonical = json.dumps([[i.origin, i.harness.model_dump(mode="json", exclude_defaults=True)] for i in inputs],
                           sort_keys=True)
    out.sources[HARNESS_SOURCE] = hashlib.sha256(canonical.encode()).hexdigest()
    for item in inputs:
        file = CONFIG_FILE if item.origin == "local" else _rel(item.base / CONFIG_FILE, project_root)
        claimed = _claimed(item.harness, item.origin, file, owners, out.problems)
        add_harness(adapter, Origin(file, item.base, project_root), claimed, out)
    # After every layer: a path one part names may be another part's (a skill's, a pack's).
    found = references(out.texts)
    carry_named_skills(found, out.skill_homes, out.outputs, out.executable)
    out.warnings += dangling_warnings(found, out.outputs, host)
    return out


def _claimed(harness: Harness, origin: str, file: str, owners: dict[str, str], problems: list[Diagnostic]) -> Harness:
    """The parts of ``harness`` no earlier input defines (each conflict is a problem)."""
    def keep(kind: str, names: Iterable[str]) -> set[str]:
        kept = set()
        for name in names:
            key = f"{kind} {name}"
            if owners.setdefault(key, origin) == origin:
                kept.add(name)
            else:
                problems.append(Diagnostic(file, f"$.harness.{kind}s.{name}", "eval-harness-conflict",
                                           f"{kind} {name!r} is also defined by {owners[key]}", f"rename one of the {kind}s"))
        return kept
    agents, skills, commands = keep("agent", harness.agents), keep("skill", harness.skills), keep("command", harness.commands)
    instructions = harness.instructions
    if instructions is not None and owners.setdefault("instructions", origin) != origin:
        problems.append(Diagnostic(file, "$.harness.instructions", "eval-harness-conflict",
                                   f"the instructions are also given by {owners['instructions']}",
                                   "keep one memory file: in the project or in one pack"))
        instructions = None
    return harness.model_copy(update={
        "agents": {k: v for k, v in harness.agents.items() if k in agents},
        "skills": {k: v for k, v in harness.skills.items() if k in skills},
        "commands": {k: v for k, v in harness.commands.items() if k in commands},
        "instructions": instructions,
    })


def _output_entry(path: str, data: bytes, executable: bool) -> dict[str, str]:
    return _output_entry_of(path, hashlib.sha256(data).hexdigest(), executable)


def _output_entry_of(path: str, digest: str, executable: bool) -> dict[str, str]:
    """A manifest entry; ``mode`` only for an executable file, so other entries read as before."""
    entry = {"path": path, "sha256": digest}
    return entry | {"mode": "x"} if executable else entry


def _manifest(host: HostName, rendered: Rendered, variant: str | None = None) -> str:
    manifest = {
        "schema": MANIFEST_SCHEMA,
        "host": host,
        # Only a variant's manifest names it: the control's reads as it did before variants.
        **({"variant": variant} if variant is not None else {}),
        "atlanteVersion": __version__,
        "sources": [_output_entry_of(p, d, p in rendered.executable_sources) for p, d in sorted(rendered.sources.items())],
        "outputs": [_output_entry(p, b, p in rendered.executable) for p, b in sorted(rendered.outputs.items())],
        # What this host's build left out of the sources, one line each (docs/design.md §9).
        "warnings": sorted(set(rendered.warnings)),
        # Harness agents the host knows by another name (their own file's frontmatter ``name``);
        # only when there is one, so other manifests read as before.
        **({"agentNames": dict(sorted(rendered.agent_names.items()))} if rendered.agent_names else {}),
        **({"skillNames": dict(sorted(rendered.skill_names.items()))} if rendered.skill_names else {}),
    }
    return json.dumps(manifest, indent=2, sort_keys=True) + "\n"


def build(project_root: Path, hosts: tuple[HostName, ...] = HOSTS) -> list[Path]:
    """Compile and write the native trees (the control's for each of ``hosts``, and each variant
    with a harness of its own for its host when that host is among them); raises
    ``DiagnosticError`` on bad sources, before anything is written."""
    inputs, problems = gather(project_root)
    variants, variant_problems = variant_builds(project_root) if not problems else ([], [])
    problems += variant_problems
    rendered: dict[tuple[str | None, HostName], Rendered] = {}
    if not problems:
        rendered = {(None, host): render(project_root, host, inputs) for host in hosts}
        for name, host in variants:
            if host in hosts:
                rendered[(name, host)] = render(project_root, host, gather(project_root, name)[0])
    for result in rendered.values():
        problems.extend(result.problems)
    if problems:
        raise DiagnosticError(sorted(set(problems)))
    written = [_write_build(project_root, host, variant, result) for (variant, host), result in rendered.items()]
    _remove_undeclared_variants(project_root, {name for name, _host in variants})
    return written


def _write_build(project_root: Path, host: HostName, variant: str | None, result: Rendered) -> Path:
    tree = tree_dir(project_root, host, variant)
    if tree.exists():
        shutil.rmtree(tree)
    for rel, data in result.outputs.items():
        target = tree / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(0o755 if rel in result.executable else 0o644)
    tree.mkdir(parents=True, exist_ok=True)
    manifest = build_dir(project_root, host, variant) / "manifest.json"
    atomic_write_text(manifest, _manifest(host, result, variant))
    return manifest


def _remove_undeclared_variants(project_root: Path, declared: set[str]) -> None:
    """A variant no longer declared (or no longer patching the harness) leaves no build behind to
    be mistaken for a current one."""
    root = project_root / ".atlante" / "build" / VARIANTS_DIR
    if root.is_dir():
        for child in root.iterdir():
            if child.name not in declared and child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)


def verify(project_root: Path, host: HostName, variant: str | None = None) -> list[Diagnostic]:
    """Diagnostics when the build for ``host`` (of ``variant``'s harness) is missing, modified or
    stale (empty when sound)."""
    manifest_path = build_dir(project_root, host, variant) / "manifest.json"
    display = _rel(manifest_path, project_root)
    hint = "run `atlante build` and commit nothing under .atlante/build by hand"
    try:
        manifest = json.loads(read_capped(manifest_path, MAX_DOCUMENT_BYTES))
        recorded_outputs = {o["path"]: o["sha256"] for o in manifest["outputs"]}
        recorded_modes = {o["path"] for o in manifest["outputs"] if o.get("mode") == "x"}
        recorded_sources = {s["path"]: (s["sha256"], s.get("mode") == "x") for s in manifest["sources"]}
    except UnreadableFile as exc:
        if exc.missing:
            whose = f" of variant {variant!r}" if variant is not None else ""
            return [Diagnostic(display, "", "eval-build-missing", f"no native build{whose} for host {host!r}", "run `atlante build`")]
        return [Diagnostic(display, "", "eval-build-modified", f"the build manifest {exc.reason}", "run `atlante build`")]
    except (ValueError, KeyError, TypeError):
        return [Diagnostic(display, "", "eval-build-modified", "the build manifest is unreadable", "run `atlante build`")]
    problems: list[Diagnostic] = []
    tree = tree_dir(project_root, host, variant)
    present = {p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()} if tree.is_dir() else set()
    for rel in sorted(present | set(recorded_outputs)):
        path = tree / rel
        if rel not in recorded_outputs:
            problems.append(Diagnostic(_rel(path, project_root), "", "eval-build-modified", "file is not part of the build", hint))
        elif (rel not in present or sha256_file(path) != recorded_outputs[rel]
              or _is_executable(path) != (rel in recorded_modes)):
            problems.append(Diagnostic(_rel(path, project_root), "", "eval-build-modified",
                                       "native output was edited or removed after the build", hint))
    inputs, gather_problems = gather(project_root, variant)
    if gather_problems:
        return problems + gather_problems
    rendered = render(project_root, host, inputs)
    if rendered.problems:
        return problems + rendered.problems
    # A skill script made executable (or not) since the build is as stale as an edited one.
    sources = {p: (d, p in rendered.executable_sources) for p, d in rendered.sources.items()}
    for rel in sorted(set(sources) | set(recorded_sources)):
        if sources.get(rel) != recorded_sources.get(rel):
            what = "was added" if rel not in recorded_sources else "was removed" if rel not in sources else "changed"
            problems.append(Diagnostic(rel.split("#")[0], "$.harness" if "#" in rel else "", "eval-build-stale",
                                       f"harness source {what} since the last build", "run `atlante build`"))
    return problems


def _is_executable(path: Path) -> bool:
    return bool(path.stat().st_mode & stat.S_IXUSR)


def build_command(project_root: Path, host: str) -> int:
    hosts: tuple[HostName, ...] = HOSTS if host == "all" else (host,)  # type: ignore[assignment]
    for manifest in build(project_root.resolve(), hosts):
        data = json.loads(manifest.read_text())
        arm = f" (variant {data['variant']})" if "variant" in data else ""
        print(f"atlante build: {data['host']}{arm}: {len(data['outputs'])} outputs from {len(data['sources'])} sources "
              f"-> {_rel(manifest.parent, project_root)}")
        for warning in data["warnings"]:
            print(f"atlante build: {data['host']}: warning: {warning}", file=sys.stderr)
    return 0
