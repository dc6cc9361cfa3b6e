"""Tests for pytest_atlante.sandbox.rundirs: only run directories nobody holds are removed."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_atlante.sandbox import rundirs

HOUR_AGO = time.time() - 3600


def _old_run_dir(parent: Path, name: str, *, claimed: bool = True) -> Path:
    path = parent / f"atlante-eval-{name}"
    (path / "scenario-1" / "sandbox").mkdir(parents=True)
    if claimed:
        (path / rundirs.CLAIMED_MARKER).touch()
    os.utime(path, (HOUR_AGO, HOUR_AGO))
    return path


def test_only_dead_runs_directories_are_removed(tmp_path: Path) -> None:
    dead = _old_run_dir(tmp_path, "dead")
    kept = _old_run_dir(tmp_path, "kept")
    (kept / rundirs.KEPT_MARKER).touch()
    os.utime(kept, (HOUR_AGO, HOUR_AGO))
    young = tmp_path / "atlante-eval-young"  # a dead run's, just made: age is no protection
    young.mkdir()
    (young / rundirs.CLAIMED_MARKER).touch()
    _old_run_dir(tmp_path, "unclaimed", claimed=False)  # an older atlante's run: it takes no lock
    other = tmp_path / "not-atlante"
    other.mkdir()
    os.utime(other, (HOUR_AGO, HOUR_AGO))
    link = tmp_path / "atlante-eval-link"
    link.symlink_to(other)
    # A live run in another process holds its directory for as long as that process lives.
    live = _old_run_dir(tmp_path, "live")
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_SH); "
         "print('held', flush=True); time.sleep(300)", str(live)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert rundirs.remove_dead(tmp_path) == [dead, young]
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            "atlante-eval-kept", "atlante-eval-link", "atlante-eval-live", "atlante-eval-unclaimed", "not-atlante"]
    finally:
        holder.kill()
        holder.wait()
    # Its process died (even by SIGKILL): the lock went with it.
    assert rundirs.remove_dead(tmp_path) == [live]


def test_a_claim_is_held_until_released(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    claim = rundirs.claim("r1")
    path = tmp_path / "atlante-eval-r1"
    (path / "scenario-1").mkdir()  # a trial directory the run could not remove (it is not empty)
    os.utime(path, (HOUR_AGO, HOUR_AGO))
    # flock is per open file description: a second descriptor, even in this process, is refused.
    assert rundirs.remove_dead(tmp_path) == []
    claim.release()
    claim.release()  # idempotent
    assert rundirs.remove_dead(tmp_path) == [path]


def test_finish_removes_an_emptied_run_directory_and_protects_kept_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    rundirs.claim("r2").release()
    rundirs.finish("r2", keep=False)
    assert not (tmp_path / "atlante-eval-r2").exists()
    claim = rundirs.claim("r3")
    (tmp_path / "atlante-eval-r3" / "scenario-1").mkdir()
    claim.release()
    rundirs.finish("r3", keep=True)
    os.utime(tmp_path / "atlante-eval-r3", (HOUR_AGO, HOUR_AGO))
    assert rundirs.remove_dead(tmp_path) == []
    assert (tmp_path / "atlante-eval-r3" / "scenario-1").is_dir()


def test_the_last_process_of_a_run_out_removes_its_emptied_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under xdist a worker can finish after the controller finished the run (SIGTERM): whoever
    releases last removes the directory once it is empty; an earlier release never does."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    path = tmp_path / "atlante-eval-r4"
    controller_view, worker = rundirs.claim("r4"), rundirs.claim("r4")
    controller_view.release()
    assert path.is_dir()  # the worker still holds it
    worker.release()
    assert not path.exists()


def test_a_dead_runs_directory_is_removed_however_young(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No age rule: a run killed a moment ago is removed by the next run, copied login and all."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    script = ("import sys, time; from pytest_atlante.sandbox import rundirs; c = rundirs.claim('k1'); "
              "d = rundirs.run_dir('k1') / 'scenario-1' / 'home' / '.claude'; d.mkdir(parents=True); "
              "(d / '.credentials.json').write_text('secret'); print('held', flush=True); time.sleep(300)")
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "TMPDIR": str(tmp_path)})
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        path = tmp_path / "atlante-eval-k1"
        assert (path / "scenario-1" / "home" / ".claude" / ".credentials.json").is_file()
        assert rundirs.remove_dead(tmp_path) == []  # alive: held
    finally:
        holder.kill()  # SIGKILL: nothing of the run cleans up
        holder.wait()
    assert rundirs.remove_dead(tmp_path) == [path]
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_at_any_step_of_a_claim_never_takes_the_claimed_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window between making a run directory and locking it: a sweeper run just before every
    lock and every rename ``claim`` does (and before the name appears) finds nothing to remove."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    sweeps: list[list[Path]] = []
    real_flock, real_rename = fcntl.flock, os.rename
    busy = False

    def sweep_first(real: Any) -> Any:
        def call(*args: Any) -> Any:
            nonlocal busy
            if not busy:
                busy = True
                try:
                    sweeps.append(rundirs.remove_dead(tmp_path))
                finally:
                    busy = False
            return real(*args)
        return call

    monkeypatch.setattr(fcntl, "flock", sweep_first(real_flock))
    monkeypatch.setattr(os, "rename", sweep_first(real_rename))
    first = rundirs.claim("fresh")      # created: flock of the half-made directory, then its rename
    path = tmp_path / "atlante-eval-fresh"
    (path / "scenario-1").mkdir()
    second = rundirs.claim("fresh")     # the existing directory: flock, then the check
    monkeypatch.setattr(fcntl, "flock", real_flock)
    monkeypatch.setattr(os, "rename", real_rename)
    assert sweeps and all(found == [] for found in sweeps), sweeps
    assert (path / "scenario-1").is_dir() and (path / rundirs.CLAIMED_MARKER).is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["atlante-eval-fresh"]  # no temporary name left
    first.release()
    assert rundirs.remove_dead(tmp_path) == []  # still held by the second claim
    second.release()
    assert rundirs.remove_dead(tmp_path) == [path]


def test_a_claim_that_waited_for_a_sweeper_starts_over_in_a_new_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim opened a dead run's directory just as a sweeper took it: it waits for the lock, finds
    the name no longer leads to what it locked, and makes a fresh directory instead of living in a
    removed one."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    path = tmp_path / "atlante-eval-again"
    (path / "scenario-1").mkdir(parents=True)
    (path / rundirs.CLAIMED_MARKER).touch()
    real_flock = fcntl.flock
    swept: list[Path] = []

    def sweep_then_lock(fd: int, operation: int) -> None:
        if operation == fcntl.LOCK_SH and not swept:
            swept.extend(rundirs.remove_dead(tmp_path))  # the sweeper wins the race for the lock
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", sweep_then_lock)
    held = rundirs.claim("again")
    monkeypatch.setattr(fcntl, "flock", real_flock)
    assert swept == [path]
    assert path.is_dir() and not (path / "scenario-1").exists()  # a new one (inode numbers get reused)
    assert rundirs.remove_dead(tmp_path) == []
    held.release()
    assert not path.exists()  # released with nothing in it: removed by the last one out


def test_live_claims_survive_a_sweeper_racing_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Claims made, re-made and released as fast as possible while another thread sweeps: whatever a
    claim holds is never removed (flock is per open file, so threads contend as processes do)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    stop = threading.Event()
    failures: list[str] = []
    swept: list[Path] = []

    def sweeper() -> None:
        while not stop.is_set():
            swept.extend(rundirs.remove_dead(tmp_path))

    def claimer(worker: int) -> None:
        for round_ in range(150):
            run_id = f"w{worker}-{round_ % 3}"  # ids come back: claims of existing (dead) directories too
            path = tmp_path / f"atlante-eval-{run_id}"
            claim = rundirs.claim(run_id)
            try:
                (path / f"t{round_}").mkdir()
                again = rundirs.claim(run_id)  # a second process of the same run
                claim.release()
                if not (path / f"t{round_}").is_dir() or not (path / rundirs.CLAIMED_MARKER).is_file():
                    failures.append(f"{path} was removed while held")
                again.release()  # non-empty: left for the sweeper, as a killed run leaves it
            except OSError as exc:
                failures.append(f"{path}: {exc}")

    sweeping = threading.Thread(target=sweeper)
    sweeping.start()
    workers = [threading.Thread(target=claimer, args=(n,)) for n in range(4)]
    try:
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join()
    finally:
        stop.set()
        sweeping.join()
    assert failures == []
    swept.extend(rundirs.remove_dead(tmp_path))
    assert swept  # the released (dead) directories did go, whenever the sweeper came
    assert list(tmp_path.iterdir()) == []  # no temporary name left behind either


def test_the_controller_holds_its_run_directory_until_finish(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between trials of different processes (xdist) and until ``--atlante-keep`` marked it kept, no
    trial process may hold the run directory: the controller does, from its ``claim`` to ``finish``."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    path = tmp_path / "atlante-eval-r5"
    held = rundirs.claim("r5")
    (path / "sources").mkdir()
    worker = rundirs.claim("r5")
    (path / "scenario-1").mkdir()  # a kept trial
    worker.release()               # the last worker is done; the controller has not finished yet
    assert rundirs.remove_dead(tmp_path) == []
    rundirs.finish("r5", keep=True, held=held)
    assert rundirs.remove_dead(tmp_path) == []  # kept
    assert (path / "scenario-1").is_dir()


def test_a_symlink_or_another_users_directory_is_never_claimed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "atlante-eval-link").symlink_to(elsewhere)
    with pytest.raises(OSError):
        rundirs.claim("link")
    assert list(elsewhere.iterdir()) == []
