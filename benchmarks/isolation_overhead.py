"""Per-trial cost of namespace isolation (bubblewrap) against the same trials without it.

Each configuration runs ``pytest --atlante-eval --atlante-scripted`` twice on the same project,
``--atlante-isolation off`` and ``--atlante-isolation namespace``, alternating the order between
repeats so load drift does not favour one mode.  The scenario has one command check, so both the
host session and a check go through bubblewrap (two ``bwrap`` starts per trial).  The figure is each
trial's ``durationMs`` from report.json (engine time of one trial); ratio = namespace / off.

  * fake host: the ``/bin/sh`` fake ``claude`` of ``_fakehost`` (exits at once), at fixtures of 10
    and 1,000 files: isolation's fixed cost against the cheapest possible trial;
  * real host: the pinned Claude Code CLI (``hosts-npm/``, ``scripts/setup``) against the scripted
    model, one turn: the cost against a real trial.  Skipped with a note when the CLI is missing.

  * start alone: ``/bin/true`` run directly and through the same bubblewrap arguments a trial
    gets (``Confinement``), 50 times each: the fixed cost of one wrapped command.

Nothing is asserted: speed is measured, never gated.

    python benchmarks/isolation_overhead.py [--trials 10] [--real-trials 3] [--repeats 2] [--no-real]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _fakehost import REPO_ROOT, install_quick_claude, machine_line, make_project, require_verdicts, run_eval

MODES = ("off", "namespace")
REAL_BIN = REPO_ROOT / "hosts-npm" / "node_modules" / ".bin"


def add_command_check(project: Path) -> None:
    """Give the scenario a command check, so checks are wrapped too."""
    path = project / "eval" / "scenarios" / "bench.eval.json"
    scenario = json.loads(path.read_text(encoding="utf-8"))
    scenario["checks"].append({"type": "command", "run": ["cat", "d000/f00000.txt"], "outputMatches": "file 0"})
    path.write_text(json.dumps(scenario, indent=2) + "\n", encoding="utf-8")


def measure(project: Path, bin_dir: Path | None, out: Path, repeats: int, what: str) -> dict[str, list[float]]:
    durations: dict[str, list[float]] = {mode: [] for mode in MODES}
    for repeat in range(repeats):
        for mode in MODES if repeat % 2 == 0 else tuple(reversed(MODES)):
            run = run_eval(project, bin_dir, out / f"{mode}-{repeat}", "--atlante-isolation", mode)
            require_verdicts(run, {"pass"}, f"{what}, isolation {mode}")
            if run.report.get("isolation", {}).get("mode") != ("namespace" if mode == "namespace" else "none"):
                sys.exit(f"{what}: the run did not get isolation {mode}: {run.report.get('isolation')}")
            durations[mode] += [float(t["durationMs"]) for t in run.trials]
    return durations


def start_cost(tmp: Path, count: int = 50) -> tuple[float, float]:
    """Median ms of ``/bin/true`` run directly and inside a trial's bubblewrap sandbox."""
    import os
    import subprocess
    import time

    from pytest_atlante.sandbox.isolation import Confinement, hidden_roots

    trial = tmp / "atlante-eval-start" / "t-1"
    for name in ("sandbox", "home"):
        (trial / name).mkdir(parents=True)
    confinement = Confinement(writable=(trial / "sandbox", trial / "home"),
                              hidden=hidden_roots(user_home=Path.home(), project_root=tmp, report_dir=None),
                              trial_dir=trial, cwd=trial / "sandbox")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(trial / "home")}
    medians = []
    for argv in (["/bin/true"], confinement.arguments(["/bin/true"], env)):
        times = []
        for _ in range(count):
            started = time.perf_counter()
            subprocess.run(argv, env=env, check=True)
            times.append((time.perf_counter() - started) * 1000)
        medians.append(statistics.median(times))
    return medians[0], medians[1]


def row(label: str, durations: dict[str, list[float]]) -> str:
    off, ns = durations["off"], durations["namespace"]
    ratio = statistics.fmean(ns) / statistics.fmean(off)
    return (f"{label:<22} {len(off):>6} {statistics.fmean(off):>10.1f} {statistics.median(off):>8.1f} "
            f"{statistics.fmean(ns):>10.1f} {statistics.median(ns):>8.1f} {ratio:>6.2f}  "
            f"(+{statistics.fmean(ns) - statistics.fmean(off):.1f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10, help="trials per run with the fake host")
    parser.add_argument("--real-trials", type=int, default=3, help="trials per run with the real CLI")
    parser.add_argument("--repeats", type=int, default=2, help="runs per mode (order alternates)")
    parser.add_argument("--no-real", action="store_true", help="skip the real-CLI part")
    args = parser.parse_args()
    print(f"machine: {machine_line()}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="atlante-bench-isolation-") as raw:
        tmp = Path(raw)
        plain_ms, wrapped_ms = start_cost(tmp)
        print(f"one command: /bin/true {plain_ms:.1f} ms, inside bubblewrap {wrapped_ms:.1f} ms (medians of 50)")
        bin_dir = tmp / "bin"
        install_quick_claude(bin_dir)
        for files in (10, 1_000):
            project = make_project(tmp / f"project-{files}", files=files, trials=args.trials)
            add_command_check(project)
            rows.append(row(f"fake host, {files} files", measure(project, bin_dir, tmp / f"out-{files}", args.repeats,
                                                                 f"fake host at {files} files")))
        if args.no_real:
            print("real host: skipped (--no-real)")
        elif not (REAL_BIN / "claude").exists():
            print(f"real host: skipped (no pinned CLI in {REAL_BIN}; run scripts/setup)")
        else:
            turns = [{"text": "Nothing to do."}]
            project = make_project(tmp / "project-real", files=10, trials=args.real_trials, script_turns=turns)
            add_command_check(project)
            rows.append(row("claude 2.1.197, 10 files", measure(project, REAL_BIN, tmp / "out-real", args.repeats,
                                                                "real host")))
    print(f"\n{'':<22} {'trials':>6} {'off mean':>10} {'median':>8} {'ns mean':>10} {'median':>8} {'ratio':>6}  (ms per trial)")
    for line in rows:
        print(line)
    print("\nratio = mean durationMs with namespace isolation / without; ns = namespace")


if __name__ == "__main__":
    main()
