"""``atlante init`` in an empty directory, then what the README's quick start runs next, through
the real CLIs and the scripted model: ``atlante build``, ``atlante selftest`` (the scenario is
``sound``) on each host and ``atlante eval --scripted``, each exit 0; a second init changes nothing.
``EVERY_HOST``: what init writes must be sound on every host, each building and running it its own way;
the eval command and the second init are the same on every host (``ONE_HOST``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import EVERY_HOST, ONE_HOST
from pytest_atlante.report.model import EvalReport

pytestmark = pytest.mark.hosts


def atlante(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_atlante.cli", *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=600, check=False)


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".atlante" not in p.relative_to(root).parts}


def initialised(tmp_path: Path, env: dict[str, str]) -> Path:
    """``atlante init`` in an empty directory, then ``atlante build``: the project the README's quick start runs."""
    project = tmp_path / "new-project"
    created = atlante(tmp_path, env, "init", str(project))
    assert created.returncode == 0, created.stderr
    assert "atlante init: created atlante.jsonc" in created.stdout
    built = atlante(project, env, "build")
    assert built.returncode == 0, built.stdout + built.stderr
    return project


@pytest.mark.parametrize("host", EVERY_HOST)
def test_init_then_selftest_on_each_host(tmp_path: Path, hosts_path: Callable[[], str], host: str) -> None:
    # The self-test's reference trial is the scenario's scripted trial through this host's CLI,
    # exactly as `atlante eval --scripted` runs it: "sound" says what init wrote runs on this host.
    env = {**os.environ, "PATH": hosts_path()}
    project = initialised(tmp_path, env)
    selftest = atlante(project, env, "selftest", "--host", host, "--out", str(tmp_path / "selftest"),
                       "-p", "no:cacheprovider")
    assert selftest.returncode == 0, selftest.stdout[-4000:] + selftest.stderr[-2000:]
    text = selftest.stdout + selftest.stderr
    assert "Exit" not in text and "Warning" not in text, text[-4000:]
    [scenario] = json.loads((tmp_path / "selftest" / "selftest.json").read_text())["scenarios"]
    assert (scenario["name"], scenario["status"]) == ("adds-farewell", "sound")


def test_init_then_scripted_eval_and_a_second_init(tmp_path: Path, hosts_path: Callable[[], str]) -> None:
    # The quick start's `atlante eval --scripted` and a second init are the same on every host (each
    # host's scripted trial of this scenario is its self-test's reference trial, above): ONE_HOST.
    env = {**os.environ, "PATH": hosts_path()}
    project = initialised(tmp_path, env)
    # One trial, not the three init writes: the scripted model plays each the same way, and the
    # CI's 20 minutes are spent on real CLIs (the file is put back before the second init below).
    config = project / "atlante.jsonc"
    written = config.read_text()
    assert '"trials": 3' in written
    config.write_text(written.replace('"trials": 3', '"trials": 1'))
    out = tmp_path / "eval"
    run = atlante(project, env, "eval", "--scripted", "--host", ONE_HOST, "--out", str(out), "-p", "no:cacheprovider")
    config.write_text(written)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    report = EvalReport.model_validate_json((out / "report.json").read_text())
    assert report.host is not None and report.host.name == ONE_HOST and report.scripted
    assert [t.verdict for s in report.scenarios for t in s.trials] == ["pass"]
    text = run.stdout + run.stderr
    assert "Exit" not in text and "Warning" not in text and "scripted run: answered offline by scripted-model" in text

    before = files(project)
    again = atlante(tmp_path, env, "init", str(project))
    assert again.returncode == 0 and "nothing to do: every file is already there" in again.stdout
    assert files(project) == before


AGENT = """---
name: debugger
description: Debugging specialist for errors and test failures.
tools: Read, Edit, Bash, Grep
model: sonnet
---
You find the cause of a failure and fix it with the smallest change.
"""


@pytest.mark.parametrize("host", EVERY_HOST)
def test_an_adopted_agent_gets_a_starting_scenario_that_is_sound_on_each_host(tmp_path: Path, host: str,
                                                                                hosts_path: Callable[[], str]) -> None:
    """The scenario init writes for an adopted agent runs that agent (``task.agent``) and is sound:
    the untouched fixture fails its checks and the scripted run, through the agent, passes them."""
    project = tmp_path / "has-harness"
    (project / ".claude/agents").mkdir(parents=True)
    (project / ".claude/agents/debugger.md").write_text(AGENT)
    env = {**os.environ, "PATH": hosts_path()}
    created = atlante(tmp_path, env, "init", str(project))
    assert created.returncode == 0 and "adopted agent debugger" in created.stdout, created.stdout + created.stderr
    assert (project / ".claude/agents/debugger.md").read_text() == AGENT
    built = atlante(project, env, "build")
    assert built.returncode == 0, built.stdout + built.stderr
    out = tmp_path / "selftest"
    selftest = atlante(project, env, "selftest", "--host", host, "--out", str(out), "-p", "no:cacheprovider")
    assert selftest.returncode == 0, selftest.stdout[-4000:] + selftest.stderr[-2000:]
    [scenario] = json.loads((out / "selftest.json").read_text())["scenarios"]
    assert (scenario["name"], scenario["status"]) == ("debugger-starter", "sound")
