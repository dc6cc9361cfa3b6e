"""One suite, every host: the example project gives the same verdicts, check results and trajectory
results on each real CLI, one report per host, and ``atlante compare`` reads them across hosts."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import EVERY_HOST, copy_example
from pytest_atlante.report.model import EvalReport
from pytest_atlante.suite.build import build

pytestmark = pytest.mark.hosts


def outcome(report: EvalReport) -> dict[str, list[tuple[str, bool, str]]]:
    return {f"{t.scenario}:{t.verdict}": [(c.type, c.passed, c.message) for c in t.checks]
            for s in report.scenarios for t in s.trials}


def test_the_example_suite_gives_the_same_results_on_every_host(
    pytester: pytest.Pytester, tmp_path: Path, hosts_path: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", hosts_path())
    root = copy_example(tmp_path)
    build(root)
    reports = {}
    for host in EVERY_HOST:
        out = tmp_path / f"out-{host}"
        result = pytester.runpytest_subprocess("--atlante-eval", "--atlante-scripted", "--atlante-host", host,
                                               "--atlante-project", str(root), "--atlante-out", str(out),
                                               "--rootdir", str(root), "-p", "no:cacheprovider", timeout=600)
        assert result.ret == 1, result.stdout.str()  # keeps-settings-untouched fails on purpose
        reports[host] = EvalReport.model_validate_json((out / "report.json").read_text())
        assert reports[host].host is not None and reports[host].host.name == host
    for host in EVERY_HOST:
        assert outcome(reports[host]) == outcome(reports["claude-code"]), host
    for host in EVERY_HOST[1:]:  # the same pass rates: no regression from one host to another
        compared = pytester.run(sys.executable, "-m", "pytest_atlante.cli", "compare",
                                str(tmp_path / "out-claude-code" / "report.json"), str(tmp_path / f"out-{host}" / "report.json"))
        assert compared.ret == 0, compared.stdout.str() + compared.stderr.str()
        assert "host" in compared.stdout.str(), compared.stdout.str()  # it names what differs between the runs
    assert sorted(outcome(reports["opencode"])) == [
        "adds-farewell:pass", "adds-module-docstring:pass", "documents-usage:pass", "keeps-settings-untouched:fail"]
