"""The one reader of reports: capped, regular files only, strict JSON, validated — and every command
that reads a report goes through it, so a FIFO named ``report.json`` hangs none of them.

The commands run as real subprocesses with a deadline: before the one reader, ``atlante view``,
``atlante report merge`` and ``--atlante-forecast`` blocked forever opening a FIFO.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO_ROOT
from pytest_atlante.report import reader
from pytest_atlante.report.model import MAX_REPORT_BYTES
from test_compare import run_of

DEADLINE_S = 60


def good_report(path: Path) -> Path:
    path.write_text(run_of({"alpha": ["pass", "fail"]}).to_json())
    return path


@pytest.mark.parametrize(("content", "code"), [
    (None, "report-missing"),
    ("fifo", "report-unsafe"),
    (b"\xff", "report-malformed"),
    ('{"a": 1, "a": 2}', "report-malformed"),
    ('{"x": NaN}', "report-malformed"),
    ('{"x": ' + "9" * 40 + "}", "report-malformed"),
    ("[" * 100_000 + "]" * 100_000, "report-malformed"),
    ('{"schema": "atlante/eval-report-v1"}', "report-invalid"),
])
def test_refusals_have_stable_codes(tmp_path: Path, content: str | bytes | None, code: str) -> None:
    path = tmp_path / "report.json"
    if content == "fifo":
        os.mkfifo(path)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(reader.ReportRejected) as caught:
        reader.read_report(path)
    assert caught.value.code == code, caught.value.reason


def test_a_huge_file_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    with path.open("wb") as handle:
        handle.truncate(MAX_REPORT_BYTES + 1)
    with pytest.raises(reader.ReportRejected) as caught:
        reader.read_report(path)
    assert caught.value.code == "report-too-large"


def test_a_good_report_reads_back_whole(tmp_path: Path) -> None:
    path = good_report(tmp_path / "report.json")
    assert json.loads(reader.read_report(path).to_json()) == json.loads(path.read_text())


def test_schema_errors_become_one_diagnostic_each_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text('{"schema": "atlante/eval-report-v1"}')
    with pytest.raises(Exception) as caught:
        reader.load_report(path, "some-code")
    problems = caught.value.diagnostics  # type: ignore[attr-defined]
    assert {p.code for p in problems} == {"some-code"} and "$.runId" in {p.location for p in problems}


def atlante(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_atlante.cli", *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=DEADLINE_S, check=False, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})


def test_no_command_blocks_on_a_fifo(tmp_path: Path) -> None:
    # Where `atlante view` finds the latest run of the project it stands in.
    fifo = tmp_path / ".atlante" / "eval" / "20261201T000000Z-abcdef" / "report.json"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    good = str(good_report(tmp_path / "good.json"))
    for args in (["view"], ["view", str(fifo)], ["view", str(fifo.parent)], ["compare", good, str(fifo)],
                 ["report", "merge", str(fifo), good, "-o", str(tmp_path / "merged.json")]):
        done = atlante(tmp_path, *args)  # a hang is a TimeoutExpired here
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert str(fifo) in done.stderr and "Traceback" not in done.stderr and "regular file" in done.stderr, done.stderr


def test_a_forecast_counts_a_fifo_report_unreadable_instead_of_waiting(tmp_path: Path, atlante_project: Any) -> None:
    """``--atlante-forecast`` (and ``--atlante-max-cost``, through the same history) reads every
    earlier report of the project: a FIFO among them blocked the run before it started."""
    fifo = atlante_project.root / ".atlante" / "eval" / "20261201T000000Z-abcdef" / "report.json"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    done = subprocess.run([sys.executable, "-m", "pytest", "--atlante-eval", "--atlante-forecast", "--atlante-project",
                           str(atlante_project.root), "-p", "no:cacheprovider", "--rootdir", str(atlante_project.root)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=DEADLINE_S, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "skipped 1 unreadable report(s)" in done.stdout, done.stdout


# --------------------------------------------------------------------------- the seal (issue 26)


def test_only_a_report_a_run_wrote_is_picked_up_by_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Forecast history, shard durations, ``atlante view`` without an argument and a baseline in
    ``.atlante/eval/`` take only sealed reports; a planted copy or an edited report is passed over."""
    from pytest_atlante.report.model import write_report
    from pytest_atlante.report.reader import ReportRejected, read_report
    from pytest_atlante.report.seal import key_file
    from pytest_atlante.report.view import latest_run
    from pytest_atlante.run.gate import load_gate
    from pytest_atlante.run.shard import expected_durations

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    runs = tmp_path / "project" / ".atlante" / "eval"
    real = write_report(run_of({"alpha": ["pass", "fail"]}), runs / "20261201T000000Z-aaaaaa")
    assert key_file().is_file() and oct(key_file().stat().st_mode & 0o777) == "0o600"
    planted = runs / "29991231T000000Z-ffffff" / "report.json"
    planted.parent.mkdir()
    planted.write_bytes(real.read_bytes())  # a byte-identical copy without its seal
    edited = runs / "29991231T000000Z-eeeeee"
    edited.mkdir()
    (edited / "report.json").write_text(real.read_text().replace('"alpha"', '"gamma"'))
    (edited / "report.json.seal").write_bytes((real.parent / "report.json.seal").read_bytes())  # the real seal, moved
    for path in (planted, edited / "report.json"):
        with pytest.raises(ReportRejected) as rejected:
            read_report(path, sealed=True)
        assert rejected.value.code == "report-unsealed"
        assert read_report(path).runId  # named explicitly, it is still readable
    assert read_report(real, sealed=True).runId
    assert latest_run(tmp_path / "project") == (real.parent, True)
    assert set(expected_durations(tmp_path / "project")) == {"alpha"}
    gate, problems = load_gate(planted, False, tmp_path / "project")
    assert gate is None and [p.code for p in problems] == ["eval-baseline-invalid"] and "seal" in problems[0].message
    outside = tmp_path / "ci-artifact.json"
    outside.write_bytes(planted.read_bytes())
    assert load_gate(outside, False, tmp_path / "project")[0] is not None  # a CI artifact is the user's choice
    assert load_gate(real, False, tmp_path / "project")[0] is not None
