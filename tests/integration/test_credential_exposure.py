"""A run whose agents could read a real credential says so once, and ``eval.credentials:
"stand-in-only"`` refuses it before any session (issue 38, item 1; run/credentials.py).

Driven by the fake host (``fakehost.py``) for speed: which credential a trial holds is decided by the
runner (the provider mode, the isolation), not by the CLI; the real CLIs' side is
``test_stand_ins_real.py``.  Without namespace isolation the agent runs as the runner's user beside
it, so it can read the runner's environment: every such real-provider trial is exposed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import Project, config_doc, scenario_doc
from fakehost import install_fake_claude
from pytest_atlante.run.credentials import CODE
from test_shards import env_for, pytest_run

pytestmark = pytest.mark.timeout(300)


def project(atlante_project: Project, tmp_path: Path, *, isolation: str, credentials: str | None) -> Path:
    install_fake_claude(tmp_path / "fakebin")
    sessions = tmp_path / "sessions.log"
    doc = config_doc(isolation=isolation, budget={"trials": 2})
    if credentials is not None:
        doc["version"] = "0.4"
        doc["eval"]["credentials"] = credentials
    atlante_project.config(doc)
    fake = {"usage": [10], "write": {"hello.txt": "hello"}, "sessions": str(sessions)}
    atlante_project.scenario(scenario_doc(task={"fixture": "eval/fixtures/app", "prompt": "FAKE:" + json.dumps(fake)},
                                          checks=[{"type": "file-exists", "path": "hello.txt"}]))
    atlante_project.build()
    return sessions


def trials(out: Path) -> list[dict[str, Any]]:
    report = json.loads((out / "report.json").read_text())
    return [trial for scenario in report["scenarios"] for trial in scenario["trials"]]


def test_exposed_trials_get_one_warning_line_naming_the_host_and_how_many(atlante_project: Project,
                                                                          tmp_path: Path) -> None:
    project(atlante_project, tmp_path, isolation="off", credentials=None)
    # Under xdist: the controller counts the workers' records.
    result = pytest_run(atlante_project, tmp_path / "out", env_for(tmp_path), "-n", "2")
    text = result.stdout + result.stderr
    assert result.returncode == 0, text
    assert [t["credentialExposed"] for t in trials(tmp_path / "out")] == [True, True]
    warnings = [line for line in text.splitlines() if "could read a real credential" in line]
    assert warnings == ["atlante: warning: in 2 trial(s) the agent could read a real credential — claude-code (2): "
                        "no namespace isolation: the agent runs as the runner's user, beside it; "
                        "eval.credentials \"stand-in-only\" refuses such a run (docs/integrity.md, \"Credentials\")"], text


def test_stand_in_only_refuses_an_exposed_run_before_any_session(atlante_project: Project, tmp_path: Path) -> None:
    sessions = project(atlante_project, tmp_path, isolation="off", credentials="stand-in-only")
    result = pytest_run(atlante_project, tmp_path / "out", env_for(tmp_path))
    text = result.stdout + result.stderr
    assert result.returncode == 3, text
    assert CODE in text and "$.eval.credentials" in text and "no namespace isolation" in text, text
    assert not sessions.exists()  # no host session started
    assert trials(tmp_path / "out") == []


def test_stand_in_only_admits_a_run_whose_agents_hold_stand_ins(atlante_project: Project, tmp_path: Path) -> None:
    project(atlante_project, tmp_path, isolation="namespace", credentials="stand-in-only")
    result = pytest_run(atlante_project, tmp_path / "out", env_for(tmp_path))
    text = result.stdout + result.stderr
    assert result.returncode == 0, text
    assert [t["credentialExposed"] for t in trials(tmp_path / "out")] == [False, False]
    assert "could read a real credential" not in text
