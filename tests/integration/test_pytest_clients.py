"""Third-party pytest clients see what the report says: the real plugins, installed from PyPI.

pytest-reportlog (its ``SessionFinish`` exit status and one ``TestReport`` per trial phase),
JUnit XML as junitparser reads it, TeamCity service messages (teamcity-messages, as PyCharm and
TeamCity use them, and the ``metainfo`` PyCharm re-runs one test from), pytest-rerunfailures and
Allure (allure-pytest: status by verdict, the scenario's description).  Every verdict but ``pass``
must reach all of them as a failure, with the same exit status the process and the report have.  Host sessions are counted
through the fake host's session log, so a rerun could not hide one.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from junitparser import JUnitXml

from conftest import Project, config_doc, copy_example
from pytest_atlante.report.model import EvalReport
from pytest_atlante.suite import jsonc
from pytest_atlante.suite.build import build
from test_budgets import fake_project, fake_scenario  # noqa: F401 - fixture
from trial_helpers import logged_requests, run_eval, with_request_log

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


@pytest.mark.parametrize("in_flight", [[], ["--atlante-in-flight", "2"]], ids=["one-at-a-time", "in-flight"])
def test_a_guard_timeout_in_a_serial_run_keeps_the_report(pytester: pytest.Pytester, fake_project: Project, tmp_path: Path,  # noqa: F811
                                                          in_flight: list[str]) -> None:
    """Also with trials in flight: the good trial counts whether or not its item was reached."""
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
    status, report, text = run(pytester, fake_project, *in_flight)
    assert status == 3 and report is not None, text
    assert report.exitStatus == 3 and report.complete is False
    trials = {t.scenario: t for s in report.scenarios for t in s.trials}
    assert trials["good"].verdict == "pass"
    assert trials["bad"].verdict == "infra-error" and "guard fired after 3 s" in (trials["bad"].error or "")
    assert [e["code"] for e in report.errors] == ["eval-guard-timeout"]
    assert "atlante: guard timeout in" in text and "Thread" in text  # the stacks, for the bug report


def unescape(value: str) -> str:
    """A TeamCity service-message attribute as written, unescaped (``|[`` is ``[``, ``||`` is ``|``)."""
    return re.sub(r"\|(.)", lambda m: {"n": "\n", "r": "\r"}.get(m[1], m[1]), value)


def teamcity_metainfo(text: str) -> dict[str, str]:
    """testStarted name -> metainfo: what PyCharm keeps to re-run that one test (IDEA-176950, PY-31836)."""
    found = {}
    for body in re.findall(r"##teamcity\[testStarted ((?:[^]|]|\|.)*)\]", text):
        name = unescape(re.search(r"name='((?:[^'|]|\|.)*)'", body)[1])  # type: ignore[index]
        found[name] = unescape(re.search(r"metainfo='((?:[^'|]|\|.)*)'", body)[1])  # type: ignore[index]
    return found


def two_trials_each(project: Project, sessions: Path) -> None:
    """``good`` passes and ``bad`` fails, two trials each."""
    project.config(config_doc(budget={"trials": 2}))
    project.scenario(fake_scenario("good", {"usage": [10], "sessions": str(sessions), "write": {"ok.txt": "ok\n"}},
                                   checks=CHECKS), GOOD)
    project.scenario(fake_scenario("bad", {"usage": [10], "sessions": str(sessions)}, checks=CHECKS), BAD)
    (project.root / "eval/scenarios/main.eval.json").unlink()
    project.build()


def test_an_ide_rerun_of_one_trial_runs_exactly_that_trial(pytester: pytest.Pytester, fake_project: Project,  # noqa: F811
                                                           tmp_path: Path) -> None:
    """PyCharm re-runs a test from teamcity-messages' ``metainfo`` (the test's name in its file, from
    ``reportinfo()``) as ``<file>::<metainfo>``, as it does ``test_x[2]`` of a parametrized Python
    test; JUnit's testcase name (and VS Code's node id) must select the same way."""
    sessions = tmp_path / "sessions.log"
    two_trials_each(fake_project, sessions)
    junit = tmp_path / "junit.xml"
    status, _report, text = run(pytester, fake_project, "--teamcity", f"--junitxml={junit}")
    assert status == 1 and sorted(sessions.read_text().split()) == ["bad-1", "bad-2", "good-1", "good-2"], text
    metainfo = teamcity_metainfo(text)
    assert metainfo["eval.scenarios.b_eval_json.bad(trial-2)"] == "bad[trial-2]", metainfo
    junit_names = {case.name for suite in JUnitXml.fromfile(str(junit)) for case in suite}
    assert "bad[trial-2]" in junit_names
    document = str(fake_project.root / BAD)
    for rerun in ([f"{document}::{metainfo['eval.scenarios.b_eval_json.bad(trial-2)']}"],   # PyCharm's target
                  [f"{document}::bad[trial-2]"],                                            # JUnit / node id
                  ["-k", metainfo["eval.scenarios.b_eval_json.bad(trial-2)"]]):             # a -k of the name
        sessions.unlink()
        status, report, text = run(pytester, fake_project, "--teamcity", *rerun)
        assert sessions.read_text().split() == ["bad-2"], (rerun, text)
        assert status == 1 and report is not None, (rerun, text)
        assert [(t.scenario, t.trial) for s in report.scenarios for t in s.trials] == [("bad", 2)], rerun
        assert teamcity(text, "testStarted") == ["eval.scenarios.b_eval_json.bad(trial-2)"], rerun


def allure_results(directory: Path) -> dict[str, dict[str, Any]]:
    """Allure's result files (``*-result.json``), by test name."""
    results = [json.loads(path.read_text()) for path in directory.glob("*-result.json")]
    return {result["name"]: result for result in results}


