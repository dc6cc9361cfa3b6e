"""Per-trial overhead of the eval engine against a floor measured in the same run.

For fixtures of 10, 1,000 and 10,000 small files:
  * plugin: ``pytest --atlante-eval --atlante-scripted`` (child process) with ``budget.trials = N``
            and a fake ``claude`` that prints one ``result`` event and exits at once.  The figure is
            each trial's ``durationMs`` from report.json — the engine's own clock around one trial:
            assemble the sandbox (copy fixture + build overlay), start/stop the scripted server,
            write host settings, snapshot, run the host, diff, checks, remove.  pytest start-up,
            collection and report writing are NOT in it.  ``hostDurationMs`` (the fake host's
            own run) is shown beside it.
  * floor:  the same work done directly, no plugin: ``shutil.copytree`` of the fixture,
            ``git init`` + ``git add -A`` + ``git commit``, then ``git add -A`` + ``git diff --cached``
            and ``shutil.rmtree`` — the least a copy/snapshot/diff/cleanup trial can cost with git.
Prints per-trial mean (and median) for both and the ratio plugin/floor, then the cost of the
always-on integrity work (hermeticity audit, source-copy check, once-per-run source copy) measured
directly on the same project, as a share of the plugin's per-trial time.  Nothing is asserted: speed is
measured, never gated.  The goal reported against is plugin ≤ 1.25× floor at 1,000 files.

    python benchmarks/eval_overhead.py [--sizes 10,1000,10000] [--profile FILES]

``--profile FILES`` additionally runs one in-process trial under cProfile at that fixture size and
prints the 25 most expensive functions by cumulative time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _fakehost import FIXTURE_REL, install_quick_claude, machine_line, make_project, require_verdicts, run_eval

SIZES: tuple[tuple[int, int], ...] = ((10, 20), (1_000, 20), (10_000, 5))  # (files, trials)
GIT_ENV = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@localhost", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@localhost", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout


def floor_trial(fixture: Path, work: Path) -> float:
    """copy + git snapshot + git diff + remove, done directly; seconds."""
    started = time.perf_counter()
    sandbox = work / "sandbox"
    shutil.copytree(fixture, sandbox, symlinks=True)
    _git(sandbox, "init", "-q")
    _git(sandbox, "add", "-A")
    _git(sandbox, "commit", "-q", "--no-gpg-sign", "-m", "baseline")
    _git(sandbox, "add", "-A")
    _git(sandbox, "diff", "--cached", "--no-color", "HEAD")
    shutil.rmtree(sandbox)
    return time.perf_counter() - started


def integrity_costs(project: Path, out: Path, repeats: int) -> dict[str, float]:
    """ms of the always-on integrity work, done directly: the audit's two fingerprints of the
    watched places per trial, the per-trial check of the run's source copies, and the once-per-run
    copy itself."""
    from pytest_atlante.sandbox.audit import Audit
    from pytest_atlante.sandbox.sources import changed_in_copy, prepare_sources
    from pytest_atlante.sandbox.trialdir import remove_tree, run_dir
    from pytest_atlante.suite.build import tree_dir

    roots = [project / FIXTURE_REL, tree_dir(project, "claude-code")]
    run_id = f"bench-{os.getpid()}"
    started = time.perf_counter()
    sources = prepare_sources(roots, run_id)
    copy_ms = (time.perf_counter() - started) * 1000
    audit = Audit.for_run(project, home=Path.home(), report_dir=out, run_temp=run_dir(run_id))
    audit_s, sources_s = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        audit.escapes(audit.start())
        audit_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        assert not any(changed_in_copy(sources, root) for root in roots)
        sources_s.append(time.perf_counter() - started)
    remove_tree(run_dir(run_id))
    return {"audit_mean": statistics.fmean(audit_s) * 1000, "sources_mean": statistics.fmean(sources_s) * 1000,
            "copy_ms": copy_ms}


def measure(files: int, trials: int, tmp: Path, bin_dir: Path) -> dict[str, float]:
    project = make_project(tmp / f"project-{files}", files=files, trials=trials)
    run = run_eval(project, bin_dir, tmp / f"out-{files}")
    require_verdicts(run, {"pass"}, f"overhead run with {files} files")
    plugin_ms = [float(t["durationMs"]) for t in run.trials]
    host_ms = [float(t["hostDurationMs"]) for t in run.trials]
    floor_ms = [floor_trial(project / FIXTURE_REL, tmp) * 1000 for _ in range(trials)]
    return {
        **integrity_costs(project, tmp / f"out-{files}", trials),
        "plugin_mean": statistics.fmean(plugin_ms), "plugin_median": statistics.median(plugin_ms),
        "host_mean": statistics.fmean(host_ms),
        "floor_mean": statistics.fmean(floor_ms), "floor_median": statistics.median(floor_ms),
        "wall_s": run.wall_s,
    }


def profile_one(files: int, tmp: Path, bin_dir: Path) -> None:
    """One trial in this process under cProfile (same engine path as the pytest run)."""
    import cProfile
    import pstats

    from pytest_atlante.report.model import new_run_id
    from pytest_atlante.run.evalrun import prepare_run, prepare_run_sources
    from pytest_atlante.suite.discovery import discover
    from pytest_atlante.trial.budget import TrialBudget
    from pytest_atlante.trial.runner import RunnerSettings, TrialRunner

    project = make_project(tmp / f"profile-{files}", files=files, trials=1)
    os.environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    suite = discover(project, scripted=True).validated()
    problems, run_errors, info = prepare_run(suite, scripted=True)
    assert not problems and not run_errors and info is not None, (problems, run_errors)
    from datetime import UTC, datetime

    run_id = new_run_id(datetime.now(UTC))
    engine = TrialRunner(suite, run_id, info, sources=prepare_run_sources(suite, run_id)[1],
                         report_dir=tmp / f"profile-{files}-out", settings=RunnerSettings(scripted=True, transcripts=False))
    budget = TrialBudget(timeoutMs=60_000, maxTokens=400_000, maxSessions=2, trials=2, allocated=True)
    entry = suite.scenarios[0]
    engine.run(entry, 1, "warm-up", budget, lambda _: None)  # lazy imports out of the profile
    profiler = cProfile.Profile()
    profiler.enable()
    record = engine.run(entry, 2, "profiled", budget, lambda _: None)
    profiler.disable()
    print(f"\nprofile of one trial with {files} files: verdict {record.verdict}, {record.durationMs} ms")
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default=",".join(str(f) for f, _ in SIZES),
                        help="fixture sizes to measure, comma-separated (empty: none)")
    parser.add_argument("--profile", type=int, metavar="FILES", help="also cProfile one trial at this fixture size")
    args = parser.parse_args()
    trials_for = dict(SIZES)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    print(f"machine: {machine_line()}")
    with tempfile.TemporaryDirectory(prefix="atlante-bench-overhead-") as raw:
        tmp = Path(raw)
        bin_dir = tmp / "bin"
        install_quick_claude(bin_dir)
        rows = []
        for files in sizes:
            trials = trials_for.get(files, 10)
            rows.append((files, trials, measure(files, trials, tmp, bin_dir)))
        if rows:
            print(f"\n{'files':>7} {'trials':>6} {'plugin mean':>12} {'median':>8} {'host':>6} "
                  f"{'floor mean':>11} {'median':>8} {'ratio':>6}  (ms per trial)")
            for files, trials, m in rows:
                print(f"{files:>7} {trials:>6} {m['plugin_mean']:>12.1f} {m['plugin_median']:>8.1f} {m['host_mean']:>6.1f} "
                      f"{m['floor_mean']:>11.1f} {m['floor_median']:>8.1f} {m['plugin_mean'] / m['floor_mean']:>6.2f}")
            print("\nplugin = report.json durationMs (engine time of one trial, fake host included); "
                  "floor = copytree + git init/add/commit + git add/diff + rmtree")
        if rows:
            print(f"\n{'files':>7} {'audit':>8} {'sources':>8} {'per trial':>10} {'of trial':>9} {'copy/run':>9}  "
                  "(ms; integrity work inside each trial's durationMs, and once per run)")
            for files, _, m in rows:
                per_trial = m["audit_mean"] + m["sources_mean"]
                print(f"{files:>7} {m['audit_mean']:>8.1f} {m['sources_mean']:>8.1f} {per_trial:>10.1f} "
                      f"{per_trial / m['plugin_mean']:>8.1%} {m['copy_ms']:>9.1f}")
        for files, _, m in rows:
            ratio = m["plugin_mean"] / m["floor_mean"]
            goal = f"  (goal <= 1.25x: {'met' if ratio <= 1.25 else 'NOT met'})" if files == 1_000 else ""
            print(f"ratio plugin/floor at {files} files: {ratio:.2f}x (medians {m['plugin_median'] / m['floor_median']:.2f}x)"
                  f"{goal}")
        if args.profile:
            profile_one(args.profile, tmp, bin_dir)


if __name__ == "__main__":
    main()
