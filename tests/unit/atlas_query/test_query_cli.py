"""`atlante benchmark score` contract, run as a subprocess, and the corpus fingerprint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from blake3 import blake3

from atlas_query_builders import corpus, fixture_case, observation, pinned_case, results, write_json
from pytest_atlante.atlas.query_corpus import load_corpus, parse_corpus
from pytest_atlante.atlas.score import corpus_fingerprint

ATLAS = Path(__file__).resolve().parents[3] / "example_project/benchmarks/atlas"


def _score(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_atlante.cli", "benchmark", "score", *args],
                          capture_output=True, text=True, timeout=60, check=False)


def test_passing_run_prints_pretty_json_and_newline() -> None:
    proc = _score("--corpus", str(ATLAS / "query-corpus.json"), "--results", str(ATLAS / "query-results.json"))
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout.endswith("}\n") and proc.stdout.startswith("{\n  ")
    receipt = json.loads(proc.stdout)
    assert receipt["passed"] is True and receipt["summary"]["cases"] == 7
    assert proc.stdout == json.dumps(receipt, indent=2, ensure_ascii=False) + "\n"


def test_out_writes_file_and_keeps_stdout_empty(tmp_path: Path) -> None:
    out = tmp_path / "nested" / "receipt.json"
    proc = _score("--corpus", str(ATLAS / "query-corpus.json"), "--results", str(ATLAS / "query-results.json"),
                  "--out", str(out))
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    assert json.loads(out.read_text())["schema"] == "agent-spec/atlas-eval/query-regression-v1"


def test_regression_writes_receipt_then_exits_1(tmp_path: Path) -> None:
    out = tmp_path / "receipt.json"
    proc = _score("--corpus", str(ATLAS / "query-corpus.json"),
                  "--results", str(ATLAS / "query-results-regressed.json"), "--out", str(out))
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("atlas-query-regression: 2 of 7 query case(s) failed correctness")
    receipt = json.loads(out.read_text())
    failed = {c["case_id"]: c["failures"] for c in receipt["cases"] if not c["passed"]}
    assert failed == {
        "symbol-lookup": ["forbidden symbols returned: basic::config::Config::save"],
        "flow-runtime-boundary": [
            "missing expected paths: rb::main -> rb::dispatch -> rb::handlers::on_message",
            "forbidden paths returned: rb::main -> rb::handlers::on_message",
            "missing required diagnostics: runtime-boundary/atlas-flow-runtime-boundary",
        ],
    }


def test_regression_on_stdout_prints_receipt_before_failing() -> None:
    proc = _score("--corpus", str(ATLAS / "query-corpus.json"),
                  "--results", str(ATLAS / "query-results-regressed.json"))
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["passed"] is False
    assert "atlas-query-regression" in proc.stderr


def test_invalid_results_exit_2_with_no_output(tmp_path: Path) -> None:
    corpus_path = write_json(tmp_path / "c.json", corpus())
    results_path = write_json(tmp_path / "r.json", results(observation("fx")))
    out = tmp_path / "receipt.json"
    proc = _score("--corpus", str(corpus_path), "--results", str(results_path), "--out", str(out))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert not out.exists()
    assert proc.stderr.startswith("atlas-query-results-missing-observation: ")
    assert "at $.observations" in proc.stderr


def test_invalid_corpus_exit_2_before_stdout(tmp_path: Path) -> None:
    corpus_path = write_json(tmp_path / "c.json", {"schema": "nope"})
    proc = _score("--corpus", str(corpus_path), "--results", str(ATLAS / "query-results.json"))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert "atlas-query-corpus-invalid" in proc.stderr and "Traceback" not in proc.stderr


# The documented canonical form, re-implemented independently: compact JSON, keys in schema order,
# absent (or null) optional fields omitted, non-ASCII kept as UTF-8.
CORPUS_KEYS = ["schema", "version", "cases"]
CASE_KEYS = ["id", "tier", "repository", "revision", "paired_fixture", "query", "expected_symbols",
             "expected_paths", "forbidden_symbols", "forbidden_paths", "required_evidence",
             "required_diagnostics", "allowed_ambiguity", "rubric", "source_ref", "context_expectation"]


def _documented_canonical(doc: dict[str, Any]) -> bytes:
    def ordered(obj: dict[str, Any], keys: list[str]) -> dict[str, Any]:
        return {k: obj[k] for k in keys if obj.get(k) is not None}

    value = ordered(doc, CORPUS_KEYS)
    value["cases"] = [ordered(c, CASE_KEYS) for c in doc["cases"]]
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _fp(doc: Any, **dump: Any) -> str:
    return corpus_fingerprint(parse_corpus(json.dumps(doc, **dump).encode(), "c.json"))


def test_fingerprint_is_blake3_of_the_documented_canonical_form() -> None:
    doc = corpus(fixture_case(query="Où est défini Config::load ?", required_diagnostics=[
        {"kind": "stale", "code": "s"}]), pinned_case())
    assert _fp(doc) == blake3(_documented_canonical(doc)).hexdigest()


def test_fingerprint_ignores_whitespace_key_order_and_explicit_nulls() -> None:
    doc = corpus()
    reordered = dict(reversed(list(doc.items())))
    reordered["cases"] = [dict(reversed(list(c.items()))) for c in doc["cases"]]
    reordered["cases"][0]["paired_fixture"] = None
    assert _fp(doc, separators=(",", ":")) == _fp(reordered, indent=4)


def test_fingerprint_changes_with_content_and_list_order() -> None:
    doc = corpus()
    base = _fp(doc)
    doc["version"] = "v2"
    assert _fp(doc) != base
    swapped = corpus()
    swapped["cases"].reverse()
    assert _fp(swapped) != base


def test_fingerprint_in_receipt_matches_function(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    _score("--corpus", str(ATLAS / "query-corpus.json"), "--results", str(ATLAS / "query-results.json"),
           "--out", str(out))
    expected = corpus_fingerprint(load_corpus(ATLAS / "query-corpus.json"))
    assert json.loads(out.read_text())["corpus_fingerprint"] == expected