ALLURE_CASES = {  # scenario -> (fake-host behaviour, scenario fields, Allure status)
    "good": ({"write": {"ok.txt": "ok\n"}}, {}, "passed"),
    "bad": ({}, {}, "failed"),
    "slow": ({"sleep": 30}, {"budget": {"timeoutMs": 1500}}, "failed"),
    "crash": ({"exit": 3}, {}, "broken"),
    "late": ({"write": {"ok.txt": "ok\n"}}, {}, "broken"),   # skipped-budget: maxSessions=8 of 10 trials
}


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_allure_files_each_trial_by_its_verdict_with_the_scenario_description(
        pytester: pytest.Pytester, fake_project: Project, tmp_path: Path, workers: list[str]) -> None:  # noqa: F811
    sessions = tmp_path / "sessions.log"
    fake_project.config(config_doc(budget={"trials": 2, "maxSessions": 8}))
    for index, (name, (behaviour, fields, _status)) in enumerate(ALLURE_CASES.items()):
        spec = {"usage": [10], "sessions": str(sessions), **behaviour}
        fake_project.scenario(fake_scenario(name, spec, checks=CHECKS, description=f"What {name} shows.", **fields),
                              f"eval/scenarios/s{index}.eval.json")
    (fake_project.root / "eval/scenarios/main.eval.json").unlink()
    fake_project.build()
    results_dir = tmp_path / "allure"
    status, report, text = run(pytester, fake_project, f"--alluredir={results_dir}", *workers)
    assert report is not None and status == report.exitStatus == 1, text
    verdicts = {(t.scenario, t.trial): t.verdict for s in report.scenarios for t in s.trials}
    assert set(verdicts.values()) == {"pass", "fail", "timeout", "infra-error", "skipped-budget"}, verdicts
    assert verdicts[("late", 1)] == verdicts[("late", 2)] == "skipped-budget"
    assert len(sessions.read_text().split()) == 8

    results = allure_results(results_dir)
    assert sorted(results) == sorted(f"{name}[trial-{n}]" for name in ALLURE_CASES for n in (1, 2))
    for name, (_behaviour, _fields, expected) in ALLURE_CASES.items():
        for n in (1, 2):
            result = results[f"{name}[trial-{n}]"]
            assert result["status"] == expected, (name, result.get("statusDetails"))
            assert result["description"] == f"What {name} shows."
            assert result["parameters"] == [{"name": "trial", "value": str(n)}]
            attachments = {a["name"]: results_dir / a["source"] for a in result.get("attachments", [])}
            verdict = verdicts[(name, n)]
            summary = attachments[f"atlante: {verdict}"].read_text()
            assert summary.startswith(f"{name} trial {n}: {verdict}"), summary
            assert "#0 file-exists" in summary or verdict in ("infra-error", "skipped-budget"), summary
            ran = verdict != "skipped-budget"   # a trial that never ran has no transcript
            assert ("transcript: " in summary) is ran and ("transcript" in attachments) is ran, result
            assert [link["name"] for link in result.get("links", [])] == (["transcript"] if ran else [])
            if expected != "passed":
                assert f"{name} trial {n}: {verdict}" in result["statusDetails"]["message"]
    # Trials are distinct tests to Allure (not retries of one): one history per trial.
    assert len({result["historyId"] for result in results.values()}) == 10


@pytest.mark.hosts
@pytest.mark.timeout(600)
def test_the_example_through_claude_reruns_one_trial_and_files_it_in_allure(
        pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hosts_path: Callable[[], str]) -> None:
    """The real CLI and the scripted model on the example project: keeps-settings-untouched fails on
    purpose; PyCharm's re-run of it (``<file>::<metainfo>``) runs that trial's session alone, and
    Allure files it as ``failed`` under the scenario's own description."""
    monkeypatch.setenv("PATH", hosts_path())
    root = copy_example(tmp_path)
    build(root)
    document = root / "eval/scenarios/settings.eval.json"
    description = jsonc.loads(document.read_text())["description"]
    log, allure_dir = tmp_path / "requests", tmp_path / "allure"
    first = run_eval(pytester, root, tmp_path / "out", "--teamcity", f"--alluredir={allure_dir}",
                     *with_request_log(monkeypatch, log))
    assert first.result.ret == 1, first.output()
    assert {s.name: [t.verdict for t in s.trials] for s in first.report.scenarios}["keeps-settings-untouched"] == ["fail"]
    assert len(logged_requests(log)) == len(first.report.scenarios) >= 2  # one host session per trial
    [(name, metainfo)] = [(n, m) for n, m in teamcity_metainfo(first.output()).items() if "keeps-settings" in n]
    assert metainfo == "keeps-settings-untouched[trial-1]", name
    result = allure_results(allure_dir)[metainfo]
    assert (result["status"], result["description"]) == ("failed", description), result
    assert "keeps-settings-untouched trial 1: fail" in result["statusDetails"]["message"]

    shutil.rmtree(log)
    rerun = run_eval(pytester, root, tmp_path / "out2", f"{document}::{metainfo}", *with_request_log(monkeypatch, log))
    assert rerun.result.ret == 1, rerun.output()
    assert list(logged_requests(log)) == ["keeps-settings-untouched-1"], rerun.output()
    assert [(s.name, len(s.trials)) for s in rerun.report.scenarios if s.trials] == [("keeps-settings-untouched", 1)]
