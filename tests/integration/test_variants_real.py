"""A variant run of the example trigger suite through the real Claude Code CLI and the scripted model:
the control (with the release-notes skill), a no-skill arm and an A/A replicate of the control.

The scripts dictate the outcome: the two should-trigger queries load the skill, which the no-skill
arm's build does not have, so those trials fail and the two should-not-trigger ones pass in every
arm.  The suite-level lift therefore says ``worse`` for no-skill (p = 2/20² at 3 trials: the two
discordant scenarios are 3/3 against 0/3 each) where the per-scenario comparison can only say
``inconclusive``, and the replicate measures a zero noise floor.
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
from pytest_atlante.suite.build import build

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(900)]

VARIANTS = ',\n  "variants": {\n    "no-skill": {"harness": {"skills": {"release-notes": null}}},\n' \
           '    "again": {"replicateOf": "control"}\n  }\n}\n'


def variant_suite(directory: Path) -> Path:
    suite = directory / "trigger-suite"
    shutil.copytree(REPO_ROOT / "example_project" / "trigger-suite", suite, ignore=shutil.ignore_patterns(".atlante"))
    config = suite / "atlante.jsonc"
    text = config.read_text().replace("v0.3/config.json", "v0.4/config.json").replace('"version": "0.3"', '"version": "0.4"')
    text = text.replace('"budget": { "trials": 2, "timeoutMs": 120000 }',
                        '"budget": { "trials": 3, "timeoutMs": 120000, "maxSessions": 36 }')
    config.write_text(text.rstrip().removesuffix("}").rstrip() + VARIANTS)
    build(suite)
    return suite


def test_no_skill_against_the_skill_is_decided_at_the_suite_level(tmp_path: Path, hosts_path: Callable[[], str]) -> None:
    suite = variant_suite(tmp_path)
    (tmp_path / "tmp").mkdir()
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}
    env.update(PATH=hosts_path(), TMPDIR=str(tmp_path / "tmp"))
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "pytest", "--atlante-eval", "--atlante-scripted", "--atlante-variants", "all",
                          "--atlante-out", str(out), "-q", "-p", "no:cacheprovider", "-n", "2"],
                         cwd=suite, env=env, capture_output=True, text=True, timeout=800, check=False)
    assert run.returncode == 1, run.stdout[-4000:] + run.stderr[-2000:]   # the no-skill arm fails two scenarios
    report = json.loads((out / "report.json").read_text())
    rates = {(s["name"], s["variant"]): s["passRate"] for s in report["scenarios"]}
    for arm, expected in (("control", 1.0), ("again", 1.0)):
        assert all(rates[(name, arm)] == expected for name, _ in rates), rates
    assert rates[("notes-for-1-1", "no-skill")] == rates[("summarise-for-users", "no-skill")] == 0.0
    assert rates[("fix-the-typo", "no-skill")] == rates[("explain-greet", "no-skill")] == 1.0
    lift = {entry["variant"]: entry for entry in report["lift"]}
    assert lift["no-skill"]["label"] == "worse" and lift["no-skill"]["p"] == pytest.approx(2 / 400)
    assert lift["no-skill"]["difference"] == -0.5
    assert {s["name"]: s["label"] for s in lift["no-skill"]["comparison"]["scenarios"]} == {
        "explain-greet": "unchanged", "fix-the-typo": "unchanged",
        "notes-for-1-1": "inconclusive", "summarise-for-users": "inconclusive"}
    assert lift["again"]["label"] == "within-noise" and report["noiseFloor"]["difference"] == 0.0
    # The skill's use, per arm: in the control every trial of a should-trigger query used it and passed.
    split = {(u["scenario"], u["variant"]): (u["used"], u["notUsed"]) for u in report["usedSplit"]}
    assert split[("notes-for-1-1", "control")] == ({"passed": 3, "trials": 3}, {"passed": 0, "trials": 0})
    assert split[("notes-for-1-1", "no-skill")] == ({"passed": 0, "trials": 0}, {"passed": 0, "trials": 3})
    assert "no-skill               -50%" in run.stdout and "worse" in run.stdout
