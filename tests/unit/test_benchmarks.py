"""The floor benchmarks run, at sizes small enough for the unit suite, so they do not rot.

Each script is run as a user runs it (a child process from the checkout) and must print its ratio
lines; the figures themselves are never asserted (speed is measured, never gated).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
RATIO = r"[0-9]+\.[0-9]+x"


def run_benchmark(script: str, *args: str, timeout: int = 600) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / script), *args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_jsonc_benchmark_prints_each_case_against_its_floor() -> None:
    out = run_benchmark("jsonc_parse.py", "--mib", "0.05", "--script-mib", "0.02", "--rounds", "1")
    assert re.search(rf"jsonc\.loads\(JSONC\)\s+median\s+[0-9.]+ ms\s+{RATIO} floor", out), out
    assert re.search(rf"load_script .*{RATIO} floor", out), out
    assert "load average" in out


def test_collection_benchmark_prints_the_ratio_to_the_fair_floor() -> None:
    out = run_benchmark("collect_scale.py", "--sizes", "5", "--repeat", "1")
    row = next(line for line in out.splitlines() if line.split()[:1] == ["5"])
    assert len(re.findall(RATIO, row)) == 2, out


@pytest.mark.timeout(900)
def test_floor_benchmark_prints_per_trial_and_per_run_ratios() -> None:
    # The /bin/sh fake host: the capture, the by-hand floor and the eval run all take their real
    # paths, without a CLI's seconds per trial.
    out = run_benchmark("floor_trial.py", "--fake", "--trials", "1", "--rounds", "1", "--isolation", "off", timeout=900)
    assert "claude-code isolation off: 1 rounds x 1 trials, load" in out, out
    for label in ("per trial", "non-host", "per run fixed"):
        assert re.search(rf"{label} +eval +-?[0-9]+ ms +floor +-?[0-9]+ ms +ratio +-?{RATIO}", out), out
    assert re.search(r"eval-floor [+-][0-9]+ ms", out), out


def test_history_benchmark_reads_the_reports_it_wrote() -> None:
    out = run_benchmark("history_read.py", "--reports", "5", "--scenarios", "2", "--rounds", "1")
    assert re.search(r"^reports: 5 \(2 scenarios x 3 trials each", out, re.M), out
    assert re.search(r"^read\+validate\+seal: [0-9]+ ms", out, re.M) and "cpu time of the whole" in out, out


def test_concurrency_benchmark_prints_each_width_against_its_pool_and_the_fixed_cost() -> None:
    # The /bin/sh fake host: the capture, the pool, the plain script and the eval runs (-n W and
    # --atlante-in-flight W) take their real paths at the smallest size.
    out = run_benchmark("concurrency.py", "--fake", "--trials", "2", "--widths", "1,2", "--rounds", "1",
                        "--think-ms", "0", timeout=900)
    for width in ("1", "2"):
        for side in ("-n", "flight"):
            assert re.search(rf"^ +{width} {side} +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9]+$", out, re.M), out
            ratios = next(line for line in out.splitlines() if line.split()[:2] == [width, f"{side}/pool"])
            assert len(re.findall(RATIO, ratios)) == 5, out
        assert re.search(rf"^ +{width} pool ", out, re.M), out
    assert re.search(r"fixed cost per run \(1 trial, serial\): eval +[0-9]+ ms +plain script +-?[0-9]+ ms +eval-script [+-][0-9]+ ms", out), out
