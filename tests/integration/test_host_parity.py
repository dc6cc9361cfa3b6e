"""One suite, every host: the example project gives the same verdicts and check results on each
host as on ``ONE_HOST``, one report per host, and ``atlante compare`` reads each host's report
against the ``ONE_HOST`` one.  The ``ONE_HOST`` run is made once per test session (``made_once``)
and each other host's test compares its own run against it, so the hosts' runs go in parallel."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import EVERY_HOST, ONE_HOST, copy_example, made_once
from pytest_atlante.hosts import host_for
from pytest_atlante.hosts.base import SCRIPTED_MODEL_ID
from pytest_atlante.report.model import EvalReport
from pytest_atlante.suite.build import build

pytestmark = pytest.mark.hosts


def outcome(report: EvalReport) -> dict[str, list[tuple[str, bool, str]]]:
    return {f"{t.scenario}:{t.verdict}": [(c.type, c.passed, c.message) for c in t.checks]
            for s in report.scenarios for t in s.trials}


def example_run(directory: Path, host: str, path: str) -> EvalReport:
    """The example suite through ``host``'s real CLI (scripted model), in ``directory``, in a child
    pytest that sees none of this session's own pytest variables (as pytester's would not)."""
    root = copy_example(directory)
    build(root)
    out = directory / f"out-{host}"
    (directory / "tmp").mkdir()
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}
    env.update(PATH=path, TMPDIR=str(directory / "tmp"), HOME=str(directory))
    result = subprocess.run([sys.executable, "-m", "pytest", "--atlante-eval", "--atlante-scripted", "--atlante-host", host,
                             "--atlante-project", str(root), "--atlante-out", str(out), "--rootdir", str(root),
                             "-p", "no:cacheprovider"], cwd=root, env=env, capture_output=True, text=True, timeout=600,
                            check=False)
    assert result.returncode == 1, result.stdout + result.stderr  # keeps-settings-untouched fails on purpose
    # adds-farewell names the harness agent greeter-dev: a host that cannot start a session as it
    # says so before any trial (and again in the summary), the others say nothing.
    warned = result.stdout.count("adds-farewell: task.agent 'greeter-dev' is not selected on")
    assert warned == (0 if host_for(host).selects_agent else 2), result.stdout
    report = EvalReport.model_validate_json((out / "report.json").read_text())
    assert report.host is not None and report.host.name == host
    return report


@pytest.mark.parametrize("host", EVERY_HOST)
def test_the_example_suite_gives_the_same_results_on_every_host(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path,
                                                                hosts_path: Callable[[], str], host: str) -> None:
    def make_reference(directory: Path) -> None:
        example_run(directory, ONE_HOST, hosts_path())

    # This host's own run first: a worker making the reference meanwhile is not waited for.
    own = None if host == ONE_HOST else example_run(tmp_path, host, hosts_path())
    shared = made_once(tmp_path_factory, "host-parity-reference", make_reference)
    reference = EvalReport.model_validate_json((shared / f"out-{ONE_HOST}" / "report.json").read_text())
    report = reference if own is None else own
    assert outcome(report) == outcome(reference)
    if own is not None:  # the same pass rates: no regression from ONE_HOST to this host
        compared = subprocess.run([sys.executable, "-m", "pytest_atlante.cli", "compare",
                                   str(shared / f"out-{ONE_HOST}" / "report.json"), str(tmp_path / f"out-{host}" / "report.json")],
                                  capture_output=True, text=True, timeout=120, check=False)
        assert compared.returncode == 0, compared.stdout + compared.stderr
        assert "host" in compared.stdout, compared.stdout  # it names what differs between the runs
    # The scripted model answered every session, whatever model the host asked for: the report names
    # it as the trials' and the run's model and keeps the asked-for name apart (issue 36).
    for run in {id(r): r for r in (report, reference)}.values():
        sessions = [t for s in run.scenarios for t in s.trials if t.scriptedTurns]
        assert sessions and {t.modelIdentity for t in sessions} == {SCRIPTED_MODEL_ID}, [t.modelIdentity for t in sessions]
        assert all(t.requestedModel for t in sessions), [t.requestedModel for t in sessions]
        assert (run.modelVersion, run.scriptedModel) == (SCRIPTED_MODEL_ID, SCRIPTED_MODEL_ID)
        assert run.requestedModel == sessions[0].requestedModel
    assert sorted(outcome(report)) == [
        "adds-farewell:pass", "adds-module-docstring:pass", "documents-usage:pass", "keeps-settings-untouched:fail"]
