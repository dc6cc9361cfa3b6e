"""Collection at scale: ``--atlante-eval --collect-only`` of N scenario files against plain pytest.

For each N (default 1,000 and 5,000), in one run:
  * eval:  ``pytest --atlante-eval --collect-only -q`` (child process) in a built project whose
           ``eval/scenarios/`` holds N scenario documents (one trial each, one shared fixture);
           this includes discovery and validation of every document, as a real run does.
  * plain: ``pytest --collect-only -q`` of N ordinary test files (one test each) in a directory.
Prints the wall time of both and the ratio eval/plain.  Nothing is asserted: speed is measured,
never gated.  Goals reported against: 1,000 files within 2x of plain; 5,000 files in under 60 s.

    python benchmarks/collect_scale.py [--sizes 1000,5000] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _fakehost import FIXTURE_REL, SCENARIO_SCHEMA, machine_line, make_project


def scenario_project(root: Path, count: int) -> Path:
    make_project(root, files=1, trials=1)
    scenarios = root / "eval" / "scenarios"
    (scenarios / "bench.eval.json").unlink()
    for index in range(count):
        doc = {"$schema": SCENARIO_SCHEMA, "version": "0.1", "name": f"scenario-{index:05d}",
               "task": {"fixture": FIXTURE_REL, "prompt": "Do nothing."},
               "checks": [{"type": "file-exists", "path": "d000/f00000.txt"}]}
        (scenarios / f"s{index:05d}.eval.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return root


def plain_project(root: Path, count: int) -> Path:
    tests = root / "tests"
    tests.mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    for index in range(count):
        (tests / f"test_{index:05d}.py").write_text(f"def test_{index:05d}():\n    assert True\n", encoding="utf-8")
    return root


def collect(cwd: Path, *args: str) -> tuple[float, int]:
    """Wall seconds of one ``--collect-only`` child process and the number of items it listed."""
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=1800, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"collection failed ({done.returncode}) in {cwd}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return wall, sum(1 for line in done.stdout.splitlines() if "::" in line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000")
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement; the best is kept")
    args = parser.parse_args()
    print(machine_line())
    print(f"{'files':>6} {'eval s':>8} {'plain s':>8} {'ratio':>7}")
    work = Path(tempfile.mkdtemp(prefix="atlante-collect-bench-"))
    try:
        for count in (int(n) for n in args.sizes.split(",")):
            evals = scenario_project(work / f"eval-{count}", count)
            plain = plain_project(work / f"plain-{count}", count)
            eval_runs, plain_runs = [], []
            for _ in range(args.repeat):
                wall, items = collect(evals, "--atlante-eval")
                assert items == count, f"eval collected {items} of {count}"
                eval_runs.append(wall)
                wall, items = collect(plain)
                assert items == count, f"plain collected {items} of {count}"
                plain_runs.append(wall)
            best_eval, best_plain = min(eval_runs), min(plain_runs)
            print(f"{count:>6} {best_eval:>8.2f} {best_plain:>8.2f} {best_eval / best_plain:>6.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
