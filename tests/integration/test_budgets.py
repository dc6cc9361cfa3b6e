"""Budgets, xdist, interrupts and crashes, driven by a fake host for speed.

The rules are also proven on the real CLIs through the scripted model in
``test_budgets_real.py``; here a fake ``claude`` (``fakehost.py``) lets a test choose usage events,
sleeps and crashes precisely.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import LOOSENING_CONFTEST, Project, config_doc, scenario_doc
from fakehost import fake_env, install_fake_claude
from pytest_atlante.report.model import EvalReport


def fake_scenario(name: str, spec: dict[str, Any], **extra: Any) -> dict[str, Any]:
    doc = scenario_doc(name=name, task={"fixture": "eval/fixtures/app", "prompt": "FAKE:" + json.dumps(spec)},
                       checks=[{"type": "file-exists", "path": "README.md"}])
    doc.update(extra)
    return doc


@pytest.fixture
def fake_project(atlante_project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    bin_dir = tmp_path / "fakebin"
    install_fake_claude(bin_dir)
    for key, value in fake_env(bin_dir).items():
        monkeypatch.setenv(key, value)
    atlante_project.fake_bin = bin_dir  # type: ignore[attr-defined]
    return atlante_project


def run(pytester: pytest.Pytester, project: Project, *args: str, subprocess_: bool = False) -> tuple[int, EvalReport | None, str]:
    out = pytester.path / "out"
    argv = ["--atlante-eval", "--atlante-project", str(project.root), "--atlante-out", str(out), "-p", "no:cacheprovider",
            *([] if "--rootdir" in args else ["--rootdir", str(project.root)]), *args]
    result = pytester.runpytest_subprocess(*argv, timeout=300) if subprocess_ else pytester.runpytest_inprocess(*argv)
    report_path = out / "report.json"
    report = EvalReport.model_validate_json(report_path.read_text()) if report_path.exists() else None
    return int(result.ret), report, result.stdout.str() + result.stderr.str()


def verdicts(report: EvalReport) -> dict[str, str]:
    return {t.nodeId: t.verdict for s in report.scenarios for t in s.trials}


@pytest.mark.parametrize("workers", [0, 2, 8])
def test_max_sessions_skips_the_same_trials_for_any_worker_count(pytester: pytest.Pytester, fake_project: Project, workers: int) -> None:
    fake_project.config(config_doc(budget={"trials": 3, "maxSessions": 4}))
    fake_project.scenario(fake_scenario("first", {"usage": [10]}), "eval/scenarios/a.eval.json")
    fake_project.scenario(fake_scenario("second", {"usage": [10]}), "eval/scenarios/b.eval.json")
    (fake_project.root / "eval/scenarios/main.eval.json").unlink()
    fake_project.build()
    status, report, text = run(pytester, fake_project, *(["-n", str(workers)] if workers else []))
    assert report is not None, text
    skipped = sorted(n for n, v in verdicts(report).items() if v == "skipped-budget")
    assert skipped == ["eval/scenarios/b.eval.json::second[trial-2]", "eval/scenarios/b.eval.json::second[trial-3]"]
    assert [v for n, v in verdicts(report).items() if n not in skipped] == ["pass"] * 4
    assert status == 1  # skipped-budget is not a pass
    for scenario in report.scenarios:
        for trial in scenario.trials:
            if trial.verdict == "skipped-budget":
                assert trial.durationMs == 0 and trial.checks == [] and trial.diff is None
    second = next(s for s in report.scenarios if s.name == "second")
    assert second.passRate == 1.0  # skipped trials are excluded from the pass rate


def test_skipped_trials_fail_with_the_reason(pytester: pytest.Pytester, fake_project: Project) -> None:
    fake_project.config(config_doc(budget={"trials": 2, "maxSessions": 1}))
    fake_project.scenario(fake_scenario("writes-hello", {"usage": [10]}))
    fake_project.build()
    status, _report, text = run(pytester, fake_project)
    assert status == 1
    assert "1 failed, 1 passed" in text  # not passed, so a failure for pytest and every client
    assert "skipped-budget: maxSessions=1 exhausted before this trial" in text


def test_max_tokens_aborts_after_the_crossing_event(pytester: pytest.Pytester, fake_project: Project, tmp_path: Path) -> None:
    log = tmp_path / "events.log"
    fake_project.config(config_doc(budget={"trials": 1, "maxTokens": 250}))
    fake_project.scenario(fake_scenario("writes-hello", {"usage": [100, 100, 100, 100, 100, 100], "event_gap": 0.3,
                                                         "events_log": str(log)}))
    fake_project.build()
    # The fake host logs its events outside its sandbox, which namespace isolation would hide.
    status, report, text = run(pytester, fake_project, "--atlante-isolation", "off")
    assert report is not None, text
    [trial] = report.scenarios[0].trials
    assert trial.verdict == "budget-exceeded" and status == 1
    assert trial.usage is not None and trial.usage.total == 300  # overshoot only by the crossing event
    emitted = log.read_text().split()
    assert emitted == ["0", "1", "2"]  # the abort came before a fourth event was written
    assert "exceeded maxTokens=250" in (trial.error or "")


def test_a_host_without_usage_events_is_budget_unmonitored(pytester: pytest.Pytester, fake_project: Project) -> None:
    fake_project.scenario(fake_scenario("writes-hello", {}))
    fake_project.build()
    status, report, _ = run(pytester, fake_project)
    assert report is not None and status == 0
    [trial] = report.scenarios[0].trials
    assert trial.budgetUnmonitored is True and trial.usage is None


def test_timeout_covers_the_host_session_only(pytester: pytest.Pytester, fake_project: Project) -> None:
    fake_project.config(config_doc(budget={"trials": 1, "timeoutMs": 60000}))
    slow = [sys.executable, "-c", "import time; time.sleep(2.5)"]
    fake_project.scenario(fake_scenario("writes-hello", {"usage": [10]}, budget={"timeoutMs": 2000},
                                        task={"fixture": "eval/fixtures/app", "setup": slow, "prompt": 'FAKE:{"usage": [10]}'},
                                        checks=[{"type": "command", "run": slow}]))
    fake_project.build()
    status, report, text = run(pytester, fake_project)
    assert status == 0, text  # 2.5 s of setup and 2.5 s of checks do not count against 2 s
    fake_project.scenario(fake_scenario("writes-hello", {"usage": [10], "sleep": 30}, budget={"timeoutMs": 2000}))
    status, report, text = run(pytester, fake_project)
    assert report is not None and status == 1
    [trial] = report.scenarios[0].trials
    assert trial.verdict == "timeout" and trial.hostDurationMs < 20000


def test_budget_fixture_reaches_a_user_conftest(pytester: pytest.Pytester, fake_project: Project, tmp_path: Path) -> None:
    seen = tmp_path / "budget.json"
    fake_project.write("conftest.py", (
        "import json, pytest\n"
        "@pytest.fixture(autouse=True)\n"
        "def record_budget(atlante_budget):\n"
        f"    open({str(seen)!r}, 'w').write(json.dumps(atlante_budget.__dict__))\n"))
    fake_project.config(config_doc(budget={"trials": 1, "maxTokens": 1234}))
    fake_project.scenario(fake_scenario("writes-hello", {"usage": [10]}, budget={"timeoutMs": 4321}))
    fake_project.build()
    status, _, text = run(pytester, fake_project, "--rootdir", str(fake_project.root), "-p", "no:timeout")
    assert status == 0, text
    assert json.loads(seen.read_text()) == {"timeoutMs": 4321, "maxTokens": 1234, "maxSessions": 15, "trials": 1, "allocated": True}


@pytest.mark.parametrize("workers", [0, 2])
def test_a_conftest_override_cannot_loosen_the_budget(pytester: pytest.Pytester, fake_project: Project, workers: int) -> None:
    fake_project.write("conftest.py", LOOSENING_CONFTEST)
    fake_project.config(config_doc(budget={"trials": 2, "maxTokens": 250, "maxSessions": 1}))
    fake_project.scenario(fake_scenario("writes-hello", {"usage": [100, 100, 100, 100, 100, 100], "event_gap": 0.3}))
    fake_project.build()
    status, report, text = run(pytester, fake_project, "--rootdir", str(fake_project.root), "-rs",
                               *(["-n", str(workers)] if workers else []))
    assert report is not None, text
    first, second = report.scenarios[0].trials
    assert first.verdict == "budget-exceeded" and "exceeded maxTokens=250" in (first.error or ""), text
    assert first.usage is not None and first.usage.total == 300  # aborted at the crossing, not at 10**9
    assert second.verdict == "skipped-budget"  # the override's allocated=True gave it no session
    assert "skipped-budget: maxSessions=1 exhausted before this trial" in text
    assert report.budget.maxTokens == 250 and report.budget.maxSessions == 1
    assert status == 1


def test_the_host_is_probed_once_per_run_under_xdist(pytester: pytest.Pytester, fake_project: Project) -> None:
    fake_project.config(config_doc(budget={"trials": 4}))
    fake_project.scenario(fake_scenario("writes-hello", {"usage": [10]}))
    fake_project.build()
    status, _report, text = run(pytester, fake_project, "-n", "2")
    assert status == 0, text
    assert (fake_project.fake_bin / "probe.log").read_text().count("probe") == 1  # type: ignore[attr-defined]


def test_a_worker_crash_is_exit_3_and_the_report_keeps_finished_trials(pytester: pytest.Pytester, fake_project: Project) -> None:
    fake_project.config(config_doc(budget={"trials": 4}))
    fake_project.scenario(fake_scenario("writes-hello", {"usage": [10]}))
    fake_project.write("conftest.py", (
        "import os\n"
        "def pytest_runtest_call(item):\n"
        "    if item.name.endswith('[trial-3]') and os.environ.get('PYTEST_XDIST_WORKER'):\n"
        "        os._exit(17)\n"))
    fake_project.build()
    status, report, text = run(pytester, fake_project, "-n", "2", "--rootdir", str(fake_project.root), subprocess_=True)
    assert status == 3, text
    assert report is not None and report.complete is False and report.exitStatus == 3
    finished = verdicts(report)
    assert "eval/scenarios/main.eval.json::writes-hello[trial-3]" not in finished
    assert sorted(v for v in finished.values()) == ["pass"] * len(finished) and len(finished) >= 2
    assert any(e.get("code") == "eval-worker-crashed" for e in report.errors)


def _alive_with(marker: str, *, hosts_only: bool = False) -> list[int]:
    """Pids whose command line holds ``marker``; ``hosts_only`` leaves out bubblewrap, which wraps
    each host under namespace isolation (its command line holds the host's)."""
    alive = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline and not (hosts_only and cmdline.startswith(b"bwrap\0")):
                alive.append(int(entry.name))
    return alive


def _gone_soon(marker: str, timeout_s: float = 30) -> list[int]:
    """What still carries ``marker`` once the run has ended, given a killed process time to go (it
    was SIGKILLed and reaped before the run ended; this only bounds a loaded machine's delay)."""
    deadline = time.monotonic() + timeout_s
    while (alive := _alive_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive


def test_ctrl_c_stops_the_run_writes_the_report_and_leaves_nothing_behind(fake_project: Project, tmp_path: Path) -> None:
    marker = f"atlante-sigint-{os.getpid()}"
    fake_project.config(config_doc(budget={"trials": 1}))
    fake_project.scenario(fake_scenario("a-quick", {"usage": [10]}), "eval/scenarios/a.eval.json")
    fake_project.scenario(fake_scenario("b-slow", {"usage": [10], "sleep": 300},
                                        task={"fixture": "eval/fixtures/app",
                                              "prompt": "FAKE:" + json.dumps({"usage": [10], "sleep": 300, "m": marker})}),
                          "eval/scenarios/b.eval.json")
    (fake_project.root / "eval/scenarios/main.eval.json").unlink()
    fake_project.build()
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "--atlante-eval", "--atlante-project", str(fake_project.root),
                             "--atlante-out", str(out), "-p", "no:cacheprovider", "--rootdir", str(fake_project.root)],
                            cwd=fake_project.root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while not _alive_with(marker, hosts_only=True) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _alive_with(marker, hosts_only=True), "the slow trial never started"
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=180)  # an upper bound only: a loaded machine stops slower
    assert proc.returncode == 3, output
    report = EvalReport.model_validate_json((out / "report.json").read_text())
    assert report.interrupted is True and report.complete is False
    trials = {t.scenario: t for s in report.scenarios for t in s.trials}
    assert trials["a-quick"].verdict == "pass"
    assert trials["b-slow"].interrupted is True and trials["b-slow"].verdict == "infra-error"
    assert _gone_soon(marker) == []
    assert not list(Path(os.path.realpath("/tmp")).glob(f"atlante-eval-{report.runId}/*"))


