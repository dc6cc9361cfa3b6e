"""A self-test reuses the reference run of a scenario whose inputs are unchanged since a sealed
earlier self-test (``report/selftest_reuse.py``), driven by the fake host (``fakehost.py``) for speed;
the real CLI's check is ``test_selftest_reuse_real.py``.

Each run is a subprocess (``pytest --atlante-eval --atlante-selftest``) writing under the project's
``.atlante/eval/``, where the next run looks; the fake host appends one line per host session to a
log, so a test counts the reference trials that really ran (outside its sandbox: isolation off).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import Project, config_doc, scenario_doc
from fakehost import fake_env, install_fake_claude
from pytest_atlante.report.selftest import SelftestReport

SCENARIOS = ("alpha", "beta")


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """Two scenarios, each on its own fixture, with a script: both sound."""
    install_fake_claude(tmp_path / "fakebin")
    project = Project(tmp_path / "project")
    project.config(config_doc())
    project.write("harness/helper.md", "You write small files.\n")
    project.write("harness/tidy/SKILL.md", "Keep files tidy.\n")
    for name in SCENARIOS:
        project.write(f"eval/fixtures/{name}/README.md", f"# {name}\n")
        spec = {"write": {"hello.txt": "hello\n"}, "sessions": str(tmp_path / "sessions.log")}
        project.scenario(scenario_doc(name, task={"fixture": f"eval/fixtures/{name}", "prompt": "FAKE:" + json.dumps(spec)}),
                         f"eval/scenarios/{name}.eval.json")
        project.script(name, [{"text": "Done."}])
    project.build()
    return project


def run_selftest(project: Project, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], SelftestReport, list[str]]:
    """One self-test; its report and the host sessions it started (the scenarios' trial dirs)."""
    log = tmp_path / "sessions.log"
    log.unlink(missing_ok=True)
    env = {**os.environ, **fake_env(tmp_path / "fakebin"), "XDG_STATE_HOME": str(tmp_path / "state")}
    argv = [sys.executable, "-m", "pytest", "--atlante-eval", "--atlante-selftest", "--atlante-project", str(project.root),
            "-p", "no:cacheprovider", "--rootdir", str(project.root), "--atlante-isolation", "off", *args]
    result = subprocess.run(argv, cwd=project.root, env=env, capture_output=True, text=True, timeout=300, check=False)
    runs = sorted((project.root / ".atlante" / "eval").iterdir())
    path = runs[-1] / "selftest.json"
    assert path.is_file(), result.stdout + result.stderr
    sessions = log.read_text().split() if log.exists() else []
    return result, SelftestReport.model_validate_json(path.read_text()), sessions


def by_name(report: SelftestReport) -> dict[str, Any]:
    return {s.name: s for s in report.scenarios}


def test_the_second_self_test_reuses_every_unchanged_reference(project: Project, tmp_path: Path) -> None:
    first, report, sessions = run_selftest(project, tmp_path)
    assert first.returncode == 0, first.stdout
    assert sorted(sessions) == ["alpha-2", "beta-2"], first.stdout   # each reference trial ran its host
    assert all(s.status == "sound" and s.reusedFrom is None and s.inputsDigest for s in report.scenarios)
    assert (project.root / ".atlante" / "eval" / report.runId / "selftest.json.seal").is_file()

    second, again, sessions = run_selftest(project, tmp_path, "-n", "2")   # the decision reaches xdist workers
    assert second.returncode == 0, second.stdout
    assert sessions == [], second.stdout                              # no host session at all
    for scenario in again.scenarios:
        assert scenario.status == "sound" and scenario.reusedFrom == report.runId
        assert scenario.reference == by_name(report)[scenario.name].reference
        assert not all(c.passed for c in scenario.noop.checks)       # the no-op trial ran again
    assert "reused the reference run of 2 of 2 scenario(s)" in second.stdout, second.stdout
    assert "2/2 pass (reused)" in second.stdout

    # A third run still names the run that really ran the reference, not the one that reused it.
    _, third, sessions = run_selftest(project, tmp_path)
    assert sessions == [] and {s.reusedFrom for s in third.scenarios} == {report.runId}


def test_a_changed_fixture_runs_that_scenario_again(project: Project, tmp_path: Path) -> None:
    run_selftest(project, tmp_path)
    project.write("eval/fixtures/beta/README.md", "# beta, changed\n")
    result, report, sessions = run_selftest(project, tmp_path)
    assert result.returncode == 0, result.stdout
    assert sessions == ["beta-2"], result.stdout
    assert by_name(report)["alpha"].reusedFrom is not None and by_name(report)["beta"].reusedFrom is None
    assert "reused the reference run of 1 of 2 scenario(s)" in result.stdout


def test_the_full_flag_runs_every_reference(project: Project, tmp_path: Path) -> None:
    run_selftest(project, tmp_path)
    result, report, sessions = run_selftest(project, tmp_path, "--atlante-selftest-full")
    assert result.returncode == 0, result.stdout
    assert sorted(sessions) == ["alpha-2", "beta-2"] and all(s.reusedFrom is None for s in report.scenarios)
    assert "reused" not in result.stdout.replace("--atlante-selftest-full", "")


@pytest.mark.parametrize("tamper", ["edit", "unseal"])
def test_a_tampered_or_unsealed_earlier_self_test_is_not_reused(project: Project, tmp_path: Path, tamper: str) -> None:
    _, report, _ = run_selftest(project, tmp_path)
    path = project.root / ".atlante" / "eval" / report.runId / "selftest.json"
    if tamper == "edit":   # what a trial with the run folder writable could do: claim alpha passed
        path.write_text(path.read_text().replace('"durationMs"', '"durationMs" ', 1))
    else:
        path.with_name("selftest.json.seal").unlink()
    result, again, sessions = run_selftest(project, tmp_path)
    assert result.returncode == 0, result.stdout
    assert sorted(sessions) == ["alpha-2", "beta-2"] and all(s.reusedFrom is None for s in again.scenarios)


def test_an_earlier_failing_reference_is_run_again(project: Project, tmp_path: Path) -> None:
    # beta's reference writes the wrong file the first time: unsolvable, never carried forward.
    spec = {"write": {"wrong.txt": "hello\n"}, "sessions": str(tmp_path / "sessions.log")}
    doc = scenario_doc("beta", task={"fixture": "eval/fixtures/beta", "prompt": "FAKE:" + json.dumps(spec)})
    project.scenario(doc, "eval/scenarios/beta.eval.json")
    first, report, _ = run_selftest(project, tmp_path)
    assert first.returncode == 1 and by_name(report)["beta"].status == "unsolvable", first.stdout
    result, again, sessions = run_selftest(project, tmp_path)
    assert sessions == ["beta-2"] and by_name(again)["beta"].status == "unsolvable", result.stdout
    assert by_name(again)["alpha"].reusedFrom == report.runId
