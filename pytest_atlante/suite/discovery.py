"""Discovery: from a project root to the validated list of scenarios a run may execute.

Everything a run needs is checked here, before any host run or model call: the configuration, the
selected packs and ``include``, every scenario document, every path and pattern, every fixture
tree, and (in scripted mode) every scenario's script.  All problems are collected, so one run
reports them all.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from pytest_atlante.checks import AgentUsedCheck, CommandUsedCheck, SkillUsedCheck, ToolUsedCheck
from pytest_atlante.checks.base import unsafe_path_reason
from pytest_atlante.diagnostics import Diagnostic, DiagnosticError
from pytest_atlante.fsutil import file_kind
from pytest_atlante.hosts.base import PluginLoader, command_names, no_place, slash_command
from pytest_atlante.hosts.names import HOST_NAMES, HostName, min_config_version
from pytest_atlante.hosts.registry import host_for
from pytest_atlante.suite.config import EvalSection, ProjectConfig, load_project_config
from pytest_atlante.suite.documents import load_document, validate_model
from pytest_atlante.suite.packs import (
    ResolvedPack,
    harness_layers,
    include_targets,
    resolve_packages,
    suite_diagnostics,
)
from pytest_atlante.suite.plugins import plugin_of
from pytest_atlante.suite.scenario import Scenario, rule_diagnostics
from pytest_atlante.suite.script import Script, load_script
from pytest_atlante.suite.variants import Arm, resolve_arms


@dataclass(frozen=True)
class ScenarioEntry:
    scenario: Scenario
    file: Path            # absolute path of the scenario document
    display: str          # the document's path as shown in diagnostics and node ids
    line: int             # 1-based line of the scenario's name, for reportinfo()
    source: str           # "local" or the pack locator
    fixture: Path         # absolute fixture directory
    script: Path | None   # the scripted-model script's file, in scripted mode
    # The script as discovery read and validated it: every trial plays this (None when absent or invalid).
    parsed_script: Script | None = None


@dataclass
class Suite:
    """What :func:`discover` found, valid or not: the problems are in ``diagnostics``.

    ``config`` and ``eval`` are None only when the configuration (or its eval section) is missing
    or invalid, and then a diagnostic says so; :meth:`validated` is the suite a run executes.
    """

    project_root: Path
    config: ProjectConfig | None
    eval: EvalSection | None
    packs: list[ResolvedPack] = field(default_factory=list)
    scenarios: list[ScenarioEntry] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # The control first, then each declared variant (suite/variants.py); empty without an eval section.
    arms: list[Arm] = field(default_factory=list)

    def validated(self) -> ValidSuite:
        """The suite with its configuration and eval section (ValueError when it has none)."""
        if self.config is None or self.eval is None:
            found = "; ".join(d.render() for d in self.diagnostics) or "no eval section"
            raise ValueError(f"the suite at {self.project_root} has no valid eval configuration: {found}")
        return ValidSuite(self.project_root, self.config, self.eval, list(self.packs), list(self.scenarios), list(self.arms))


@dataclass(frozen=True)
class ValidSuite:
    """A suite whose configuration validated: what a run executes (its ``eval`` is always there)."""

    project_root: Path
    config: ProjectConfig
    eval: EvalSection
    packs: list[ResolvedPack] = field(default_factory=list)
    scenarios: list[ScenarioEntry] = field(default_factory=list)
    arms: list[Arm] = field(default_factory=list)


def expand_glob(root: Path, pattern: str) -> list[Path]:
    """Glob relative to ``root``; a trailing ``.json*`` matches exactly ``.json`` and ``.jsonc``.

    Raises ``ValueError`` with a readable reason for a glob that is unsafe or that the filesystem
    refuses (absolute, ``..``, over-long names).
    """
    reason = unsafe_path_reason(pattern)
    if reason:
        raise ValueError(reason)
    patterns = [pattern[:-1], pattern[:-1] + "c"] if pattern.endswith(".json*") else [pattern]
    try:
        # Every match but a plain directory is kept, so a FIFO or a device named like a scenario is
        # reported by the loader as what it is instead of being skipped; a directory whose name
        # looks like a document is reported too.
        found = {p for pat in patterns for p in root.glob(pat) if _document_like(p)}
    except (OSError, ValueError, NotImplementedError) as exc:
        raise ValueError(f"the glob cannot be expanded: {exc}") from exc
    return sorted(found)


def _document_like(path: Path) -> bool:
    return not path.is_dir() or path.name.endswith((".json", ".jsonc"))


def _glob_or_problem(suite: Suite, root: Path, pattern: str, file: str, location: str) -> list[Path]:
    try:
        documents = expand_glob(root, pattern)
    except ValueError as exc:
        suite.diagnostics.append(Diagnostic(file, location, "eval-path-unsafe", f"scenarios glob {pattern!r}: {exc}",
                                            "use a glob relative to its root, such as eval/scenarios/*.eval.json*"))
        return []
    if not documents:
        suite.diagnostics.append(Diagnostic(file, location, "eval-scenario-invalid",
                                            f"the glob {pattern!r} matches no scenario documents",
                                            "fix the glob (relative to its root) or add scenarios"))
    return documents


def display_path(path: Path, project_root: Path) -> str:
    if is_within(path, project_root):  # every scenario of a suite: no relative path object built
        return "/".join(path.parts[len(project_root.parts):]) or "."
    return os.path.relpath(path, project_root).replace(os.sep, "/")


def _special_kind(path: Path) -> str | None:
    try:
        return file_kind(os.lstat(path).st_mode)
    except OSError:
        return None


def fixture_diagnostics(fixture: Path, host: HostName, file: str) -> list[Diagnostic]:
    """Fixture tree rules: no ``.git``, ``node_modules``, symlinks or special files; host config paths."""
    found: list[Diagnostic] = []

    def problem(rel: str, message: str, hint: str) -> None:
        found.append(Diagnostic(file, "$.task.fixture", "eval-fixture-invalid", f"fixture file {rel!r}: {message}", hint))

    for dirpath, dirnames, filenames in os.walk(fixture):
        base = Path(dirpath)
        for name in sorted(dirnames + filenames):
            full = base / name
            rel = full.relative_to(fixture).as_posix()
            if full.is_symlink():
                problem(rel, "fixtures cannot contain symlinks", "replace the link with a copy of its target")
            elif name in (".git", "node_modules"):
                problem(rel, f"fixtures cannot contain {name}", f"remove {name} from the fixture; setup can create it")
            elif name in filenames and (kind := _special_kind(full)) is not None:
                # A FIFO or device cannot be copied into a sandbox (the copy would block or fail).
                problem(rel, f"fixtures cannot contain special files; this is {kind}",
                        "remove it from the fixture; setup can create it if a trial needs one")
        dirnames[:] = sorted(d for d in dirnames if d not in (".git", "node_modules") and not (base / d).is_symlink())
    # The host adapters own the list of config files their CLI would merge beside the generated one.
    for rel, reason in sorted(host_for(host).forbidden_fixture_files.items()):
        if (fixture / rel).exists():
            problem(rel, reason, "remove it from the fixture; every trial gets a fresh generated host configuration")
    return found


def _fixture_problems(fixture_root: Path, fixture: Path, value: str, host: HostName, display: str, root: Path) -> list[Diagnostic]:
    where = display_path(fixture_root, root) or "."
    try:
        if not fixture.is_dir():
            return [Diagnostic(display, "$.task.fixture", "eval-fixture-invalid", f"fixture directory {value!r} does not exist",
                               f"create it under {where} or fix the path")]
        if fixture.is_symlink() or not fixture.resolve().is_relative_to(fixture_root.resolve()):
            return [Diagnostic(display, "$.task.fixture", "eval-path-unsafe",
                               f"fixture {value!r} escapes its root {where!r} through a symlink",
                               "fixtures must be real directories inside the project (or pack) root")]
        return fixture_diagnostics(fixture, host, display)
    except OSError as exc:  # e.g. a name longer than the filesystem allows
        return [Diagnostic(display, "$.task.fixture", "eval-fixture-invalid", f"fixture {value[:80]!r} cannot be read: {exc.strerror}",
                           "fix the fixture path")]


def _script_for(document: Path, name: str) -> Path | None:
    for suffix in (".json", ".jsonc"):
        candidate = document.parent / "scripted" / f"{name}{suffix}"
        if os.path.lexists(candidate):  # load_script reports one that is not a regular file
            return candidate
    return None


def _load_scenarios(suite: Suite, documents: list[Path], source: str, fixture_root: Path, host: HostName, scripted: bool,
                    optional_scripts: bool = False) -> None:
    root = suite.project_root
    # Scenarios usually share fixtures: each tree is walked (and resolved) once per suite, not once
    # per scenario; its problems are then named after each document that uses it.
    fixtures: dict[str, tuple[list[Diagnostic], Path]] = {}
    for document in documents:
        display = display_path(document, root)
        loaded = load_document(document, display, "eval-scenario-invalid")
        if isinstance(loaded, Diagnostic):
            suite.diagnostics.append(loaded)
            continue
        scenario, problems = validate_model(Scenario, loaded, "eval-scenario-invalid",
                                            "see the Scenario documents section of docs/reference.md")
        suite.diagnostics.extend(problems)
        if scenario is None:
            continue
        assert isinstance(scenario, Scenario)
        suite.diagnostics.extend(rule_diagnostics(scenario, display))
        suite.diagnostics.extend(harness_name_diagnostics(scenario, display, suite))
        suite.diagnostics.extend(impossible_check_diagnostics(scenario, display, suite, host))
        suite.diagnostics.extend(command_prompt_diagnostics(scenario, display, suite, host))
        fixture = fixture_root / scenario.task.fixture
        safe = unsafe_path_reason(scenario.task.fixture) is None
        if safe:
            if scenario.task.fixture not in fixtures:
                fixtures[scenario.task.fixture] = (
                    _fixture_problems(fixture_root, fixture, scenario.task.fixture, host, "", root), fixture.resolve())
            problems_of_fixture, resolved = fixtures[scenario.task.fixture]
            suite.diagnostics.extend(replace(problem, file=display) for problem in problems_of_fixture)
        script = _script_for(document, scenario.name) if scripted else None
        parsed: Script | None = None
        if scripted:
            if script is None and not optional_scripts:
                suite.diagnostics.append(Diagnostic(display, "$.name", "eval-script-missing",
                                                    f"no scripted-model script for scenario {scenario.name!r}",
                                                    f"add scripted/{scenario.name}.json beside the scenario document"))
            elif script is not None:
                parsed, script_problems = _load_script(script, root)
                suite.diagnostics.extend(script_problems)
        suite.scenarios.append(ScenarioEntry(scenario, document, display, loaded.line_of_key("name", scenario.name),
                                             # an unsafe path (a NUL) is already a diagnostic; never resolve it
                                             source, resolved if safe else fixture, script, parsed))


def harness_names(suite: Suite) -> dict[str, set[str]]:
    """The agents, skills and commands the run's harness defines (local, in any arm, and every
    selected pack layer): the names a ``agent-used`` / ``skill-used`` / ``command-used`` check may
    count and a ``/name`` prompt may run, a plugin's part also as ``plugin:name`` (suite/plugins.py).
    A name only some arms define counts zero uses in the others."""
    layers = [(suite.project_root, suite.config.harness)] if suite.config else []
    layers += [(suite.project_root, arm.harness) for arm in suite.arms]
    layers += [(base, harness) for _origin, base, harness in harness_layers(suite.packs)]
    names: dict[str, set[str]] = {"agent": set(), "skill": set(), "command": set()}
    for base, harness in layers:
        for kind, parts in (("agent", {n: a.prompt for n, a in harness.agents.items()}),
                            ("skill", {n: k.dir for n, k in harness.skills.items()}),
                            ("command", {n: c.file for n, c in harness.commands.items()})):
            for name, path in parts.items():
                names[kind].add(name)
                if kind == "skill":  # a /name prompt may run a skill on some hosts: command-used counts it
                    names["command"].add(name)
                if kind == "command":  # and as each host runs it
                    names[kind] |= {spelling for host in HOST_NAMES for spelling in command_names(host_for(host), name, path)}
                plugin = plugin_of(base / path, base) if not unsafe_path_reason(path) else None
                if plugin is not None:
                    names[kind].add(plugin.namespaced(name))
    return names


def host_command_names(suite: Suite, host: HostName) -> set[str]:
    """The names a ``/name`` prompt may run on ``host``: each harness command (any layer, as
    :func:`harness_names`) by the name ``host`` knows it by (``hosts.base.command_names``; a
    plugin's command ``plugin:name`` on a host that namespaces the plugin, ``name`` elsewhere), and each
    skill where the host runs skills as commands (docs/host-facts.md §13)."""
    layers = [(suite.project_root, suite.config.harness)] if suite.config else []
    layers += [(suite.project_root, arm.harness) for arm in suite.arms]
    layers += [(base, harness) for _origin, base, harness in harness_layers(suite.packs)]
    # Claude Code and OpenCode also run a skill as /name (its SKILL.md is the expansion), Gemini CLI not.
    names: set[str] = {name for _base, harness in layers for name in harness.skills} \
        if getattr(host_for(host), "skills_run_as_commands", False) else set()
    for base, harness in layers:
        for name, source in harness.commands.items():
            runs_as = command_names(host_for(host), name, source.file)
            plugin = plugin_of(base / source.file, base) if runs_as and not unsafe_path_reason(source.file) else None
            if plugin is not None and isinstance(host_for(host), PluginLoader) and plugin.host == host:
                # A host that namespaces the plugin runs its command only so: Claude Code answers
                # "Unknown command" to the plain name (host-facts §14, suite/plugins.py).
                runs_as = {plugin.namespaced(name)}
            names |= runs_as
    return names


def harness_name_diagnostics(scenario: Scenario, display: str, suite: Suite) -> list[Diagnostic]:
    """A trajectory check that counts a skill or agent the harness does not define could never
    mean anything: a validation error before any session (``eval-scenario-invalid``)."""
    found = []
    known: dict[str, set[str]] | None = None
    for index, check in enumerate(scenario.checks):
        if isinstance(check, SkillUsedCheck | AgentUsedCheck | CommandUsedCheck):
            kind, name = ("skill", check.skill) if isinstance(check, SkillUsedCheck) else \
                ("agent", check.agent) if isinstance(check, AgentUsedCheck) else ("command", check.command.removeprefix("/"))
            known = known if known is not None else harness_names(suite)
            if name not in known[kind]:
                defined = ", ".join(sorted(known[kind])) or "none"
                found.append(Diagnostic(display, f"$.checks[{index}].{kind}", "eval-scenario-invalid",
                                        f"{check.type}: the harness defines no {kind} {name!r} (it defines: {defined})",
                                        f"name a {kind} of the harness section of atlante.jsonc (or of a selected pack)"))
    return found


IMPOSSIBLE_CHECK = "eval-check-impossible"
UNKNOWN_COMMAND = "eval-command-unknown"


def _run_hosts(suite: Suite, host: HostName) -> list[HostName]:
    """The hosts the suite's scenarios run under: the run's, and each arm's."""
    return list(dict.fromkeys([host, *(arm.host for arm in suite.arms)]))


def command_prompt_diagnostics(scenario: Scenario, display: str, suite: Suite, host: HostName) -> list[Diagnostic]:
    """A prompt that runs a slash command (``/name …``) must name a command of the harness, on
    hosts that run commands: otherwise the host answers "Unknown command" without asking the model
    (Claude Code), sends the text as it is (Gemini CLI, Codex), or fails (OpenCode), and the trial
    means nothing (docs/reference.md, "Slash commands").  A validation error before any session
    (``eval-command-unknown``), and ``command-used`` at least 1 on a host without commands is
    ``eval-check-impossible``."""
    found: list[Diagnostic] = []
    command = slash_command(scenario.task.prompt)
    hosts = [name for name in _run_hosts(suite, host) if no_place(host_for(name), "command") is None]
    if command is not None:
        defined_on = {name: sorted(host_command_names(suite, name)) for name in hosts}
        for name, defined in defined_on.items():
            if command.name in defined:
                continue
            found.append(Diagnostic(
                display, "$.task.prompt", UNKNOWN_COMMAND,
                f"the prompt runs /{command.name}, which the harness does not define for {name} "
                f"(it defines: {', '.join(f'/{n}' for n in defined) or 'no command'})",
                "add the command to the harness section of atlante.jsonc (harness.commands), name one it "
                "defines (a command kept in a folder runs as /folder:name), or start the prompt with "
                "something other than '/' if it is no command"))
    counts = [(index, check) for index, check in enumerate(scenario.checks)
              if isinstance(check, CommandUsedCheck) and check.least > 0]
    for name in _run_hosts(suite, host):
        why = no_place(host_for(name), "command")
        if why is None:
            continue
        if command is not None:
            found.append(Diagnostic(
                display, "$.task.prompt", UNKNOWN_COMMAND,
                f"the prompt runs /{command.name}, but {name} runs no slash commands ({why}): it would send "
                "the text to the model as it is",
                "run the scenario under a host that runs commands (eval.host, --atlante-host), or write the "
                "command's instructions into the prompt"))
        found += [Diagnostic(
            display, f"$.checks[{index}]", IMPOSSIBLE_CHECK,
            f"command-used: {name} runs no slash commands ({why}), so a count of /{check.command.removeprefix('/')} "
            f"of at least {check.least} can never be reached on it",
            "run the scenario under a host that runs commands (eval.host, --atlante-host), drop the check, "
            "or make it {\"max\": 0}") for index, check in counts]
    return found


def impossible_check_diagnostics(scenario: Scenario, display: str, suite: Suite, host: HostName) -> list[Diagnostic]:
    """A delegation count a host can never reach, named before any session (docs/reference.md,
    "Checks a host cannot satisfy"): ``agent-used`` or ``tool-used`` of ``task`` with a ``min`` of
    at least 1 on a host that has no sub-agents (its adapter has no place for an agent,
    ``hosts.base.no_place``), in any arm that runs under that host.  ``max: 0`` holds there."""
    counts = [(index, check) for index, check in enumerate(scenario.checks)
              if (isinstance(check, AgentUsedCheck) or (isinstance(check, ToolUsedCheck) and check.tool == "task"))
              and check.least > 0]
    if not counts:
        return []
    found = []
    for name in _run_hosts(suite, host):
        why = no_place(host_for(name), "agent")
        if why is None:
            continue
        for index, check in counts:
            what = f"agent {check.agent!r}" if isinstance(check, AgentUsedCheck) else "the task tool"
            found.append(Diagnostic(
                display, f"$.checks[{index}]", IMPOSSIBLE_CHECK,
                f"{check.type}: {name} has no sub-agents ({why}), so a count of {what} of at least "
                f"{check.least} can never be reached on it",
                "run the scenario under a host with sub-agents (eval.host, --atlante-host), drop the check, "
                "or make it {\"max\": 0} to assert the host never delegates"))
    return found


def _load_script(script: Path, root: Path) -> tuple[Script | None, list[Diagnostic]]:
    """The validated script, or None and its problems (located by the script's display path)."""
    try:
        return load_script(script), []
    except DiagnosticError as exc:
        return None, [Diagnostic(display_path(script, root), d.location, d.code, d.message, d.hint) for d in exc.diagnostics]


def _duplicates(suite: Suite) -> None:
    seen: dict[str, ScenarioEntry] = {}
    for entry in suite.scenarios:
        name = entry.scenario.name
        if name in seen:
            first = seen[name]
            suite.diagnostics.append(Diagnostic(entry.display, "$.name", "eval-scenario-duplicate",
                                                f"scenario name {name!r} is already used by {first.display} ({first.source})",
                                                "scenario names must be unique across local and included suites; rename one"))
        else:
            seen[name] = entry


def _load_pack_suites(suite: Suite, section: EvalSection, packages: list[str], config_display: str, scripted: bool,
                      optional_scripts: bool) -> None:
    """The suites ``eval.include`` opts in: scenarios, fixtures and scripts resolve from the pack root."""
    targets, problems = include_targets(suite.project_root, suite.packs, packages, section.include or [], config_display)
    suite.diagnostics.extend(problems)
    for included in targets:
        pack = included.pack
        found = suite_diagnostics(included, section.host, config_display)
        suite.diagnostics.extend(found)
        if any(d.code == "eval-pack-host-incompatible" for d in found):
            continue
        documents = _glob_or_problem(suite, pack.root, included.suite.scenarios, pack.config_display,
                                     f"{pack.suite_location}.scenarios")
        inside = [d for d in documents if d.resolve().is_relative_to(pack.root)]
        for document in documents:
            if document not in inside:
                suite.diagnostics.append(Diagnostic(display_path(document, suite.project_root), "", "eval-path-unsafe",
                                                    f"pack scenario document escapes the pack root {pack.display_root!r} through a symlink",
                                                    "pack scenario documents must be real files inside the pack root"))
        _load_scenarios(suite, inside, pack.locator, pack.root, section.host, scripted, optional_scripts)


def discover(project_root: Path, *, scripted: bool = False, names: list[str] | None = None, require_eval: bool = True,
             host_override: HostName | None = None, optional_scripts: bool = False) -> Suite:
    """Load and validate everything; ``suite.diagnostics`` is empty when the run may proceed.

    ``optional_scripts`` (the self-test) loads and validates the scripts that exist without
    requiring one per scenario: a scenario without a script is reported, not refused.

    ``host_override`` (``--atlante-host``) runs the same suite under the other host without editing
    the configuration; the version rule still applies (v0.1 admits only OpenCode).
    """
    project_root = project_root.resolve()
    config, loaded, problems = load_project_config(project_root)
    suite = Suite(project_root, config, config.eval if config else None, diagnostics=list(problems))
    if config is None or loaded is None:
        return suite
    packs, pack_problems = resolve_packages(project_root, config.packages, loaded.display)
    suite.packs = packs
    suite.diagnostics.extend(pack_problems)
    if config.eval is None:
        if require_eval:
            suite.diagnostics.append(Diagnostic(loaded.display, "$.eval", "eval-config-invalid",
                                                "atlante.jsonc has no eval section", "add an eval section with host and scenarios"))
        return suite
    if host_override is not None and host_override != config.eval.host:
        needed = min_config_version(host_override)
        if config.version < needed:
            suite.diagnostics.append(Diagnostic(loaded.display, "$.version", "eval-config-invalid",
                                                f"--atlante-host {host_override} needs a version {needed} configuration",
                                                f"set \"version\": \"{needed}\" in atlante.jsonc"))
        suite.eval = config.eval.model_copy(update={"host": host_override})
    host = suite.eval.host if suite.eval else config.eval.host
    suite.arms, arm_problems = resolve_arms(config, suite.eval or config.eval, loaded.display)
    suite.diagnostics.extend(arm_problems)
    if config.eval.scenarios is not None:
        documents = _glob_or_problem(suite, project_root, config.eval.scenarios, loaded.display, "$.eval.scenarios")
        _load_scenarios(suite, documents, "local", project_root, host, scripted, optional_scripts)
    _load_pack_suites(suite, suite.eval or config.eval, config.packages, loaded.display, scripted, optional_scripts)
    _duplicates(suite)
    if names:
        known = {e.scenario.name for e in suite.scenarios}
        for name in names:
            if name not in known:
                suite.diagnostics.append(Diagnostic("", "--atlante-scenario", "eval-scenario-filter-empty",
                                                    f"no scenario named {name!r}",
                                                    "known scenarios: " + (", ".join(sorted(known)) or "(none)")))
        suite.scenarios = [e for e in suite.scenarios if e.scenario.name in names]
    return suite


def collection_plan(files: list[Path], rootpath: Path) -> tuple[list[str], frozenset[Path]]:
    """pytest arguments that collect exactly ``files``, and every path collection needs to enter.

    One argument per file made pytest re-collect a file's whole directory once per argument
    (quadratic: 150 s for 1,000 files).  Instead the arguments are the fewest directories that
    hold the files inside the rootdir (each walked once) plus the files outside it, which pytest
    could only name by a shortened id; the returned set (the files and their directories up to
    those arguments) lets the caller ignore everything else a directory holds, such as test modules.
    """
    inside = sorted({f for f in files if is_within(f, rootpath)})
    roots: list[Path] = []
    for directory in sorted({f.parent for f in inside}):  # a descendant sorts right after its ancestor
        if not roots or not directory.is_relative_to(roots[-1]):
            roots.append(directory)
    allowed: set[Path] = set(files) | set(roots)
    for file in inside:
        parent = file.parent
        while parent not in allowed:  # stops at the latest at the file's root, which is in ``allowed``
            allowed.add(parent)
            parent = parent.parent
    outside = sorted({f for f in files if not is_within(f, rootpath)})
    return [str(p) for p in roots + outside], frozenset(allowed)


def is_within(path: Path, root: Path) -> bool:
    """``path.is_relative_to(root)`` for absolute paths, without building the relative path (a
    collection asks it of every scenario file)."""
    parts = root.parts
    return path.parts[: len(parts)] == parts
