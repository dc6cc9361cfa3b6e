"""Collection: node ids, filters, --collect-only, and ordinary pytest runs left untouched."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import pytest

from conftest import Project, config_doc, copy_example, scenario_doc

EXAMPLE_IDS = [
    "eval/scenarios/docs.eval.jsonc::documents-usage[trial-1]",
    "eval/scenarios/greeter.eval.json::adds-farewell[trial-1]",
    "eval/scenarios/settings.eval.json::keeps-settings-untouched[trial-1]",
    "packs/docstring-pack/eval/scenarios/module-docstring.eval.json::adds-module-docstring[trial-1]",
]


def collect(pytester: pytest.Pytester, root: Path, *args: str) -> tuple[int, list[str], str]:
    result = pytester.runpytest_inprocess("--atlante-eval", "--atlante-project", str(root), "--collect-only", "-q",
                                          "-p", "no:cacheprovider", "--rootdir", str(root), *args)
    lines = [line for line in result.stdout.lines if "::" in line]
    return int(result.ret), lines, result.stdout.str()


def test_example_project_collects_the_expected_ids(pytester: pytest.Pytester, tmp_path: Path) -> None:
    from pytest_atlante.suite.build import build

    root = copy_example(tmp_path)
    build(root)
    status, ids, text = collect(pytester, root)
    assert status == 0, text
    assert ids == EXAMPLE_IDS


def test_trials_per_scenario_give_one_item_each(pytester: pytest.Pytester, atlante_project: Project) -> None:
    from conftest import config_doc

    atlante_project.config(config_doc(budget={"trials": 3}))
    atlante_project.build()
    status, ids, text = collect(pytester, atlante_project.root)
    assert status == 0, text
    assert ids == [f"eval/scenarios/main.eval.json::writes-hello[trial-{n}]" for n in (1, 2, 3)]


def test_dash_k_and_scenario_filter(pytester: pytest.Pytester, atlante_project: Project) -> None:
    atlante_project.scenario(scenario_doc(name="second-one"), "eval/scenarios/second.eval.jsonc")
    status, ids, _ = collect(pytester, atlante_project.root, "-k", "second")
    assert status == 0 and ids == ["eval/scenarios/second.eval.jsonc::second-one[trial-1]"]
    status, ids, _ = collect(pytester, atlante_project.root, "--atlante-scenario", "writes-hello")
    assert status == 0 and ids == ["eval/scenarios/main.eval.json::writes-hello[trial-1]"]


def test_jsonc_scenarios_with_comments_are_collected_and_other_suffixes_are_not(pytester: pytest.Pytester, atlante_project: Project) -> None:
    atlante_project.write("eval/scenarios/extra.eval.jsonc", "// comment\n" + __import__("json").dumps(scenario_doc(name="from-jsonc")) + "\n")
    atlante_project.write("eval/scenarios/stale.eval.json.bak", "not json at all")
    status, ids, text = collect(pytester, atlante_project.root)
    assert status == 0, text
    assert "eval/scenarios/extra.eval.jsonc::from-jsonc[trial-1]" in ids
    assert not any(".bak" in i for i in ids)


def test_reportinfo_points_at_the_scenario_line(pytester: pytest.Pytester, atlante_project: Project) -> None:
    atlante_project.write("eval/scenarios/main.eval.json", __import__("json").dumps(scenario_doc(), indent=2))
    items, _ = pytester.inline_genitems("--atlante-eval", "--atlante-project", str(atlante_project.root),
                                        "--rootdir", str(atlante_project.root), "-p", "no:cacheprovider")
    path, line, label = items[0].reportinfo()
    text = Path(path).read_text().splitlines()
    assert '"name": "writes-hello"' in text[line]
    assert label == "writes-hello[trial-1]"  # as a parametrized test's: PyCharm re-runs one test from it


def test_without_the_flag_nothing_changes(pytester: pytest.Pytester, atlante_project: Project) -> None:
    atlante_project.write("tests/test_plain.py", "def test_one():\n    assert True\n\ndef test_two():\n    assert False\n")
    os.chdir(atlante_project.root)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--rootdir", str(atlante_project.root), "tests")
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == 1
    assert "atlante:" not in result.stdout.str() and "atlante eval" not in result.stdout.str()
    assert not (atlante_project.root / ".atlante" / "eval").exists()


def test_plain_pytest_without_atlante_config_is_unaffected(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a="def test_ok():\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    empty = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-k", "nothing_matches")
    assert empty.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_help_documents_every_option(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("--help")
    text = result.stdout.str()
    for option in ("--atlante-eval", "--atlante-scenario", "--atlante-out", "--atlante-keep", "--atlante-project", "--atlante-scripted"):
        assert option in text


def test_example_query_cases_join_ordinary_runs_only(pytester: pytest.Pytester, tmp_path: Path) -> None:
    root = copy_example(tmp_path)
    os.chdir(root)
    result = pytester.runpytest_inprocess("--collect-only", "-q", "-p", "no:cacheprovider", "-c", str(root / "pytest.ini"))
    ids = [line for line in result.stdout.lines if "::" in line]
    assert "tests/test_greeter.py::test_greet_uses_the_name" in ids
    assert "benchmarks/atlas/query-corpus.json::symbol-lookup" in ids
    assert not any("eval.json" in i for i in ids)


def test_an_eval_run_collects_scenarios_only_even_beside_test_modules(pytester: pytest.Pytester, atlante_project: Project) -> None:
    # atlante passes the scenario directories to pytest; what else they hold stays out of the run
    atlante_project.write("eval/scenarios/test_beside.py", "def test_beside():\n    assert False\n")
    atlante_project.write("eval/scenarios/nested/deeper.eval.json", json.dumps(scenario_doc(name="deeper")))
    atlante_project.write("eval/scenarios/nested/test_deeper.py", "def test_deeper():\n    assert False\n")
    atlante_project.config(config_doc(scenarios="eval/**/*.eval.json"))
    status, ids, text = collect(pytester, atlante_project.root)
    assert status == 0, text
    assert ids == ["eval/scenarios/main.eval.json::writes-hello[trial-1]",
                   "eval/scenarios/nested/deeper.eval.json::deeper[trial-1]"]


def test_collection_plan_walks_each_directory_once(tmp_path: Path) -> None:
    from pytest_atlante.suite.discovery import collection_plan

    root = tmp_path / "root"
    files = [root / "a/x.eval.json", root / "a/b/y.eval.json", root / "a/b/c/z.eval.json", root / "d/w.eval.json",
             tmp_path / "pack/p.eval.json"]
    args, allowed = collection_plan(files, root)
    assert args == [str(root / "a"), str(root / "d"), str(tmp_path / "pack/p.eval.json")]
    assert allowed == {*files, root / "a", root / "a/b", root / "a/b/c", root / "d"}


def test_trials_get_the_fixtures_of_their_own_directory(pytester: pytest.Pytester, atlante_project: Project) -> None:
    # Trials of one directory share one fixture resolution (collection resolves once per
    # directory); a conftest of one directory must still reach only the trials below it.
    atlante_project.config(config_doc(scenarios="eval/scenarios/**/*.eval.json", budget={"trials": 2}))
    for name, folder in (("first", "a"), ("second", "a"), ("third", "b")):
        atlante_project.scenario(scenario_doc(name=name), f"eval/scenarios/{folder}/{name}.eval.json")
    (atlante_project.root / "eval" / "scenarios" / "main.eval.json").unlink()
    atlante_project.write("eval/scenarios/a/conftest.py",
                          "import pytest\n@pytest.fixture(autouse=True)\ndef only_in_a():\n    pass\n")
    seen = atlante_project.root / "fixtures.json"
    atlante_project.write("conftest.py", (
        "import json\n"
        "def pytest_collection_modifyitems(items):\n"
        f"    open({str(seen)!r}, 'w').write(json.dumps({{i.nodeid: 'only_in_a' in i.fixturenames for i in items}}))\n"))
    atlante_project.build()
    status, ids, text = collect(pytester, atlante_project.root)
    assert status == 0 and len(ids) == 6, text
    assert json.loads(seen.read_text()) == {
        **{f"eval/scenarios/a/{name}.eval.json::{name}[trial-{n}]": True for name in ("first", "second") for n in (1, 2)},
        **{f"eval/scenarios/b/third.eval.json::third[trial-{n}]": False for n in (1, 2)},
    }


class CleanupStack:
    """The one part of ``pytest.Config`` the collector pause uses."""

    def __init__(self) -> None:
        self.cleanups: list[Callable[[], None]] = []

    def add_cleanup(self, func: Callable[[], None]) -> None:
        self.cleanups.append(func)


def test_the_collector_is_off_until_collection_ends_then_runs_with_the_run_frozen() -> None:
    import gc

    from pytest_atlante.run.gcpause import CollectionGcPause

    gc.collect()  # thaws what an earlier in-process run of this worker left frozen
    config = CleanupStack()
    before = gc.get_freeze_count()
    pause = CollectionGcPause(config)  # type: ignore[arg-type]
    try:
        assert not gc.isenabled()
        kept = [[n] for n in range(1000)]  # the suite's documents and items, alive for the run
        pause.pytest_collection_finish(None)  # type: ignore[arg-type]
        assert gc.isenabled() and gc.get_freeze_count() >= before + len(kept)
        pause.pytest_runtestloop(None)  # type: ignore[arg-type]  # a second resume changes nothing
        pause.pytest_unconfigure(None)  # type: ignore[arg-type]
        assert gc.get_freeze_count() >= before + len(kept)  # still frozen for pytest's cleanups
        assert len(config.cleanups) == 1
        config.cleanups[0]()
        gc.collect(1)  # a young collection never looks at old objects: nothing to thaw for it
        assert gc.isenabled() and gc.get_freeze_count() >= before + len(kept)
        gc.collect()
        assert gc.get_freeze_count() == before and pause.finished
        CollectionGcPause(CleanupStack()).release()  # type: ignore[arg-type]  # the next run's pause
        assert pause.thaw_before_full_collection not in gc.callbacks  # took out the finished thaw
    finally:
        gc.enable()
        gc.collect()


def test_a_collector_the_user_switched_off_stays_off_and_nothing_is_frozen() -> None:
    import gc

    from pytest_atlante.run.gcpause import CollectionGcPause

    gc.collect()
    before = gc.get_freeze_count()
    gc.disable()
    try:
        pause = CollectionGcPause(CleanupStack())  # type: ignore[arg-type]
        pause.pytest_collection_finish(None)  # type: ignore[arg-type]
        assert not gc.isenabled() and gc.get_freeze_count() == before
        pause.pytest_unconfigure(None)  # type: ignore[arg-type]
        pause.release()
        assert not gc.isenabled() and pause.thaw_before_full_collection not in gc.callbacks
    finally:
        gc.enable()


THAW_AT_EXIT = """\
import gc, os, sys
from pytest_atlante.run.gcpause import CollectionGcPause

