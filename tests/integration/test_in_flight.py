"""``--atlante-in-flight N``: one process keeps N trials running at once (``run/inflight.py``),
driven by a fake host (``fakehost.py``) for speed; the same on the real CLIs is in
``test_in_flight_real.py``.

That the trials really overlap is shown without a clock: the fake host's ``barrier`` lets a session
go on only once N sessions have started, so a run that started them one after another fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import Project, config_doc, scenario_doc
from fakehost import fake_env, install_fake_claude
from pytest_atlante.report.model import EvalReport
from pytest_atlante.report.selftest import SelftestReport


def fake_scenario(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return scenario_doc(name, task={"fixture": "eval/fixtures/app", "prompt": "FAKE:" + json.dumps(spec)},
                        checks=[{"type": "file-exists", "path": "out.txt"}])


def write_suite(project: Project, trials: int, specs: dict[str, dict[str, Any]]) -> None:
    for name, spec in specs.items():
        project.scenario(fake_scenario(name, spec), file=f"eval/scenarios/{name}.eval.json")
        project.script(name, [{"text": "Done."}])   # the self-test's reference trial needs one
    (project.root / "eval/scenarios/main.eval.json").unlink(missing_ok=True)
    project.config(config_doc(budget={"trials": trials}))
    project.build()


def argv(project: Project, out: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "--atlante-eval", "--atlante-project", str(project.root),
            "--atlante-out", str(out), "--atlante-isolation", "off", "-p", "no:cacheprovider",
            "--rootdir", str(project.root), "-q", *args]


def run_only(project: Project, tmp_path: Path, out: str, *args: str) -> subprocess.CompletedProcess[str]:
    install_fake_claude(tmp_path / "fakebin")
    env = {**os.environ, **fake_env(tmp_path / "fakebin")}
    return subprocess.run(argv(project, tmp_path / out, *args), cwd=project.root, env=env, capture_output=True,
                          text=True, timeout=600, check=False)


def run(project: Project, tmp_path: Path, out: str, *args: str) -> tuple[subprocess.CompletedProcess[str], EvalReport]:
    result = run_only(project, tmp_path, out, *args)
    path = tmp_path / out / "report.json"
    assert path.is_file(), result.stdout + result.stderr
    return result, EvalReport.model_validate_json(path.read_text())


def trials_of(report: EvalReport) -> list[tuple[str, int, str]]:
    return [(s.name, t.trial, t.verdict) for s in report.scenarios for t in s.trials]


@pytest.mark.timeout(600)
def test_n_trials_run_at_once_in_one_process(atlante_project: Project, tmp_path: Path) -> None:
    barrier = tmp_path / "barrier"
    spec = {"barrier": {"dir": str(barrier), "count": 4, "timeout": 120}, "write": {"out.txt": "x"}, "usage": [10]}
    write_suite(atlante_project, 4, {"together": spec})
    result, report = run(atlante_project, tmp_path, "out", "-p", "no:xdist", "--atlante-in-flight", "4")
    assert result.returncode == 0, result.stdout + result.stderr
    assert trials_of(report) == [("together", t, "pass") for t in (1, 2, 3, 4)]
    # Four host sessions, from four processes, each of which saw the other three start.
    pids = {(barrier / name).read_text() for name in os.listdir(barrier)}
    assert len(pids) == 4
    # pytest reported them as a serial run does: one line per trial, in item order.
    assert "4 passed" in result.stdout


@pytest.mark.timeout(600)
def test_the_report_is_the_serial_runs(atlante_project: Project, tmp_path: Path) -> None:
    """Same verdicts, trials, totals and exit status with 3 in flight as one at a time, and a failing
    trial fails its own item (the report says which)."""
    write_suite(atlante_project, 3, {
        "writes": {"write": {"out.txt": "x"}, "usage": [10, 20], "sleep": 0.2},
        "misses-two": {"write": {"out.txt": "x"}, "no_write_in": [2], "usage": [5]},
    })
    serial, serial_report = run(atlante_project, tmp_path, "serial", "-p", "no:xdist")
    wide, wide_report = run(atlante_project, tmp_path, "wide", "-p", "no:xdist", "--atlante-in-flight", "3")
    assert serial.returncode == wide.returncode == 1, wide.stdout + wide.stderr
    assert trials_of(wide_report) == trials_of(serial_report)
    assert ("misses-two", 2, "fail") in trials_of(wide_report)
    assert wide_report.verdicts == serial_report.verdicts
    assert {v: n for v, n in wide_report.verdicts.items() if n} == {"pass": 5, "fail": 1}
    assert [s.totals for s in wide_report.scenarios] == [s.totals for s in serial_report.scenarios]
    assert "FAILED eval/scenarios/misses-two.eval.json::misses-two[trial-2]" in wide.stdout


@pytest.mark.timeout(600)
def test_the_self_test_runs_its_reference_trials_at_once(atlante_project: Project, tmp_path: Path) -> None:
    """``atlante selftest`` of three scenarios, three in flight: every reference session met the
    other two (the no-op trials start no host), and the verdicts are a serial self-test's."""
    barrier = tmp_path / "barrier"
    specs = {name: {"barrier": {"dir": str(barrier), "count": 3, "timeout": 120}, "write": {"out.txt": "x"}}
             for name in ("one", "two", "three")}
    write_suite(atlante_project, 1, specs)
    result = run_only(atlante_project, tmp_path, "out", "-p", "no:xdist", "--atlante-selftest", "--atlante-in-flight", "3")
    assert result.returncode == 0, result.stdout + result.stderr
    path = tmp_path / "out" / "selftest.json"
    report = SelftestReport.model_validate_json(path.read_text())
    assert sorted((s.name, s.status) for s in report.scenarios) == [("one", "sound"), ("three", "sound"), ("two", "sound")]
    assert len(os.listdir(barrier)) == 3


