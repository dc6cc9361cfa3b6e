"""An xdist eval run and pytest's numbered base temp directories (``pytest-of-<user>/pytest-N``).

xdist asks the controller for pytest's base temp directory; left to pytest, that makes a new
numbered one and, once the session ends — after the report is written — removes every numbered
directory but the newest three: the user's other pytest runs', whatever they hold, long after the
eval's report was written.  The run gets a base temp directory of its own instead
(``run/outputs.own_basetemp``), removed at its end.  A fake host (``fakehost.py``) for speed: this
is the runner's behaviour, not a host's.
"""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import Project, config_doc, scenario_doc
from fakehost import fake_env, install_fake_claude


def eval_argv(project: Project, out: Path, *args: str) -> list[str]:
    # Not pytester's runpytest_subprocess: it adds a --basetemp of its own, and a user's run has none.
    return [sys.executable, "-m", "pytest", "--atlante-eval", "--atlante-project", str(project.root),
            "--atlante-out", str(out), "--atlante-isolation", "off", "-p", "no:cacheprovider",
            "--rootdir", str(project.root), "-q", *args]


def test_an_xdist_run_leaves_other_runs_temp_directories_alone_and_removes_its_own(
    atlante_project: Project, tmp_path: Path
) -> None:
    install_fake_claude(tmp_path / "fakebin")
    atlante_project.scenario(scenario_doc(task={"fixture": "eval/fixtures/app", "prompt": "FAKE:" + json.dumps({"usage": [10]})},
                                          checks=[{"type": "file-exists", "path": "README.md"}]))
    atlante_project.config(config_doc(budget={"trials": 2}))
    atlante_project.build()
    # Five earlier runs' numbered directories, none of them locked (their runs ended).
    numbered = tmp_path / "temproot" / f"pytest-of-{getpass.getuser()}"
    numbered.mkdir(parents=True, mode=0o700)
    earlier = [numbered / f"pytest-{n}" for n in range(1, 6)]
    for path in earlier:
        path.mkdir()
        (path / "kept.txt").write_text("another run's files\n")
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    env = {**os.environ, **fake_env(tmp_path / "fakebin"), "TMPDIR": str(private_tmp),
           "PYTEST_DEBUG_TEMPROOT": str(tmp_path / "temproot")}
    env = {name: value for name, value in env.items() if not name.startswith("PYTEST_XDIST")}
    done = subprocess.run(eval_argv(atlante_project, tmp_path / "out", "-n", "2"), cwd=atlante_project.root, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in numbered.iterdir()) == [p.name for p in earlier]  # none removed, none added
    assert all((p / "kept.txt").is_file() for p in earlier)
    assert list(private_tmp.iterdir()) == []  # the run's own base temp directory went at its end


def test_a_basetemp_the_user_names_is_theirs(atlante_project: Project, tmp_path: Path) -> None:
    install_fake_claude(tmp_path / "fakebin")
    atlante_project.scenario(scenario_doc(task={"fixture": "eval/fixtures/app", "prompt": "FAKE:" + json.dumps({"usage": [10]})},
                                          checks=[{"type": "file-exists", "path": "README.md"}]))
    atlante_project.build()
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    basetemp = tmp_path / "mine"
    env = {**os.environ, **fake_env(tmp_path / "fakebin"), "TMPDIR": str(private_tmp)}
    env = {name: value for name, value in env.items() if not name.startswith("PYTEST_XDIST")}
    done = subprocess.run(eval_argv(atlante_project, tmp_path / "out", "-n", "2", "--basetemp", str(basetemp)),
                          cwd=atlante_project.root, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert basetemp.is_dir()  # made by pytest for xdist and left there, as pytest leaves it
    assert list(private_tmp.iterdir()) == []
