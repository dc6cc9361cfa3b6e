"""Resource packs: resolving the project's ``packages`` locators and its ``eval.include`` opt-ins.

Locator forms (docs/design.md §2):
- ``./dir`` or ``../dir`` — a directory relative to the project root;
- ``name`` or ``@scope/name`` — ``node_modules/<name>`` under the project root;
- any of those followed by ``/<preset>`` — a named preset of that package.

A pack root holds its own ``atlante.jsonc`` (the root preset: ``harness``, named ``presets`` and
optional ``eval`` suite metadata).  Resolution only reads metadata: it never runs a pack's setup
commands, checks or scenarios.  A suite runs only when ``eval.include`` names a package or preset
the project already selected, and then under the project's host, model and budget — nothing of the
pack's metadata is inherited into the project's configuration.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from pytest_atlante.checks.base import unsafe_path_reason
from pytest_atlante.diagnostics import Diagnostic
from pytest_atlante.hosts.names import HostName
from pytest_atlante.projectroot import CONFIG_FILE
from pytest_atlante.suite.config import Harness, PackConfig, PackSuite, version_diagnostics
from pytest_atlante.suite.documents import load_document, validate_model
from pytest_atlante.suite.scenario import SLUG_PATTERN

# npm's package-name rules: lowercase (legacy names may carry capitals), no leading dot or
# underscore, an optional ``@scope/``; this also keeps ``.``, ``..`` and ``a/../b`` out of node_modules.
_NPM_NAME = re.compile(r"^(?:@[a-zA-Z0-9~-][a-zA-Z0-9._~-]*/)?[a-zA-Z0-9~-][a-zA-Z0-9._~-]*$")
_PRESET = re.compile(SLUG_PATTERN)
SUITE_PATH_FIELDS = ("scenarios", "fixtures", "report", "source")
LOCATOR_FORMS = "./dir, ../dir, name, @scope/name, each optionally followed by /<preset>"


@dataclass(frozen=True)
class ResolvedPack:
    locator: str            # as the project wrote it (in packages, or in eval.include for a suite)
    package: str            # the package part of the locator
    preset: str | None      # the selected preset, if any
    root: Path              # the pack root directory (resolved)
    display_root: str       # the pack root as shown to users (project-relative posix)
    config: PackConfig

    @property
    def config_display(self) -> str:
        """The pack's root preset file as diagnostics name it."""
        return f"{self.display_root}/{CONFIG_FILE}" if self.display_root not in ("", ".") else CONFIG_FILE

    @property
    def suite_owner(self) -> str | None:
        """The preset whose ``eval`` this selection exposes, ``None`` for the root preset's."""
        if self.preset is not None and self.config.presets[self.preset].eval is not None:
            return self.preset
        return None

    @property
    def suite(self) -> PackSuite | None:
        """The suite this selection exposes: the preset's own suite, else the root preset's."""
        owner = self.suite_owner
        return self.config.presets[owner].eval if owner is not None else self.config.eval

    @property
    def suite_location(self) -> str:
        """JSON path of the exposed suite inside the pack's ``atlante.jsonc``."""
        owner = self.suite_owner
        return f"$.presets.{owner}.eval" if owner is not None else "$.eval"

    @property
    def layers(self) -> list[tuple[str | None, Harness]]:
        """(preset, harness): the root preset's (``None``), then the selected preset's, which extends it."""
        found: list[tuple[str | None, Harness]] = [(None, self.config.harness)]
        if self.preset is not None:
            preset_harness = self.config.presets[self.preset].harness
            if preset_harness is not None:
                found.append((self.preset, preset_harness))
        return found


@dataclass(frozen=True)
class IncludedSuite:
    index: int              # position in eval.include, for located diagnostics
    pack: ResolvedPack      # the selection whose suite runs; ``pack.locator`` is the include entry

    @property
    def suite(self) -> PackSuite:
        suite = self.pack.suite
        assert suite is not None  # include_targets only returns selections with a suite
        return suite


def _is_relative(locator: str) -> bool:
    return locator.startswith(("./", "../"))


# Longer than any real package path; a longer name makes the filesystem raise ENAMETOOLONG.
_MAX_LOCATOR = 200


