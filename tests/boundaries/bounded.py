"""Run one command as the boundary tests need it: a hard timeout, its exit code and its peak RSS.

The peak RSS is ``wait4``'s ``ru_maxrss`` for the command: its own peak, or that of a child it
waited for (git, a check) when larger.  On Linux a process's ``ru_maxrss`` starts from the RSS of
the process that forked it, so the command is started by a small launcher (``_LAUNCHER``), not
straight from the test worker (whose own memory would otherwise be the floor of every figure).
Big inputs are sparse files: as large as the case needs while costing the disk almost nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

# The bound on the runner's peak memory over every hostile case.
RSS_BOUND_MIB = 250
# Forks the command from a fresh, small process and writes its ru_maxrss (KiB) to argv[1].
_LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status) % 256)
"""


@dataclass(frozen=True)
class Outcome:
    returncode: int
    stdout: str
    stderr: str
    peak_rss_mib: float
    timed_out: bool

    @property
    def text(self) -> str:
        return self.stdout + self.stderr


def run_bounded(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout_s: float = 120.0) -> Outcome:
    """Run ``argv`` to completion (killing its process group after ``timeout_s``)."""
    out_path, err_path, rss_path = cwd / ".bounded.out", cwd / ".bounded.err", cwd / ".bounded.rss"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", _LAUNCHER, str(rss_path), *argv], cwd=cwd, env=env,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
    timed_out = threading.Event()

    def kill() -> None:
        timed_out.set()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)

    timer = threading.Timer(timeout_s, kill)
    timer.start()
    try:
            proc.wait()
    finally:
        timer.cancel()
    # ru_maxrss is in KiB on Linux; a killed launcher wrote none (the case failed anyway).
    peak_kib = int(rss_path.read_text()) if rss_path.exists() else 0
    result = Outcome(proc.returncode, out_path.read_text(errors="replace"), err_path.read_text(errors="replace"),
                     peak_kib / 1024, timed_out.is_set())
    for path in (out_path, err_path, rss_path):
        path.unlink(missing_ok=True)
    log = os.environ.get("ATLANTE_RSS_LOG")  # benchmarks/peak_rss.py collects every measurement
    if log:
        case = os.environ.get("PYTEST_CURRENT_TEST", " ".join(argv)).rsplit(" ", 1)[0]
        with open(log, "a") as handle:
            handle.write(f"{result.peak_rss_mib:.1f}\t{case}\n")
    return result


def sparse(path: Path, size: int, head: bytes = b"") -> Path:
    """A file of ``size`` bytes that occupies (almost) no disk: ``head`` then a hole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        handle.write(head)
        handle.truncate(size)
    return path


def assert_clean(outcome: Outcome, *, rss_bound_mib: float = RSS_BOUND_MIB) -> None:
    """No hang, no traceback, memory under the bound."""
    assert not outcome.timed_out, "the command hung and was killed\n" + outcome.text[-3000:]
    assert "Traceback" not in outcome.text and "INTERNALERROR" not in outcome.text, outcome.text[-3000:]
    assert outcome.peak_rss_mib <= rss_bound_mib, f"peak RSS {outcome.peak_rss_mib:.0f} MiB"
