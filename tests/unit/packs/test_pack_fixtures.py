"""Pack scenarios resolve ``task.fixture`` from the pack root and can never reach outside it."""

from __future__ import annotations

import os
from pathlib import Path

from .conftest import PACK_FIXTURE, PACK_SCENARIO, PackProject, codes, only, pack_scenario

PACK = "node_modules/@acme/notes-pack"
DOC = f"{PACK}/eval/scenarios/{PACK_SCENARIO}.eval.json"


def included(project: PackProject, **pack_kwargs: object) -> Path:
    root = project.pack(PACK, **pack_kwargs)  # type: ignore[arg-type]
    project.select(["@acme/notes-pack"], ["@acme/notes-pack"])
    return root


def test_the_fixture_resolves_from_the_pack_root_not_the_project(project: PackProject) -> None:
    root = included(project)
    # the same relative path in the consuming project must not be used
    project.write(f"{PACK_FIXTURE}/README.md", "# the project's own notes app\n")
    suite = project.discover()
    assert codes(suite) == []
    [entry] = [e for e in suite.scenarios if e.source != "local"]
    assert entry.fixture == (root / PACK_FIXTURE).resolve()
    assert (entry.fixture / "README.md").read_text() == "# notes app (from the pack)\n"


def test_a_fixture_only_the_project_has_is_missing_for_the_pack(project: PackProject) -> None:
    included(project, scenarios=[pack_scenario(fixture="eval/fixtures/app")])  # the project's fixture path
    problem = only(project.discover(), "eval-fixture-invalid")
    assert (problem.file, problem.location) == (f"{PACK}/eval/scenarios/{PACK_SCENARIO}.eval.json", "$.task.fixture")
    assert PACK in problem.hint


def test_a_fixture_path_with_dotdot_is_rejected(project: PackProject) -> None:
    included(project, scenarios=[pack_scenario(fixture="../../../eval/fixtures/app")])
    problem = only(project.discover(), "eval-path-unsafe")
    assert (problem.file, problem.location) == (DOC, "$.task.fixture")


def test_an_absolute_fixture_path_is_rejected(project: PackProject) -> None:
    included(project, scenarios=[pack_scenario(fixture=str(project.root / "eval/fixtures/app"))])
    assert only(project.discover(), "eval-path-unsafe").location == "$.task.fixture"


def test_a_symlinked_fixture_escaping_the_pack_is_rejected(project: PackProject) -> None:
    root = included(project, with_fixture=False)
    (root / PACK_FIXTURE).parent.mkdir(parents=True)
    os.symlink(project.root / "eval/fixtures/app", root / PACK_FIXTURE)
    suite = project.discover()
    problem = only(suite, "eval-path-unsafe")
    assert (problem.file, problem.location) == (DOC, "$.task.fixture")
    assert "escapes its root" in problem.message and PACK in problem.message


def test_a_symlinked_fixtures_directory_escaping_the_pack_is_rejected(project: PackProject, tmp_path: Path) -> None:
    outside = tmp_path / "outside/fixtures/notes-app"
    outside.mkdir(parents=True)
    (outside / "README.md").write_text("# not the pack's\n")
    root = included(project, with_fixture=False, suite={"scenarios": "eval/scenarios/*.eval.json", "fixtures": "eval/fixtures"})
    (root / "eval").mkdir(exist_ok=True)
    os.symlink(outside.parent, root / "eval/fixtures")
    found = sorted(codes(project.discover()))
    assert found == [("eval-path-unsafe", f"{PACK}/atlante.jsonc", "$.eval.fixtures"),
                     ("eval-path-unsafe", DOC, "$.task.fixture")]


def test_a_symlink_inside_a_pack_fixture_is_rejected(project: PackProject) -> None:
    root = included(project)
    os.symlink(project.root / "atlante.jsonc", root / PACK_FIXTURE / "config.jsonc")
    problem = only(project.discover(), "eval-fixture-invalid")
    assert (problem.file, problem.location) == (DOC, "$.task.fixture")
    assert "symlink" in problem.message


def test_host_config_rules_apply_to_pack_fixtures(project: PackProject) -> None:
    root = included(project)
    (root / PACK_FIXTURE / ".mcp.json").write_text("{}")
    assert "'.mcp.json'" in only(project.discover(), "eval-fixture-invalid").message


def test_a_declared_fixture_tree_must_exist(project: PackProject) -> None:
    included(project, suite={"scenarios": "eval/scenarios/*.eval.json", "fixtures": "eval/fixture-tree"})
    problem = only(project.discover(), "eval-fixture-invalid")
    assert (problem.file, problem.location) == (f"{PACK}/atlante.jsonc", "$.eval.fixtures")


def test_a_symlinked_scenario_document_escaping_the_pack_is_rejected(project: PackProject) -> None:
    root = included(project)
    os.symlink(project.root / "eval/scenarios/main.eval.json", root / "eval/scenarios/borrowed.eval.json")
    problem = only(project.discover(), "eval-path-unsafe")
    assert problem.file == f"{PACK}/eval/scenarios/borrowed.eval.json"
    assert PACK in problem.message and problem.hint


def test_check_paths_and_allowlists_follow_the_sandbox_rules(project: PackProject) -> None:
    # check paths are relative to the sandbox root, so the same traversal rule applies to pack scenarios
    included(project, scenarios=[pack_scenario(checks=[{"type": "file-exists", "path": "../notes.txt"},
                                                       {"type": "diff-allowlist", "allow": ["node_modules/x"]}])])
    found = sorted(c for c in codes(project.discover()) if c[0] == "eval-path-unsafe")
    assert found == [("eval-path-unsafe", DOC, "$.checks[0].path"), ("eval-path-unsafe", DOC, "$.checks[1].allow[0]")]
