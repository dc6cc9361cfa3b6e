"""Sharded runs and their merge, driven by a fake host (``fakehost.py``) for speed.

Shards run as separate ``pytest`` processes, as CI machines would, and are merged by the real
``atlante report merge`` command.  The same comparison on the real CLIs through the scripted model
is in ``test_shards_real.py``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import Project, config_doc, scenario_doc
from fakehost import fake_env, install_fake_claude
from pytest_atlante.report.model import EvalReport
from pytest_atlante.report.seal import write_seal

SCENARIOS = ("alpha", "beta", "gamma")


def fake_scenario(name: str, spec: dict[str, Any], check: str = "README.md") -> dict[str, Any]:
    return scenario_doc(name=name, task={"fixture": "eval/fixtures/app", "prompt": "FAKE:" + json.dumps(spec)},
                        checks=[{"type": "file-exists", "path": check}])


@pytest.fixture
def sharded_project(atlante_project: Project, tmp_path: Path) -> Project:
    """3 scenarios x 2 trials, maxSessions 4 (< 6 trials); gamma fails its check."""
    install_fake_claude(tmp_path / "fakebin")
    atlante_project.config(config_doc(budget={"trials": 2, "maxSessions": 4}))
    (atlante_project.root / "eval/scenarios/main.eval.json").unlink()
    for name in SCENARIOS:
        check = "missing.txt" if name == "gamma" else "README.md"
        atlante_project.scenario(fake_scenario(name, {"usage": [10]}, check), f"eval/scenarios/{name}.eval.json")
    atlante_project.build()
    return atlante_project


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, **fake_env(tmp_path / "fakebin"), **extra}
    for name in ("GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT", "CI_PIPELINE_ID", "BUILDKITE_BUILD_ID",
                 "BUILDKITE_RETRY_COUNT", "CIRCLE_WORKFLOW_ID", "BUILD_ID"):
        if name not in extra:
            env.pop(name, None)
    return env


def pytest_run(project: Project, out: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pytest", "--atlante-eval", "--atlante-project", str(project.root),
            "--atlante-out", str(out), "-p", "no:cacheprovider", "--rootdir", str(project.root), "-q", *args]
    return subprocess.run(argv, cwd=project.root, env=env, capture_output=True, text=True, timeout=300, check=False)


def merge(paths: list[Path], out: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pytest_atlante.cli", "report", "merge", *map(str, paths), "-o", str(out)]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)


def verdicts(report: EvalReport) -> dict[str, str]:
    return {t.nodeId: t.verdict for s in report.scenarios for t in s.trials}


def load(path: Path) -> EvalReport:
    return EvalReport.model_validate_json(path.read_text(encoding="utf-8"))


def run_shards(project: Project, tmp_path: Path, env: dict[str, str], count: int, *extra: str, tag: str = "s") -> list[Path]:
    """``count`` shard processes started side by side, as a CI matrix would."""
    procs = []
    for index in range(1, count + 1):
        out = tmp_path / f"{tag}{index}"
        argv = [sys.executable, "-m", "pytest", "--atlante-eval", "--atlante-project", str(project.root),
                "--atlante-out", str(out), "-p", "no:cacheprovider", "--rootdir", str(project.root), "-q",
                "--atlante-shard", f"{index}/{count}", *extra]
        procs.append((out, subprocess.Popen(argv, cwd=project.root, env=env, stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, text=True)))
    paths = []
    for out, proc in procs:
        text, _ = proc.communicate(timeout=300)
        assert (out / "report.json").is_file(), text
        assert proc.returncode == load(out / "report.json").exitStatus, text  # an empty shard too: never pytest's 5
        paths.append(out / "report.json")
    return paths


def test_four_shards_merge_to_the_unsharded_run(sharded_project: Project, tmp_path: Path) -> None:
    env = env_for(tmp_path, GITHUB_RUN_ID="4242", GITHUB_RUN_ATTEMPT="1")
    whole = pytest_run(sharded_project, tmp_path / "whole", env)
    assert whole.returncode == 1, whole.stdout + whole.stderr
    unsharded = load(tmp_path / "whole" / "report.json")
    assert unsharded.shard is None and unsharded.runGroup is None

    paths = run_shards(sharded_project, tmp_path, env, 4)
    shards = [load(p) for p in paths]
    assert [s.shard.index for s in shards if s.shard] == [1, 2, 3, 4]
    assert len({s.runGroup for s in shards}) == 1 and shards[0].runGroup and shards[0].runGroup.endswith("-4242-1")
    assert len({s.suiteDigest for s in shards}) == 1
    # Each shard ran only its share; together they hold every trial once.
    assert sum(len(verdicts(s)) for s in shards) == 6 and all(verdicts(s) for s in shards)

    merged_path = tmp_path / "merged.json"
    done = merge(paths, merged_path, env)
    assert done.returncode == 1, done.stdout + done.stderr  # the run's status: a trial failed, two skipped
    merged = load(merged_path)
    assert verdicts(merged) == verdicts(unsharded)
    skipped = sorted(n for n, v in verdicts(merged).items() if v == "skipped-budget")
    assert skipped == ["eval/scenarios/gamma.eval.json::gamma[trial-1]", "eval/scenarios/gamma.eval.json::gamma[trial-2]"]
    assert [s.name for s in merged.scenarios] == [s.name for s in unsharded.scenarios]
    assert [(s.expectedTrials, s.passRate) for s in merged.scenarios] == [(s.expectedTrials, s.passRate) for s in unsharded.scenarios]
    assert merged.verdicts == unsharded.verdicts and merged.exitStatus == unsharded.exitStatus == 1
    assert merged.complete and [m.index for m in merged.shards or []] == [1, 2, 3, 4]
    assert merged.shard is None and merged.runGroup == shards[0].runGroup
    # Transcript paths are rewritten relative to the merged report and still lead to the files.
    transcripts = [t.transcript for s in merged.scenarios for t in s.trials if t.transcript]
    assert transcripts and all((merged_path.parent / p).is_file() for p in transcripts)
    # Statistics are recomputed over all trials, by the same code: identical to the unsharded run's.
    assert merged.suite == unsharded.suite and merged.suite is not None and merged.suite.trials == 4
    assert [(s.passInterval, s.passAtK, s.verdictCounts, s.scenarioDigest, s.harnessDigest) for s in merged.scenarios] == \
        [(s.passInterval, s.passAtK, s.verdictCounts, s.scenarioDigest, s.harnessDigest) for s in unsharded.scenarios]

    # Any order of the inputs gives the same bytes.
    for seed in (1, 2):
        order = paths[:]
        random.Random(seed).shuffle(order)
        again = tmp_path / f"merged-{seed}.json"
        assert merge(order, again, env).returncode == 1
        assert again.read_bytes() == merged_path.read_bytes()

    # A missing shard: exit 3 naming it; a duplicated one likewise.
    missing = merge(paths[:2] + paths[3:], tmp_path / "x.json", env)
    assert missing.returncode == 3 and "eval-merge-missing-shard" in missing.stderr and "shard 3/4" in missing.stderr
    twice = merge(paths + paths[1:2], tmp_path / "y.json", env)
    assert twice.returncode == 3 and "shard 2/4 is given 2 times" in twice.stderr

    # A shard of another suite (one more scenario): exit 2, mixed.
    sharded_project.scenario(fake_scenario("delta", {"usage": [10]}), "eval/scenarios/delta.eval.json")
    sharded_project.build()
    other = pytest_run(sharded_project, tmp_path / "other", env, "--atlante-shard", "2/4")
    assert (tmp_path / "other" / "report.json").is_file(), other.stdout
    mixed = merge([paths[0], tmp_path / "other" / "report.json", paths[2], paths[3]], tmp_path / "z.json", env)
    assert mixed.returncode == 2 and "eval-merge-mixed" in mixed.stderr and "suite digest" in mixed.stderr
    assert not (tmp_path / "z.json").exists()


@pytest.mark.parametrize("value", ["0/4", "5/4", "2", "a/b", "-1/2"])
def test_a_bad_shard_is_a_usage_error(pytester: pytest.Pytester, atlante_project: Project, value: str) -> None:
    result = pytester.runpytest_inprocess("--atlante-eval", "--atlante-project", str(atlante_project.root),
                                          f"--atlante-shard={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "eval-shard-invalid" in result.stderr.str()


def test_shards_deselect_the_other_trials_and_balance_by_earlier_durations(sharded_project: Project, tmp_path: Path) -> None:
    """Deselected items are reported as such; an earlier report's durations change the split."""
    env = env_for(tmp_path)
    first = pytest_run(sharded_project, tmp_path / "a", env, "--atlante-shard", "1/2", "--co")
    assert "deselected" in first.stdout, first.stdout
    # Without history the split balances by count and keeps scenarios whole (unit tests cover that);
    # an earlier whole-run report saying alpha is slow makes alpha heavier than a fair share, so
    # its two trials go to different shards.
    earlier = sharded_project.root / ".atlante" / "eval" / "20260101T000000Z-abcdef" / "report.json"
    whole = pytest_run(sharded_project, tmp_path / "whole", env)
    report = json.loads((tmp_path / "whole" / "report.json").read_text())
    for scenario in report["scenarios"]:
        scenario["meanDurationMs"] = 60_000.0 if scenario["name"] == "alpha" else 1_000.0
    earlier.parent.mkdir(parents=True)
    earlier.write_text(json.dumps(report))
    write_seal(earlier, earlier.read_bytes())  # as a run of this user's would have: durations come from sealed reports only
    assert whole.returncode == 1
    paths = run_shards(sharded_project, tmp_path, env, 2, tag="bal")
    names = [sorted({t.scenario for s in load(p).scenarios for t in s.trials}) for p in paths]
    assert all("alpha" in n for n in names), names


