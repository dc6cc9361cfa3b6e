"""The output contract of validate / plan / summarize, exercised through a real `atlante` process."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from ._builders import REPO, make_corpus, make_receipt, ndjson

Run = Callable[..., subprocess.CompletedProcess[str]]
EXAMPLE = REPO / "example_project/benchmarks/atlas"


def test_validate_prints_exact_compact_form(run_cli: Run) -> None:
    result = run_cli("benchmark", "validate", "--corpus", str(EXAMPLE / "corpus.json"))
    assert result.returncode == 0, result.stderr
    assert result.stdout == '{"valid":true,"cases":8}\n'
    assert result.stderr == ""


def test_validate_has_no_out_option(run_cli: Run, tmp_path: Path) -> None:
    result = run_cli(
        "benchmark", "validate", "--corpus", str(EXAMPLE / "corpus.json"), "--out", "x.json"
    )
    assert result.returncode != 0
    assert result.stdout == ""
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["plan", "--corpus", str(EXAMPLE / "corpus.json")],
        ["summarize", "--receipts", str(EXAMPLE / "receipts.ndjson")],
    ],
    ids=["plan", "summarize"],
)
def test_stdout_is_pretty_json_plus_newline(run_cli: Run, args: list[str]) -> None:
    result = run_cli("benchmark", *args)
    assert result.returncode == 0, result.stderr
    assert result.stdout == json.dumps(json.loads(result.stdout), indent=2) + "\n"
    assert result.stderr == ""


@pytest.mark.parametrize(
    "args",
    [
        ["plan", "--corpus", str(EXAMPLE / "corpus.json")],
        ["summarize", "--receipts", str(EXAMPLE / "receipts.ndjson")],
    ],
    ids=["plan", "summarize"],
)
def test_out_replaces_file_and_keeps_stdout_empty(
    run_cli: Run, tmp_path: Path, args: list[str]
) -> None:
    target = tmp_path / "result.json"
    target.write_text("old contents that must be replaced")
    printed = run_cli("benchmark", *args).stdout
    result = run_cli("benchmark", *args, "--out", str(target))
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert target.read_text() == printed
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]  # no temp file left behind


def test_plan_of_example_has_both_arms_for_all_cases(run_cli: Run) -> None:
    plan = json.loads(run_cli("benchmark", "plan", "--corpus", str(EXAMPLE / "corpus.json")).stdout)
    assert plan["schema"] == "agent-spec/atlas-eval/run-plan-v1"
    assert len(plan["runs"]) == 8 * 3 * 2


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    ("command", "flag", "data", "code"),
    [
        ("validate", "--corpus", b'{"schema": "nope"}', "atlas-corpus-invalid"),
        ("plan", "--corpus", b"{broken", "atlas-corpus-invalid"),
        ("summarize", "--receipts", ndjson([make_receipt(arm="x")]), "atlas-receipts-invalid"),
        ("summarize", "--receipts", b"\n", "atlas-receipts-empty"),
        (
            "summarize",
            "--receipts",
            ndjson([make_receipt(correctness=None)]),
            "atlas-receipts-ungraded",
        ),
    ],
)
def test_error_keeps_stdout_empty_and_out_untouched(
    run_cli: Run, tmp_path: Path, command: str, flag: str, data: bytes, code: str
) -> None:
    source = _write(tmp_path, "input.json", data)
    extra = [] if command == "validate" else ["--out", str(tmp_path / "out.json")]
    result = run_cli("benchmark", command, flag, str(source), *extra)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"{code}: {source}")
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize(
    ("command", "flag"),
    [("validate", "--corpus"), ("plan", "--corpus"), ("summarize", "--receipts")],
)
def test_missing_input_is_unreadable(run_cli: Run, command: str, flag: str) -> None:
    result = run_cli("benchmark", command, flag, "does-not-exist.json")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("atlas-input-unreadable: does-not-exist.json")


def test_valid_corpus_written_by_test_validates(run_cli: Run, tmp_path: Path) -> None:
    source = _write(tmp_path, "c.json", json.dumps(make_corpus()).encode())
    result = run_cli("benchmark", "validate", "--corpus", str(source))
    assert result.stdout == '{"valid":true,"cases":1}\n'
