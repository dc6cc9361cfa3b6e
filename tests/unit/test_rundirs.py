"""Tests for pytest_atlante.rundirs: only run directories nobody holds are removed."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from pytest_atlante import rundirs

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
    young = tmp_path / "atlante-eval-young"
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
        assert rundirs.remove_dead(tmp_path) == [dead]
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            "atlante-eval-kept", "atlante-eval-link", "atlante-eval-live", "atlante-eval-unclaimed",
            "atlante-eval-young", "not-atlante"]
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
