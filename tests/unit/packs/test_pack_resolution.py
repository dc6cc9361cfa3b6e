"""Resolving ``packages``: ./relative dirs, bare and scoped node_modules names, ``/<preset>``
selections, pack root presets and their contained suite paths, and building packs' harnesses."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_atlante.diagnostics import Diagnostic
from pytest_atlante.suite.build import build, tree_dir
from pytest_atlante.suite.packs import ResolvedPack, harness_layers, resolve_packages

from .conftest import PackProject, codes, only

PRESETS = {"strict": {"harness": {"skills": {"strict-notes": {"description": "Strict notes.", "dir": "harness/strict"}}}},
           "lenient": {}}


def resolve(project: PackProject, *locators: str) -> tuple[list[ResolvedPack], list[Diagnostic]]:
    return resolve_packages(project.root, list(locators), "atlante.jsonc")


@pytest.mark.parametrize(("where", "locator"), [
    ("packs/notes", "./packs/notes"),
    ("node_modules/notes-pack", "notes-pack"),
    ("node_modules/@acme/notes-pack", "@acme/notes-pack"),
])
def test_each_locator_form_resolves_to_its_pack_root(project: PackProject, where: str, locator: str) -> None:
    root = project.pack(where)
    [pack], problems = resolve(project, locator)
    assert problems == []
    assert (pack.locator, pack.package, pack.preset) == (locator, locator, None)
    assert pack.root == root.resolve()
    assert pack.display_root == where
    assert pack.config_display == f"{where}/atlante.jsonc"
    assert pack.suite is not None and pack.suite.scenarios == "eval/scenarios/*.eval.json*"


def test_a_relative_pack_outside_the_project_resolves(project: PackProject, tmp_path: Path) -> None:
    PackProject(tmp_path).pack("shared-pack")
    [pack], problems = resolve(project, "../shared-pack")
    assert problems == [] and pack.root == (tmp_path / "shared-pack").resolve()


@pytest.mark.parametrize(("where", "locator", "package"), [
    ("packs/notes", "./packs/notes/strict", "./packs/notes"),
    ("node_modules/notes-pack", "notes-pack/strict", "notes-pack"),
    ("node_modules/@acme/notes-pack", "@acme/notes-pack/strict", "@acme/notes-pack"),
])
def test_a_preset_selection_names_package_and_preset(project: PackProject, where: str, locator: str, package: str) -> None:
    project.pack(where, presets=PRESETS)
    project.write(f"{where}/harness/strict/SKILL.md", "Be strict.\n")
    [pack], problems = resolve(project, locator)
    assert problems == []
    assert (pack.package, pack.preset) == (package, "strict")
    # a preset extends its root preset: both harness layers are selected
    assert [sorted(h.agents) + sorted(h.skills) for _, h in pack.layers] == [["note-taker"], ["strict-notes"]]


def test_an_unknown_preset_is_located_and_lists_the_presets(project: PackProject) -> None:
    project.pack("node_modules/@acme/notes-pack", presets=PRESETS)
    _, problems = resolve(project, "@acme/notes-pack", "@acme/notes-pack/missing")
    [problem] = problems
    assert (problem.code, problem.file, problem.location) == ("eval-package-unresolved", "atlante.jsonc", "$.packages[1]")
    assert "'missing'" in problem.message and "lenient, strict" in problem.hint


def test_a_missing_package_says_where_it_looked(project: PackProject) -> None:
    _, [problem] = resolve(project, "@acme/absent")
    assert (problem.code, problem.location) == ("eval-package-unresolved", "$.packages[0]")
    assert "node_modules/@acme/absent" in problem.hint


@pytest.mark.parametrize("locator", ["..", ".", ".hidden", "@acme", "a/../b", "/etc", "_private", "Up/Down/x/y"])
def test_malformed_locators_never_escape_node_modules(project: PackProject, locator: str) -> None:
    # the project itself (``..`` from node_modules) would be a readable atlante.jsonc: it must not resolve
    packs, [problem] = resolve(project, locator)
    assert packs == []
    assert (problem.code, problem.location) == ("eval-package-unresolved", "$.packages[0]")
    assert problem.hint


def test_an_invalid_root_preset_is_located_in_the_pack_file(project: PackProject) -> None:
    project.pack("node_modules/@acme/notes-pack", suite={"scenarios": "eval/*.json", "runner": "x"})
    packs, problems = resolve(project, "@acme/notes-pack")
    assert packs == []
    assert [(p.code, p.file, p.location) for p in problems] == [
        ("eval-package-invalid", "node_modules/@acme/notes-pack/atlante.jsonc", "$.eval.runner")]


def test_a_root_preset_that_is_not_json_is_located_by_line(project: PackProject) -> None:
    project.write("packs/broken/atlante.jsonc", '{\n  "version": "0.2",,\n}')
    _, [problem] = resolve(project, "./packs/broken")
    assert (problem.code, problem.file, problem.location) == ("eval-package-invalid", "packs/broken/atlante.jsonc", "line 2, column 20")


@pytest.mark.parametrize(("field", "value", "reason"), [
    ("scenarios", "../elsewhere/*.eval.json", "traversal"),
    ("fixtures", "/srv/fixtures", "absolute"),
    ("report", "eval/../../report.json", "traversal"),
    ("source", "../../other-repo/eval", "traversal"),
    ("fixtures", "node_modules/x", "node_modules"),
])
def test_suite_paths_stay_inside_the_pack(project: PackProject, field: str, value: str, reason: str) -> None:
    suite = {"scenarios": "eval/scenarios/*.eval.json*", field: value}
    project.pack("packs/notes", suite=suite, presets={"strict": {"eval": suite}})
    _, problems = resolve(project, "./packs/notes")
    assert sorted((p.code, p.file, p.location) for p in problems) == [
        ("eval-path-unsafe", "packs/notes/atlante.jsonc", f"$.eval.{field}"),
        ("eval-path-unsafe", "packs/notes/atlante.jsonc", f"$.presets.strict.eval.{field}"),
    ]
    assert all(reason in p.message and p.hint for p in problems)


def test_a_v01_pack_cannot_declare_a_claude_code_suite(project: PackProject) -> None:
    project.pack("packs/notes", suite={"scenarios": "eval/*.json", "host": "claude-code"}, version="0.1")
    _, [problem] = resolve(project, "./packs/notes")
    assert (problem.code, problem.file, problem.location) == ("eval-config-invalid", "packs/notes/atlante.jsonc", "$.eval.host")


def test_build_compiles_selected_packs_with_the_project(project: PackProject) -> None:
    project.pack("node_modules/@acme/notes-pack", presets=PRESETS)
    project.write("node_modules/@acme/notes-pack/harness/strict/SKILL.md", "Be strict.\n")
    project.select(["@acme/notes-pack/strict"])
    build(project.root)
    for host, owned in (("claude-code", ".claude"), ("opencode", ".opencode")):
        tree = tree_dir(project.root, host)  # type: ignore[arg-type]
        assert (tree / owned / "agents/helper.md").is_file()          # the project's
        assert "You take notes." in (tree / owned / "agents/note-taker.md").read_text()  # the pack's root preset
        assert (tree / owned / "skills/strict-notes/SKILL.md").is_file()  # the selected preset's
    manifest = json.loads((project.root / ".atlante/build/claude-code/manifest.json").read_text())
    assert "node_modules/@acme/notes-pack/harness/note-taker.md" in {s["path"] for s in manifest["sources"]}


def test_an_unselected_preset_is_not_built(project: PackProject) -> None:
    project.pack("packs/notes", presets=PRESETS)
    project.write("packs/notes/harness/strict/SKILL.md", "Be strict.\n")
    project.select(["./packs/notes"])
    build(project.root)
    assert not (tree_dir(project.root, "claude-code") / ".claude/skills/strict-notes").exists()


def test_harness_layers_compile_a_root_preset_once(project: PackProject) -> None:
    project.pack("packs/notes", presets=PRESETS)
    project.write("packs/notes/harness/strict/SKILL.md", "Be strict.\n")
    packs, problems = resolve(project, "./packs/notes", "./packs/notes/strict", "./packs/notes/lenient")
    assert problems == [] and len(packs) == 3
    layers = harness_layers(packs)
    assert [origin for origin, _, _ in layers] == ["./packs/notes", "./packs/notes/strict"]


def test_a_symlinked_install_resolves_to_its_real_root(project: PackProject, tmp_path: Path) -> None:
    real = PackProject(tmp_path).pack("workspace/notes-pack")
    (project.root / "node_modules/@acme").mkdir(parents=True)
    os.symlink(real, project.root / "node_modules/@acme/notes-pack")
    [pack], problems = resolve(project, "@acme/notes-pack")
    assert problems == [] and pack.root == real.resolve()


def test_the_base_project_is_valid_and_only_is_strict(project: PackProject) -> None:
    # the baseline every pack test mutates, and the helper they assert with
    suite = project.discover()
    assert codes(suite) == []
    with pytest.raises(AssertionError):
        only(suite, "eval-include-unselected")


def test_editing_a_selected_packs_source_makes_the_build_stale(project: PackProject) -> None:
    from pytest_atlante.suite.build import verify

    project.pack("packs/notes")
    project.select(["./packs/notes"])
    build(project.root)
    assert verify(project.root, "claude-code") == []
    project.write("packs/notes/harness/note-taker.md", "You take long notes.\n")
    assert [(d.code, d.file) for d in verify(project.root, "claude-code")] == [
        ("eval-build-stale", "packs/notes/harness/note-taker.md")]


def test_a_pack_agent_colliding_with_the_projects_is_a_build_error(project: PackProject) -> None:
    from pytest_atlante.diagnostics import DiagnosticError

    project.pack("packs/notes", agent="helper")  # the project defines "helper" too
    project.select(["./packs/notes"])
    with pytest.raises(DiagnosticError) as caught:
        build(project.root)
    assert [(d.code, d.file, d.location) for d in caught.value.diagnostics] == [
        ("eval-harness-conflict", "packs/notes/atlante.jsonc", "$.harness.agents.helper")]


def test_a_packs_commands_and_memory_file_build_and_a_second_memory_file_is_a_conflict(project: PackProject) -> None:
    from pytest_atlante.diagnostics import DiagnosticError

    project.write("packs/notes/harness/note.md", "---\ndescription: Take a note\n---\nNote $ARGUMENTS\n")
    project.write("packs/notes/harness/memory.md", "Notes go in notes/.\n")
    project.pack("packs/notes", harness={"agents": {}, "commands": {"note": {"file": "harness/note.md"}},
                                         "instructions": "harness/memory.md"})
    project.select(["./packs/notes"])
    build(project.root)
    tree = tree_dir(project.root, "claude-code")
    assert (tree / ".claude/commands/note.md").read_text().endswith("Note $ARGUMENTS\n")
    assert (tree / "CLAUDE.md").read_text() == "Notes go in notes/.\n"
    doc = json.loads((project.root / "atlante.jsonc").read_text())
    project.write("memory.md", "Mine.\n")
    doc["harness"]["instructions"] = "memory.md"
    project.config(doc)
    with pytest.raises(DiagnosticError) as caught:
        build(project.root)
    assert [(d.code, d.file, d.location) for d in caught.value.diagnostics] == [
        ("eval-harness-conflict", "packs/notes/atlante.jsonc", "$.harness.instructions")]
