"""``atlante history`` over many runs: how long reading and judging N sealed reports takes.

Writes N sealed reports (each ``--scenarios`` scenarios x ``--trials`` trials with two checks, the
shape of a small real suite) into a temp project with the report writer itself, then times
``sealed_complete_reports(root, N)`` (read, strict JSON, validate, verify each seal) and
``build_history`` over them, best of ``--rounds``.  Prints the figures; asserts nothing.

    python benchmarks/history_read.py --reports 1000
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pytest_atlante.records import CheckResult, TrialRecord
from pytest_atlante.report.history import build_history, sealed_complete_reports
from pytest_atlante.report.model import BudgetRecord, HostIdentity, RunState, build_report, keyed, write_report

START = datetime(2026, 1, 1, tzinfo=UTC)


def write_runs(root: Path, reports: int, scenarios: int, trials: int) -> None:
    for index in range(reports):
        started = START + timedelta(minutes=index)
        records = []
        for s in range(scenarios):
            for n in range(1, trials + 1):
                passed = (index + s + n) % 7 != 0
                checks = [CheckResult(index=0, type="file-exists", passed=True, message="exists"),
                          CheckResult(index=1, type="command", passed=passed, message="exit 0" if passed else "exit 1")]
                records.append(TrialRecord(scenario=f"scenario-{s:02d}", trial=n, nodeId=f"s{s}.eval.json::scenario-{s:02d}[trial-{n}]",
                                           verdict="pass" if passed else "fail", durationMs=1200, checks=checks))
        state = RunState(run_id=started.strftime("%Y%m%dT%H%M%SZ") + f"-{index:06x}", started_at=started,
                         host=HostIdentity(name="claude-code", version="2.1.197", dialect="claude-code"),
                         budget=BudgetRecord(trials=trials, timeoutMs=600_000, maxSessions=100, maxTokens=400_000),
                         records=keyed(records),
                         digests={f"scenario-{s:02d}": ("sha256:" + "a" * 64, "sha256:" + "b" * 64) for s in range(scenarios)})
        names = [(f"scenario-{s:02d}", f"s{s}.eval.json", "local", trials) for s in range(scenarios)]
        report = build_report(state, names, finished_at=started + timedelta(seconds=30), complete=True, exit_status=1)
        out = root / ".atlante" / "eval" / report.runId
        out.mkdir(parents=True)
        write_report(report, out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=1000)
    parser.add_argument("--scenarios", type=int, default=10)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="atlante-history-") as tmp:
        root = Path(tmp)
        os.environ["XDG_STATE_HOME"] = str(root / "state")   # a seal key of the benchmark's own
        write_runs(root, args.reports, args.scenarios, args.trials)
        size = sum(p.stat().st_size for p in (root / ".atlante" / "eval").glob("*/report.json"))
        best_read = best_build = best_cpu = float("inf")
        for _ in range(args.rounds):
            began, cpu = time.perf_counter(), time.process_time()
            reports = sealed_complete_reports(root, args.reports)
            read = time.perf_counter()
            history = build_history(reports, args.reports)
            best_read, best_build = min(best_read, read - began), min(best_build, time.perf_counter() - read)
            best_cpu = min(best_cpu, time.process_time() - cpu)
        assert len(reports) == args.reports and len(history.scenarios) == args.scenarios
        print(f"reports: {args.reports} ({args.scenarios} scenarios x {args.trials} trials each, {size / 1e6:.1f} MB)")
        print(f"read+validate+seal: {best_read * 1000:.0f} ms ({best_read / args.reports * 1e6:.0f} us/report)")
        print(f"history: {best_build * 1000:.0f} ms; total {(best_read + best_build) * 1000:.0f} ms (best of {args.rounds})")
        # Wall time on a loaded machine waits for the CPU; the process's own CPU time does not.
        print(f"cpu time of the whole (read and history): {best_cpu * 1000:.0f} ms")
        print(f"load average: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
