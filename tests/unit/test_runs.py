"""The project's runs (``report/runs.py``): ``atlante runs``, the run ``atlante view`` opens, retention."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pytest_atlante.cli import main
from pytest_atlante.records import TrialRecord
from pytest_atlante.report import runs
from pytest_atlante.report.model import (
    BudgetRecord,
    HostIdentity,
    RunState,
    SelectionRecord,
    build_report,
    keyed,
    write_report,
)
from pytest_atlante.report.statrecords import Comparison
from pytest_atlante.trial.runner import TrialKey


@pytest.fixture(autouse=True)
def _own_report_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)


def write_run(project: Path, run_id: str, *, selected: int = 2, suite: int = 2, narrowed: tuple[str, ...] = (),
              complete: bool = True, baseline: str | None = None) -> Path:
    """A sealed report of ``selected`` of the suite's ``suite`` trials, as a run writes it."""
    records = [TrialRecord(scenario="alpha", trial=t, nodeId=f"a.eval.json::alpha[trial-{t}]",
                           verdict="pass" if t % 2 else "fail", durationMs=10) for t in range(1, selected + 1)]
    started = datetime.strptime(run_id[:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    state = RunState(run_id=run_id, started_at=started, scripted=True,
                     host=HostIdentity(name="claude-code", version="2.1.197", dialect="claude-code"),
                     budget=BudgetRecord(trials=suite, timeoutMs=1000, maxSessions=10, maxTokens=1000),
                     records=keyed(records), collected=True,
                     expected={r.nodeId: TrialKey("alpha", r.trial) for r in records},
                     selection=SelectionRecord(suiteTrials=suite, narrowedBy=list(narrowed)))
    report = build_report(state, [("alpha", "a.eval.json", "local", selected)], finished_at=started + timedelta(seconds=5),
                          complete=complete, exit_status=1)
    if baseline is not None:
        report = report.model_copy(update={"comparison": Comparison(baseRunId=baseline, newRunId=run_id)})
    return write_report(report, runs.runs_dir(project) / run_id)


def test_each_run_folder_has_a_status(tmp_path: Path) -> None:
    project = tmp_path / "project"
    write_run(project, "20261201T010000Z-aaaaaa")
    write_run(project, "20261201T020000Z-bbbbbb", selected=1, narrowed=("-k trial-1",))
    write_run(project, "20261201T030000Z-cccccc", complete=False)
    top = runs.runs_dir(project)
    (top / "20261201T040000Z-dddddd").mkdir()
    (top / "20261201T040000Z-dddddd" / "diagnostics.json").write_text("{}")
    (top / "20261201T050000Z-eeeeee").mkdir()  # a run killed before its report
    planted = top / "20261201T060000Z-ffffff"
    planted.mkdir()
    (planted / "report.json").write_bytes((top / "20261201T010000Z-aaaaaa" / "report.json").read_bytes())
    lock = runs.hold(top / "20261201T070000Z-gggggg")
    (top / "20261201T080000Z-hhhhhh").mkdir()
    (top / "20261201T080000Z-hhhhhh" / "selftest.json").write_text("{}")
    os.symlink(top / "20261201T010000Z-aaaaaa", top / "29991231T000000Z-link")  # no run: a symlink
    try:
        found = [(e.run_id, e.status) for e in runs.list_runs(project)]
        assert found == [("20261201T080000Z-hhhhhh", "selftest"), ("20261201T070000Z-gggggg", "running"),
                         ("20261201T060000Z-ffffff", "unsealed"), ("20261201T050000Z-eeeeee", "unfinished"),
                         ("20261201T040000Z-dddddd", "invalid"), ("20261201T030000Z-cccccc", "partial"),
                         ("20261201T020000Z-bbbbbb", "partial"), ("20261201T010000Z-aaaaaa", "complete")]
        assert [e.run_id for e in runs.complete_reports(project)] == ["20261201T010000Z-aaaaaa"]
    finally:
        lock.release()
    assert runs.list_runs(project)[1].status == "unfinished"  # released: nobody holds it now
    assert not (top / "20261201T070000Z-gggggg" / runs.LOCK_FILE).exists()


def test_a_deselected_trial_makes_a_run_partial(tmp_path: Path) -> None:
    """Even with no option recorded (a plugin's deselection), fewer trials than the suite's is partial."""
    write_run(tmp_path, "20261201T010000Z-aaaaaa", selected=1, suite=2)
    assert [e.status for e in runs.list_runs(tmp_path)] == ["partial"]


def test_atlante_runs_lists_newest_first_from_a_subdirectory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    project = tmp_path / "project"
    (project / "atlante.jsonc").parent.mkdir(parents=True)
    (project / "atlante.jsonc").write_text("{}")
    write_run(project, "20261201T010000Z-aaaaaa")
    write_run(project, "20261201T020000Z-bbbbbb", selected=1, narrowed=("-k trial-1",))
    (project / "src" / "deep").mkdir(parents=True)
    monkeypatch.chdir(project / "src" / "deep")
    assert main(["runs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["run", "started", "host", "selection", "verdicts", "exit", "status"]
    assert lines[1].startswith("20261201T020000Z-bbbbbb") and lines[1].endswith("partial")
    assert "1/2 trials (-k trial-1)" in lines[1] and "1 pass" in lines[1] and "claude-code (scripted)" in lines[1]
    assert lines[2].startswith("20261201T010000Z-aaaaaa") and lines[2].endswith("complete")
    assert "2/2 trials" in lines[2] and "1 pass, 1 fail" in lines[2] and "2026-12-01T01:00:00" in lines[2]
    assert lines[3] == f"2 run(s) in {project / '.atlante' / 'eval'}"
    assert not (project / "src" / "deep" / ".atlante").exists()


def test_view_opens_the_newest_complete_run_and_says_which(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "atlante.jsonc").write_text("{}")
    write_run(tmp_path, "20261201T010000Z-aaaaaa")
    write_run(tmp_path, "20261201T020000Z-bbbbbb", selected=1, narrowed=("-k trial-1",))
    monkeypatch.chdir(tmp_path)
    assert main(["view"]) == 0
    out = capsys.readouterr().out
    assert "the newest complete run, 20261201T010000Z-aaaaaa" in out
    assert (runs.runs_dir(tmp_path) / "20261201T010000Z-aaaaaa" / "report.html").is_file()
    assert not (runs.runs_dir(tmp_path) / "20261201T020000Z-bbbbbb" / "report.html").exists()


def test_view_falls_back_to_the_newest_partial_run_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    write_run(tmp_path, "20261201T020000Z-bbbbbb", selected=1, narrowed=("-k trial-1",))
    monkeypatch.chdir(tmp_path)
    assert main(["view"]) == 0
    assert "no complete run; the newest partial run, 20261201T020000Z-bbbbbb" in capsys.readouterr().out


def test_retention_keeps_the_newest_and_never_a_running_run_or_a_baseline(tmp_path: Path) -> None:
    ids = [f"20261201T0{h}0000Z-aaaaaa" for h in range(1, 8)]
    for run_id in ids:
        write_run(tmp_path, run_id, baseline=ids[1] if run_id == ids[6] else None)
    top = runs.runs_dir(tmp_path)
    lock = runs.hold(top / ids[2])            # an old run still going (a long CI job)
    try:
        removed = runs.prune(tmp_path, 2, protect=[top / ids[3] / "report.json"])  # this run's --atlante-baseline
    finally:
        lock.release()
    left = sorted(p.name for p in top.iterdir())
    # kept: the newest two; ids[1]: the baseline a kept report compared against; ids[2]: running;
    # ids[3]: named by --atlante-baseline.  Only ids[0], ids[4] go.
    assert left == [ids[1], ids[2], ids[3], ids[5], ids[6]]
    assert sorted(p.name for p in removed) == [ids[0], ids[4]]


def test_keep_runs_is_configurable_and_validated(tmp_path: Path) -> None:
    from pytest_atlante.suite.config import DEFAULT_KEEP_RUNS, load_project_config

    (tmp_path / "atlante.jsonc").write_text(json.dumps({"version": "0.3", "eval": {
        "host": "claude-code", "scenarios": "*.eval.json*", "keepRuns": 5}}))
    config, _, problems = load_project_config(tmp_path)
    assert config is not None and config.eval is not None and config.eval.keepRuns == 5 and not problems
    (tmp_path / "atlante.jsonc").write_text(json.dumps({"version": "0.3", "eval": {
        "host": "claude-code", "scenarios": "*.eval.json*", "keepRuns": 0}}))
    config, _, problems = load_project_config(tmp_path)
    assert config is None and [p.location for p in problems] == ["$.eval.keepRuns"]
    assert DEFAULT_KEEP_RUNS >= 10
