"""Where a run finds its project and what it leaves there, driven by a fake host for speed.

``atlante eval`` and ``pytest --atlante-eval`` started two levels below the project find its
``atlante.jsonc`` (as pytest finds its rootdir) and write only under the project's ``.atlante/``;
a run started where there is no project writes nothing; each run records its selection, and
``eval.keepRuns`` removes the older run folders at the end of a run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT, SCENARIO_SCHEMA, Project, config_doc
from fakehost import fake_env, install_fake_claude
from pytest_atlante.report import runs


def fake_scenario(name: str) -> dict[str, object]:
    return {"$schema": SCENARIO_SCHEMA, "version": "0.1", "name": name,
            "task": {"fixture": "eval/fixtures/app", "prompt": "FAKE:" + json.dumps({"usage": [10]})},
            "checks": [{"type": "file-exists", "path": "README.md"}]}


@pytest.fixture
def fake_project(atlante_project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Project, dict[str, str]]:
    # The runs seal their reports with this HOME's key; the test reads them with the same one.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    bin_dir = tmp_path / "fakebin"
    install_fake_claude(bin_dir)
    atlante_project.scenario(fake_scenario("first"), "eval/scenarios/main.eval.json")
    atlante_project.scenario(fake_scenario("second"), "eval/scenarios/more.eval.jsonc")
    atlante_project.build()
    env = {**os.environ, **fake_env(bin_dir), "HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO_ROOT)}
    env.pop("XDG_STATE_HOME", None)
    return atlante_project, env


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("command", ["atlante eval", "pytest --atlante-eval", "pytest --atlante-eval -n 2"])
def test_a_run_two_levels_down_finds_the_project_and_writes_nothing_there(
        fake_project: tuple[Project, dict[str, str]], command: str) -> None:
    """Under xdist too: the workers' node ids of scenario files outside pytest's rootdir (the
    subdirectory) are the ones the controller expects, so the run is complete."""
    project, env = fake_project
    deep = project.root / "src" / "pkg"
    deep.mkdir(parents=True)
    (deep / "module.py").write_text("x = 1\n")
    argv = ([sys.executable, "-m", "pytest_atlante.cli", "eval"] if command == "atlante eval"
            else [sys.executable, "-m", "pytest", *command.split()[1:]])
    done = subprocess.run([*argv, "--atlante-isolation", "off", "-p", "no:cacheprovider"], cwd=deep, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert tree(deep) == {"module.py"}, done.stdout
    [entry] = runs.list_runs(project.root)
    assert entry.status == "complete" and entry.report is not None
    # both scenarios, the .eval.jsonc one included (the configured glob is *.eval.json*)
    assert sorted(s.name for s in entry.report.scenarios) == ["first", "second"]
    assert "eval/scenarios/more.eval.jsonc::second[trial-1]" in done.stdout


def test_a_run_where_there_is_no_project_writes_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "nowhere" / "deeper"
    empty.mkdir(parents=True)
    done = subprocess.run([sys.executable, "-m", "pytest_atlante.cli", "eval", "-p", "no:cacheprovider"], cwd=empty,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "eval-config-missing" in done.stdout and "atlante init" in done.stdout
    assert tree(tmp_path / "nowhere") == {"deeper"}


def test_keep_runs_removes_older_runs_and_a_k_run_is_partial(fake_project: tuple[Project, dict[str, str]]) -> None:
    project, env = fake_project
    project.config(config_doc(keepRuns=2))
    argv = [sys.executable, "-m", "pytest_atlante.cli", "eval", "--atlante-isolation", "off", "-p", "no:cacheprovider"]
    for extra in ([], [], ["-k", "second"]):
        done = subprocess.run([*argv, *extra], cwd=project.root, env=env, capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
    entries = runs.list_runs(project.root)
    assert [e.status for e in entries] == ["partial", "complete"]
    partial = entries[0].report
    assert partial is not None and partial.selection is not None
    assert (partial.selectedTrials, partial.selection.suiteTrials, partial.selection.narrowedBy) == (1, 2, ["-k second"])
    listed = subprocess.run([sys.executable, "-m", "pytest_atlante.cli", "runs"], cwd=project.root / "eval", env=env,
                            capture_output=True, text=True, timeout=60, check=True).stdout
    assert "1/2 trials (-k second)" in listed and "2/2 trials" in listed, listed


def test_a_scenario_the_glob_misses_is_named_in_the_collect_and_eval_output(
        fake_project: tuple[Project, dict[str, str]]) -> None:
    """The glob `*.eval.json` (what `atlante init` wrote before) misses a scenario saved as
    .eval.jsonc, and a document whose $schema is a scenario URI is no scenario to it either: both
    are named, in `--collect-only` (an IDE's collection) as in the run; node_modules is not looked in."""
    project, env = fake_project
    project.config(config_doc(scenarios="eval/scenarios/*.eval.json"))
    project.write("notes/draft.json", {"$schema": SCENARIO_SCHEMA, "version": "0.1", "name": "draft"})
    project.write("node_modules/some-pack/x.eval.json", {})
    project.write("package.json", {"name": "app"})
    argv = [sys.executable, "-m", "pytest_atlante.cli", "eval", "--atlante-isolation", "off", "-p", "no:cacheprovider"]
    for extra in (["--collect-only"], []):
        done = subprocess.run([*argv, *extra], cwd=project.root, env=env, capture_output=True, text=True, timeout=300,
                              check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        warned = [line for line in done.stdout.splitlines() if "looks like a scenario document" in line]
        assert len({line for line in warned}) == 2, done.stdout
        assert any(line.startswith("atlante: warning: eval/scenarios/more.eval.jsonc looks like") for line in warned)
        assert any(line.startswith("atlante: warning: notes/draft.json looks like") for line in warned)
        assert all("eval.scenarios ('eval/scenarios/*.eval.json')" in line for line in warned)
