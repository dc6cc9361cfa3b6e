"""The self-test's reuse of unchanged reference runs through ``atlante selftest`` and a real CLI.

The fake-host tests (``test_selftest_reuse.py``) cover each rule; this one shows the real thing:
the first ``atlante selftest`` runs the reference through the pinned CLI, the second reuses it
(no trial directory of a reference trial is made), and ``atlante selftest --full`` runs it again.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import ONE_HOST
from pytest_atlante.report.selftest import SelftestReport
from trial_helpers import TrialCase, write_project, write_turn

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(600)]


def selftest(project: Path, env: dict[str, str], *args: str) -> tuple[str, SelftestReport]:
    argv = [sys.executable, "-m", "pytest_atlante.cli", "selftest", *args, "-p", "no:cacheprovider",
            "--rootdir", str(project)]
    result = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False)
    newest = sorted((project / ".atlante" / "eval").iterdir())[-1]
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout, SelftestReport.model_validate_json((newest / "selftest.json").read_text())


def test_atlante_selftest_reuses_the_real_reference_and_full_runs_it(tmp_path: Path, hosts_path: Callable[[], str]) -> None:
    case = TrialCase("sound", [write_turn("hello.txt", "hello\n"), {"text": "Done."}],
                     [{"type": "file-contains", "path": "hello.txt", "pattern": "hello"}], "pass", None)
    project = write_project(tmp_path / "project", ONE_HOST, [case])
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "PATH": hosts_path(), "TMPDIR": str(tmp_path / "tmp"), "XDG_STATE_HOME": str(tmp_path / "state")}

    _, first = selftest(project, env)
    [ran] = first.scenarios
    assert ran.status == "sound" and ran.reusedFrom is None and ran.reference is not None
    assert (ran.reference.scriptedTurns or 0) >= 2   # the real CLI asked the scripted model for both turns

    output, second = selftest(project, env)
    [reused] = second.scenarios
    assert reused.status == "sound" and reused.reusedFrom == first.runId, output
    assert reused.reference == ran.reference and "1/1 pass (reused)" in output, output

    output, full = selftest(project, env, "--full")
    [again] = full.scenarios
    assert again.status == "sound" and again.reusedFrom is None, output
    assert again.reference is not None and (again.reference.scriptedTurns or 0) >= 2