class Config:
    def add_cleanup(self, func):
        self.release = func

def seen(phase, info):
    if phase == "start" and sys.is_finalizing():
        os.write(1, b"frozen at exit: %d\\n" % gc.get_freeze_count())

config = Config()
pause = CollectionGcPause(config)
kept = [[n] for n in range(1000)]
pause.pytest_collection_finish(None)
config.release()
gc.callbacks.append(seen)   # after the pause's: sees what the pause left for the exit collection
"""


def test_the_interpreter_s_collection_at_exit_leaves_the_run_frozen(tmp_path: Path) -> None:
    # Thawing there would walk every document and item to free what the process returns anyway.
    import subprocess
    import sys

    script = tmp_path / "thaw_at_exit.py"
    script.write_text(THAW_AT_EXIT, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    frozen = [int(line.rsplit(":", 1)[1]) for line in done.stdout.splitlines() if line.startswith("frozen at exit")]
    assert frozen and frozen[0] >= 1000, done.stdout


def test_an_in_process_run_leaves_its_caller_s_collector_as_it_was(pytester: pytest.Pytester,
                                                                    atlante_project: Project) -> None:
    import gc

    class Probe:
        seen: ClassVar[list[bool]] = []

        def pytest_collection_modifyitems(self) -> None:
            self.seen.append(gc.isenabled())

        def pytest_runtestloop(self) -> None:
            self.seen.append(gc.isenabled())

    gc.collect()
    before = gc.get_freeze_count()
    result = pytester.runpytest_inprocess("--atlante-eval", "--atlante-project", str(atlante_project.root),
                                          "--collect-only", "-q", "-p", "no:cacheprovider",
                                          "--rootdir", str(atlante_project.root), plugins=[Probe()])
    assert result.ret == 0, result.stdout.str()
    assert Probe.seen == [False, True]  # off while collecting, on again for the test loop
    assert gc.isenabled()
    gc.collect()  # the caller's next full collection thaws the run and frees its cycles
    assert gc.get_freeze_count() == before


GC_PROBE = """\
import atexit, gc, json, os
import pytest

