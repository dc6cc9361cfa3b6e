"""Issue 27: the hermeticity audit blames a trial only for what the trial did.

What pytest and its plugins are configured to write into the project while trials run — Allure
results (an xdist worker writes one after each trial, while the other worker's trial is in its
window), the report log (the controller appends as reports arrive), pytest-cov's data files (a
worker saves ``.coverage.<host>.<pid>.<random>`` when it ends) — and another terminal's run of the
same project writing its report beside this one's, are never a trial's escape: with isolation off
(the configured paths are excluded) and under namespace isolation (the project is read-only to
every trial, so no change there is a trial's).  A real escape is still caught in each of those runs
(isolation off), or refused by the read-only mount (namespace).

The fake host (tests/integration/fakehost.py) keeps these runs fast; the windows overlap by
construction: ``a-slow``'s session lasts 6 s while the other worker runs the quick trials.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from conftest import Project, config_doc
from pytest_atlante.report.model import EvalReport
from test_budgets import fake_project, fake_scenario  # noqa: F401 - fixture

pytestmark = pytest.mark.timeout(600)

OK: dict[str, Any] = {"write": {"ok.txt": "ok\n"}}
CHECKS = [{"type": "file-exists", "path": "ok.txt"}]
# The configured output of each client, inside the project.
CLIENTS: dict[str, Callable[[Path], list[str]]] = {
    "allure": lambda root: [f"--alluredir={root / 'allure-results'}"],
    "report-log": lambda root: [f"--report-log={root / 'report-log.jsonl'}"],
    # the data file from $COVERAGE_FILE (set by the test): workers write <file>.<host>.<pid>.<random>
    "coverage": lambda root: ["--cov", "--cov-report="],
}


def scenarios(project: Project, specs: dict[str, dict[str, Any]]) -> None:
    project.config(config_doc(budget={"trials": 1}))
    (project.root / "eval/scenarios/main.eval.json").unlink(missing_ok=True)
    for name, spec in specs.items():
        project.scenario(fake_scenario(name, {"usage": [10], **spec}, checks=CHECKS), f"eval/scenarios/{name}.eval.json")
    project.build()


def client_outputs(root: Path, client: str) -> list[Path]:
    """What the client wrote into the project (proof that it wrote while trials ran)."""
    if client == "allure":
        return sorted((root / "allure-results").glob("*-result.json"))
    if client == "report-log":
        return [root / "report-log.jsonl"] if (root / "report-log.jsonl").exists() else []
    return sorted(root.glob(".coverage*"))


def run(pytester: pytest.Pytester, project: Project, isolation: str, *args: str) -> tuple[int, EvalReport | None, str]:
    out = pytester.path / f"out-{time.monotonic_ns()}"
    result = pytester.runpytest_subprocess("--atlante-eval", "--atlante-project", str(project.root), "--atlante-out", str(out),
                                           "--rootdir", str(project.root), "--atlante-isolation", isolation, *args, timeout=300)
    path = out / "report.json"
    report = EvalReport.model_validate_json(path.read_text()) if path.exists() else None
    return int(result.ret), report, result.stdout.str() + result.stderr.str()


def trials(report: EvalReport) -> dict[str, tuple[str, list[str]]]:
    return {t.scenario: (t.verdict, t.escapes) for s in report.scenarios for t in s.trials}


@pytest.mark.parametrize("isolation", ["off", "namespace"])
@pytest.mark.parametrize("client", list(CLIENTS))
def test_a_clients_output_in_the_project_is_no_escape_and_a_real_one_is_caught(
    pytester: pytest.Pytester, fake_project: Project, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
    client: str, isolation: str,
) -> None:
    root = fake_project.root
    monkeypatch.setenv("COVERAGE_FILE", str(root / ".coverage"))
    escaped = root / "escaped.txt"
    scenarios(fake_project, {"a-slow": {**OK, "sleep": 6}, "b-quick": OK, "c-quick": OK, "d-quick": OK,
                             "e-escapes": {"write": {"ok.txt": "ok\n", str(escaped): "escaped\n"}}})
    passing = ["a-slow", "b-quick", "c-quick", "d-quick"]
    status, report, text = run(pytester, fake_project, isolation, "-n", "2", *CLIENTS[client](root),
                               *(arg for name in passing for arg in ("--atlante-scenario", name)))
    assert report is not None, text
    assert trials(report) == dict.fromkeys(passing, ("pass", [])), text
    assert status == 0, text
    assert client_outputs(root, client), f"{client} wrote nothing into the project"

    # A real escape, with the same client writing: caught with isolation off; under namespace
    # isolation the project is read-only to the agent (the fake host's write fails: no pass).
    status, report, text = run(pytester, fake_project, isolation, "-n", "2", *CLIENTS[client](root),
                               "--atlante-scenario", "e-escapes")
    assert report is not None and status == 1, text
    [(verdict, escapes)] = trials(report).values()
    if isolation == "off":
        assert (verdict, escapes) == ("fail", ["escaped.txt"]), text
        assert escaped.read_text() == "escaped\n"
    else:
        assert verdict == "infra-error" and escapes == [] and not escaped.exists(), text


def _start(pytester: pytest.Pytester, project: Project, isolation: str, *names: str) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "pytest", "--atlante-eval", "--atlante-project", str(project.root),
            "--rootdir", str(project.root), "--atlante-isolation", isolation,
            *(arg for name in names for arg in ("--atlante-scenario", name))]
    return cast("subprocess.Popen[bytes]", pytester.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                          stdin=subprocess.DEVNULL))


@pytest.mark.parametrize("isolation", ["off", "namespace"])
def test_two_runs_side_by_side_with_the_default_report_path_both_pass(
    pytester: pytest.Pytester, fake_project: Project, isolation: str,  # noqa: F811
) -> None:
    """Two terminals, one project, ``.atlante/eval/<run id>/`` each.  The second starts 2.5 s after
    the first: its quick trial's transcript lands in the first's slow window, and the first's
    report (and ``.atlante/.gitignore``) in the second's.  The second run's escaper writes into the
    project after the first run ended: caught (isolation off) or refused (namespace)."""
    root = fake_project.root
    escaped = root / "escaped.txt"
    scenarios(fake_project, {"a-quick": OK, "b-slow": {**OK, "sleep": 6},
                             "c-escapes": {"write": {"ok.txt": "ok\n", str(escaped): "escaped\n"}}})
    first = _start(pytester, fake_project, isolation, "a-quick", "b-slow")
    time.sleep(2.5)
    second = _start(pytester, fake_project, isolation, "a-quick", "b-slow", "c-escapes")
    outputs = [process.communicate(timeout=300)[0].decode(errors="replace") for process in (first, second)]
    reports = [EvalReport.model_validate_json(p.read_text()) for p in sorted((root / ".atlante/eval").glob("*/report.json"))]
    assert len(reports) == 2, outputs
    by_size = sorted(reports, key=lambda r: len(r.scenarios))
    assert trials(by_size[0]) == {"a-quick": ("pass", []), "b-slow": ("pass", [])}, outputs[0]
    second_trials = trials(by_size[1])
    assert {k: v for k, v in second_trials.items() if k != "c-escapes"} == {"a-quick": ("pass", []), "b-slow": ("pass", [])}, outputs[1]
    if isolation == "off":
        assert second_trials["c-escapes"] == ("fail", ["escaped.txt"]), outputs[1]
    else:
        assert second_trials["c-escapes"] == ("infra-error", []) and not escaped.exists(), outputs[1]
    assert (first.returncode, second.returncode) == (0, 1), outputs
    assert json.loads((root / ".atlante/eval" / by_size[0].runId / "report.json").read_text())["exitStatus"] == 0


# --------------------------------------------------------------------------- through the real CLI


@pytest.mark.hosts
@pytest.mark.usefixtures("on_path")
def test_the_example_project_under_every_client_through_claude_code(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The example project, Claude Code and the scripted model, ``-n 2``, isolation off, with Allure,
    the report log and coverage all writing into the project: its passing scenarios stay ``pass``
    (two trials each, so one worker's results land in the other's windows); an agent that writes
    into the project by absolute path is still caught."""
    from conftest import copy_example, scenario_doc
    from pytest_atlante.suite.build import build
    from test_integrity import py_turn
    from trial_helpers import DONE, run_eval

    root = copy_example(tmp_path)
    escaped = root / "escaped.txt"
    Project(root).scenario(scenario_doc("writes-outside", task={"fixture": "eval/fixtures/greeter-app", "prompt": "Do it."},
                                        checks=[{"type": "file-exists", "path": "greeter.py"}]),
                           "eval/scenarios/outside.eval.json")
    Project(root).script("writes-outside", [py_turn(f"open({str(escaped)!r}, 'w').write('escaped\\n')"), DONE])
    config = root / "atlante.jsonc"
    config.write_text(config.read_text().replace('"trials": 1,', '"trials": 2,'))
    build(root)
    monkeypatch.setenv("COVERAGE_FILE", str(root / ".coverage"))
    clients = [arg for make in CLIENTS.values() for arg in make(root)]
    common = ["-n", "2", "--atlante-isolation", "off", "--rootdir", str(root), *clients]
    passing = ["adds-farewell", "documents-usage"]
    run = run_eval(pytester, root, tmp_path / "out", *common, *(a for n in passing for a in ("--atlante-scenario", n)))
    assert {(t.scenario, t.trial): (t.verdict, t.escapes) for s in run.report.scenarios for t in s.trials} == {
        (name, trial): ("pass", []) for name in passing for trial in (1, 2)}, run.output()
    assert run.result.ret == 0, run.output()
    for client in CLIENTS:
        assert client_outputs(root, client), f"{client} wrote nothing into the project"

    run = run_eval(pytester, root, tmp_path / "out-escape", *common, "--atlante-scenario", "writes-outside")
    trial = run.trial("writes-outside")
    assert (trial.verdict, trial.escapes) == ("fail", ["escaped.txt"]), run.output()
    assert escaped.read_text() == "escaped\n"
