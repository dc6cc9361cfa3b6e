"""Shards side by side: 64 trials of a 2 s fake host as 1, 2 and 4 shards (each ``-n 2``), and the
merge time for 10,000 trial records.

Each shard is its own ``pytest --atlante-eval --atlante-scripted --atlante-shard K/N -n 2`` process,
all N started at once (as a CI matrix would, here on one machine); the fake ``claude`` sleeps 2 s
per trial (``_fakehost.py``).  Ideal wall time of a shard is trials × sleep / (N × workers); the
figure that matters is the slowest shard's wall time against it (the merge job waits for it).  The
shards' reports are merged with ``atlante report merge`` and must hold every trial, passed.

The merge benchmark builds N synthetic shard reports with 10,000 trial records in all (100
scenarios) and times ``atlante report merge`` as a process (start-up included) and in-process.
Nothing is asserted; ratios are printed.

    python benchmarks/eval_shards.py [--trials 64] [--scenarios 8] [--sleep 2] [--shards 1,2,4] [--workers 2]
                                     [--merge-records 10000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _fakehost import install_quick_claude, machine_line, make_project
from pytest_atlante.records import TrialRecord
from pytest_atlante.report.merge import load_shard_reports, merge_reports
from pytest_atlante.report.model import BudgetRecord, EvalReport, RunState, ShardRef, build_report, keyed


def run_shards(project: Path, bin_dir: Path, out: Path, count: int, workers: int) -> tuple[list[float], float]:
    """Start ``count`` shard processes at once; (each shard's wall time, the merge's wall time)."""
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "GITHUB_RUN_ID": f"bench-{count}"}
    started = time.perf_counter()
    procs = []
    for index in range(1, count + 1):
        argv = [sys.executable, "-m", "pytest", "--atlante-eval", "--atlante-scripted", "-p", "no:cacheprovider", "-q",
                "--atlante-project", str(project), "--atlante-out", str(out / str(index)),
                "--atlante-shard", f"{index}/{count}", "-n", str(workers)]
        procs.append(subprocess.Popen(argv, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    walls = [0.0] * count
    pending = dict(enumerate(procs))
    while pending:
        for index, proc in list(pending.items()):
            if proc.poll() is not None:
                walls[index] = time.perf_counter() - started
                text = proc.stdout.read() if proc.stdout else ""
                if proc.returncode != 0:
                    sys.exit(f"shard {index + 1}/{count} exited {proc.returncode}:\n{text[-3000:]}")
                del pending[index]
        time.sleep(0.05)
    merged = out / "merged.json"
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest_atlante.cli", "report", "merge",
                           *[str(out / str(i) / "report.json") for i in range(1, count + 1)], "-o", str(merged)],
                          env=env, capture_output=True, text=True, check=False)
    merge_s = time.perf_counter() - began
    if proc.returncode != 0:
        sys.exit(f"merge of {count} shards exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    report = EvalReport.model_validate_json(merged.read_text(encoding="utf-8"))
    trials = [t for s in report.scenarios for t in s.trials]
    if not report.complete or any(t.verdict != "pass" for t in trials):
        sys.exit(f"{count} shards: the merged report is incomplete or not all passed:\n{report.verdicts}")
    return walls, merge_s


def synthetic_shards(out: Path, records: int, count: int, scenarios: int = 100) -> list[Path]:
    """``count`` shard reports holding ``records`` trial records in all, written as a shard would."""
    per_scenario = records // scenarios
    now = datetime.now(UTC)
    paths = []
    for index in range(1, count + 1):
        mine = [s for s in range(scenarios) if s % count == index - 1]
        trials = [TrialRecord(scenario=f"s{s:03d}", trial=t, nodeId=f"eval/s{s:03d}.eval.json::s{s:03d}[trial-{t}]",
                              verdict="pass" if (s + t) % 7 else "fail", durationMs=1000 + s + t, hostDurationMs=900)
                  for s in mine for t in range(1, per_scenario + 1)]
        state = RunState(
            run_id=f"shard-{index}", started_at=now, host=None, model=None, scripted=True,
            budget=BudgetRecord(trials=per_scenario, timeoutMs=1000, maxSessions=records, maxTokens=1000),
            records=keyed(trials), shard=ShardRef(index=index, count=count), suite_digest="sha256:" + "0" * 64,
            run_group="bench")
        report = build_report(state, [(f"s{s:03d}", f"eval/s{s:03d}.eval.json", "local", per_scenario) for s in mine],
                              finished_at=now, complete=True, exit_status=1)
        path = out / f"shard-{index}.json"
        path.write_text(report.to_json(), encoding="utf-8")
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=64, help="trials in all (spread over --scenarios)")
    parser.add_argument("--scenarios", type=int, default=8)
    parser.add_argument("--sleep", type=float, default=2.0, help="seconds the fake host sleeps per trial")
    parser.add_argument("--shards", default="1,2,4", help="shard counts, comma-separated")
    parser.add_argument("--workers", type=int, default=2, help="-n inside each shard")
    parser.add_argument("--merge-records", type=int, default=10_000)
    args = parser.parse_args()
    print(f"machine: {machine_line()}; load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="atlante-bench-shards-") as raw:
        tmp = Path(raw)
        bin_dir = tmp / "bin"
        install_quick_claude(bin_dir, sleep_s=args.sleep)
        project = make_project(tmp / "project", files=10, trials=args.trials // args.scenarios, scenarios=args.scenarios)
        total = args.trials // args.scenarios * args.scenarios
        print(f"\n{total} trials ({args.scenarios} scenarios), {args.sleep:g} s fake host, -n {args.workers} per shard")
        print(f"{'shards':>6} {'slowest s':>10} {'fastest s':>10} {'ideal s':>8} {'slowest/ideal':>14} {'merge s':>8}")
        for count in [int(n) for n in args.shards.split(",")]:
            walls, merge_s = run_shards(project, bin_dir, tmp / f"out-{count}", count, args.workers)
            ideal = total * args.sleep / (count * args.workers)
            print(f"{count:>6} {max(walls):>10.1f} {min(walls):>10.1f} {ideal:>8.1f} {max(walls) / ideal:>14.2f} {merge_s:>8.2f}")

        paths = synthetic_shards(tmp, args.merge_records, 4)
        began = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pytest_atlante.cli", "report", "merge", *map(str, paths),
                               "-o", str(tmp / "merged-10k.json")], capture_output=True, text=True, check=False)
        cli_s = time.perf_counter() - began
        began = time.perf_counter()
        merge_reports(load_shard_reports(paths))
        inprocess_s = time.perf_counter() - began
        print(f"\nmerge of {args.merge_records} trial records in 4 shard reports: atlante report merge {cli_s:.2f} s "
              f"(process, exit {proc.returncode}); load + merge in-process {inprocess_s:.2f} s")


if __name__ == "__main__":
    main()
