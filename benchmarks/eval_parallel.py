"""Parallel trials with pytest-xdist: wall time of 32 slow fake-host trials at ``-n 1, 2, 4, 8``.

Each trial runs a fake ``claude`` that sleeps 2 s and prints one ``result`` event, so a trial is
almost all waiting and the ideal wall time at ``-n N`` is 32 × 2 s / N.  The wall time is the whole
``pytest --atlante-eval --atlante-scripted -n N`` child process (start-up, worker spawn, collection,
report included) — what a user waits for.

The floor, measured in the same run: plain pytest-xdist (``-p no:atlante``) on a generated test file
of the same number of tests, each of which runs the same fake host directly with ``subprocess.run``.
It shows what xdist itself costs on this machine (worker start-up and shutdown are paid once per
run and do not shrink with N).  Prints wall, floor, ideal, wall/ideal and wall/floor per N.  Nothing
is asserted; the goal reported against is ``-n 8`` within 1.2× of ideal.

    python benchmarks/eval_parallel.py [--trials 32] [--sleep 2] [--workers 1,2,4,8] [--repeat 1]

With ``--repeat R`` each N is measured R times, the plugin and the floor alternating, and the
medians are shown: on a shared machine single runs vary by a second or more.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _fakehost import bench_env, install_quick_claude, machine_line, make_project, require_verdicts, run_eval


def xdist_floor(tmp: Path, host: Path, tests: int, workers: int) -> float:
    """Wall time of plain ``pytest -n workers`` over ``tests`` tests that each run ``host`` once."""
    suite = tmp / "floor"
    suite.mkdir(exist_ok=True)
    (suite / "test_floor.py").write_text(
        "import subprocess\nimport pytest\n\n\n"
        f"@pytest.mark.parametrize('index', range({tests}))\n"
        "def test_host(index: int) -> None:\n"
        f"    subprocess.run([{str(host)!r}, '-p', 'x'], stdout=subprocess.PIPE, check=True)\n",
        encoding="utf-8")
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:atlante", "-q", "-n", str(workers),
            "test_floor.py"]
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=suite, env=bench_env(), capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"floor run -n {workers} failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--sleep", type=float, default=2.0, help="seconds the fake host sleeps per trial")
    parser.add_argument("--workers", default="1,2,4,8", help="xdist worker counts, comma-separated")
    parser.add_argument("--repeat", type=int, default=1, help="runs per N (medians shown)")
    args = parser.parse_args()
    workers = [int(n) for n in args.workers.split(",")]
    print(f"machine: {machine_line()}")
    with tempfile.TemporaryDirectory(prefix="atlante-bench-parallel-") as raw:
        tmp = Path(raw)
        bin_dir = tmp / "bin"
        host = install_quick_claude(bin_dir, sleep_s=args.sleep)
        project = make_project(tmp / "project", files=10, trials=args.trials)
        rows = []
        for n in workers:
            walls, floors, means = [], [], []
            for attempt in range(args.repeat):
                run = run_eval(project, bin_dir, tmp / f"out-n{n}-{attempt}", "-n", str(n))
                require_verdicts(run, {"pass"}, f"-n {n}")
                if len(run.trials) != args.trials:
                    sys.exit(f"-n {n}: {len(run.trials)} trial records, expected {args.trials}\n{run.output[-3000:]}")
                walls.append(run.wall_s)
                means.append(sum(t["durationMs"] for t in run.trials) / len(run.trials) / 1000)
                floors.append(xdist_floor(tmp, host, args.trials, n))
            if args.repeat > 1:
                print(f"-n {n}: wall {', '.join(f'{w:.1f}' for w in walls)}; floor {', '.join(f'{f:.1f}' for f in floors)}")
            rows.append((n, statistics.median(walls), statistics.median(floors), args.trials * args.sleep / n,
                         statistics.median(means)))
        print(f"\n{'-n':>3} {'wall s':>8} {'floor s':>8} {'ideal s':>8} {'wall/ideal':>10} {'wall/floor':>10} "
              f"{'mean trial s':>13}")
        for n, wall, floor, ideal, mean_trial in rows:
            print(f"{n:>3} {wall:>8.1f} {floor:>8.1f} {ideal:>8.1f} {wall / ideal:>10.2f} {wall / floor:>10.2f} "
                  f"{mean_trial:>13.2f}")
        print(f"\nwall = whole pytest --atlante-eval process; floor = plain pytest-xdist running the same fake host "
              f"{args.trials} times; ideal = {args.trials} x {args.sleep:g} s / n; mean trial = report.json durationMs")
        for n, wall, floor, ideal, _ in rows:
            goal = f"  (goal wall/floor <= 1.05x: {'met' if wall / floor <= 1.05 else 'NOT met'})" if n == 8 else ""
            print(f"ratio wall/ideal at -n {n}: {wall / ideal:.2f}x{goal}; plain xdist floor/ideal {floor / ideal:.2f}x; "
                  f"wall/floor {wall / floor:.2f}x")


if __name__ == "__main__":
    main()