frozen_at_collections = []
collected = []

def record(phase, info):
    if phase == "start" and collected:
        frozen_at_collections.append(gc.get_freeze_count())

@pytest.hookimpl(trylast=True)
def pytest_collection_finish():
    collected.append(True)
    gc.callbacks.append(record)

atexit.register(lambda: open(os.environ["GC_PROBE_OUT"], "w").write(json.dumps(frozen_at_collections)))
"""


def test_pytest_s_own_collections_at_exit_do_not_walk_the_frozen_run(
        pytester: pytest.Pytester, atlante_project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    # A subprocess: pytester's in-process runs switch off pytest's collections at exit.
    pytester.makepyfile(gcprobe=GC_PROBE)
    out = pytester.path / "frozen.json"
    monkeypatch.setenv("GC_PROBE_OUT", str(out))
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    result = pytester.runpytest_subprocess("-p", "gcprobe", "--atlante-eval", "--atlante-project",
                                           str(atlante_project.root), "--collect-only", "-q",
                                           "-p", "no:cacheprovider", "--rootdir", str(atlante_project.root))
    assert result.ret == 0, result.stdout.str()
    frozen_at_collections = json.loads(out.read_text())
    # pytest 9.2's unraisableexception collects in its unconfigure and again in its cleanup:
    # both after the run was frozen, neither after it thawed (each would walk every document and item).
    assert len(frozen_at_collections) >= (2 if pytest.version_tuple >= (9, 2) else 0)
    assert 0 not in frozen_at_collections, frozen_at_collections