def _split(locator: str) -> list[tuple[str, str | None]]:
    """Candidate (package, preset) readings of a locator, most specific package first."""
    candidates: list[tuple[str, str | None]] = []
    if "\0" in locator or len(locator) > _MAX_LOCATOR:  # no filesystem would resolve it
        return candidates
    if _is_relative(locator) or _NPM_NAME.match(locator):
        candidates.append((locator, None))
    head, _, last = locator.rstrip("/").rpartition("/")
    if head and _PRESET.match(last) and (_is_relative(head) or _NPM_NAME.match(head)):
        candidates.append((head, last))
    return candidates


def _package_dir(project_root: Path, package: str) -> Path:
    return project_root / package if _is_relative(package) else project_root / "node_modules" / package


def _display(path: Path, project_root: Path) -> str:
    try:
        return path.resolve().relative_to(project_root.resolve()).as_posix()
    except ValueError:
        return path.resolve().as_posix()


def resolve_packages(project_root: Path, locators: list[str], config_display: str) -> tuple[list[ResolvedPack], list[Diagnostic]]:
    """Every locator in the project's ``packages``, resolved; problems located at ``$.packages[i]``."""
    packs: list[ResolvedPack] = []
    problems: list[Diagnostic] = []
    for index, locator in enumerate(locators):
        location = f"$.packages[{index}]"
        candidates = _split(locator)
        if not candidates:
            problems.append(Diagnostic(config_display, location, "eval-package-unresolved",
                                       f"{locator!r} is not a package locator", f"use one of the forms {LOCATOR_FORMS}"))
            continue
        tried: list[str] = []
        for package, preset in candidates:
            directory = _package_dir(project_root, package)
            tried.append(_display(directory, project_root))
            if not (directory / CONFIG_FILE).is_file():
                continue
            pack_config, pack_problems = load_pack_config(directory, project_root)
            problems.extend(pack_problems)
            if pack_config is None:
                break
            if preset is not None and preset not in pack_config.presets:
                problems.append(Diagnostic(config_display, location, "eval-package-unresolved",
                                           f"package {package!r} has no preset {preset!r}",
                                           f"use one of: {', '.join(sorted(pack_config.presets)) or '(no presets)'}"))
                break
            packs.append(ResolvedPack(locator, package, preset, directory.resolve(),
                                      _display(directory, project_root), pack_config))
            break
        else:
            problems.append(Diagnostic(config_display, location, "eval-package-unresolved",
                                       f"cannot resolve package locator {locator!r}",
                                       "install the package into node_modules/ or fix the ./relative path; "
                                       f"looked for {CONFIG_FILE} in: " + ", ".join(tried)))
    return packs, problems


def load_pack_config(root: Path, project_root: Path) -> tuple[PackConfig | None, list[Diagnostic]]:
    """A pack's root preset, validated; every suite path must stay inside its root."""
    display = _display(root / CONFIG_FILE, project_root)
    loaded = load_document(root / CONFIG_FILE, display, "eval-package-invalid")
    if isinstance(loaded, Diagnostic):
        return None, [loaded]
    config, problems = validate_model(PackConfig, loaded, "eval-package-invalid",
                                      "fix the pack's root preset (see docs/packs.md)")
    if config is None:
        return None, problems
    assert isinstance(config, PackConfig)
    problems = version_diagnostics(loaded, config)
    suites = [("$.eval", config.eval)] + [(f"$.presets.{name}.eval", p.eval) for name, p in config.presets.items()]
    for where, suite in suites:
        if suite is None:
            continue
        for field in SUITE_PATH_FIELDS:
            value = getattr(suite, field)
            reason = unsafe_path_reason(value) if value is not None else None
            if reason:
                base = "the pack's repository root" if field == "source" else "the pack root"
                problems.append(Diagnostic(display, f"{where}.{field}", "eval-path-unsafe",
                                           f"pack {field} path {value!r}: {reason}",
                                           f"write it relative to {base}, without '..'; it must stay inside it"))
    return config, problems


