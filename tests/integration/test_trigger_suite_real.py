"""The example trigger suite (example_project/trigger-suite, run by scripts/demo) through each real
CLI: every should-trigger query loads the release-notes skill and no other does, the report's
trigger rates say so, and `atlante compare` of a host's report with ``ONE_HOST``'s finds them
unchanged.  Each host loads skills its own way (``EVERY_HOST``); the ``ONE_HOST`` run is made once
per test session (``made_once``) and the other hosts' tests compare against it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import EVERY_HOST, ONE_HOST, REPO_ROOT, made_once
from pytest_atlante.report.model import EvalReport
from pytest_atlante.suite.build import build

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(900)]

TRIALS = 1
EXPECTED_RATES = {
    "notes-for-1-1": ("use", TRIALS), "summarise-for-users": ("use", TRIALS),
    "fix-the-typo": ("no-use", 0), "explain-greet": ("no-use", 0),
}


def atlante(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_atlante.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=800, check=False)


def trigger_run(directory: Path, host: str, path: str) -> Path:
    """The trigger suite through ``host``'s real CLI in ``directory``, its rates checked; its report."""
    suite = directory / "trigger-suite"
    shutil.copytree(REPO_ROOT / "example_project" / "trigger-suite", suite, ignore=shutil.ignore_patterns(".atlante"))
    # One trial per query, not the example's two: the scripted model plays each query the same way
    # every time, so a second trial on every host is CPU the CI's 20 minutes need elsewhere.
    config = suite / "atlante.jsonc"
    assert '"trials": 2' in config.read_text()
    config.write_text(config.read_text().replace('"trials": 2', f'"trials": {TRIALS}'))
    build(suite)
    (directory / "tmp").mkdir()
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}
    env.update(PATH=path, TMPDIR=str(directory / "tmp"))
    out = directory / f"out-{host}"
    run = atlante("eval", "--atlante-scripted", "--atlante-host", host, "--atlante-out", str(out), "-q",
                  "-p", "no:cacheprovider", cwd=suite, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    report = EvalReport.model_validate_json((out / "report.json").read_text())
    rates = {s.name: [(r.kind, r.name, r.wanted, r.used, r.trials) for r in s.triggerRates] for s in report.scenarios}
    assert rates == {name: [("skill", "release-notes", wanted, used, TRIALS)] for name, (wanted, used) in EXPECTED_RATES.items()}
    assert f"trigger rate: notes-for-1-1: skill release-notes used in {TRIALS}/{TRIALS} trials (100%" in run.stdout
    assert [t.verdict for s in report.scenarios for t in s.trials] == ["pass"] * 4 * TRIALS
    return out / "report.json"


@pytest.mark.parametrize("host", EVERY_HOST)
def test_the_trigger_suite_measures_the_same_trigger_rates_on_every_host(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, hosts_path: Callable[[], str], host: str
) -> None:
    def make_reference(directory: Path) -> None:
        trigger_run(directory, ONE_HOST, hosts_path())

    # This host's own run first: a worker making the reference meanwhile is not waited for.
    report = None if host == ONE_HOST else trigger_run(tmp_path, host, hosts_path())
    reference = made_once(tmp_path_factory, "trigger-suite-reference", make_reference) / f"out-{ONE_HOST}" / "report.json"
    if report is None:
        return  # ONE_HOST: its run is the reference, its rates checked as it was made
    env = {**os.environ, "PATH": hosts_path()}
    compared = atlante("compare", "--json", str(reference), str(report), cwd=tmp_path / "trigger-suite", env=env)
    assert compared.returncode == 0, compared.stdout + compared.stderr
    comparison = json.loads(compared.stdout)
    assert sorted((t["scenario"], t["label"], t["wanted"]) for t in comparison["triggers"]) == sorted(
        (name, "unchanged", wanted) for name, (wanted, _) in EXPECTED_RATES.items())
    assert {c["component"] for c in comparison["changed"]} >= {"host"}
