"""benchmarks/concurrency.py's arithmetic and parsing: /proc/<pid>/stat, the process tree, the
per-trial figures and ratios (never its timings: speed is measured, never gated)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import concurrency as bench

# proc(5): the command sits in parentheses and may hold spaces and ")"; utime 14, stime 15,
# starttime 22, rss 24 (pages).
STAT = ("4242 (node (a) b) S 4200 4242 4242 0 -1 4194560 100 0 0 0 "
        "70 30 5 5 20 0 11 0 123456 1000000 2560 18446744073709551615")


def sample(pid: int, ppid: int, cpu: int, rss_pages: int = 1, start: int = 1) -> bench.ProcSample:
    return bench.ProcSample(pid=pid, ppid=ppid, start=start, cpu_ticks=cpu, rss_bytes=rss_pages * bench.PAGE_BYTES)


def test_a_stat_line_gives_ppid_own_cpu_start_and_rss_whatever_the_command() -> None:
    got = bench.parse_stat(STAT)
    assert (got.pid, got.ppid, got.cpu_ticks, got.start) == (4242, 4200, 100, 123456)   # utime+stime, not cutime
    assert got.rss_bytes == 2560 * bench.PAGE_BYTES


def test_the_tree_is_the_root_and_everything_below_it_only() -> None:
    snapshot = [sample(1, 0, 0), sample(10, 1, 0), sample(11, 10, 0), sample(12, 11, 0), sample(20, 1, 0)]
    assert sorted(s.pid for s in bench.descendants(10, snapshot)) == [10, 11, 12]
    assert bench.descendants(99, snapshot) == []


def test_usage_keeps_each_process_last_cpu_the_runners_apart_and_the_peak_of_the_summed_rss() -> None:
    usage = bench.TreeUsage()
    def is_runner(s: bench.ProcSample) -> bool:
        return s.pid in (10, 11)
    usage.add([sample(10, 1, 100, 10), sample(11, 10, 50, 20), sample(12, 11, 500, 300)], is_runner)
    # pid 12 ended; 13 started; pid 11 was reused by another process (another start time)
    usage.add([sample(10, 1, 300, 10), sample(11, 10, 80, 20), sample(13, 10, 40, 5), sample(11, 10, 7, 1, start=9)],
              is_runner)
    ticks = bench.CLOCK_TICKS
    assert usage.runner_cpu_s == pytest.approx((300 + 80 + 7) / ticks)
    assert usage.tree_cpu_s == pytest.approx((300 + 80 + 500 + 40 + 7) / ticks)
    assert usage.peak_rss_bytes == 330 * bench.PAGE_BYTES
    usage.reaped_cpu_s = 12.5   # once waited for, getrusage is exact and wins
    assert usage.tree_cpu_s == 12.5


def test_effective_concurrency_cpu_per_trial_and_fixed_cost() -> None:
    side = bench.Side(wall_s=10.0, trial_s=[4.0, 4.0, 4.0, 4.0, 4.0], runner_cpu_s=2.5, tree_cpu_s=20.0, peak_rss_bytes=1)
    assert side.concurrency == pytest.approx(2.0)
    assert side.runner_cpu_per_trial == pytest.approx(0.5) and side.tree_cpu_per_trial == pytest.approx(4.0)
    assert side.fixed_s == pytest.approx(-10.0)   # meaningful for a serial run only, where it is wall - trials
    serial = bench.Side(wall_s=3.2, trial_s=[2.0], runner_cpu_s=0, tree_cpu_s=0, peak_rss_bytes=0)
    assert serial.fixed_s == pytest.approx(1.2)
    assert bench.Side(0.0, [], 0, 0, 0).concurrency == 0.0 and bench.Side(0.0, [], 0, 0, 0).runner_cpu_per_trial == 0.0


def test_the_ratio_row_is_eval_over_pool_of_the_medians() -> None:
    evals = [bench.Side(12.0, [4.0] * 6, 1.2, 6.0, 300 * 2**20), bench.Side(10.0, [4.0] * 6, 0.6, 6.0, 100 * 2**20),
             bench.Side(11.0, [4.0] * 6, 0.9, 6.0, 200 * 2**20)]
    pools = [bench.Side(8.0, [4.0] * 6, 0.3, 3.0, 100 * 2**20)]
    flight = [bench.Side(6.0, [4.0] * 6, 0.3, 3.0, 100 * 2**20)]
    rows = bench.width_lines(4, {"xdist": evals, "flight": flight}, pools)
    assert rows[0].split() == ["4", "-n", "11.0", "2.2", "0.150", "1.00", "200"]
    assert rows[1].split() == ["4", "flight", "6.0", "4.0", "0.050", "0.50", "100"]
    assert rows[2].split() == ["4", "pool", "8.0", "3.0", "0.050", "0.50", "100"]
    # wall 11/8, concurrency (24/11)/(24/8) = 8/11, runner CPU 0.15/0.05, tree 1/0.5, memory 2
    assert rows[3].split() == ["4", "-n/pool", "1.38x", "0.73x", "3.00x", "2.00x", "2.00x"]
    # wall 6/8, concurrency (24/6)/(24/8) = 4/3, the rest equal
    assert rows[4].split() == ["4", "flight/pool", "0.75x", "1.33x", "1.00x", "1.00x", "1.00x"]
    assert bench.ratio(1.0, 0.0).strip() == "-"


def test_the_fixed_cost_line_is_the_median_of_paired_differences() -> None:
    evals = [bench.Side(3.0, [2.0], 0, 0, 0), bench.Side(3.5, [2.0], 0, 0, 0)]
    scripts = [bench.Side(2.2, [2.0], 0, 0, 0), bench.Side(2.3, [2.0], 0, 0, 0)]
    [line] = bench.fixed_lines(evals, scripts)
    assert "eval    1250 ms" in line and "plain script     250 ms" in line and "eval-script +1000 ms" in line


def test_trial_times_come_from_the_report_and_the_pool_log_and_a_failed_trial_stops() -> None:
    report = {"scenarios": [{"trials": [{"verdict": "pass", "durationMs": 1500}, {"verdict": "pass", "durationMs": 500}]}]}
    assert bench.eval_trial_seconds(report) == [1.5, 0.5]
    with pytest.raises(ValueError, match="infra-error"):
        bench.eval_trial_seconds({"scenarios": [{"trials": [{"verdict": "infra-error", "durationMs": 1}]}]})
    with pytest.raises(ValueError, match="no trial"):
        bench.eval_trial_seconds({})
    assert bench.pool_trial_seconds('{"trial": 0, "ms": 2000, "hostMs": 1}\n\n{"trial": 1, "ms": 250}\n') == [2.0, 0.25]


def test_quick_mode_overrides_the_size_and_help_says_how_to_run_the_full_table(capsys: pytest.CaptureFixture[str]) -> None:
    args = bench.parse_args(["--quick", "--trials", "64"])
    assert (args.trials, args.widths, args.rounds) == (4, "1,2", 1)
    assert bench.parse_args([]).widths == "1,4,8,16,32"
    with pytest.raises(SystemExit):
        bench.parse_args(["--help"])
    text = capsys.readouterr().out
    assert "QUIET machine" in text and "--trials 32 --widths 1,4,8,16,32" in text