def harness_layers(packs: list[ResolvedPack]) -> list[tuple[str, Path, Harness]]:
    """(origin, base, harness) for every selected pack, each layer once.

    Selecting a package and one of its presets (or two presets) reaches the root preset's harness
    more than once; it is compiled once, attributed to the package.
    """
    layers: list[tuple[str, Path, Harness]] = []
    seen: set[tuple[Path, str | None]] = set()
    for pack in packs:
        for preset, harness in pack.layers:
            if (pack.root, preset) not in seen:
                seen.add((pack.root, preset))
                layers.append((pack.package if preset is None else f"{pack.package}/{preset}", pack.root, harness))
    return layers


def _include_match(packs: list[ResolvedPack], locator: str) -> ResolvedPack | None:
    """The selection an include entry names: a selected locator, or a package reached via a preset.

    Naming the package of a selected preset opts in the package's own (root preset) suite.
    """
    exact = next((p for p in packs if p.locator == locator), None)
    if exact is not None:
        return exact
    via_preset = next((p for p in packs if p.package == locator), None)
    if via_preset is not None:
        return replace(via_preset, locator=locator, preset=None)
    return None


def _unselected_hint(project_root: Path, locator: str, selected: list[str]) -> str:
    installed = any((_package_dir(project_root, package) / CONFIG_FILE).is_file() for package, _ in _split(locator))
    lead = ("it is installed, but an installed package is unavailable to eval.include until it is selected"
            if installed else "eval.include may only name packages or presets selected in \"packages\"")
    return f"{lead}; add {locator!r} to \"packages\" first (selected: {', '.join(selected) or 'none'})"


def include_targets(project_root: Path, packs: list[ResolvedPack], packages: list[str], include: list[str],
                    config_display: str) -> tuple[list[IncludedSuite], list[Diagnostic]]:
    """The suites ``eval.include`` opts in, each once, with the include rules applied.

    ``packages`` is the project's raw list: an include naming a selected locator that failed to
    resolve gets no second diagnostic (the ``$.packages[i]`` one already says why).
    """
    chosen: list[IncludedSuite] = []
    seen: set[tuple[Path, str | None]] = set()
    problems: list[Diagnostic] = []
    for index, locator in enumerate(include):
        location = f"$.eval.include[{index}]"
        match = _include_match(packs, locator)
        if match is None:
            if locator not in packages:
                problems.append(Diagnostic(config_display, location, "eval-include-unselected",
                                           f"{locator!r} is not among the project's selected packages",
                                           _unselected_hint(project_root, locator, packages)))
            continue
        if match.suite is None:
            problems.append(Diagnostic(config_display, location, "eval-include-no-suite",
                                       f"{locator!r} exposes no pack suite (no eval section in {match.config_display})",
                                       "remove it from eval.include, or include a package or preset that declares an eval suite"))
            continue
        key = (match.root, match.suite_owner)
        if key not in seen:
            seen.add(key)
            chosen.append(IncludedSuite(index, match))
    return chosen, problems


def suite_diagnostics(included: IncludedSuite, project_host: HostName, config_display: str) -> list[Diagnostic]:
    """Checks an included suite needs before its documents are read: host and the fixture tree."""
    pack, suite = included.pack, included.suite
    if suite.host is not None and suite.host != project_host:
        return [Diagnostic(config_display, f"$.eval.include[{included.index}]", "eval-pack-host-incompatible",
                           f"pack suite {pack.locator!r} declares host {suite.host!r} "
                           f"({pack.config_display} at {pack.suite_location}.host); the project runs {project_host!r}",
                           "include a host-neutral suite or one declared for the project's host, or change eval.host")]
    if suite.fixtures is None or unsafe_path_reason(suite.fixtures):
        return []
    fixtures = pack.root / suite.fixtures
    if not fixtures.is_dir():
        return [Diagnostic(pack.config_display, f"{pack.suite_location}.fixtures", "eval-fixture-invalid",
                           f"the pack's fixture tree {suite.fixtures!r} does not exist",
                           "fix the path (relative to the pack root) or remove \"fixtures\"")]
    if not fixtures.resolve().is_relative_to(pack.root):
        return [Diagnostic(pack.config_display, f"{pack.suite_location}.fixtures", "eval-path-unsafe",
                           f"the pack's fixture tree {suite.fixtures!r} escapes the pack root through a symlink",
                           "pack fixtures must be real directories inside the pack root")]
    return []