SOCKETSERVER = Path(__import__("execnet").__file__).parent / "script" / "socketserver.py"


def start_socketserver(env: dict[str, str], cwd: Path) -> tuple[subprocess.Popen[str], int]:
    """execnet's own socket server on 127.0.0.1, ephemeral port (read from its first line)."""
    proc = subprocess.Popen([sys.executable, "-u", str(SOCKETSERVER), "127.0.0.1:0"], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "socket_readline_exec_server-1.2 Entering Accept loop ('127.0.0.1', 41234)"
    assert "Entering Accept loop" in line, line
    return proc, int(line.rstrip().rstrip(")").rsplit(",", 1)[1])


def test_xdist_socket_gateways_give_one_complete_report(sharded_project: Project, tmp_path: Path) -> None:
    """Two execnet socket gateways as remote workers: one probe, every trial's record, one report."""
    env = env_for(tmp_path)
    servers = [start_socketserver(env, tmp_path) for _ in range(2)]
    try:
        tx = [a for _, port in servers for a in ("--tx", f"socket=127.0.0.1:{port}//chdir={sharded_project.root}")]
        probes = tmp_path / "fakebin" / "probe.log"
        probes.unlink(missing_ok=True)
        run = pytest_run(sharded_project, tmp_path / "remote", env, *tx, "-p", "xdist")
    finally:
        for proc, _ in servers:
            proc.kill()
            proc.wait(timeout=30)
            assert proc.stdout is not None
            proc.stdout.close()
    report = load(tmp_path / "remote" / "report.json")
    assert run.returncode == 1, run.stdout + run.stderr
    assert report.complete and sum(len(s.trials) for s in report.scenarios) == 6
    assert report.verdicts["pass"] == 4 and report.verdicts["skipped-budget"] == 2
    assert "signal only works in main thread" not in run.stdout + run.stderr
    assert probes.read_text().count("probe") == 1  # the controller probed; workers did not


def test_an_empty_shard_reports_and_exits_0(atlante_project: Project, tmp_path: Path) -> None:
    """One trial, two shards: shard 2 holds nothing, still writes its partial report, exits 0."""
    install_fake_claude(tmp_path / "fakebin")
    atlante_project.scenario(fake_scenario("writes-hello", {"usage": [10]}))
    atlante_project.build()
    env = env_for(tmp_path)
    paths = run_shards(atlante_project, tmp_path, env, 2, tag="e")
    empty = load(paths[1])
    assert empty.shard is not None and empty.shard.index == 2 and empty.exitStatus == 0 and not verdicts(empty)
    merged = merge(paths, tmp_path / "merged.json", env)
    assert merged.returncode == 0, merged.stderr
    assert list(verdicts(load(tmp_path / "merged.json")).values()) == ["pass"]
