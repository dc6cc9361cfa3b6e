"""Several ``process.run`` calls in flight at once, from threads of this process (the reaper's
"runs in flight"): a run that ends kills what is its own and nothing of the others.

Each run is ``process_helpers/concurrent.py``: it starts the kinds of process a host CLI's run leaves
(a plain child, a ``setsid`` tool shell re-parented to the runner, a sandbox init that left the
group and dropped the token, a ``setsid env -i`` double fork), says "ready", and stays in flight
until the test creates its go file; then it reports whether each of its processes is still the
same live process.  The order of events is set by those files, never by sleeps or wall time.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_atlante.sandbox import reaper
from pytest_atlante.sandbox.isolation import Confinement, probe
from pytest_atlante.sandbox.process import RunResult, live_processes_with_token, run
from test_process import _env, _helper, _kill_leftovers  # noqa: F401  (the autouse clean-up fixture too)

# Only bounds a broken test (a run that never says "ready", a thread that never ends): never reached.
HANG_S = 120.0
ESCAPES = ("--plain-child", "--setsid-orphan", "--session-orphan")


@dataclass
class InFlight:
    """One ``process.run`` in its own thread, held in flight until ``end`` creates its go file."""

    go: Path
    lines: list[str] = field(default_factory=list)
    ready: threading.Event = field(default_factory=threading.Event)
    result: RunResult | None = None
    error: BaseException | None = None
    thread: threading.Thread | None = None

    def said(self, name: str) -> str:
        return next(line.split(" ", 1)[1] for line in self.lines if line.startswith(name + " "))

    def pids(self) -> list[int]:
        kinds = ("plain-child", "setsid-orphan", "session-orphan", "escaped-orphan")
        return [int(line.split()[1]) for line in self.lines if line.split()[0] in kinds]

    def end(self) -> RunResult:
        self.go.touch()
        assert self.thread is not None
        self.thread.join(HANG_S)
        assert not self.thread.is_alive(), "the run did not end"
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


def _start(tmp_path: Path, name: str, *options: str,
           wrap: Callable[[list[str]], list[str]] | None = None) -> InFlight:
    """Start a run in a thread and return once it said "ready" (its processes are all up)."""
    flight = InFlight(tmp_path / f"{name}.go")

    def on_line(line: str) -> bool:
        flight.lines.append(line)
        if line == "ready":
            flight.ready.set()
        return False

    def target() -> None:
        try:
            flight.result = run(_helper("concurrent.py", str(flight.go), *options), cwd=tmp_path, env=_env(),
                                timeout_s=HANG_S, on_stdout_line=on_line, wrap=wrap)
        except BaseException as exc:  # noqa: BLE001  (whatever ended the run is re-raised by end())
            flight.error = exc
        finally:
            flight.ready.set()

    flight.thread = threading.Thread(target=target, name=f"run-{name}")
    flight.thread.start()
    flight.ready.wait(HANG_S)
    assert "ready" in flight.lines, f"run {name} did not get going: {flight.lines} {flight.error!r}"
    return flight


def _gone(pid: int) -> bool:
    """Neither alive nor a zombie: killed and reaped (os.kill(pid, 0) succeeds on a zombie)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _assert_ended_whole(flight: InFlight, result: RunResult) -> None:
    """The run's processes all lived to its end, and none outlived it."""
    assert result.returncode == 0, (result.stdout, result.stderr)
    alive = [line for line in flight.lines if line.startswith("alive ")]
    assert alive and all(line.endswith(" yes") for line in alive), alive
    assert live_processes_with_token(flight.said("token")) == []


@pytest.fixture(params=["tree", "scan"])
def membership(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The kernel's child lists, or a kernel without them (the ``/proc`` scan fallback)."""
    if request.param == "scan":
        monkeypatch.setattr(reaper, "_children_of", lambda pid: None)
    yield request.param


def test_a_run_that_ends_kills_none_of_the_runs_still_in_flight(tmp_path: Path, membership: str) -> None:
    # A is older than B and C: everything of theirs became a child of this process (or of their
    # leader) after A's snapshot of its children, so only the runs in flight tell A it is not A's.
    a = _start(tmp_path, "a")
    b = _start(tmp_path, "b", *ESCAPES)
    c = _start(tmp_path, "c", *ESCAPES)
    ended_a = a.end()
    assert (ended_a.returncode, ended_a.orphans_killed) == (0, 0)
    ended_c = c.end()  # the younger first: it must not take B's either
    _assert_ended_whole(c, ended_c)
    assert ended_c.orphans_killed == 3  # its own: the plain child, the tool shell, the session member
    ended_b = b.end()
    _assert_ended_whole(b, ended_b)
    assert ended_b.orphans_killed == 3
    assert all(_gone(pid) for pid in b.pids() + c.pids())


def test_a_child_another_thread_starts_outside_any_run_is_left_alone(tmp_path: Path, membership: str) -> None:
    # A git a trial thread runs (sandbox/trialdir.py), a test's own Popen: our child since after the
    # run started, in this process's own session, where no process of any run can be.
    a = _start(tmp_path, "a")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], env=_env())
    try:
        ended = a.end()
        assert (ended.returncode, ended.orphans_killed) == (0, 0)
        assert other.poll() is None  # still running
    finally:
        other.kill()
        other.wait()


@pytest.mark.parametrize("first", ["escaper", "other"])
def test_an_escape_nothing_identifies_dies_with_the_first_run_to_end(tmp_path: Path, first: str) -> None:
    # `setsid env -i` behind a double fork: no token, no session or group of any run, our child
    # since after both runs started.  It counts for every run in flight, so whichever ends first
    # kills it; the other run is not touched.
    other = _start(tmp_path, "other")
    escaper = _start(tmp_path, "escaper", "--escaped-orphan")
    (escaped,) = escaper.pids()
    runs = [escaper, other] if first == "escaper" else [other, escaper]
    ended = [flight.end() for flight in runs]
    assert [result.returncode for result in ended] == [0, 0], ended
    assert [result.orphans_killed for result in ended] == [1, 0]
    assert _gone(escaped)
    assert escaper.lines[-1] == "alive escaped-orphan " + ("yes" if first == "escaper" else "no")


def test_a_run_that_ends_leaves_a_bubblewrapped_run_alone(tmp_path: Path) -> None:
    # B under real bubblewrap: its processes live in their own PID namespace below B's leader (the
    # wrapper), and its sandbox init is re-parented to this process when the wrapper exits first.
    assert probe() is None, "bubblewrap must work here (scripts/setup installs it)"
    env = _env()
    confinement = Confinement(writable=(tmp_path,), hidden=(), trial_dir=tmp_path, cwd=tmp_path)
    a = _start(tmp_path, "a")
    b = _start(tmp_path, "b", *ESCAPES, wrap=confinement.wrapper(env))
    ended_a = a.end()
    assert (ended_a.returncode, ended_a.orphans_killed) == (0, 0)
    # How many of B's processes its own sweep still finds alive depends on how fast the namespace
    # dies with its init, so B's count is not asserted; that none survives is.
    _assert_ended_whole(b, b.end())


def test_a_run_is_registered_while_its_leader_is_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No sweep may see a run's leader before the run is in the registry: the registry's lock is
    # held from before the Popen until the run is registered.
    held: list[bool] = []
    real_popen = subprocess.Popen

    def popen(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        held.append(reaper.RUNS_IN_FLIGHT.locked())
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen)
    assert run(["true"], cwd=tmp_path, env=_env(), timeout_s=HANG_S).returncode == 0
    assert held == [True]
    assert reaper.RUNS_IN_FLIGHT.tokens() == ()  # unregistered once it ended
