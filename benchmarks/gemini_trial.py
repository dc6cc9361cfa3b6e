"""Per-trial overhead of a real Gemini CLI trial against its floor, measured in the same run.

  * plugin: ``pytest --atlante-eval --atlante-scripted --atlante-host gemini-cli`` (child process)
            with ``budget.trials = N`` over a 10-file fixture; a two-turn script (write a file, then
            done) played to the real ``gemini`` 0.61.0.  The figure is each trial's ``durationMs``
            (the engine's clock around one trial: sandbox, scripted server and metering proxy,
            settings, snapshot, the host run, diff, checks, removal), ``hostDurationMs`` beside it.
  * floor:  the same ``gemini -p`` session run directly, no plugin: the adapter's settings and
            policy written into a fresh home, the same scripted server (no proxy), the same
            command and environment, timed from spawn to exit.  Gemini CLI's own start-up (node
            loading its bundle, about 3 s) is in both.
Nothing is asserted: speed is measured, never gated.

    PATH=hosts-npm/node_modules/.bin:$PATH python benchmarks/gemini_trial.py [--trials 5]
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
from _fakehost import machine_line, make_project, require_verdicts, run_eval
from pytest_atlante.hosts import host_for
from pytest_atlante.hosts.base import TrialWiring
from pytest_atlante.provider.scripted import ScriptedModelServer
from pytest_atlante.sandbox.process import allowlisted_environment
from pytest_atlante.suite.script import Script

TURNS = [{"text": "Writing.", "actions": [{"type": "write", "path": "hello.txt", "content": "hello\n"}]},
         {"text": "Done."}]


def floor_trial(work: Path) -> float:
    """One bare Gemini CLI session as the adapter configures it; seconds from spawn to exit."""
    host = host_for("gemini-cli")
    parent = dict(os.environ)
    info = host.probe(parent)
    sandbox, home = work / "sandbox", work / "home"
    for directory in (sandbox, home):
        directory.mkdir(parents=True)
    script = Script.model_validate({"schema": "atlante/scripted-model-v1", "turns": TURNS})
    with ScriptedModelServer(script, sandbox_root=sandbox) as server:
        host.prepare(TrialWiring(info, sandbox_root=sandbox, home=home, user_home=home, parent_env=parent, model=None,
                     scripted=server.endpoint))
        env = host.environment(info, base_env=allowlisted_environment(parent, home=home), parent_env=parent,
                               home=home, scripted=server.endpoint)
        argv = host.command(info, prompt="Do nothing.", agent=None, model=None)
        started = time.perf_counter()
        subprocess.run(argv, cwd=sandbox, env=env, stdin=subprocess.DEVNULL, capture_output=True, check=True,
                       start_new_session=True)
        elapsed = time.perf_counter() - started
    if not (sandbox / "hello.txt").is_file():
        sys.exit("floor: the Gemini session did not write hello.txt")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    if shutil.which("gemini") is None:
        sys.exit("gemini is not on PATH: put hosts-npm/node_modules/.bin first")
    print(machine_line(), f"load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="atlante-bench-gemini-") as scratch:
        root = Path(scratch)
        floors = []
        for index in range(args.trials):
            floors.append(floor_trial(root / f"floor-{index}") * 1000)
        project = make_project(root / "project", files=10, trials=args.trials, script_turns=TURNS, host="gemini-cli")
        run = run_eval(project, None, root / "out", "--atlante-host", "gemini-cli")
        require_verdicts(run, {"pass"}, "plugin")
    plugin = [float(t["durationMs"]) for t in run.trials]
    hosts = [float(t["hostDurationMs"]) for t in run.trials]
    print("| trials | plugin mean | plugin median | host mean | floor mean | floor median | ratio (means) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {len(plugin)} | {statistics.mean(plugin):,.0f} | {statistics.median(plugin):,.0f} | "
          f"{statistics.mean(hosts):,.0f} | {statistics.mean(floors):,.0f} | {statistics.median(floors):,.0f} | "
          f"**{statistics.mean(plugin) / statistics.mean(floors):.2f}×** |")


if __name__ == "__main__":
    main()
