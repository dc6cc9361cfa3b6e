"""The project's runs: the folders under ``<project>/.atlante/eval/``, what each holds, and retention.

One listing every command that looks at past runs calls: ``atlante runs`` (the table),
``atlante view`` without an argument (the newest *complete* run), ``atlante history`` (the folders,
via :func:`run_dirs`, each report read narrow by ``report/history.py``; the sealed
complete reports) and retention at the end of a run (``eval.keepRuns``).

Each run folder is named by its run id, which sorts by start time (``model.new_run_id``), and is in
one of these states:

- ``running``: its run is alive (it holds the folder's lock, :func:`hold`);
- ``complete``: a sealed report of a run that ran every trial of its whole suite (no ``-k``, ``-m``,
  ``--deselect``, ``--lf``, path, ``--atlante-scenario`` or shard narrowed it, no trial missing);
- ``partial``: a sealed report of a narrowed, interrupted or unfinished selection;
- ``selftest``: the self-test's ``selftest.json``;
- ``invalid``: the run stopped at validation (``diagnostics.json``, no trial ran);
- ``unsealed``: a report no run of this user's wrote (``report/seal.py``);
- ``unreadable``: a report file that cannot be read or is no report (a FIFO, junk);
- ``unfinished``: nothing final and nobody holding it: a run that was killed.

Only sealed reports are used where a report is picked up without being named (``report/seal.py``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pytest_atlante.report import reader
from pytest_atlante.report.model import REPORT_FILE, EvalReport
from pytest_atlante.report.selftest import SELFTEST_FILE

__all__ = [
    "LOCK_FILE",
    "RunEntry",
    "RunLock",
    "complete_reports",
    "hold",
    "is_whole",
    "list_runs",
    "newest_complete",
    "prune",
    "run_dirs",
    "runs_dir",
    "table_lines",
]

DIAGNOSTICS_FILE = "diagnostics.json"
LOCK_FILE = ".running"

RunStatus = Literal["running", "complete", "partial", "selftest", "invalid", "unsealed", "unreadable", "unfinished"]


def runs_dir(project_root: Path) -> Path:
    return project_root / ".atlante" / "eval"


@dataclass(frozen=True)
class RunEntry:
    run_id: str
    directory: Path
    status: RunStatus
    report: EvalReport | None = None   # the sealed report (complete and partial runs)
    problem: str | None = None         # why a report there could not be used (unsealed)

    @property
    def report_path(self) -> Path:
        return self.directory / REPORT_FILE


def is_whole(report: EvalReport) -> bool:
    """The run ran every trial its suite asks for: complete, and nothing narrowed its selection.

    Reports that predate ``selection`` (and merged reports, which hold the whole suite) count as
    whole when complete."""
    if not report.complete or report.shard is not None:
        return False
    selection = report.selection
    if selection is None:
        return True
    return not selection.narrowedBy and report.selectedTrials == selection.suiteTrials


def is_running(directory: Path) -> bool:
    """Some live process of the run holds the folder's lock (:func:`hold`)."""
    try:
        fd = os.open(directory / LOCK_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing drops the probe's lock
    return False


class RunLock:
    """The run's hold on its folder: taken before the first trial, released when the report is written."""

    def __init__(self, fd: int, path: Path) -> None:
        self._fd: int | None = fd
        self._path = path

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            self._path.unlink()
        os.close(fd)


def hold(directory: Path) -> RunLock:
    """Create the run's folder and hold its lock while the run lives (OSError if it cannot)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise
    return RunLock(fd, path)


def _entry(directory: Path) -> RunEntry:
    run_id = directory.name
    if is_running(directory):
        return RunEntry(run_id, directory, "running")
    report_path = directory / REPORT_FILE
    if os.path.lexists(report_path):
        try:
            report = reader.read_report(report_path, sealed=True)
        except reader.ReportRejected as exc:
            status: RunStatus = "unsealed" if exc.code == "report-unsealed" else "unreadable"
            return RunEntry(run_id, directory, status, problem=exc.reason)
        return RunEntry(run_id, directory, "complete" if is_whole(report) else "partial", report)
    if (directory / SELFTEST_FILE).is_file():
        return RunEntry(run_id, directory, "selftest")
    if (directory / DIAGNOSTICS_FILE).is_file():
        return RunEntry(run_id, directory, "invalid")
    return RunEntry(run_id, directory, "unfinished")


def run_dirs(project_root: Path) -> list[Path]:
    """The run folders, newest first: real directories only (a symlink planted there is no run)."""
    top = runs_dir(project_root)
    try:
        with os.scandir(top) as found:
            names = [e.name for e in found if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")]
    except OSError:
        return []
    return [top / name for name in sorted(names, reverse=True)]


def list_runs(project_root: Path) -> list[RunEntry]:
    """Every run folder of the project, newest first."""
    return [_entry(directory) for directory in run_dirs(project_root)]


def complete_reports(project_root: Path) -> list[RunEntry]:
    """The runs with a sealed report of their whole suite, newest first (``atlante history``)."""
    return [entry for entry in list_runs(project_root) if entry.status == "complete"]


def newest_complete(project_root: Path, *, or_partial: bool = False) -> RunEntry | None:
    """The newest run whose sealed report covers its whole suite; ``or_partial``: when there is none,
    the newest partial run, or a report file that cannot be read (``atlante view`` without an
    argument then says why it cannot be read, rather than that there is nothing)."""
    partial = None
    for directory in run_dirs(project_root):
        entry = _entry(directory)
        if entry.status == "complete":
            return entry
        if entry.status in ("partial", "unreadable") and partial is None:
            partial = entry
    return partial if or_partial else None


def _baselines(entries: Iterable[RunEntry]) -> set[str]:
    """The run ids the kept reports compared against (``--atlante-baseline``)."""
    return {e.report.comparison.baseRunId for e in entries if e.report is not None and e.report.comparison is not None}


def prune(project_root: Path, keep: int, *, protect: Iterable[Path] = ()) -> list[Path]:
    """Remove run folders beyond the newest ``keep``; returns what was removed.

    Never a running run, never one named as a baseline (``protect``: the current run's
    ``--atlante-baseline``; and every run a kept report was compared against), never anything but a
    real directory under ``.atlante/eval/``."""
    entries = list_runs(project_root)
    kept, candidates = entries[:keep], entries[keep:]
    protected = {Path(os.path.realpath(p)) for p in protect} | {Path(os.path.realpath(e.directory)) for e in kept}
    named = _baselines(kept)
    removed = []
    for entry in candidates:
        if entry.status == "running" or entry.run_id in named:
            continue
        real = Path(os.path.realpath(entry.directory))
        if any(real == p or real in p.parents for p in protected):
            continue
        with contextlib.suppress(OSError):
            shutil.rmtree(entry.directory)
            removed.append(entry.directory)
    return removed


# --------------------------------------------------------------------------- ``atlante runs``


def _selection_text(report: EvalReport) -> str:
    selection = report.selection
    selected = report.selectedTrials
    if selection is None or selected is None:
        return "-"
    text = f"{selected}/{selection.suiteTrials} trials"
    return text + (f" ({', '.join(selection.narrowedBy)})" if selection.narrowedBy else "")


def _verdict_text(report: EvalReport) -> str:
    return ", ".join(f"{n} {verdict}" for verdict, n in report.verdicts.items() if n) or "no trial"


def _printable(text: str) -> str:
    """A folder name or report text as one plain line: no escape sequence reaches the terminal."""
    return "".join(ch if ch.isprintable() else "?" for ch in text)


def table_lines(project_root: Path) -> list[str]:
    """``atlante runs``: one line per run folder, newest first."""
    entries = list_runs(project_root)
    if not entries:
        return [f"no runs under {runs_dir(project_root)}"]
    rows: list[tuple[str, ...]] = [("run", "started", "host", "selection", "verdicts", "exit", "status")]
    for entry in entries:
        report = entry.report
        if report is None:
            why = {"running": "in progress", "selftest": "the self-test (selftest.json)",
                   "invalid": "stopped at validation (diagnostics.json)", "unfinished": "no report: the run was killed",
                   "unsealed": f"not used: {entry.problem}", "unreadable": f"not used: {entry.problem}"}.get(entry.status, "")
            rows.append((entry.run_id, "-", "-", "-", why, "-", entry.status))
            continue
        host = report.host.name if report.host is not None else "-"
        rows.append((entry.run_id, report.startedAt, host + (" (scripted)" if report.scripted else ""),
                     _selection_text(report), _verdict_text(report), str(report.exitStatus), entry.status))
    rows = [tuple(_printable(cell) for cell in row) for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[-1]
            for row in rows] + [f"{len(entries)} run(s) in {runs_dir(project_root)}"]
