"""docs/architecture.md's "where to add a host" kept true: a fifth host is one folder under
``hosts/`` plus its lines in ``hosts/names.py``, and nothing else in the package changes.

The test copies the package, adds ``hosts/fifth_host/`` (the test-only echo adapter of
``tests/unit/trial/echohost.py``) and the host's name, dialect and ``HOSTS`` line, and runs a whole
eval (build, validation, probe, trial, checks, report) on the copy in a subprocess.  Without the
``names.py`` lines the same project is refused as naming an unknown host, so the folder alone is not
enough and the lines alone would not import.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT, Project, config_doc, scenario_doc

PACKAGE = REPO_ROOT / "pytest_atlante"
ECHO_ADAPTER = REPO_ROOT / "tests" / "unit" / "trial" / "echohost.py"
NAME = "fifth-host"


def copy_package(root: Path) -> Path:
    shutil.copytree(PACKAGE, root / "pytest_atlante", ignore=shutil.ignore_patterns("__pycache__"))
    return root / "pytest_atlante"


def add_folder(package: Path) -> None:
    folder = package / "hosts" / "fifth_host"
    folder.mkdir()
    (folder / "__init__.py").write_text('"""A fifth host, added by a test."""\n')
    adapter = ECHO_ADAPTER.read_text().replace('NAME = "echo"', f'NAME = "{NAME}"', 1)
    assert f'NAME = "{NAME}"' in adapter
    (folder / "adapter.py").write_text(adapter)


def add_registry_lines(package: Path) -> None:
    names = package / "hosts" / "names.py"
    text = names.read_text()
    edits = [
        ('"codex", "gemini-cli"]', f'"codex", "gemini-cli", "{NAME}"]'),  # HostName
        ('"codex-responses", "gemini-cli"]', f'"codex-responses", "gemini-cli", "{NAME}"]'),  # HostDialect
        ("HOSTS: dict[HostName, HostEntry] = {\n",
         f'HOSTS: dict[HostName, HostEntry] = {{\n    "{NAME}": HostEntry("pytest_atlante.hosts.fifth_host.adapter:EchoHost", '
         f'since="0.3", dialects=("{NAME}",)),\n'),
    ]
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    names.write_text(text)
    # HOSTS' order is HostName's: the new line goes last.
    text = names.read_text()
    line = next(line for line in text.splitlines(keepends=True) if line.startswith(f'    "{NAME}": HostEntry('))
    text = text.replace(line, "", 1).replace("\n}\nif tuple(HOSTS)", f"\n{line.rstrip()}\n}}\nif tuple(HOSTS)", 1)
    names.write_text(text)


def changed_files(package: Path) -> set[str]:
    """The package files the copy adds or changes, relative to the package."""
    found = set()
    for path in package.rglob("*"):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        rel = path.relative_to(package)
        original = PACKAGE / rel
        if not original.is_file() or original.read_bytes() != path.read_bytes():
            found.add(rel.as_posix())
    return found


def project_for(root: Path) -> Project:
    project = Project(root)
    root.mkdir()
    project.config({**config_doc(), "version": "0.3", "eval": {**config_doc()["eval"], "host": NAME}})
    project.write("harness/helper.md", "You write small files.\n")
    project.write("harness/tidy/SKILL.md", "Keep files tidy.\n")
    project.write("eval/fixtures/app/README.md", "# app\n")
    spec = {"write": {"hello.txt": "hello\n"}, "usage": [10, 5]}
    project.scenario(scenario_doc(task={"fixture": "eval/fixtures/app", "prompt": json.dumps(spec)}))
    return project


def run(source: Path, project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(source)}
    return subprocess.run([sys.executable, *args], cwd=project, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


BUILD = ("-c", "import sys; from pytest_atlante.cli import main; sys.exit(main(['build']))")
EVAL = ("-m", "pytest", "--atlante-eval", "--atlante-isolation=off", "-p", "no:cacheprovider", "-q")


def test_a_fifth_host_is_one_folder_and_its_lines_in_names(tmp_path: Path) -> None:
    package = copy_package(tmp_path / "src")
    add_folder(package)
    add_registry_lines(package)
    assert changed_files(package) == {"hosts/fifth_host/__init__.py", "hosts/fifth_host/adapter.py", "hosts/names.py"}

    project = project_for(tmp_path / "project")
    built = run(package.parent, project.root, *BUILD)
    assert built.returncode == 0, built.stdout + built.stderr
    done = run(package.parent, project.root, *EVAL)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(next((project.root / ".atlante" / "eval").rglob("report.json")).read_text())
    assert report["host"]["name"] == NAME
    [scenario] = report["scenarios"]
    assert [trial["verdict"] for trial in scenario["trials"]] == ["pass"]


@pytest.mark.parametrize("lines", [False, True], ids=["folder-only", "lines-only"])
def test_the_folder_or_the_lines_alone_are_not_a_host(tmp_path: Path, lines: bool) -> None:
    package = copy_package(tmp_path / "src")
    add_registry_lines(package) if lines else add_folder(package)
    project = project_for(tmp_path / "project")
    done = run(package.parent, project.root, *BUILD)
    assert done.returncode != 0, done.stdout + done.stderr
    if lines:  # the table names an adapter module that is not there
        assert "pytest_atlante.hosts.fifth_host" in done.stderr, done.stderr
    else:  # the configuration does not admit a host names.py does not list
        output = done.stdout + done.stderr
        assert "eval-config-invalid" in output and "$.eval.host" in output, output
