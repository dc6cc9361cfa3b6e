"""Third-party pytest clients see what the report says: the real plugins, installed from PyPI.

pytest-reportlog (its ``SessionFinish`` exit status and one ``TestReport`` per trial phase),
JUnit XML as junitparser reads it, TeamCity service messages (teamcity-messages, as PyCharm and
TeamCity use them) and pytest-rerunfailures.  Every verdict but ``pass`` must reach all of them as a
failure, with the same exit status the process and the report have.  Host sessions are counted
through the fake host's session log, so a rerun could not hide one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from junitparser import JUnitXml

from conftest import Project, config_doc
from pytest_atlante.report.model import EvalReport
from test_budgets import fake_project, fake_scenario  # noqa: F401 - fixture

GOOD = "eval/scenarios/a.eval.json"
BAD = "eval/scenarios/b.eval.json"
CHECKS = [{"type": "file-exists", "path": "ok.txt"}]

# verdict of the second scenario -> (its fake-host behaviour, scenario fields, budget)
CASES: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    "fail": ({}, {}, {}),
    "timeout": ({"sleep": 30}, {"budget": {"timeoutMs": 1500}}, {}),
    "budget-exceeded": ({"usage": [100, 100, 100], "event_gap": 0.2}, {}, {"maxTokens": 150}),
    "infra-error": ({"exit": 3}, {}, {}),
    "skipped-budget": ({"write": {"ok.txt": "ok\n"}}, {}, {"maxSessions": 1}),
}


def two_scenarios(project: Project, sessions: Path, verdict: str) -> None:
    """``good`` passes; ``bad`` ends with ``verdict``; one trial each."""
    behaviour, fields, budget = CASES[verdict]
    project.config(config_doc(budget={"trials": 1, **budget}))
    good = {"usage": [10], "sessions": str(sessions), "write": {"ok.txt": "ok\n"}}
    project.scenario(fake_scenario("good", good, checks=CHECKS), GOOD)
    project.scenario(fake_scenario("bad", {"usage": [10], "sessions": str(sessions), **behaviour}, checks=CHECKS, **fields), BAD)
    (project.root / "eval/scenarios/main.eval.json").unlink()
    project.build()


def teamcity(text: str, message: str) -> list[str]:
    """The ``name`` of every TeamCity service message of one kind (``|`` escapes, ``]`` ends one)."""
    bodies = re.findall(rf"##teamcity\[{message} ((?:[^]|]|\|.)*)\]", text)
    return sorted(re.search(r"name='((?:[^'|]|\|.)*)'", body)[1] for body in bodies)  # type: ignore[index]


def run(pytester: pytest.Pytester, project: Project, *args: str) -> tuple[int, EvalReport | None, str]:
    out = pytester.path / "out"
    # The fake host logs its sessions outside its sandbox, which namespace isolation would hide.
    result = pytester.runpytest_subprocess("--atlante-eval", "--atlante-project", str(project.root), "--atlante-out", str(out),
                                           "--rootdir", str(project.root), "-p", "no:cacheprovider",
                                           "--atlante-isolation", "off", *args, timeout=300)
    path = out / "report.json"
    report = EvalReport.model_validate_json(path.read_text()) if path.exists() else None
    return int(result.ret), report, result.stdout.str() + result.stderr.str()


# every verdict serially; two of them again under xdist (the report rides on xdist's serialised reports)
@pytest.mark.parametrize(("verdict", "workers"), [*((v, []) for v in CASES), ("fail", ["-n", "2"]), ("skipped-budget", ["-n", "2"])],
                         ids=[*CASES, "fail-xdist", "skipped-budget-xdist"])
def test_every_client_sees_a_trial_that_did_not_pass_as_a_failure(pytester: pytest.Pytester, fake_project: Project,  # noqa: F811
                                                                  tmp_path: Path, verdict: str, workers: list[str]) -> None:
    sessions = tmp_path / "sessions.log"
    two_scenarios(fake_project, sessions, verdict)
    log, junit = tmp_path / "log.jsonl", tmp_path / "junit.xml"
    status, report, text = run(pytester, fake_project, f"--report-log={log}", f"--junitxml={junit}", "--teamcity", *workers)
    assert report is not None, text
    assert {t.scenario: t.verdict for s in report.scenarios for t in s.trials} == {"good": "pass", "bad": verdict}
    assert status == report.exitStatus == 1, text

    entries = [json.loads(line) for line in log.read_text().splitlines()]
    [finish] = [e for e in entries if e["$report_type"] == "SessionFinish"]
    assert finish["exitstatus"] == 1
    calls = {e["nodeid"]: e["outcome"] for e in entries if e["$report_type"] == "TestReport" and e["when"] == "call"}
    assert calls == {f"{GOOD}::good[trial-1]": "passed", f"{BAD}::bad[trial-1]": "failed"}

    xml = JUnitXml.fromfile(str(junit))
    assert (xml.tests, xml.failures, xml.errors, xml.skipped) == (2, 1, 0, 0)
    cases = {case.name: [type(r).__name__ for r in case.result] for suite in xml for case in suite}
    assert cases == {"good[trial-1]": [], "bad[trial-1]": ["Failure"]}

    assert teamcity(text, "testStarted") == ["eval.scenarios.a_eval_json.good(trial-1)", "eval.scenarios.b_eval_json.bad(trial-1)"]
    assert teamcity(text, "testFailed") == ["eval.scenarios.b_eval_json.bad(trial-1)"], text
    ran = sorted(sessions.read_text().split())
    assert ran == (["good-1"] if verdict == "skipped-budget" else ["bad-1", "good-1"])


def test_reruns_are_refused_before_any_session(pytester: pytest.Pytester, fake_project: Project, tmp_path: Path) -> None:  # noqa: F811
    sessions = tmp_path / "sessions.log"
    two_scenarios(fake_project, sessions, "fail")
    status, report, text = run(pytester, fake_project, "--reruns", "1")
    assert status == 2 and report is None, text
    assert "eval-reruns-refused" in text and "reruns are refused in eval runs" in text
    assert not sessions.exists()


def test_a_flaky_mark_never_buys_a_hidden_session(pytester: pytest.Pytester, fake_project: Project, tmp_path: Path) -> None:  # noqa: F811
    sessions = tmp_path / "sessions.log"
    two_scenarios(fake_project, sessions, "fail")
    fake_project.write("conftest.py", (
        "import pytest\n"
        "def pytest_collection_modifyitems(items):\n"
        "    for item in items:\n"
        "        item.add_marker(pytest.mark.flaky(reruns=2))\n"))
    log = tmp_path / "log.jsonl"
    status, report, text = run(pytester, fake_project, f"--report-log={log}")
    assert report is not None and status == report.exitStatus == 1, text
    assert sorted(sessions.read_text().split()) == ["bad-1", "good-1"]  # one session per trial, no more
    assert {t.scenario: t.verdict for s in report.scenarios for t in s.trials} == {"good": "pass", "bad": "fail"}
    outcomes = [json.loads(line) for line in log.read_text().splitlines()]
    bad = [e["outcome"] for e in outcomes if e.get("when") == "call" and e["nodeid"].startswith(BAD)]
    assert bad == ["rerun", "rerun", "failed"]  # each rerun is refused at once, visibly
    assert "bad trial 1: reruns are refused in eval runs" in text


def test_a_guard_timeout_in_a_serial_run_keeps_the_report(pytester: pytest.Pytester, fake_project: Project, tmp_path: Path) -> None:  # noqa: F811
    sessions = tmp_path / "sessions.log"
    fake_project.config(config_doc(budget={"trials": 1, "timeoutMs": 60000}))
    good = {"usage": [10], "sessions": str(sessions), "write": {"ok.txt": "ok\n"}}
    fake_project.scenario(fake_scenario("good", good, checks=CHECKS), GOOD)
    fake_project.scenario(fake_scenario("bad", {"usage": [10], "sessions": str(sessions), "sleep": 20}, checks=CHECKS), BAD)
    (fake_project.root / "eval/scenarios/main.eval.json").unlink()
    # A guard shorter than the trial's own timeout stands in for a plugin bug that hangs a trial.
    fake_project.write("conftest.py", (
        "import pytest\n"
        "def pytest_collection_modifyitems(items):\n"
        "    for item in items:\n"
        "        if 'bad' in item.nodeid:\n"
        "            item.add_marker(pytest.mark.timeout(3, method='thread', func_only=True))\n"))
    fake_project.build()
    status, report, text = run(pytester, fake_project)
    assert status == 3 and report is not None, text
    assert report.exitStatus == 3 and report.complete is False
    trials = {t.scenario: t for s in report.scenarios for t in s.trials}
    assert trials["good"].verdict == "pass"
    assert trials["bad"].verdict == "infra-error" and "guard fired after 3 s" in (trials["bad"].error or "")
    assert [e["code"] for e in report.errors] == ["eval-guard-timeout"]
    assert "atlante: guard timeout in" in text and "Thread" in text  # the stacks, for the bug report
