"""Per-trial overhead of a Codex trial against its floor: the same ``codex exec`` run by hand.

  * plugin: ``pytest --atlante-eval --atlante-scripted`` on a project whose host is ``codex``, N
    trials of one scenario (one ``write`` turn, then a final text) over a 10-file fixture, without
    and with namespace isolation; the figure is each trial's ``durationMs`` (engine time of one
    trial: sandbox, baseline, metering proxy, session, rollout, checks, diff, clean-up) and its
    ``hostDurationMs`` (the session alone);
  * floor: what the trial cannot do without — the pinned ``codex exec --json --skip-git-repo-check``
    run by hand, N times, each on a fresh copy of the same fixture with a fresh ``CODEX_HOME`` holding
    the same ``config.toml`` and rules, against a scripted-model server playing the same script
    (started per run, as the trial does), stdin ``/dev/null``; wall time of copy + server + session.

ratio = mean plugin durationMs / mean floor.  Runs alternate plugin and floor per repeat, so load
drift does not favour one side.  Nothing is asserted: speed is measured, never gated.

    python benchmarks/codex_overhead.py [--trials 5] [--repeats 2]
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
from _fakehost import FIXTURE_REL, REPO_ROOT, bench_env, machine_line, make_project, require_verdicts, run_eval
from pytest_atlante.hosts.codex.config import codex_rules, render_config
from pytest_atlante.hosts.codex.tools import CODEX_TOOLS
from pytest_atlante.provider.scripted import ScriptedModelServer
from pytest_atlante.suite.script import Script

REAL_BIN = REPO_ROOT / "hosts-npm" / "node_modules" / ".bin"
TURNS = [{"text": "Writing.", "actions": [{"type": "write", "path": "out.txt", "content": "x\n"}]}, {"text": "Done."}]


def floor_once(project: Path, work: Path, env: dict[str, str]) -> float:
    """One hand-run session, timed from the fixture copy to the CLI's exit."""
    started = time.perf_counter()
    sandbox, home, tmp = work / "sandbox", work / "home", work / "tmp"
    shutil.copytree(project / FIXTURE_REL, sandbox)
    (home / ".codex" / "rules").mkdir(parents=True)
    tmp.mkdir()
    script = Script.model_validate({"schema": "atlante/scripted-model-v1", "turns": TURNS})
    with ScriptedModelServer(script, sandbox_root=sandbox, shell_tools=CODEX_TOOLS) as server:
        (home / ".codex" / "config.toml").write_text(render_config(model=None, scripted=server.endpoint,
                                                                   openai_base_url=None), encoding="utf-8")
        (home / ".codex" / "rules" / "atlante.rules").write_text(codex_rules(), encoding="utf-8")
        child = {**env, "HOME": str(home), "CODEX_HOME": str(home / ".codex"), "TMPDIR": str(tmp)}
        done = subprocess.run([str(REAL_BIN / "codex"), "exec", "--json", "--skip-git-repo-check", "--", "Do nothing."],
                              cwd=sandbox, env=child, stdin=subprocess.DEVNULL, capture_output=True, check=False,
                              start_new_session=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0 or not (sandbox / "out.txt").is_file():
        sys.exit(f"floor run failed (exit {done.returncode}): {done.stderr.decode(errors='replace')[-500:]}")
    shutil.rmtree(work)
    return elapsed * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=5, help="trials per plugin run, hand runs per floor round")
    parser.add_argument("--repeats", type=int, default=2, help="rounds (plugin and floor alternate)")
    args = parser.parse_args()
    if not (REAL_BIN / "codex").exists():
        sys.exit(f"no pinned codex in {REAL_BIN}: run scripts/setup")
    print(f"machine: {machine_line()}")
    env = bench_env()
    env["PATH"] = f"{REAL_BIN}{os.pathsep}{env.get('PATH', '')}"
    plugin: dict[str, list[float]] = {"off": [], "namespace": []}
    host: dict[str, list[float]] = {"off": [], "namespace": []}
    floor: list[float] = []
    with tempfile.TemporaryDirectory(prefix="atlante-bench-codex-") as raw:
        tmp = Path(raw)
        project = make_project(tmp / "project", files=10, trials=args.trials, script_turns=TURNS, host="codex")
        for repeat in range(args.repeats):
            for side in ("plugin", "floor") if repeat % 2 == 0 else ("floor", "plugin"):
                if side == "floor":
                    floor += [floor_once(project, tmp / f"floor-{repeat}-{n}", env) for n in range(args.trials)]
                    continue
                for mode in ("off", "namespace"):
                    run = run_eval(project, REAL_BIN, tmp / f"out-{mode}-{repeat}", "--atlante-isolation", mode)
                    require_verdicts(run, {"pass"}, f"codex, isolation {mode}")
                    plugin[mode] += [float(t["durationMs"]) for t in run.trials]
                    host[mode] += [float(t["hostDurationMs"]) for t in run.trials]
    floor_mean = statistics.mean(floor)
    print(f"\n{'':<28} {'n':>3} {'mean ms':>9} {'median':>8} {'session ms':>10} {'× floor':>8}")
    print(f"{'floor: codex exec by hand':<28} {len(floor):>3} {floor_mean:>9.0f} {statistics.median(floor):>8.0f} "
          f"{'':>10} {1.0:>8.2f}")
    for mode in ("off", "namespace"):
        print(f"{'plugin, isolation ' + mode:<28} {len(plugin[mode]):>3} {statistics.mean(plugin[mode]):>9.0f} "
              f"{statistics.median(plugin[mode]):>8.0f} {statistics.mean(host[mode]):>10.0f} "
              f"{statistics.mean(plugin[mode]) / floor_mean:>8.2f}")
    print("\n× floor = mean trial durationMs / mean floor; session = mean hostDurationMs (the codex process alone)")


if __name__ == "__main__":
    main()
