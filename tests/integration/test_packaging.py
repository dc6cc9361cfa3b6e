"""The package installs the way the README says: a built wheel, in a fresh venv outside the checkout.

``python -m build`` makes the sdist and the wheel (the wheel from the sdist, so a file missing from
either shows up; without build isolation, with the test venv's setuptools, to keep CI off the index); the wheel goes into a new venv with ``--no-deps`` — its dependencies come from this
test run's own venv through a ``.pth`` line (no download, and that venv's editable install of this
checkout stays inactive: ``.pth`` files of a directory added that way are not processed).  From a copy
of the example project, that venv's ``atlante`` builds the harness and runs the eval through the real
Claude Code CLI and the scripted model.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import REPO_ROOT, copy_example
from pytest_atlante.report.model import EvalReport

pytestmark = pytest.mark.hosts


def test_the_wheel_runs_the_example_eval_from_a_fresh_venv(tmp_path: Path, hosts_path: Callable[[], str]) -> None:
    dist = tmp_path / "dist"
    built = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(REPO_ROOT)],
                           capture_output=True, text=True, timeout=600, check=False)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    # the metadata setuptools reads without a deprecation banner (license as an SPDX expression)
    assert "deprecated" not in (built.stdout + built.stderr).lower(), built.stdout[-3000:] + built.stderr[-3000:]
    [wheel] = dist.glob("pytest_atlante-*.whl")
    [sdist] = dist.glob("pytest_atlante-*.tar.gz")

    modules = {p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / "pytest_atlante").rglob("*.py")}
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = archive.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    schema_files = {f"pytest_atlante/suite/schema-files/{n}.json" for n in ("config", "config-v0.1", "config-v0.2", "config-v0.3", "config-v0.4", "eval-scenario", "eval-scenario-v0.1")}
    assert modules | {"pytest_atlante/py.typed"} | schema_files <= names
    assert "[pytest11]\natlante = pytest_atlante.plugin" in entry_points
    assert "[console_scripts]\natlante = pytest_atlante.cli:main" in entry_points
    with tarfile.open(sdist) as archive:
        top = archive.getnames()[0].split("/")[0]
        assert {f"{top}/README.md", f"{top}/pyproject.toml", f"{top}/pytest_atlante/py.typed"} <= set(archive.getnames())

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "zz-test-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    # Without PYTHONPATH: a checkout on it (with the egg-info the build leaves there) would make pip
    # think the package is already installed and skip the wheel.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                                str(wheel)], capture_output=True, text=True, timeout=300, check=False, env=env)
    assert installed.returncode == 0, installed.stderr

    project = copy_example(tmp_path)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{hosts_path()}"
    where = subprocess.run([str(python), "-c", "import pytest_atlante; print(pytest_atlante.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert Path(where.stdout.strip()).is_relative_to(site)  # the wheel's copy, not the checkout's
    atlante = str(venv / "bin" / "atlante")
    schema = subprocess.run([atlante, "schema", "config"], cwd=tmp_path, env=env, capture_output=True, text=True,
                            check=True, timeout=60)
    # the every-version schema and the newest version's, both read from the wheel's data
    assert '"$id": "https://atlante.sh/schema/config.json"' in schema.stdout and '"v0.4-ProjectConfig"' in schema.stdout
    subprocess.run([atlante, "build"], cwd=project, env=env, check=True, capture_output=True, timeout=120)
    out = tmp_path / "out"
    run = subprocess.run([atlante, "eval", "--scripted", "--out", str(out), "--scenario", "adds-farewell",
                          "--scenario", "keeps-settings-untouched", "-p", "no:cacheprovider"],
                         cwd=project, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 1, run.stdout[-4000:] + run.stderr[-2000:]  # keeps-settings-untouched fails on purpose
    # the installed package imported before pytest's plugin loading: no rewrite warning, no banner
    assert "PytestAssertRewriteWarning" not in run.stdout + run.stderr, run.stdout[-4000:]
    report = EvalReport.model_validate_json((out / "report.json").read_text())
    assert {t.scenario: t.verdict for s in report.scenarios for t in s.trials} == {
        "adds-farewell": "pass", "keeps-settings-untouched": "fail"}
