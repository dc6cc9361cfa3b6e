"""Pack problems end a real ``pytest --atlante-eval`` run with exit 2 and located diagnostics
(serially and with ``-n 2``); pack trials are collected under the pack's path; the example pack's
published report passes ``atlante pack report``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO_ROOT, copy_example

from .conftest import PACK_SCENARIO, PackProject, pack_scenario

Mutation = Callable[[PackProject], Any]
M = "atlante.jsonc"
SCOPED = "node_modules/@acme/notes-pack"


def installed_unselected(p: PackProject) -> None:
    p.pack(SCOPED)
    p.select([], ["@acme/notes-pack"])


def no_suite(p: PackProject) -> None:
    p.pack("packs/plain", no_suite=True)
    p.select(["./packs/plain"], ["./packs/plain"])


def wrong_host(p: PackProject) -> None:
    p.pack(SCOPED, suite={"host": "opencode", "scenarios": "eval/scenarios/*.eval.json"})
    p.select(["@acme/notes-pack"], ["@acme/notes-pack"])
    p.build()


def unknown_preset(p: PackProject) -> None:
    p.pack(SCOPED, presets={"strict": {}})
    p.select(["@acme/notes-pack/lenient"])


def escaping_fixture(p: PackProject) -> None:
    p.pack("packs/notes", scenarios=[pack_scenario(fixture="../../eval/fixtures/app")])
    p.select(["./packs/notes"], ["./packs/notes"])
    p.build()


def duplicate_name(p: PackProject) -> None:
    p.pack("packs/notes", scenarios=[pack_scenario("writes-hello")])
    p.select(["./packs/notes"], ["./packs/notes"])
    p.build()


def unsafe_suite_path(p: PackProject) -> None:
    p.pack("packs/notes", suite={"scenarios": "eval/scenarios/*.eval.json", "report": "../report.json"})
    p.select(["./packs/notes"])


def selected_not_included(p: PackProject) -> None:
    p.pack("packs/notes")
    p.select(["./packs/notes"])
    p.build()


# (id, mutation, extra args, code, file, location)
CASES: list[tuple[str, Mutation, list[str], str, str, str]] = [
    ("include-installed-unselected", installed_unselected, [], "eval-include-unselected", M, "$.eval.include[0]"),
    ("include-no-suite", no_suite, [], "eval-include-no-suite", M, "$.eval.include[0]"),
    ("pack-host-incompatible", wrong_host, [], "eval-pack-host-incompatible", M, "$.eval.include[0]"),
    ("package-unknown-preset", unknown_preset, [], "eval-package-unresolved", M, "$.packages[0]"),
    ("pack-fixture-escapes", escaping_fixture, [], "eval-path-unsafe",
     f"packs/notes/eval/scenarios/{PACK_SCENARIO}.eval.json", "$.task.fixture"),
    ("pack-name-collides", duplicate_name, [], "eval-scenario-duplicate", "packs/notes/eval/scenarios/writes-hello.eval.json", "$.name"),
    ("pack-suite-path-unsafe", unsafe_suite_path, [], "eval-path-unsafe", "packs/notes/atlante.jsonc", "$.eval.report"),
    ("filter-never-opts-in", selected_not_included, ["--atlante-scenario", PACK_SCENARIO], "eval-scenario-filter-empty", "", "--atlante-scenario"),
]


def run_eval(pytester: pytest.Pytester, root: Path, extra: list[str], workers: int) -> tuple[int, dict[str, Any], str]:
    out = pytester.path / f"out-{workers}"
    args = ["--atlante-eval", "--atlante-project", str(root), "--atlante-out", str(out), "-p", "no:cacheprovider", *extra]
    result = pytester.runpytest_inprocess(*args, *(["-n", str(workers)] if workers else []))
    envelope = json.loads((out / "diagnostics.json").read_text()) if (out / "diagnostics.json").exists() else {}
    return int(result.ret), envelope, result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize(("mutate", "extra", "code", "file", "location"), [pytest.param(*row[1:], id=row[0]) for row in CASES])
def test_pack_problems_exit_2_with_a_located_diagnostic(pytester: pytest.Pytester, project: PackProject, mutate: Mutation,
                                                       extra: list[str], code: str, file: str, location: str) -> None:
    mutate(project)
    status, envelope, text = run_eval(pytester, project.root, extra, workers=0)
    assert status == 2, text
    assert "Traceback" not in text and "INTERNALERROR" not in text, text
    assert (code, file, location) in [(d["code"], d["file"], d["location"]) for d in envelope["diagnostics"]]
    assert all(d["message"] and d["hint"] for d in envelope["diagnostics"])
    assert code in text and "no trial was run" in text


def test_pack_problems_are_the_same_with_workers(pytester: pytest.Pytester, project: PackProject) -> None:
    wrong_host(project)
    serial = run_eval(pytester, project.root, [], workers=0)
    parallel = run_eval(pytester, project.root, [], workers=2)
    assert serial[0] == parallel[0] == 2
    assert serial[1] == parallel[1] and serial[1]["diagnostics"]


def collect(pytester: pytest.Pytester, root: Path, *args: str) -> tuple[int, list[str], str]:
    result = pytester.runpytest_inprocess("--atlante-eval", "--atlante-project", str(root), "--collect-only", "-q",
                                          "-p", "no:cacheprovider", "--rootdir", str(root), *args)
    return int(result.ret), [line for line in result.stdout.lines if "::" in line], result.stdout.str()


def test_pack_trials_are_collected_under_the_pack_path(pytester: pytest.Pytester, project: PackProject) -> None:
    project.pack(SCOPED, presets={"strict": {"eval": {"scenarios": "eval/strict/*.eval.json"}}})
    project.write(f"{SCOPED}/eval/strict/strict.eval.json", pack_scenario("strict-notes"))
    project.pack("packs/notes", scenarios=[pack_scenario("local-pack-notes")], agent="other-taker")
    project.select(["@acme/notes-pack/strict", "./packs/notes"], ["@acme/notes-pack/strict", "./packs/notes"])
    project.build()
    status, ids, text = collect(pytester, project.root)
    assert status == 0, text
    assert ids == [
        "eval/scenarios/main.eval.json::writes-hello[trial-1]",
        f"{SCOPED}/eval/strict/strict.eval.json::strict-notes[trial-1]",
        "packs/notes/eval/scenarios/local-pack-notes.eval.json::local-pack-notes[trial-1]",
    ]
    # the atlante_pack marker tells pack trials apart: -m selects them
    status, ids, _ = collect(pytester, project.root, "-m", "atlante_pack")
    assert status == 0 and len(ids) == 2 and all("eval/scenarios/main" not in i for i in ids)


def test_the_example_project_includes_its_local_pack(pytester: pytest.Pytester, tmp_path: Path) -> None:
    from pytest_atlante.suite.build import build

    root = copy_example(tmp_path)
    build(root)
    status, ids, text = collect(pytester, root)
    assert status == 0, text
    assert "packs/docstring-pack/eval/scenarios/module-docstring.eval.json::adds-module-docstring[trial-1]" in ids
    assert len(ids) == 4


def test_atlante_pack_report_refuses_what_the_example_pack_used_to_publish(tmp_path: Path) -> None:
    """The example pack publishes no report: the one it shipped was a scripted replay."""
    pack = REPO_ROOT / "example_project/packs/docstring-pack"
    done = subprocess.run([sys.executable, "-m", "pytest_atlante.cli", "pack", "report", str(pack)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, json.loads(done.stdout)["code"]) == (1, "report-not-declared"), done.stdout
    copy = tmp_path / "pack"
    shutil.copytree(pack, copy)
    config = copy / "atlante.jsonc"
    config.write_text(config.read_text().replace('"fixtures": "eval/fixtures",', '"fixtures": "eval/fixtures", "report": "eval/report.json",'))
    shutil.copy(REPO_ROOT / "tests/boundaries/data/scripted-pack-report.json", copy / "eval/report.json")
    done = subprocess.run([sys.executable, "-m", "pytest_atlante.cli", "pack", "report", str(copy)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, json.loads(done.stdout)["code"]) == (1, "report-scripted"), done.stdout
