"""Boundary: what the agent and the checks produce, through the real trial pipeline.

Each row is one ``pytest --atlante-eval`` run in a subprocess (sandbox, baseline, host session,
diff, checks, report), with the fake ``claude`` from ``tests/integration/fakehost.py`` standing in
for the model: the real CLI adds nothing to how many files land in the sandbox.  Asserted per row:
the verdict and what the report records, bounded report and terminal output, no traceback, no
hang, and the runner's peak RSS under the bound.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bounded import Outcome, assert_clean, run_bounded, sparse
from conftest import Project, scenario_doc
from pytest_atlante.records import CHANGED_PATHS_CAP
from pytest_atlante.report.model import EvalReport
from tests.integration.fakehost import fake_env, install_fake_claude

GIB = 1 << 30
MIB = 1 << 20
# Terminal output and report of one hostile trial stay this small, whatever the agent did.
OUTPUT_BOUND = 200_000
REPORT_BOUND = 400_000


def fake(spec: dict[str, Any], checks: list[dict[str, Any]]) -> Callable[[Project], None]:
    prompt = "FAKE:" + json.dumps(spec)
    return lambda p: p.scenario(scenario_doc(task={"fixture": "eval/fixtures/app", "prompt": prompt}, checks=checks))


# Twice the runner's RSS bound: read whole, the file breaks the bound; copied whole, it takes 512
# MiB of disk, which the check below sees.  No larger: a file over 8 MiB is hashed, not diffed, and
# the run reads every byte of it several times (the baseline, the sandbox after the trial).
SPARSE_FIXTURE_BYTES = 512 * MIB


def sparse_fixture(p: Project) -> None:
    sparse(p.root / "eval/fixtures/app/disk.img", SPARSE_FIXTURE_BYTES, b"head")
    # A sandbox copy that is not sparse would take the file's whole size of disk; the check measures the copy.
    blocks = ("import os,sys; st=os.stat('disk.img'); "
              f"sys.exit(0 if st.st_size == {SPARSE_FIXTURE_BYTES} and st.st_blocks * 512 < 2**20 else 1)")
    fake({}, [{"type": "command", "run": [sys.executable, "-c", blocks]}])(p)


def many_files(report: EvalReport, outcome: Outcome) -> None:
    (trial,) = report.scenarios[0].trials
    assert trial.verdict == "fail"
    assert len(trial.changedPaths) == CHANGED_PATHS_CAP and trial.changedPathsTotal == 200_000
    assert "200000 changed path(s) outside the allowlist" in trial.checks[0].message
    assert "and 199980 more (see report.json)" in outcome.text


def huge_file(report: EvalReport, outcome: Outcome) -> None:
    (trial,) = report.scenarios[0].trials
    assert trial.verdict == "pass", trial
    assert trial.changedPaths == ["huge.bin"] and trial.changedPathsTotal is None
    assert trial.diff is not None and "+<atlante: large file, 1073741824 bytes, sha256 49bc20df" in trial.diff


def check_output(report: EvalReport, outcome: Outcome) -> None:
    (trial,) = report.scenarios[0].trials
    assert trial.verdict == "pass", trial
    assert trial.checks[0].output is not None and trial.checks[0].output == "x" * 2000


def host_line(report: EvalReport, outcome: Outcome) -> None:
    (trial,) = report.scenarios[0].trials
    # The over-long line is skipped; the events after it are still read (the result, the usage).
    assert trial.verdict == "pass", trial
    assert trial.usage is not None and trial.usage.inputTokens == 10


def passes(report: EvalReport, outcome: Outcome) -> None:
    (trial,) = report.scenarios[0].trials
    assert trial.verdict == "pass", trial


def fifo_checked(report: EvalReport, outcome: Outcome) -> None:
    (trial,) = report.scenarios[0].trials
    assert trial.verdict == "fail"
    assert trial.checks[0].message == "file-contains pipe: is a FIFO (named pipe), not a regular file"


# Writing through a command check: 8,000 chunks of 64 KiB = 500 MiB on stdout, not one newline.
NO_NEWLINE = "import sys\nfor _ in range(8000): sys.stdout.write('x' * 65536)\nsys.stdout.flush()"

CASES: list[tuple[str, Callable[[Project], None], Callable[[EvalReport, Outcome], None]]] = [
    ("agent-writes-200000-files",
     fake({"many": {"dir": "many", "count": 200_000}}, [{"type": "diff-allowlist", "allow": ["hello.txt"]}]), many_files),
    ("agent-writes-a-1gib-file",
     fake({"sparse": {"huge.bin": GIB}}, [{"type": "file-exists", "path": "huge.bin"}]), huge_file),
    ("check-prints-500mib-without-newline",
     fake({}, [{"type": "command", "run": [sys.executable, "-c", NO_NEWLINE]}]), check_output),
    ("host-prints-300mib-without-newline",
     fake({"noline": 300 * MIB, "usage": [10]}, [{"type": "file-exists", "path": "README.md"}]), host_line),
    ("fixture-has-a-512mib-sparse-file", sparse_fixture, passes),
    ("agent-leaves-a-fifo-where-a-check-reads",
     fake({"fifo": ["pipe"]}, [{"type": "file-contains", "path": "pipe", "pattern": "x"}]), fifo_checked),
]


def run_trial(project: Project, tmp_path: Path, out: Path | None, *paths: str) -> Outcome:
    bin_dir = tmp_path / "fakebin"
    install_fake_claude(bin_dir)
    env = {**os.environ, **fake_env(bin_dir), "TMPDIR": str(tmp_path)}
    argv = [sys.executable, "-m", "pytest", "--atlante-eval", "--atlante-project", str(project.root),
            "-p", "no:cacheprovider", "--rootdir", str(project.root)]
    if out is not None:
        argv += ["--atlante-out", str(out)]
    argv += paths
    return run_bounded(argv, cwd=tmp_path, env=env, timeout_s=300)


@pytest.mark.timeout(400)
@pytest.mark.parametrize(("arrange", "verify"), [pytest.param(*row[1:], id=row[0]) for row in CASES])
def test_agent_output_is_bounded(
    atlante_project: Project, tmp_path: Path, arrange: Callable[[Project], None],
    verify: Callable[[EvalReport, Outcome], None],
) -> None:
    arrange(atlante_project)
    out = tmp_path / "out"
    outcome = run_trial(atlante_project, tmp_path, out)
    assert_clean(outcome)
    report_path = out / "report.json"
    assert report_path.stat().st_size < REPORT_BOUND
    report = EvalReport.model_validate_json(report_path.read_text())
    assert outcome.returncode == report.exitStatus, outcome.text[-3000:]
    assert len(outcome.text) < OUTPUT_BOUND, outcome.text[:3000]
    verify(report, outcome)


@pytest.mark.timeout(200)
def test_a_gitignore_that_cannot_be_written_is_in_the_reports_exit_status(
    atlante_project: Project, tmp_path: Path
) -> None:
    fake({}, [{"type": "file-exists", "path": "README.md"}])(atlante_project)
    gitignore = atlante_project.root / ".atlante" / ".gitignore"
    if gitignore.exists():
        gitignore.unlink()
    gitignore.mkdir()
    outcome = run_trial(atlante_project, tmp_path, out=None)
    assert_clean(outcome)
    (report_path,) = (atlante_project.root / ".atlante" / "eval").glob("*/report.json")
    report = EvalReport.model_validate_json(report_path.read_text())
    assert outcome.returncode == report.exitStatus == 3, outcome.text[-3000:]
    assert "eval-report-write-failed" in outcome.text and ".atlante/.gitignore" in outcome.text
    assert [t.verdict for t in report.scenarios[0].trials] == ["pass"]


@pytest.mark.timeout(200)
def test_an_ordinary_failure_in_the_same_run_is_in_the_reports_exit_status(
    atlante_project: Project, tmp_path: Path
) -> None:
    fake({}, [{"type": "file-exists", "path": "README.md"}])(atlante_project)
    atlante_project.write("test_plain.py", "def test_ordinary():\n    assert False\n")
    out = tmp_path / "out"
    outcome = run_trial(atlante_project, tmp_path, out, str(atlante_project.root / "test_plain.py"),
                        str(atlante_project.root / "eval"))
    assert_clean(outcome)
    report = EvalReport.model_validate_json((out / "report.json").read_text())
    assert [t.verdict for t in report.scenarios[0].trials] == ["pass"]
    assert outcome.returncode == report.exitStatus == 1, outcome.text[-3000:]
    assert "1 failed, 1 passed" in outcome.stdout  # the ordinary item ran beside the trial
