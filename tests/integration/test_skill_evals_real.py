"""A public skill's Agent Skills evals (tests/data/skill-evals, MIT) through ``atlante init``, the
self-test and scripted evals on two real CLIs.

The skill lives in the Claude Code layout with its ``evals/evals.json`` and trigger file; ``atlante
init`` adopts it and imports 24 scenarios.  The self-test then says what an import can say: an eval
without a scripted reference is ``no-reference``, a should-trigger query with one is ``sound``, a
should-not-trigger query is ``vacuous`` (an agent that does nothing passes it, as the import warned).
With a scripted reference per scenario (what a user adds from a known-good session) the imported
suite runs on Claude Code and OpenCode and measures the trigger rates it should.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from pytest_atlante.report.model import EvalReport
from pytest_atlante.suite import jsonc

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(900)]

DATA = REPO_ROOT / "tests" / "data" / "skill-evals" / "AvdLee-Xcode-Disk-Cleanup-Agent-Skill" / "evals"
SKILL = "xcode-disk-cleanup"
SHOULD, SHOULD_NOT = f"{SKILL}-trigger-01", f"{SKILL}-trigger-11"


def atlante(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_atlante.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=800, check=False)


def reference(document: Path) -> None:
    """A scripted reference for an imported scenario: load the skill when it should be used, else answer."""
    doc = json.loads(document.read_text())
    bound = doc["checks"][0]
    turns = ([{"text": "Loading the skill.", "actions": [{"type": "skill", "name": bound["skill"]}]}, {"text": "Audited."}]
             if bound.get("min") else [{"text": "That is not an Xcode storage question."}])
    target = document.parent / "scripted" / (doc["name"] + ".json")
    target.parent.mkdir(exist_ok=True)
    target.write_text(json.dumps({"schema": "atlante/scripted-model-v1", "turns": turns}))


def test_an_imported_public_skill_suite_self_tests_and_runs_on_two_hosts(tmp_path: Path, hosts_path: Callable[[], str]) -> None:
    project = tmp_path / "project"
    skill = project / ".claude" / "skills" / SKILL
    shutil.copytree(DATA, skill / "evals")
    (skill / "SKILL.md").write_text(f"---\nname: {SKILL}\ndescription: Audits the disk space Xcode uses and proposes "
                                    "safe cleanups; use when asked to reclaim Xcode storage.\n---\nAudit first; delete "
                                    "nothing without approval.\n")
    (tmp_path / "tmp").mkdir()
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}
    env.update(PATH=hosts_path(), TMPDIR=str(tmp_path / "tmp"))

    init = atlante("init", cwd=project, env=env)
    assert init.returncode == 0, init.stdout + init.stderr
    assert f"atlante init: adopted 24 scenario(s) from .claude/skills/{SKILL}/evals/evals.json" in init.stdout
    assert f"warning: {SHOULD_NOT}: should_trigger false" in init.stdout
    assert "warning: low-space-audit: 4 expectations and the expected output kept in the description only" in init.stdout
    # init's own starter scenario has its script; no imported scenario has one
    assert [p.name for p in project.glob("eval/scenarios/scripted/*")] == [f"{SKILL}-starter.json"]
    reference(project / "eval" / "scenarios" / f"{SHOULD}.eval.json")
    reference(project / "eval" / "scenarios" / f"{SHOULD_NOT}.eval.json")
    build = atlante("build", cwd=project, env=env)
    assert build.returncode == 0, build.stdout + build.stderr

    selftest = atlante("selftest", "--atlante-scenario", "low-space-audit", "--atlante-scenario", SHOULD,
                       "--atlante-scenario", SHOULD_NOT, "-p", "no:cacheprovider", cwd=project, env=env)
    assert selftest.returncode == 1, selftest.stdout + selftest.stderr       # vacuous fails the self-test
    statuses = {line.split()[0]: line.split()[1] for line in selftest.stdout.splitlines()
                if line.split()[:1] and line.split()[0] in ("low-space-audit", SHOULD, SHOULD_NOT)}
    assert statuses == {"low-space-audit": "no-reference", SHOULD: "sound", SHOULD_NOT: "vacuous"}, selftest.stdout

    # A scripted run validates every scenario's script: the references a user adds for the whole suite.
    for document in (project / "eval" / "scenarios").glob("*.eval.json"):
        if not (document.parent / "scripted" / document.name.replace(".eval.json", ".json")).exists():
            reference(document)
    config = project / "atlante.jsonc"
    doc = jsonc.loads(config.read_text())
    doc["eval"]["budget"]["trials"] = 1
    config.write_text(json.dumps(doc, indent=2) + "\n")
    for host in ("claude-code", "opencode"):
        out = tmp_path / f"out-{host}"
        run = atlante("eval", "--atlante-scripted", "--atlante-host", host, "--atlante-scenario", SHOULD,
                      "--atlante-scenario", SHOULD_NOT, "--atlante-out", str(out), "-q", "-p", "no:cacheprovider",
                      cwd=project, env=env)
        assert run.returncode == 0, run.stdout + run.stderr
        report = EvalReport.model_validate_json((out / "report.json").read_text())
        assert report.host is not None and report.host.name == host
        rates = {s.name: [(r.name, r.wanted, r.used, r.trials) for r in s.triggerRates] for s in report.scenarios}
        assert rates == {SHOULD: [(SKILL, "use", 1, 1)], SHOULD_NOT: [(SKILL, "no-use", 0, 1)]}
