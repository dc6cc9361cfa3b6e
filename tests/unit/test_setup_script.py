"""``scripts/setup`` installs what the demo runs; ``--test`` adds the test-only tools.

The script runs from a copy of the checkout's files with stub tools on PATH (``apt-get``, ``npm``,
the venv's python) that record each call, and every install already stamped as done, so nothing is
installed: what the script *would* install shows in the calls it makes for what is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO_ROOT

RECORDER = '#!/bin/sh\necho "$(basename "$0") $*" >> "$CALLS"\n'
VERSION = '#!/bin/sh\necho "1.0 (stub)"\n'


def checkout(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy2(REPO_ROOT / "scripts/setup", root / "scripts/setup")
    shutil.copy2(REPO_ROOT / "pyproject.toml", root / "pyproject.toml")
    for rel in ("hosts-npm", "hosts-npm-newest"):
        (root / rel / "node_modules/.bin").mkdir(parents=True)
        shutil.copy2(REPO_ROOT / rel / "package-lock.json", root / rel / "package-lock.json")
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name in ("apt-get", "npm"):
        (stubs / name).write_text(RECORDER)
    for name in ("git", "rg", "bwrap", "node"):
        (stubs / name).write_text(VERSION)
    # the CLIs are there but their lock is newer than what npm installed: npm is called for them
    clis = [root / "hosts-npm/node_modules/.bin" / n for n in ("claude", "opencode", "codex", "gemini")]
    clis.append(root / "hosts-npm-newest/node_modules/.bin/claude")
    for cli in clis:
        cli.write_text(VERSION)
    pythons = []
    for venv in (".venv", ".venv-pytest8"):   # both venvs exist; their installs are still to do
        (root / venv / "bin").mkdir(parents=True)
        (root / venv / "bin/python").write_text(RECORDER.replace('$(basename "$0")', venv.lstrip(".")))
        pythons.append(root / venv / "bin/python")
    for path in [*stubs.iterdir(), *pythons, *clis]:
        path.chmod(0o755)
    # python3 stays the real one (the script reads pyproject.toml with it); jq is missing on purpose.
    (stubs / "python3").symlink_to(os.path.realpath(sys.executable))   # an interpreter, not a launcher shim
    for tool in ("dirname", "basename", "id", "touch"):   # the coreutils it uses, and nothing else
        found = shutil.which(tool)
        assert found is not None
        (stubs / tool).symlink_to(found)
    calls = tmp_path / "calls"
    env = {"PATH": str(stubs), "CALLS": str(calls), "HOME": str(tmp_path)}
    return root, calls, env


def run(root: Path, env: dict[str, str], *args: str) -> tuple[int, list[str]]:
    proc = subprocess.run(["/bin/bash", str(root / "scripts/setup"), *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    calls = Path(env["CALLS"])
    return proc.returncode, (calls.read_text().splitlines() if calls.exists() else [])


def test_the_demo_setup_installs_only_what_the_demo_runs(tmp_path: Path) -> None:
    root, _, env = checkout(tmp_path)
    _, calls = run(root, env)
    # a fresh checkout: the package into .venv and the pinned CLIs, nothing of the tests'
    assert "venv -m pip install -q -e ." in calls
    assert not any("[test]" in c for c in calls)
    assert [c for c in calls if c.startswith("npm")] == ["npm install --prefix hosts-npm --no-audit --no-fund --loglevel=error"]
    assert not any(c.startswith("apt-get") for c in calls)           # jq is missing, but the demo needs none
    assert not any(c.startswith("venv-pytest8") for c in calls)


def test_the_test_setup_adds_the_test_only_tools(tmp_path: Path) -> None:
    root, _, env = checkout(tmp_path)
    _, calls = run(root, env, "--test")
    assert os.geteuid() != 0 or any(c.startswith("apt-get install") and " jq" in c for c in calls), calls
    assert "venv -m pip install -q -e .[test]" in calls
    assert "venv-pytest8 -m pip install -q pytest==8 pytest-xdist==3.6.1 pytest-timeout==2.3.1" in calls
    assert "npm install --prefix hosts-npm-newest --no-audit --no-fund --loglevel=error" in calls


def test_an_unknown_argument_is_a_usage_error(tmp_path: Path) -> None:
    root, _, env = checkout(tmp_path)
    status, calls = run(root, env, "--everything")
    assert status == 2 and calls == []
