"""Peak RSS of atlante over every hostile and oversized input of the boundary tests.

Runs ``tests/boundaries`` (each case is one atlante subprocess: ``pytest --atlante-eval``,
``atlante pack report`` or ``atlante benchmark ...``, fed sparse files of up to 6 GiB, 200,000
agent-written files, 500 MiB without a newline ...) and prints each case's peak RSS as measured by
``wait4`` for that process (its own and its waited children's, git included), the largest, and its
ratio to the 250 MiB goal.  The tests assert the bound; this script only reports the figures.

    python benchmarks/peak_rss.py [-k EXPRESSION] [-n WORKERS]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BOUND_MIB = 250


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", default="", help="pytest -k expression selecting cases")
    parser.add_argument("-n", default="2", help="pytest-xdist workers (default 2)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "rss.tsv"
        log.touch()
        argv = [sys.executable, "-m", "pytest", "tests/boundaries", "-q", "-p", "no:cacheprovider", "-n", args.n,
                "-k", args.k or "not whatever_the_view and not unmutated"]
        done = subprocess.run(argv, cwd=ROOT, env={**os.environ, "ATLANTE_RSS_LOG": str(log)}, text=True,
                              capture_output=True, check=False)
        rows = sorted((float(rss), case) for rss, case in (line.split("\t", 1) for line in log.read_text().splitlines()))
    if not rows:
        print(done.stdout[-2000:] + done.stderr[-2000:])
        return 1
    width = max(len(case) for _, case in rows)
    print(f"{'case':<{width}}  {'peak RSS MiB':>12}")
    for rss, case in rows:
        print(f"{case:<{width}}  {rss:>12.1f}")
    worst, case = rows[-1]
    print(f"\ncases: {len(rows)}; largest peak RSS {worst:.1f} MiB ({case})")
    print(f"ratio largest/goal: {worst / BOUND_MIB:.2f} (goal {BOUND_MIB} MiB)")
    print(f"tests: {done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.returncode}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