def test_with_xdist_it_is_refused_before_any_session(atlante_project: Project, tmp_path: Path) -> None:
    sessions = tmp_path / "sessions.log"
    write_suite(atlante_project, 2, {"writes": {"write": {"out.txt": "x"}, "sessions": str(sessions)}})
    result = run_only(atlante_project, tmp_path, "out", "-n", "2", "--atlante-in-flight", "2")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "eval-in-flight-xdist" in result.stdout
    assert not sessions.exists()


@pytest.mark.parametrize("value", ["0", "-3", "many", "2000"])
def test_a_bad_width_is_a_usage_error(pytester: pytest.Pytester, value: str) -> None:
    result = pytester.runpytest("--atlante-eval", "--atlante-in-flight", value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--atlante-in-flight*not a number of trials from 1 to 1024*"])


@pytest.mark.timeout(600)
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_interrupts_every_trial_in_flight(atlante_project: Project, tmp_path: Path, stop: signal.Signals) -> None:
    """Ctrl-C (or CI's SIGTERM) while three trials run in threads: each is recorded as interrupted,
    none of their hosts lives on, the fourth never starts, and the report is written (exit 3)."""
    barrier = tmp_path / "barrier"
    spec = {"barrier": {"dir": str(barrier), "count": 3, "timeout": 120}, "sleep": 300, "write": {"out.txt": "x"}}
    write_suite(atlante_project, 4, {"waits": spec})
    install_fake_claude(tmp_path / "fakebin")
    env = {**os.environ, **fake_env(tmp_path / "fakebin")}
    out = tmp_path / "out"
    proc = subprocess.Popen(argv(atlante_project, out, "-p", "no:xdist", "--atlante-in-flight", "3"),
                            cwd=atlante_project.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 240
        while len(os.listdir(barrier)) < 3 if barrier.is_dir() else True:
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "three sessions never ran at once"
            time.sleep(0.1)
        pids = [int((barrier / name).read_text()) for name in os.listdir(barrier)]
        proc.send_signal(stop)
        output = proc.communicate(timeout=120)[0]
        assert proc.returncode == 3, output
        report = EvalReport.model_validate_json((out / "report.json").read_text())
        assert report.interrupted and not report.complete
        [scenario] = report.scenarios
        assert sorted((t.trial, t.interrupted, t.verdict) for t in scenario.trials) == [
            (1, True, "infra-error"), (2, True, "infra-error"), (3, True, "infra-error")]
        assert scenario.notRun == 1
        assert [pid for pid in pids if alive(pid)] == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.timeout(600)
def test_x_stops_and_the_trials_in_flight_are_not_run(atlante_project: Project, tmp_path: Path) -> None:
    """``-x``: the first failure stops the run, as in a serial run; the trials still in flight are
    stopped (no host lives on) and count as not run, not as interrupted; one that had finished
    before its item was reached counts (it ran, and was paid for)."""
    barrier = tmp_path / "barrier"
    meet = {"dir": str(barrier), "count": 4, "timeout": 120}
    write_suite(atlante_project, 2, {"a-fails": {"barrier": meet},
                                     "b-slow": {"barrier": meet, "sleep": 300, "write": {"out.txt": "x"}}})
    result, report = run(atlante_project, tmp_path, "out", "-p", "no:xdist", "--atlante-in-flight", "4", "-x")
    assert result.returncode == 1, result.stdout + result.stderr
    fails, slow = report.scenarios
    # Trial 2 of a-fails either finished before the stop (it counts) or was cut short (not run).
    assert trials_of(report)[0] == ("a-fails", 1, "fail") and set(trials_of(report)[1:]) <= {("a-fails", 2, "fail")}
    assert len(fails.trials) + fails.notRun == 2 and not any(t.interrupted for t in fails.trials)
    assert (slow.name, slow.trials, slow.notRun) == ("b-slow", [], 2)
    assert not report.complete and not report.interrupted
    pids = [int((barrier / name).read_text()) for name in os.listdir(barrier)]
    assert len(pids) == 4 and [pid for pid in pids if alive(pid)] == []


def alive(pid: int) -> bool:
    """Alive and not a zombie (a zombie is dead; its parent, gone, no longer reaps it)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False
