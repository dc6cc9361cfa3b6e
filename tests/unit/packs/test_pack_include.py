"""``eval.include``: only selected packages or presets, suites required, host compatibility, and
pack metadata never inherited.  Discovery only reads — these tests never start a host."""

from __future__ import annotations

import pytest

from .conftest import PACK_SCENARIO, PackProject, codes, only, pack_scenario

PRESET_SUITE = {"scenarios": "eval/strict/*.eval.json"}


def names(suite: object) -> list[tuple[str, str]]:
    return [(e.scenario.name, e.source) for e in suite.scenarios]  # type: ignore[attr-defined]


def test_selecting_a_pack_never_runs_its_suite(project: PackProject) -> None:
    project.pack("packs/notes")
    project.select(["./packs/notes"])
    suite = project.discover()
    assert codes(suite) == []
    assert names(suite) == [("writes-hello", "local")]


def test_an_included_suite_runs_beside_the_local_one_with_the_locator_as_source(project: PackProject) -> None:
    project.pack("node_modules/@acme/notes-pack")
    project.select(["@acme/notes-pack"], ["@acme/notes-pack"])
    suite = project.discover(scripted=True)
    assert codes(suite) == []
    assert names(suite) == [("writes-hello", "local"), (PACK_SCENARIO, "@acme/notes-pack")]
    entry = suite.scenarios[1]
    assert entry.display == f"node_modules/@acme/notes-pack/eval/scenarios/{PACK_SCENARIO}.eval.json"
    assert entry.script == project.root / f"node_modules/@acme/notes-pack/eval/scenarios/scripted/{PACK_SCENARIO}.json"


def test_a_project_may_consist_of_included_suites_only(project: PackProject) -> None:
    project.pack("packs/notes")
    project.select(["./packs/notes"], ["./packs/notes"], scenarios=None)
    suite = project.discover()
    assert codes(suite) == [] and names(suite) == [(PACK_SCENARIO, "./packs/notes")]


def test_an_include_that_nothing_selected_is_rejected(project: PackProject) -> None:
    project.select([], ["@acme/review-pack"])
    problem = only(project.discover(), "eval-include-unselected")
    assert (problem.file, problem.location) == ("atlante.jsonc", "$.eval.include[0]")
    assert "selected" in problem.hint


def test_an_installed_but_unselected_package_is_unavailable(project: PackProject) -> None:
    project.pack("node_modules/@acme/notes-pack")
    project.select([], ["@acme/notes-pack"])
    suite = project.discover()
    problem = only(suite, "eval-include-unselected")
    assert problem.location == "$.eval.include[0]"
    assert "installed" in problem.hint and "add '@acme/notes-pack' to \"packages\"" in problem.hint
    assert names(suite) == [("writes-hello", "local")]


def test_an_include_without_a_pack_suite_is_a_validation_error(project: PackProject) -> None:
    project.pack("packs/plain", no_suite=True)
    project.select(["./packs/plain"], ["./packs/plain"])
    problem = only(project.discover(), "eval-include-no-suite")
    assert (problem.file, problem.location) == ("atlante.jsonc", "$.eval.include[0]")
    assert "packs/plain/atlante.jsonc" in problem.message


def test_a_preset_is_includable_only_when_it_is_selected(project: PackProject) -> None:
    project.pack("node_modules/notes-pack", presets={"strict": {"eval": PRESET_SUITE}})
    project.select(["notes-pack"], ["notes-pack/strict"])
    assert only(project.discover(), "eval-include-unselected").location == "$.eval.include[0]"


def test_a_selected_preset_exposes_its_own_suite(project: PackProject) -> None:
    project.pack("node_modules/notes-pack", presets={"strict": {"eval": PRESET_SUITE}})
    project.write("node_modules/notes-pack/eval/strict/strict.eval.json", pack_scenario("strict-notes"))
    project.select(["notes-pack/strict"], ["notes-pack/strict"])
    suite = project.discover()
    assert codes(suite) == []
    assert names(suite) == [("writes-hello", "local"), ("strict-notes", "notes-pack/strict")]


def test_a_package_reached_through_a_preset_includes_its_root_suite(project: PackProject) -> None:
    project.pack("node_modules/@acme/notes-pack", presets={"strict": {"eval": PRESET_SUITE}})
    project.write("node_modules/@acme/notes-pack/eval/strict/strict.eval.json", pack_scenario("strict-notes"))
    project.select(["@acme/notes-pack/strict"], ["@acme/notes-pack"])
    suite = project.discover()
    assert codes(suite) == []
    assert names(suite) == [("writes-hello", "local"), (PACK_SCENARIO, "@acme/notes-pack")]


def test_a_preset_without_its_own_suite_exposes_the_root_suite_once(project: PackProject) -> None:
    project.pack("packs/notes", presets={"lenient": {}})
    project.select(["./packs/notes", "./packs/notes/lenient"], ["./packs/notes", "./packs/notes/lenient"])
    suite = project.discover()
    assert codes(suite) == []
    assert names(suite) == [("writes-hello", "local"), (PACK_SCENARIO, "./packs/notes")]


def test_an_include_of_a_broken_selection_is_reported_once(project: PackProject) -> None:
    project.select(["@acme/absent"], ["@acme/absent"])
    assert [c for c, _, _ in codes(project.discover())] == ["eval-package-unresolved"]


