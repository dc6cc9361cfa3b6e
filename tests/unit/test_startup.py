"""The controller's start-up work beside validation: the bubblewrap probe and the dead-run sweep."""

from __future__ import annotations

import threading

import pytest

from pytest_atlante.run import startup


def test_the_probe_and_the_sweep_run_in_their_own_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: dict[str, str] = {}
    monkeypatch.setattr(startup.isolations, "probe", lambda: ran.setdefault("probe", threading.current_thread().name) and "no bwrap")
    monkeypatch.setattr(startup.rundirs, "remove_dead", lambda: ran.setdefault("sweep", threading.current_thread().name) and [])
    work = startup.StartupWork(probe_isolation=True)
    assert work.isolation_probe() == "no bwrap"
    work.finish()
    work.finish()  # a second call does nothing
    assert ran == {"probe": "atlante-bwrap-probe", "sweep": "atlante-dead-run-sweep"}


def test_a_probe_not_started_runs_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(startup.isolations, "probe", lambda: threading.current_thread().name)
    monkeypatch.setattr(startup.rundirs, "remove_dead", list)
    work = startup.StartupWork(probe_isolation=False)
    assert work.isolation_probe() == threading.current_thread().name
    work.finish()


def test_an_error_in_a_thread_is_raised_where_it_is_joined(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise OSError("no /tmp")

    monkeypatch.setattr(startup.isolations, "probe", broken)
    monkeypatch.setattr(startup.rundirs, "remove_dead", broken)
    work = startup.StartupWork(probe_isolation=True)
    with pytest.raises(OSError, match="no /tmp"):
        work.isolation_probe()
    with pytest.raises(OSError, match="no /tmp"):
        work.finish()


def test_the_end_of_a_run_waits_for_a_probe_no_one_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    monkeypatch.setattr(startup.isolations, "probe", lambda: release.wait(5) and None)
    monkeypatch.setattr(startup.rundirs, "remove_dead", list)
    work = startup.StartupWork(probe_isolation=True)
    threading.Timer(0.2, release.set).start()
    work.finish()  # a run stopped by validation: its probe thread is not left running
    assert release.is_set()
