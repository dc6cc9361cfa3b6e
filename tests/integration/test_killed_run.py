"""A run killed outright (SIGKILL) mid-trial: the next run, started at once, removes its trial
directory and the login copied into it (``rundirs``), with a fake host (``fakehost.py``) for speed.

The same on the real CLIs, under namespace isolation, is in ``test_isolation_real.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import Project, config_doc, scenario_doc
from fakehost import fake_env, install_fake_claude
from pytest_atlante.provider.proxy import STAND_IN_PREFIX
from pytest_atlante.sandbox.trialdir import SANDBOX_DIR_PREFIX

LOGIN = '{"claudeAiOauth": {"accessToken": "sk-ant-oat01-killed-run-login"}}'


def pytest_argv(project: Project, out: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "--atlante-eval", "--atlante-project", str(project.root),
            "--atlante-out", str(out), "--atlante-isolation", "off", "-p", "no:cacheprovider",
            "--rootdir", str(project.root), "-q", *args]


def wait_for(path: Path, proc: subprocess.Popen[str], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


@pytest.mark.timeout(300)
def test_the_next_run_removes_a_killed_runs_directory_and_copied_login_at_once(
    atlante_project: Project, tmp_path: Path
) -> None:
    install_fake_claude(tmp_path / "fakebin")
    started = tmp_path / "host-started"
    atlante_project.scenario(scenario_doc(task={"fixture": "eval/fixtures/app",
                                                "prompt": "FAKE:" + json.dumps({"started": str(started), "sleep": 120})},
                                          checks=[{"type": "file-exists", "path": "README.md"}]))
    atlante_project.config(config_doc())
    atlante_project.build()
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    login_dir = tmp_path / "claude-config"
    login_dir.mkdir()
    (login_dir / ".credentials.json").write_text(LOGIN)
    (login_dir / ".credentials.json").chmod(0o600)
    env = {**os.environ, **fake_env(tmp_path / "fakebin"), "TMPDIR": str(private_tmp), "CLAUDE_CONFIG_DIR": str(login_dir)}

    run = subprocess.Popen(pytest_argv(atlante_project, tmp_path / "out"), cwd=atlante_project.root, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    host_pid = None
    try:
        wait_for(started, run)  # the trial is running: its host session has started
        host_pid = int(started.read_text())
        dead = [p for p in private_tmp.iterdir() if p.name.startswith(SANDBOX_DIR_PREFIX)]
        assert len(dead) == 1
        copies = list(dead[0].glob("*/home/.claude/.credentials.json"))
        # The copied login, in the trial's HOME, holding a stand-in for the real token (issue 38).
        [copied] = [json.loads(c.read_text()) for c in copies]
        assert copied["claudeAiOauth"]["accessToken"].startswith(STAND_IN_PREFIX)
        run.send_signal(signal.SIGKILL)  # nothing of the run gets to clean up
        run.communicate(timeout=60)
        assert run.returncode == -signal.SIGKILL
        assert dead[0].is_dir() and copies[0].is_file()
        # However long the next run takes to get there (a loaded machine), the directory it finds is
        # younger than the minute that used to protect a young run directory: dated in the future.
        os.utime(dead[0], (time.time() + 3600, time.time() + 3600))

        again = subprocess.run(pytest_argv(atlante_project, tmp_path / "out-2", "-k", "no-trial-matches-this"),
                               cwd=atlante_project.root, env=env, capture_output=True, text=True, timeout=240, check=False)
        assert not dead[0].exists(), again.stdout + again.stderr
        assert [p for p in private_tmp.rglob("*") if p.name == ".credentials.json"] == []
        # The second run finished too: it left nothing of its own in $TMPDIR.
        assert list(private_tmp.iterdir()) == [], again.stdout + again.stderr
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate(timeout=60)
        if host_pid is not None:  # the fake host, orphaned by the kill, sleeps on
            with contextlib.suppress(ProcessLookupError):
                os.kill(host_pid, signal.SIGKILL)