@pytest.mark.parametrize(("project_host", "pack_host"), [("claude-code", "opencode"), ("opencode", "claude-code")])
def test_a_suite_for_the_other_host_fails_before_execution(project: PackProject, project_host: str, pack_host: str) -> None:
    project.pack("packs/neutral", scenarios=[pack_scenario("neutral-notes")])
    project.pack("packs/bound", suite={"host": pack_host, "scenarios": "eval/scenarios/*.eval.json"})
    project.select(["./packs/neutral", "./packs/bound"], ["./packs/neutral", "./packs/bound"], host=project_host)
    suite = project.discover()
    problem = only(suite, "eval-pack-host-incompatible")
    assert (problem.file, problem.location) == ("atlante.jsonc", "$.eval.include[1]")
    assert pack_host in problem.message and project_host in problem.message
    assert "packs/bound/atlante.jsonc at $.eval.host" in problem.message
    # the incompatible suite is neither run under the other host nor silently dropped into the run
    assert PACK_SCENARIO not in [n for n, _ in names(suite)]


@pytest.mark.parametrize("project_host", ["claude-code", "opencode"])
def test_a_host_neutral_suite_runs_under_either_host(project: PackProject, project_host: str) -> None:
    project.pack("packs/notes")
    project.select(["./packs/notes"], ["./packs/notes"], host=project_host)
    suite = project.discover()
    assert codes(suite) == []
    assert (PACK_SCENARIO, "./packs/notes") in names(suite)


@pytest.mark.parametrize("host", ["claude-code", "opencode"])
def test_a_suite_declared_for_the_project_host_runs(project: PackProject, host: str) -> None:
    project.pack("packs/notes", suite={"host": host, "scenarios": "eval/scenarios/*.eval.json"})
    project.select(["./packs/notes"], ["./packs/notes"], host=host)
    suite = project.discover()
    assert codes(suite) == [] and (PACK_SCENARIO, "./packs/notes") in names(suite)


def test_pack_metadata_is_not_inherited_into_the_project_configuration(project: PackProject) -> None:
    project.pack("packs/notes", suite={"host": "opencode", "scenarios": "eval/scenarios/*.eval.json",
                                       "fixtures": "eval/fixtures", "report": "eval/report.json"})
    project.select(["./packs/notes"], ["./packs/notes"], host="opencode", model="anthropic/claude-x", budget={"trials": 2})
    suite = project.discover()
    assert codes(suite) == []
    assert suite.eval is not None
    assert (suite.eval.host, suite.eval.model, suite.eval.budget.trials) == ("opencode", "anthropic/claude-x", 2)
    assert suite.eval.scenarios == "eval/scenarios/*.eval.json*"  # the project's glob, not the pack's


def test_a_pack_suite_glob_that_matches_nothing_is_located_in_the_pack(project: PackProject) -> None:
    project.pack("packs/notes", presets={"strict": {"eval": {"scenarios": "eval/none/*.eval.json"}}})
    project.select(["./packs/notes/strict"], ["./packs/notes/strict"])
    problem = only(project.discover(), "eval-scenario-invalid")
    assert (problem.file, problem.location) == ("packs/notes/atlante.jsonc", "$.presets.strict.eval.scenarios")


def test_names_are_unique_across_local_and_included_suites(project: PackProject) -> None:
    project.pack("node_modules/@acme/notes-pack", scenarios=[pack_scenario("writes-hello")])
    project.select(["@acme/notes-pack"], ["@acme/notes-pack"])
    problem = only(project.discover(), "eval-scenario-duplicate")
    both = problem.file + " " + problem.message
    assert "eval/scenarios/main.eval.json (local)" in both
    assert "node_modules/@acme/notes-pack/eval/scenarios/writes-hello.eval.json" in both
    assert problem.location == "$.name"


def test_names_are_unique_across_two_included_suites(project: PackProject) -> None:
    project.pack("packs/one")
    project.pack("packs/two")
    project.select(["./packs/one", "./packs/two"], ["./packs/one", "./packs/two"])
    problem = only(project.discover(), "eval-scenario-duplicate")
    assert problem.file == f"packs/two/eval/scenarios/{PACK_SCENARIO}.eval.json"
    assert f"packs/one/eval/scenarios/{PACK_SCENARIO}.eval.json (./packs/one)" in problem.message


def test_the_scenario_filter_never_opts_a_pack_in(project: PackProject) -> None:
    project.pack("packs/notes")
    project.select(["./packs/notes"])
    suite = project.discover(names=[PACK_SCENARIO])
    problem = only(suite, "eval-scenario-filter-empty")
    assert problem.location == "--atlante-scenario"
    assert suite.scenarios == []


def test_the_scenario_filter_selects_among_included_suites(project: PackProject) -> None:
    project.pack("packs/notes")
    project.select(["./packs/notes"], ["./packs/notes"])
    suite = project.discover(names=[PACK_SCENARIO])
    assert codes(suite) == [] and names(suite) == [(PACK_SCENARIO, "./packs/notes")]


def test_a_pack_scenario_needs_its_script_beside_it_in_scripted_mode(project: PackProject) -> None:
    project.pack("packs/notes")
    (project.root / f"packs/notes/eval/scenarios/scripted/{PACK_SCENARIO}.json").unlink()
    project.select(["./packs/notes"], ["./packs/notes"])
    problem = only(project.discover(scripted=True), "eval-script-missing")
    assert (problem.file, problem.location) == (f"packs/notes/eval/scenarios/{PACK_SCENARIO}.eval.json", "$.name")
