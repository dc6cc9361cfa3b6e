"""Measure `atlante benchmark summarize` against the JSON parse floor on one million receipts.

Usage:  python benchmarks/atlas_summarize.py [--receipts N]

Generates N NDJSON receipts (default 1,000,000) in a temporary directory, then in the same run
times, each in a fresh interpreter so both pay the same start-up:

* the floor: plain ``json.loads`` of every line (no validation, no statistics);
* ``python -m pytest_atlante.cli benchmark summarize --receipts FILE --out SUMMARY``.

Prints both wall times, their ratio (goal: <= 3x) and each process's peak RSS (from ``wait4``),
so the summarizer's streaming memory can be compared with the floor's.  Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLOOR = """
import json, sys
count = 0
with open(sys.argv[1], "rb") as handle:
    for line in handle:
        if line.strip():
            json.loads(line)
            count += 1
print(count)
"""

D4_HASH = "0123456789abcdef" * 4


def write_receipts(path: Path, count: int) -> None:
    rng = random.Random(1234)
    with path.open("w", encoding="utf-8") as handle:
        for index in range(count):
            atlas = index % 2 == 0
            receipt = {
                "case_id": f"case-{index // 6 % 500}",
                "arm": "atlas" if atlas else "baseline",
                "trial": index // 2 % 3 + 1,
                "correctness": {"passed": rng.random() < 0.8},
                "file_reads": rng.randint(0, 40),
                "graph_calls": rng.randint(0, 12),
                "tool_calls": rng.randint(1, 60),
                "duration_ms": rng.randint(200, 90_000),
                "context_bytes": rng.randint(1_000, 400_000),
                "cost_usd": round(rng.uniform(0.0, 0.5), 5),
                "query_metrics_schema": "agent-spec/atlas-eval/query-metrics-v1",
                "response_bytes": rng.randint(0, 200_000),
                "read_back_calls": rng.randint(0, 5),
                "follow_up_queries": rng.randint(0, 8),
                "truncated_queries": rng.randint(0, 2),
                "atlas_serving_mode": "worker" if atlas else "direct",
                "concurrent_query_receipt_path": "benchmarks/atlas/concurrent-query-receipt-v1.json",
                "concurrent_query_receipt_hash": D4_HASH,
            }
            handle.write(json.dumps(receipt, separators=(",", ":")) + "\n")


def timed(argv: list[str]) -> tuple[float, int]:
    """Run ``argv``; return (wall seconds, peak RSS in KiB) of that one child."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:4]} failed with status {proc.returncode}")
    return elapsed, usage.ru_maxrss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--receipts", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="atlas-summarize-bench-") as tmp:
        receipts = Path(tmp) / "receipts.ndjson"
        summary = Path(tmp) / "summary.json"
        start = time.perf_counter()
        write_receipts(receipts, args.receipts)
        size_mb = receipts.stat().st_size / 1e6
        print(f"generated {args.receipts:,} receipts ({size_mb:.0f} MB) "
              f"in {time.perf_counter() - start:.1f}s")
        floor_s, floor_kib = timed([sys.executable, "-c", FLOOR, str(receipts)])
        summ_s, summ_kib = timed(
            [sys.executable, "-m", "pytest_atlante.cli", "benchmark", "summarize",
             "--receipts", str(receipts), "--out", str(summary)]
        )
        result = json.loads(summary.read_text(encoding="utf-8"))
        assert result["receipts"] == args.receipts, "summary lost receipts"
    print(f"floor   json.loads per line : {floor_s:7.2f}s  peak RSS {floor_kib / 1024:7.1f} MiB")
    print(f"atlante benchmark summarize : {summ_s:7.2f}s  peak RSS {summ_kib / 1024:7.1f} MiB")
    print(f"ratio summarize / floor     : {summ_s / floor_s:7.2f}x  (goal <= 3x)")
    print(f"sample storage              : {10 * 8 * args.receipts / 2**20:7.1f} MiB "
          "(10 metrics x 8 bytes x receipts, the streaming lower bound)")


if __name__ == "__main__":
    main()