def test_progress_shows_each_trial_phase_and_a_summary(pytester: pytest.Pytester, fake_project: Project) -> None:
    fake_project.config(config_doc(budget={"trials": 2}))
    fake_project.scenario(fake_scenario("writes-hello", {"usage": [40, 2]}))
    fake_project.build()
    status, report, text = run(pytester, fake_project, "-v")
    assert status == 0 and report is not None
    line = next(row for row in text.splitlines() if "main.eval.json::writes-hello[trial-1] [" in row)
    assert "[sandbox] [host session] [checks] PASSED" in line  # live, not captured
    assert "atlante: eval/scenarios/main.eval.json::writes-hello[trial-1]: pass in" in text
    assert ", 42 tokens, $0.0010" in text
    summary = next(row for row in text.splitlines() if row.startswith("writes-hello "))  # the per-scenario table
    assert summary.split()[1:6] == ["2", "100%", "34-100%*", "100%", "100%"]  # trials, pass, Wilson (* few trials), pass@2, pass^2
    assert f"report: {pytester.path / 'out' / 'report.json'}" in text
    parallel_status, _, parallel = run(pytester, fake_project, "-v", "-n", "2")
    assert parallel_status == 0
    assert "host session started" in parallel  # xdist: the controller says when a trial starts


@pytest.mark.parametrize("target", ["controller", "process-group"])
def test_ctrl_c_under_xdist_stops_every_worker_trial(fake_project: Project, tmp_path: Path, target: str) -> None:
    marker = f"atlante-sigint-xdist-{os.getpid()}-{target}"
    fake_project.config(config_doc(budget={"trials": 4}))
    fake_project.scenario(fake_scenario("writes-hello", {}, task={"fixture": "eval/fixtures/app",
                                                                  "prompt": "FAKE:" + json.dumps({"usage": [10], "sleep": 300, "m": marker})}))
    fake_project.build()
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "--atlante-eval", "-n", "2", "--atlante-project", str(fake_project.root),
                             "--atlante-out", str(out), "-p", "no:cacheprovider", "--rootdir", str(fake_project.root)],
                            cwd=fake_project.root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while len(_alive_with(marker, hosts_only=True)) < 2 and time.monotonic() < deadline:  # both workers' hosts run
        time.sleep(0.2)
    assert len(_alive_with(marker, hosts_only=True)) == 2
    if target == "controller":  # e.g. `kill -INT <pid>`: the controller passes it on to the workers
        proc.send_signal(signal.SIGINT)
    else:  # Ctrl-C in a terminal: the whole foreground group
        os.killpg(proc.pid, signal.SIGINT)
    output, _ = proc.communicate(timeout=180)  # an upper bound only
    assert proc.returncode == 3, output
    report = EvalReport.model_validate_json((out / "report.json").read_text())
    assert report.interrupted is True and report.complete is False
    interrupted = [t for s in report.scenarios for t in s.trials]
    assert len(interrupted) == 2 and all(t.interrupted and t.verdict == "infra-error" for t in interrupted)
    assert _gone_soon(marker) == []


def test_a_narrowed_run_reports_only_the_requested_scenarios(pytester: pytest.Pytester, fake_project: Project) -> None:
    fake_project.config(config_doc(budget={"trials": 2}))
    fake_project.scenario(fake_scenario("first", {"usage": [10]}), "eval/scenarios/a.eval.json")
    fake_project.scenario(fake_scenario("second", {"usage": [10]}), "eval/scenarios/b.eval.json")
    (fake_project.root / "eval/scenarios/main.eval.json").unlink()
    fake_project.build()
    status, report, text = run(pytester, fake_project, "-k", "first and trial-1")
    assert status == 0 and report is not None, text
    assert [(s.name, s.expectedTrials, s.passRate) for s in report.scenarios] == [("first", 1, 1.0)]
    assert report.complete is True
