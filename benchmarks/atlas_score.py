"""Throughput of `atlante benchmark score` on a generated 100,000-case corpus.

Generates a query corpus (both tiers, B5 cases, paths, diagnostics) and matching results in a temp
dir, then, each in a fresh child process so peak RSS belongs to one job:
  * floor:  plain ``json.loads`` of the same two files (the cheapest possible read of them);
  * score:  ``cmd_score(corpus, results, out)`` end to end: parse, validate, score, fingerprint,
            render and atomically write the receipt.
Prints cases/s, peak RSS and the ratio score/floor measured in the same run.  Nothing is asserted:
speed is measured, never gated.

    python benchmarks/atlas_score.py [--cases N]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FP = "ab" * 32


def _case(i: int) -> tuple[dict[str, Any], dict[str, Any]]:
    pinned = i % 10 == 9
    cid = f"case-{i:06d}"
    sym = [f"crate::m{i % 97}::f{i}", f"crate::m{i % 89}::g{i}"]
    case: dict[str, Any] = {
        "id": cid,
        "tier": "pinned-repository" if pinned else "deterministic-fixture",
        "repository": "https://example.com/r.git" if pinned else f"fixtures/atlas/f{i % 13}",
        "query": f"Who calls f{i}?",
        "expected_symbols": sym,
        "expected_paths": [["crate::main", sym[0], sym[1]]] if i % 3 == 0 else [],
        "forbidden_symbols": [f"crate::wrong::f{i}"],
        "forbidden_paths": [],
        "required_evidence": [f"src/m{i % 97}.rs#L{i % 400}"],
        "required_diagnostics": [{"kind": "capability", "code": "atlas-scip-unavailable"}] if i % 7 == 0 else [],
        "allowed_ambiguity": 3,
        "rubric": ["names both callers"],
        "source_ref": f"issue #{i}",
    }
    if pinned:
        case["revision"] = f"{i:040x}"
        case["paired_fixture"] = f"case-{i - 1:06d}"
    obs: dict[str, Any] = {
        "case_id": cid,
        "symbols": [sym[1], f"crate::extra::h{i}", sym[0]] if i % 5 else [f"crate::extra::h{i}"],
        "paths": case["expected_paths"],
        "evidence": case["required_evidence"],
        "diagnostics": case["required_diagnostics"] + ([{"kind": "stale", "code": "atlas-graph-stale"}] if i % 11 == 0 else []),
        "response_bytes": 1000 + i % 5000,
        "duration_ms": 5 + i % 300,
        "read_back_calls": i % 3,
        "follow_up_queries": i % 2,
    }
    if i % 20 == 0:
        case["context_expectation"] = {
            "schema": "agent-spec/atlas-eval/context-expectation-v1", "profile": "compact",
            "limits": {"retrieval_hard_cap": 8, "max_serialized_bytes": 10000},
            "retrieval_loss": "allowed", "projection_loss": "allowed", "read_back": "allowed",
            "omission_classes": ["low-rank"]}
        obs["context_receipt"] = {
            "schema": "agent-spec/atlas-eval/context-receipt-v1", "profile": "compact",
            "limits": {"retrieval_hard_cap": 8, "max_serialized_bytes": 10000},
            "retrieval": {"candidates": 10, "returned": 8, "hard_cap_dropped": 2},
            "projection": {"input": 8, "relevant": 8, "relevance_dropped": 0, "retained": 8, "retention_dropped": 0},
            "serialized_bytes": obs["response_bytes"],
            "omissions": [{"stage": "retrieval-hard-cap", "class": "low-rank", "count": 2}],
            "graph_fingerprint": FP, "read_back_calls": obs["read_back_calls"],
            "follow_up_queries": obs["follow_up_queries"], "load_profile": "steady"}
    return case, obs


def generate(directory: Path, count: int) -> tuple[Path, Path]:
    pairs = [_case(i) for i in range(count)]
    corpus = {"schema": "agent-spec/atlas-eval/query-corpus-v1", "version": "bench", "cases": [c for c, _ in pairs]}
    results = {"schema": "agent-spec/atlas-eval/query-results-v1", "corpus_version": "bench",
               "observations": [o for _, o in pairs]}
    corpus_path, results_path = directory / "query-corpus.json", directory / "query-results.json"
    corpus_path.write_text(json.dumps(corpus, indent=2))
    results_path.write_text(json.dumps(results, indent=2))
    return corpus_path, results_path


def _child(job: str, corpus: Path, results: Path, out: Path) -> None:
    """Run one job in this (fresh) process and print its wall time and peak RSS as JSON."""
    if job == "score":
        from pytest_atlante.atlas.score import cmd_score

        start = time.perf_counter()
        status = cmd_score(corpus, results, out)
    else:
        start = time.perf_counter()
        json.loads(corpus.read_bytes())
        json.loads(results.read_bytes())
        status = 0
    seconds = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": seconds, "peak_mib": peak_kib / 1024, "status": status}))


def _run(job: str, corpus: Path, results: Path, out: Path) -> dict[str, float]:
    proc = subprocess.run([sys.executable, __file__, "--child", job, str(corpus), str(results), str(out)],
                          capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--child", nargs=4, metavar=("JOB", "CORPUS", "RESULTS", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        job, corpus, results, out = args.child
        _child(job, Path(corpus), Path(results), Path(out))
        return
    with tempfile.TemporaryDirectory(prefix="atlas-score-bench-") as tmp:
        corpus, results = generate(Path(tmp), args.cases)
        out = Path(tmp) / "receipt.json"
        size_mib = (corpus.stat().st_size + results.stat().st_size) / 2**20
        floor = _run("floor", corpus, results, out)
        score = _run("score", corpus, results, out)
        print(f"cases:              {args.cases} ({size_mib:.1f} MiB of input)")
        print(f"json.loads floor:   {floor['seconds']:.3f} s  peak RSS {floor['peak_mib']:.0f} MiB")
        print(f"score end to end:   {score['seconds']:.3f} s  peak RSS {score['peak_mib']:.0f} MiB "
              f"(exit {int(score['status'])})")
        print(f"throughput:         {args.cases / score['seconds']:,.0f} cases/s")
        print(f"ratio score/floor:  {score['seconds'] / floor['seconds']:.2f}x")


if __name__ == "__main__":
    main()
