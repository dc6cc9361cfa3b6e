"""What a command's process sweep costs, by machine size: the run's own tree against a ``/proc`` scan.

Every command a trial runs (the host session, each command check) takes two sweeps: the children
this process has before it starts (``current_children``) and, once it ended, the kill sweep
(``kill_processes_with_token``).  This script starts ``--extra`` idle processes (not children of
the sweeping process, as another engineer's or CI's processes would be), then, interleaved per
round, times both calls for a run of ``/bin/true`` the way ``process.run`` makes them:

- **tree**: the kernel's child lists from this process down (``/proc/<pid>/task/*/children``);
- **scan**: the same calls with the child lists hidden, so they scan every process in ``/proc``
  (token, process group, adopted children) — the only method before issue 28.

Reported per machine size: medians over ``--rounds`` of both, and the median of the per-round
ratios.  The load average is printed beside them.

    python benchmarks/sweep_cost.py [--extra 0,300] [--rounds 31]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_atlante.sandbox import reaper


@contextmanager
def idle_processes(count: int) -> Iterator[None]:
    """``count`` sleepers that are not our children (grandchildren, below a launcher that was our
    child before any measured run, as another job's processes would be)."""
    if count == 0:
        yield
        return
    launcher = subprocess.Popen(
        [sys.executable, "-c", "import os, sys, time\n"
         "for _ in range(int(sys.argv[1])):\n"
         "    if os.fork() == 0:\n        time.sleep(3600); os._exit(0)\n"
         "time.sleep(3600)\n", str(count)], start_new_session=True)
    time.sleep(2.0)
    try:
        yield
    finally:
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait()


def one_run(token: str) -> tuple[float, float]:
    """Seconds of ``current_children`` and of the kill sweep around a run of /bin/true."""
    start = time.perf_counter()
    known = reaper.current_children()
    before = time.perf_counter() - start
    child = subprocess.Popen(["/bin/true"], env={"PATH": "/usr/bin:/bin", reaper.TOKEN_VARIABLE: token},
                             start_new_session=True)
    while os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT) is None:
        pass
    start = time.perf_counter()
    reaper.kill_processes_with_token(token, process_group=child.pid, known_children=known)
    after = time.perf_counter() - start
    child.wait()
    return before, after


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--extra", default="0,300")
    parser.add_argument("--rounds", type=int, default=31)
    options = parser.parse_args()
    reaper.ensure_child_subreaper()
    for extra in (int(x) for x in options.extra.split(",")):
        with idle_processes(extra):
            machine = sum(1 for name in os.listdir("/proc") if name.isdigit())
            tree: list[float] = []
            scan: list[float] = []
            for index in range(options.rounds):
                tree.append(sum(one_run(f"bench-tree-{index}")))
                with mock.patch.object(reaper, "_children_of", return_value=None):
                    scan.append(sum(one_run(f"bench-scan-{index}")))
            ratio = statistics.median(s / t for s, t in zip(scan, tree, strict=True))
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            print(f"{machine:4d} processes on the machine (load {load}): per command "
                  f"tree {statistics.median(tree) * 1000:6.2f} ms, scan {statistics.median(scan) * 1000:6.2f} ms "
                  f"(scan/tree {ratio:.1f}x); a trial runs 2-3 commands")


if __name__ == "__main__":
    main()
