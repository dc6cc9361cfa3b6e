"""Boundary: the Atlas inputs (corpora, results, receipts, run plans) and the ``--out`` target.

Every row runs the real command in a subprocess with a timeout and asserts the exit status, the
diagnostic code on stderr, no traceback, no hang and the peak RSS (the big rows are sparse files
of 6 GiB, far over what the commands read).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bounded import assert_clean, run_bounded, sparse
from conftest import REPO_ROOT

EXAMPLE = REPO_ROOT / "example_project/benchmarks/atlas"
RUNNER = REPO_ROOT / "scripts/atlas-eval/run-opt-in.sh"
GIB = 1 << 30

Arrange = Callable[[Path], list[str]]  # work dir -> argv after `atlante benchmark`


def inputs(work: Path) -> dict[str, Path]:
    names = ("corpus.json", "receipts.ndjson", "query-corpus.json", "query-results.json")
    for name in names:
        shutil.copy(EXAMPLE / name, work / name)
    return {name: work / name for name in names}


def hostile(name: str, make: Callable[[Path], Any], argv: Callable[[dict[str, Path]], list[str]]) -> Arrange:
    def arrange(work: Path) -> list[str]:
        files = inputs(work)
        files[name].unlink()
        make(files[name])
        return argv(files)
    return arrange


def validate(f: dict[str, Path]) -> list[str]:
    return ["validate", "--corpus", str(f["corpus.json"])]


def summarize(f: dict[str, Path]) -> list[str]:
    return ["summarize", "--receipts", str(f["receipts.ndjson"])]


def score(f: dict[str, Path]) -> list[str]:
    return ["score", "--corpus", str(f["query-corpus.json"]), "--results", str(f["query-results.json"])]


def out_is_a_directory(work: Path) -> list[str]:
    return [*score(inputs(work)), "--out", str(work)]


def out_under_a_file(work: Path) -> list[str]:
    return [*score(inputs(work)), "--out", str(work / "query-results.json" / "score.json")]


def shape_and_rule_errors(work: Path) -> list[str]:
    files = inputs(work)
    corpus = json.loads(files["query-corpus.json"].read_text())
    corpus["cases"][0]["tier"] = 7  # a shape error in one case ...
    corpus["cases"][2]["id"] = corpus["cases"][1]["id"]  # ... and a rule violation in others
    files["query-corpus.json"].write_text(json.dumps(corpus))
    return score(files)


# (id, arrange, exit status, codes that must all appear on stderr)
CASES: list[tuple[str, Arrange, int, list[str]]] = [
    ("corpus-is-a-fifo", hostile("corpus.json", os.mkfifo, validate), 2, ["atlas-input-unreadable"]),
    ("corpus-is-a-directory", hostile("corpus.json", lambda p: p.mkdir(), validate), 2, ["atlas-input-unreadable"]),
    ("corpus-6gib-sparse", hostile("corpus.json", lambda p: sparse(p, 6 * GIB, b"{"), validate), 2, ["atlas-input-unreadable"]),
    ("corpus-links-to-a-device", hostile("corpus.json", lambda p: p.symlink_to("/dev/zero"), validate), 2, ["atlas-input-unreadable"]),
    ("receipts-are-a-fifo", hostile("receipts.ndjson", os.mkfifo, summarize), 2, ["atlas-input-unreadable"]),
    ("receipts-6gib-sparse-no-newline", hostile("receipts.ndjson", lambda p: sparse(p, 6 * GIB, b"{"), summarize), 2,
     ["atlas-input-unreadable"]),
    ("query-corpus-is-a-fifo", hostile("query-corpus.json", os.mkfifo, score), 2, ["atlas-query-corpus-unreadable"]),
    ("query-results-6gib-sparse", hostile("query-results.json", lambda p: sparse(p, 6 * GIB, b"{"), score), 2,
     ["atlas-query-results-unreadable"]),
    ("out-names-a-directory", out_is_a_directory, 2, ["atlas-out-invalid"]),
    ("out-under-a-regular-file", out_under_a_file, 2, ["atlas-out-invalid"]),
    ("corpus-shape-error-keeps-rule-violations", shape_and_rule_errors, 2,
     ["atlas-query-corpus-invalid", "atlas-query-corpus-duplicate-id"]),
]


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("arrange", "status", "codes"), [pytest.param(*row[1:], id=row[0]) for row in CASES])
def test_hostile_atlas_input(tmp_path: Path, arrange: Arrange, status: int, codes: list[str]) -> None:
    argv = arrange(tmp_path)
    outcome = run_bounded([sys.executable, "-m", "pytest_atlante.cli", "benchmark", *argv], cwd=tmp_path, timeout_s=120)
    assert_clean(outcome)
    assert outcome.returncode == status, outcome.text[-3000:]
    assert outcome.stdout == ""  # errors come before any JSON
    for code in codes:
        assert code in outcome.stderr, outcome.stderr[-3000:]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("plan", [b"", b"\n", b"   ", b"{}{}"], ids=["zero-bytes", "newline", "blanks", "two-documents"])
def test_run_opt_in_rejects_an_empty_run_plan(tmp_path: Path, plan: bytes) -> None:
    """jq 1.6's ``-e`` exits 0 on empty input; the runner must still refuse before the agent starts."""
    agent = tmp_path / "agent"
    agent.write_text(f"#!{sys.executable}\nopen({str(tmp_path / 'started')!r}, 'w').close()\n")
    agent.chmod(0o755)
    (tmp_path / "plan.json").write_bytes(plan)
    (tmp_path / "d4.json").write_text('{"matrix": "reviewed"}\n')
    env = {"PATH": os.environ["PATH"], "ATLAS_EVAL_AGENT_COMMAND": str(agent), "ATLAS_EVAL_D4_MODE": "worker",
           "ATLAS_EVAL_D4_RECEIPT": str(tmp_path / "d4.json")}
    outcome = run_bounded([shutil.which("bash") or "bash", str(RUNNER), str(tmp_path / "plan.json"),
                           str(tmp_path / "receipts.ndjson")], cwd=tmp_path, env=env, timeout_s=60)
    assert_clean(outcome)
    assert outcome.returncode == 2, outcome.text
    assert "atlas-runner-plan-invalid" in outcome.stderr
    assert not (tmp_path / "started").exists() and not (tmp_path / "receipts.ndjson").exists()
