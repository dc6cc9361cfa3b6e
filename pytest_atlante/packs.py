"""Resource packs: resolving the project's ``packages`` locators to pack roots and presets.

Locator forms (ARCHITECTURE §2):
- ``./dir`` or ``../dir`` — a directory relative to the project root;
- ``name`` or ``@scope/name`` — ``node_modules/<name>`` under the project root;
- any of those followed by ``/<preset>`` — a named preset of that package.

A pack root holds its own ``atlante.jsonc`` (the root preset).  Resolution only reads metadata: it
never runs a pack's setup commands, checks or scenarios.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .config import CONFIG_FILE, Harness, PackConfig, PackSuite, version_diagnostics
from .diagnostics import Diagnostic
from .documents import load_document, validate_model
from .scenario import unsafe_path_reason


@dataclass(frozen=True)
class ResolvedPack:
    locator: str            # as the project wrote it
    package: str            # the package part of the locator
    preset: str | None      # the selected preset, if any
    root: Path              # the pack root directory (resolved)
    display_root: str       # the pack root as shown to users (project-relative posix)
    config: PackConfig

    @property
    def suite(self) -> PackSuite | None:
        """The suite this selection exposes: the preset's own suite, else the root preset's."""
        if self.preset is not None:
            preset_suite = self.config.presets[self.preset].eval
            if preset_suite is not None:
                return preset_suite
        return self.config.eval

    @property
    def harnesses(self) -> list[Harness]:
        found = [self.config.harness]
        if self.preset is not None and self.config.presets[self.preset].harness is not None:
            preset_harness = self.config.presets[self.preset].harness
            assert preset_harness is not None
            found.append(preset_harness)
        return found


def _split(locator: str) -> list[tuple[str, str | None]]:
    """Candidate (package, preset) readings of a locator, most specific package first."""
    parts = locator.split("/")
    candidates: list[tuple[str, str | None]] = [(locator, None)]
    if len(parts) >= 2:
        candidates.append(("/".join(parts[:-1]), parts[-1]))
    return candidates


def _package_dir(project_root: Path, package: str) -> Path:
    if package.startswith(("./", "../")) or package in {".", ".."}:
        return project_root / package
    return project_root / "node_modules" / package


def _valid_package_name(package: str) -> bool:
    if package.startswith(("./", "../")):
        return True
    parts = package.split("/")
    if package.startswith("@"):
        return len(parts) == 2 and all(parts)
    return len(parts) == 1 and bool(parts[0])


def resolve_packages(project_root: Path, locators: list[str], config_display: str) -> tuple[list[ResolvedPack], list[Diagnostic]]:
    packs: list[ResolvedPack] = []
    problems: list[Diagnostic] = []
    for index, locator in enumerate(locators):
        location = f"$.packages[{index}]"
        resolved: ResolvedPack | None = None
        tried: list[str] = []
        for package, preset in _split(locator):
            if not _valid_package_name(package):
                continue
            directory = _package_dir(project_root, package)
            tried.append(directory.as_posix())
            if not (directory / CONFIG_FILE).is_file():
                continue
            pack_config, pack_problems = load_pack_config(directory, project_root)
            problems.extend(pack_problems)
            if pack_config is None:
                resolved = None
                break
            if preset is not None and preset not in pack_config.presets:
                problems.append(Diagnostic(config_display, location, "eval-package-unresolved",
                                           f"package {package!r} has no preset {preset!r}",
                                           f"use one of: {', '.join(sorted(pack_config.presets)) or '(no presets)'}"))
                break
            resolved = ResolvedPack(locator, package, preset, directory.resolve(),
                                    _display(directory, project_root), pack_config)
            break
        else:
            problems.append(Diagnostic(config_display, location, "eval-package-unresolved",
                                       f"cannot resolve package locator {locator!r}",
                                       "install the package into node_modules/ or fix the ./relative path; "
                                       f"looked for {CONFIG_FILE} in: " + ", ".join(tried or ["(invalid locator)"])))
        if resolved is not None:
            packs.append(resolved)
    return packs, problems


def _display(path: Path, project_root: Path) -> str:
    try:
        return path.resolve().relative_to(project_root.resolve()).as_posix()
    except ValueError:
        return path.resolve().as_posix()


def load_pack_config(root: Path, project_root: Path) -> tuple[PackConfig | None, list[Diagnostic]]:
    display = _display(root / CONFIG_FILE, project_root)
    loaded = load_document(root / CONFIG_FILE, display, "eval-package-invalid")
    if isinstance(loaded, Diagnostic):
        return None, [loaded]
    config, problems = validate_model(PackConfig, loaded, "eval-package-invalid",
                                      "fix the pack's root preset (see the Packs section of the README)")
    if config is None:
        return None, problems
    problems = version_diagnostics(loaded, config)
    suites = [("$.eval", config.eval)] + [(f"$.presets.{name}.eval", p.eval) for name, p in config.presets.items()]
    for where, suite in suites:
        if suite is None:
            continue
        for field in ("scenarios", "fixtures", "report", "source"):
            value = getattr(suite, field)
            reason = unsafe_path_reason(value) if value is not None else None
            if reason:
                problems.append(Diagnostic(display, f"{where}.{field}", "eval-path-unsafe",
                                           f"pack {field} path {value!r}: {reason}",
                                           "pack paths are relative to the pack root and stay inside it"))
    return config, problems


def include_targets(packs: list[ResolvedPack], include: list[str], config_display: str) -> tuple[list[ResolvedPack], list[Diagnostic]]:
    """The selected packs whose suites ``eval.include`` opts in, with the include rules applied."""
    chosen: list[ResolvedPack] = []
    problems: list[Diagnostic] = []
    for index, locator in enumerate(include):
        location = f"$.eval.include[{index}]"
        match = next((p for p in packs if p.locator == locator), None)
        if match is None:
            # a package reached only through one of its presets may be included by package name
            match = next((p for p in packs if p.package == locator), None)
        if match is None:
            problems.append(Diagnostic(config_display, location, "eval-include-unselected",
                                       f"{locator!r} is not among the project's selected packages",
                                       "add it to \"packages\" first; installed but unselected packages are unavailable to eval.include"))
            continue
        if match.suite is None:
            problems.append(Diagnostic(config_display, location, "eval-include-no-suite",
                                       f"{locator!r} exposes no pack suite (no eval section in its preset)",
                                       "remove it from eval.include, or include a package that declares an eval suite"))
            continue
        if match not in chosen:
            chosen.append(match)
    return chosen, problems
