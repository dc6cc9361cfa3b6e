"""Verdict integrity against a hostile agent, on both real CLIs through the scripted model.

What an agent with a shell tries here: processes that outlive the run (``env -i``, ``setsid env -i``,
a double fork, all ignoring SIGINT, SIGTERM and SIGHUP), writes to the user's HOME, the project and
``/tmp``, and a runner that dies under it (SIGKILL) or is cancelled (SIGTERM, as CI does).  Every
process carries a unique marker in its command line, so ``/proc`` says whether it is still alive.

Namespace isolation (bubblewrap) is required where a test says so: on a machine without it that run
exits 3 (``eval-isolation-unavailable``) and the test fails, so CI proves it is there.  The ``off``
path is run too, where the runner alone must find and kill what escaped.

Which hosts: each host's CLI, tool shell and signal handling are its own, so the serial runs and the
runner's death go through ``EVERY_HOST``; how the xdist controller hands a kill or a SIGTERM to its
workers is the runner's alone, so the ``-n 2`` variants run once, on ``ONE_HOST``.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import EVERY_HOST, ONE_HOST, per_host_then_once
from pytest_atlante.report.model import EvalReport
from pytest_atlante.sandbox.trialdir import SANDBOX_DIR_PREFIX
from trial_helpers import (
    ALL_CHECKS_PASS,
    DONE,
    HostName,
    TrialCase,
    assert_clean_run,
    bash_turn,
    new_marker,
    processes_with,
    run_eval,
    sleeper,
    write_project,
)

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(600), pytest.mark.usefixtures("on_path")]

# Ignores every polite signal, touches the flag file named by its first argument, sleeps 300 s.
STUBBORN = ("import pathlib, signal, sys, time; "
            "[signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)]; "
            "pathlib.Path(sys.argv[1]).touch(); time.sleep(300)")
ESCAPES = {
    "plain": "python3 -c \"$P\" {flag} {marker}",
    "env-i": "env -i python3 -c \"$P\" {flag} {marker}",
    "setsid-env-i": "setsid env -i python3 -c \"$P\" {flag} {marker}",
    "double-fork": "( ( env -i python3 -c \"$P\" {flag} {marker} </dev/null >/dev/null 2>&1 & ) & )",
}


def escape_case(marker: str, targets: list[Path]) -> TrialCase:
    """Start every kind of escaping process and wait until each has touched its flag; then write
    one file into each of ``targets`` (HOME, the project, /tmp) by absolute path."""
    lines = [f"P='{STUBBORN}'"]
    for kind, template in ESCAPES.items():
        command = template.format(flag=f"f-{kind}", marker=f"{marker}-{kind}")
        lines.append(command if kind == "double-fork" else f"{command} </dev/null >/dev/null 2>&1 &")
    flags = " && ".join(f"[ -e f-{kind} ]" for kind in ESCAPES)
    # The 300 rounds spelled out: Gemini CLI's shell tool refuses any command substitution, $(seq …) too.
    lines.append(f"for i in {' '.join(map(str, range(300)))}; do {flags} && break; sleep 0.1; done")
    writes = "; ".join([*(f"echo escaped > {target}" for target in targets), "echo done > inside.txt"])
    return TrialCase(
        name="escapes",
        turns=[bash_turn("\n".join(lines)), bash_turn(writes), DONE],
        checks=[*({"type": "file-exists", "path": f"f-{kind}"} for kind in ESCAPES),
                {"type": "file-exists", "path": "inside.txt"}],
        verdict="pass",
        outcomes=("pass",) * (len(ESCAPES) + 1),
    )


@pytest.mark.parametrize(("host", "isolation", "workers"),
                         per_host_then_once([("namespace", "0"), ("off", "0")], once=[("off", "2")]))
def test_no_process_survives_and_nothing_outside_is_written(
    pytester: pytest.Pytester, tmp_path: Path, private_tmp: Path, host: HostName, isolation: str, workers: str
) -> None:
    marker = new_marker()
    home = Path(os.environ["HOME"])  # pytester's HOME: the runner's user HOME
    targets = [home / f"escape-{marker}.txt", tmp_path / "project" / f"escape-{marker}.txt",
               Path("/tmp") / f"escape-{marker}.txt"]
    project = write_project(tmp_path / "project", host, [escape_case(marker, targets)])
    try:
        run = run_eval(pytester, project, tmp_path / "out", "--atlante-isolation", isolation, "-n", workers)
        written = [target for target in targets if target.exists()]
    finally:
        Path("/tmp", f"escape-{marker}.txt").unlink(missing_ok=True)
    trial = run.trial("escapes")
    assert all(check.passed for check in trial.checks), run.output()  # every escaping process really started
    # Codex runs its own sandbox (workspace-write: the sandbox and its TMPDIR writable, nothing
    # else) wherever ours is off, so the writes fail there too.
    contained = isolation == "namespace" or host == "codex"
    if contained:
        assert (run.result.ret, trial.verdict, trial.escapes) == (0, "pass", []), run.output()
    else:
        # Without isolation the writes land, and the always-on audit fails the trial naming them
        # (HOME and the project are watched; /tmp is not).
        assert (run.result.ret, trial.verdict) == (1, "fail"), run.output()
        assert trial.escapes == sorted([f"escape-{marker}.txt", f"~/escape-{marker}.txt"])
    assert run.report.isolation is not None
    assert run.report.isolation.mode == ("namespace" if isolation == "namespace" else "none")
    # None of them, whatever it did to its environment, session or signals, outlived the run.
    assert processes_with(marker) == []
    if contained:
        assert written == []  # HOME, project and /tmp are out of reach (read-only or private)
    else:
        assert written == targets  # without isolation they are not: the test above can fail
    assert_clean_run(run, private_tmp)


def sleeping_case(marker: str) -> TrialCase:
    """A session that sleeps in a tool shell (plus a setsid'd sleeper) until it is stopped.  The
    marker is in the prompt too, so the CLI's and bubblewrap's command lines carry it."""
    command = f"(setsid {sleeper(marker + '-detached', 'detached.txt')} &) ; {sleeper(marker, 'sleeping.txt')}"
    return TrialCase(name="sleeps", prompt=f"Sleep. {marker}", turns=[bash_turn(command), DONE],
                     checks=[{"type": "file-exists", "path": "sleeping.txt"}], verdict="pass", outcomes=("pass",))


def start_eval(project: Path, out: Path, *args: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "pytest", "--atlante-eval", "--atlante-scripted", "--atlante-project", str(project),
            "--atlante-out", str(out), "-p", "no:cacheprovider", "--rootdir", str(project), *args]
    return subprocess.Popen(argv, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for(marker: str, count: int, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while len(processes_with(marker)) < count and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(processes_with(marker)) >= count, f"the trial never got going: {processes_with(marker)}"


def wait_until_gone(marker: str, timeout_s: float = 15) -> list[tuple[int, str]]:
    deadline = time.monotonic() + timeout_s
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    return processes_with(marker)


@pytest.mark.parametrize("host", EVERY_HOST)
def test_sigkill_of_the_runner_leaves_nothing_running_and_the_next_run_cleans_up(
    tmp_path: Path, private_tmp: Path, host: HostName
) -> None:
    marker = new_marker()
    project = write_project(tmp_path / "project", host, [sleeping_case(marker)])
    proc = start_eval(project, tmp_path / "out", "--atlante-isolation", "namespace")
    try:
        wait_for(marker, 4)  # bubblewrap and the CLI (prompt), both sleepers
    finally:
        proc.kill()
        proc.communicate(timeout=60)
    assert wait_until_gone(marker) == []  # the CLI, bubblewrap and both sleepers died with the runner
    dead = [p for p in private_tmp.iterdir() if p.name.startswith(SANDBOX_DIR_PREFIX)]
    assert len(dead) == 1 and any(dead[0].iterdir())  # the killed run could not clean up after itself
    # Another run on this machine is alive and holds its run directory: it must be left alone.
    live = private_tmp / f"{SANDBOX_DIR_PREFIX}live-run"
    (live / "trial-1").mkdir(parents=True)
    lock = os.open(live, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(lock, fcntl.LOCK_SH)
        for path in (dead[0], live):  # older than the grace a just-created run directory gets
            os.utime(path, (time.time() - 3600, time.time() - 3600))
        again = start_eval(project, tmp_path / "out-2", "-k", "no-trial-matches-this")
        output, _ = again.communicate(timeout=300)
        assert not dead[0].exists(), output
        assert (live / "trial-1").is_dir()
    finally:
        os.close(lock)


@pytest.mark.parametrize(("host", "workers"), per_host_then_once(["0"], once=["2"]))
def test_sigterm_stops_the_run_like_ctrl_c(tmp_path: Path, private_tmp: Path, host: HostName, workers: str) -> None:
    marker = new_marker()
    project = write_project(tmp_path / "project", host, [sleeping_case(marker)])
    out = tmp_path / "out"
    proc = start_eval(project, out, "-n", workers)
    try:
        wait_for(marker, 3)
        proc.send_signal(signal.SIGTERM)  # to the runner (the controller under xdist) only
        output, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 3, output
    report = EvalReport.model_validate_json((out / "report.json").read_text())
    assert report.interrupted and not report.complete and report.exitStatus == 3
    [trial] = [t for s in report.scenarios for t in s.trials]
    assert trial.interrupted and trial.verdict == "infra-error"
    assert wait_until_gone(marker) == []
    assert [p for p in private_tmp.iterdir() if p.name.startswith(SANDBOX_DIR_PREFIX)] == []


def test_the_report_says_when_no_namespace_isolation_was_possible(
    pytester: pytest.Pytester, tmp_path: Path, private_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bwrap that cannot create namespaces (as on a machine with user namespaces disabled).
    fake_bin = tmp_path / "fake-bwrap"
    fake_bin.mkdir()
    (fake_bin / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    (fake_bin / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_bin}{os.pathsep}{os.environ['PATH']}")
    project = write_project(tmp_path / "project", ONE_HOST, [ALL_CHECKS_PASS])
    required = run_eval(pytester, project, tmp_path / "out-required", "--atlante-isolation", "namespace")
    assert required.result.ret == 3, required.output()
    assert "eval-isolation-unavailable" in required.output()
    assert [e["code"] for e in required.report.errors] == ["eval-isolation-unavailable"]
    assert required.report.verdicts["pass"] == 0  # no trial ran
    fallback = run_eval(pytester, project, tmp_path / "out-auto")
    assert fallback.result.ret == 0, fallback.output()
    assert "WARNING: trials run without OS-level isolation" in fallback.output()
    assert fallback.report.isolation is not None and fallback.report.isolation.mode == "none"
    assert "No permissions to create new namespace" in (fallback.report.isolation.reason or "")
    assert_clean_run(fallback, private_tmp)


# Loaded into the eval run (``-p zombie_count``): once the run is over, the run's own zombie
# children — state Z in /proc/<pid>/stat with this process as their parent — as "pid comm" lines.
ZOMBIE_COUNT_PLUGIN = '''
import os, pathlib, pytest

@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    found = []
    for name in os.listdir("/proc"):
        try:
            stat = pathlib.Path("/proc", name, "stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if fields[0] == b"Z" and int(fields[1]) == os.getpid():
            found.append(stat[:stat.rfind(b")") + 1].decode())
    pathlib.Path(os.environ["ATLANTE_TEST_ZOMBIES"]).write_text("\\n".join(found))
'''


def test_the_runner_reaps_every_process_it_started(
    pytester: pytest.Pytester, tmp_path: Path, private_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Bubblewrap's outer process exits before its sandbox init, which is then re-parented to the
    # runner (a child subreaper) and dies a moment later: unreaped, one zombie per run or nearly.
    # Four trials of three wrapped runs each (the session, two command checks) and the probe: a dozen
    # chances for a zombie where nearly every one leaves one unreaped.
    pytester.makepyfile(zombie_count=ZOMBIE_COUNT_PLUGIN)
    zombies = tmp_path / "zombies.txt"
    monkeypatch.setenv("ATLANTE_TEST_ZOMBIES", str(zombies))
    project = write_project(tmp_path / "project", ONE_HOST, [ALL_CHECKS_PASS], budget={"trials": 4})
    run = run_eval(pytester, project, tmp_path / "out", "--atlante-isolation", "namespace", "-n", "0",
                   "-p", "zombie_count")
    assert run.result.ret == 0, run.output()
    assert run.report.isolation is not None and run.report.isolation.mode == "namespace"
    assert run.report.verdicts["pass"] == 4
    assert zombies.read_text() == ""  # the runner's zombie children once all trials are over
    assert_clean_run(run, private_tmp)
