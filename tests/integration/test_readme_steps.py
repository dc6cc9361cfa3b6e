"""The README's "Use it in your project" steps, followed literally: its shell block, read from the
README (not copied here), runs as written in an empty directory with a fresh virtualenv, with only
``/path/to/pytest-atlante`` replaced by this checkout.  It installs the package, puts the host CLIs
``scripts/setup`` installed on PATH, and runs init, build, selftest, a scripted eval and the view;
each must succeed.  The scenario the README shows is the one ``atlante init`` wrote."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import REPO_ROOT

pytestmark = pytest.mark.hosts

PLACEHOLDER = "/path/to/pytest-atlante"


def section(text: str, heading: str) -> str:
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def fenced(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", text, re.M | re.S)


def test_the_readme_use_it_in_your_project_steps_run_as_written(tmp_path: Path) -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    steps = fenced(section(readme, "## Use it in your project"), "bash")[0]
    assert PLACEHOLDER in steps and "atlante init" in steps and "atlante eval --scripted" in steps, steps
    project = tmp_path / "my-project"
    project.mkdir()
    script = "set -euo pipefail\nset -x\n" + steps.replace(PLACEHOLDER, str(REPO_ROOT))
    # A new user's shell: the system's PATH only (no venv of this checkout, no host CLI on it).
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTEST_ADDOPTS")
           and not k.startswith(("PYTEST_", "ATLANTE_"))}
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
    run = subprocess.run(["bash", "-c", script], cwd=project, env=env, capture_output=True, text=True,
                         timeout=1500, check=False)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-6000:]
    assert "self-test: 1 sound; exit status 0" in output, output[-6000:]
    assert re.search(r"^verdicts: \d+ pass; exit status 0$", run.stdout, re.M), output[-6000:]
    html = re.findall(r"^html: (.+)$", run.stdout, re.M)
    assert html and Path(html[-1]).is_file() and Path(html[-1]).is_relative_to(project / ".atlante"), output[-3000:]

    shown = json.loads(fenced(section(readme, "## One complete scenario"), "json")[0])
    written = json.loads((project / "eval" / "scenarios" / f"{shown['name']}.eval.json").read_text())
    assert shown == written  # the README's scenario is the one init writes, whole
