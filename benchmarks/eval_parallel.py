"""Parallel trials with pytest-xdist: wall time of 32 slow fake-host trials at ``-n 1, 2, 4, 8``.

Each trial runs a fake ``claude`` that sleeps 2 s and prints one ``result`` event, so a trial is
almost all waiting and the ideal wall time at ``-n N`` is 32 × 2 s / N.  The wall time is the whole
``pytest --atlante-eval --atlante-scripted -n N`` child process (start-up, worker spawn, collection,
report included) — what a user waits for.  Prints wall, ideal and wall/ideal per N.  Nothing is
asserted; the goal reported against is ``-n 8`` within 1.2× of ideal.

    python benchmarks/eval_parallel.py [--trials 32] [--sleep 2] [--workers 1,2,4,8]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _fakehost import install_quick_claude, machine_line, make_project, require_verdicts, run_eval  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--sleep", type=float, default=2.0, help="seconds the fake host sleeps per trial")
    parser.add_argument("--workers", default="1,2,4,8", help="xdist worker counts, comma-separated")
    args = parser.parse_args()
    workers = [int(n) for n in args.workers.split(",")]
    print(f"machine: {machine_line()}")
    with tempfile.TemporaryDirectory(prefix="atlante-bench-parallel-") as raw:
        tmp = Path(raw)
        bin_dir = tmp / "bin"
        install_quick_claude(bin_dir, sleep_s=args.sleep)
        project = make_project(tmp / "project", files=10, trials=args.trials)
        rows = []
        for n in workers:
            run = run_eval(project, bin_dir, tmp / f"out-n{n}", "-n", str(n))
            require_verdicts(run, {"pass"}, f"-n {n}")
            if len(run.trials) != args.trials:
                sys.exit(f"-n {n}: {len(run.trials)} trial records, expected {args.trials}\n{run.output[-3000:]}")
            ideal = args.trials * args.sleep / n
            mean_trial = sum(t["durationMs"] for t in run.trials) / len(run.trials) / 1000
            rows.append((n, run.wall_s, ideal, mean_trial))
        print(f"\n{'-n':>3} {'wall s':>8} {'ideal s':>8} {'ratio':>6} {'mean trial s':>13}")
        for n, wall, ideal, mean_trial in rows:
            print(f"{n:>3} {wall:>8.1f} {ideal:>8.1f} {wall / ideal:>6.2f} {mean_trial:>13.2f}")
        print(f"\nwall = whole pytest process; ideal = {args.trials} x {args.sleep:g} s / n; "
              "mean trial = report.json durationMs")
        for n, wall, ideal, _ in rows:
            goal = f"  (goal <= 1.2x: {'met' if wall / ideal <= 1.2 else 'NOT met'})" if n == 8 else ""
            print(f"ratio wall/ideal at -n {n}: {wall / ideal:.2f}x{goal}")


if __name__ == "__main__":
    main()
