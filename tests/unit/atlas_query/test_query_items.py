"""pytester: query-corpus cases as pytest items, their failure messages, the receipt, the fixture."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

ATLAS = Path(__file__).resolve().parents[3] / "example_project/benchmarks/atlas"
CORPUS = "benchmarks/atlas/query-corpus.json"
RECEIPT = ".atlante/atlas/query-regression.json"

CONFTEST = """
from pathlib import Path
from pytest_atlante.atlas.items import AtlasQueryPlugin

def pytest_configure(config):
    root = Path(str(config.rootpath))
    plugin = AtlasQueryPlugin(root, Path("benchmarks/atlas/query-corpus.json"), Path("benchmarks/atlas/{results}"))
    config.pluginmanager.register(plugin, "atlante-atlas")
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    target = pytester.path / "benchmarks/atlas"
    target.mkdir(parents=True)
    for name in ("query-corpus.json", "query-results.json", "query-results-regressed.json"):
        shutil.copy(ATLAS / name, target / name)
    pytester.makeconftest(CONFTEST.format(results="query-results.json"))
    return pytester


def _receipt(pytester: pytest.Pytester) -> dict[str, object]:
    data: dict[str, object] = json.loads((pytester.path / RECEIPT).read_text())
    return data


def test_cases_pass_and_receipt_is_written(project: pytest.Pytester) -> None:
    result = project.runpytest("-v")
    result.assert_outcomes(passed=7)
    result.stdout.fnmatch_lines([f"{CORPUS}::symbol-lookup PASSED*", f"{CORPUS}::pinned-flow PASSED*"])
    receipt = _receipt(project)
    assert receipt["schema"] == "agent-spec/atlas-eval/query-regression-v1"
    assert (receipt["passed"], receipt["complete"]) == (True, True)
    assert [c["case_id"] for c in receipt["cases"]][:2] == ["symbol-lookup", "flow-runtime-boundary"]  # type: ignore[attr-defined]


def test_failing_case_names_what_was_forbidden(project: pytest.Pytester) -> None:
    project.makeconftest(CONFTEST.format(results="query-results-regressed.json"))
    result = project.runpytest()
    result.assert_outcomes(passed=5, failed=2)
    result.stdout.fnmatch_lines([
        "*_ query case symbol-lookup _*",
        "forbidden symbols returned: basic::config::Config::save",
        "query case symbol-lookup (deterministic-fixture) in benchmarks/atlas/query-corpus.json",
    ])
    result.stdout.fnmatch_lines([
        "*_ query case flow-runtime-boundary _*",
        "missing expected paths: rb::main -> rb::dispatch -> rb::handlers::on_message",
    ])
    receipt = _receipt(project)
    assert receipt["passed"] is False
    assert receipt["summary"] == {"cases": 7, "passed": 5, "failed": 2, "tiers": {
        "deterministic-fixture": {"cases": 5, "passed": 3}, "pinned-repository": {"cases": 2, "passed": 2}}}


def test_items_are_collected_in_a_default_run_that_does_not_walk_the_corpus(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\ntestpaths = tests\n")
    project.mkdir("tests")
    (project.path / "tests/test_plain.py").write_text("def test_plain():\n    pass\n")
    result = project.runpytest("-k", "symbol or plain", "-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([f"{CORPUS}::symbol-lookup PASSED*", f"{CORPUS}::pinned-symbol-lookup PASSED*"])
    assert _receipt(project)["complete"] is False


def test_explicit_paths_elsewhere_do_not_add_query_items(project: pytest.Pytester) -> None:
    project.mkdir("tests")
    (project.path / "tests/test_plain.py").write_text("def test_plain():\n    pass\n")
    project.runpytest("tests").assert_outcomes(passed=1)
    assert not (project.path / RECEIPT).exists()


def test_single_case_node_id_runs_alone(project: pytest.Pytester) -> None:
    project.runpytest(f"{CORPUS}::pinned-flow").assert_outcomes(passed=1)


def test_fixture_supplies_fresh_observations(project: pytest.Pytester) -> None:
    # The configured results file passes; the fixture's fresh observations carry the regression.
    project.makeconftest(CONFTEST.format(results="query-results.json") + """
import json
import pytest

@pytest.fixture(scope="session")
def atlante_query_observations():
    path = Path(__file__).parent / "benchmarks/atlas/query-results-regressed.json"
    return json.loads(path.read_text())["observations"]
""")
    result = project.runpytest()
    result.assert_outcomes(passed=5, failed=2)
    result.stdout.fnmatch_lines(["forbidden symbols returned: basic::config::Config::save"])
    assert _receipt(project)["passed"] is False


def test_fixture_with_a_missing_observation_fails_with_the_diagnostic(project: pytest.Pytester) -> None:
    project.makeconftest(CONFTEST.format(results="query-results.json") + """
import json
import pytest

@pytest.fixture
def atlante_query_observations():
    doc = json.loads((Path(__file__).parent / "benchmarks/atlas/query-results.json").read_text())
    doc["observations"] = doc["observations"][1:]
    return doc
""")
    result = project.runpytest()
    result.assert_outcomes(failed=7)
    result.stdout.fnmatch_lines(["atlas-query-results-missing-observation: fixture atlante_query_observations*"])


def test_invalid_results_file_fails_items_with_its_diagnostic(project: pytest.Pytester) -> None:
    (project.path / "benchmarks/atlas/query-results.json").write_text('{"schema": "x"}')
    result = project.runpytest()
    result.assert_outcomes(failed=7)
    result.stdout.fnmatch_lines(["atlas-query-results-invalid: *query-results.json at $.schema*"])


def test_invalid_corpus_is_a_collection_error(project: pytest.Pytester) -> None:
    path = project.path / CORPUS
    doc = json.loads(path.read_text())
    doc["cases"][0]["allowed_ambiguity"] = 65
    path.write_text(json.dumps(doc))
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*atlas-query-corpus-ambiguity-range: *query-corpus.json at $.cases[[]0[]].allowed_ambiguity*"])


def test_invalid_corpus_outside_the_walk_is_a_collection_error(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\ntestpaths = tests\n")
    project.mkdir("tests")
    (project.path / "tests/test_plain.py").write_text("def test_plain():\n    pass\n")
    (project.path / CORPUS).write_text("{")
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*atlas-query-corpus-invalid*"])


def test_xdist_receipt_is_written_by_the_controller(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess("-n", "2", "-p", "xdist")
    result.assert_outcomes(passed=7)
    receipt = _receipt(project)
    assert receipt["summary"]["cases"] == 7 and receipt["complete"] is True  # type: ignore[index]
