"""One run as 4 shards on a real CLI (scripted model): the same skipped-budget set and the same
verdicts as the unsharded run once merged.  Small on purpose: 3 scenarios x 2 trials with
``maxSessions`` 3, so the run takes 6 real sessions in all.  Sharding, the budget ledger and the
merge are the runner's and the report's, the same for every host: ``ONE_HOST``."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import ONE_HOST, Project, config_doc, scenario_doc
from test_shards import load, merge, pytest_run, run_shards, verdicts

pytestmark = pytest.mark.hosts


def write_turn(content: str) -> list[dict[str, object]]:
    return [{"text": "Writing.", "actions": [{"type": "write", "path": "hello.txt", "content": content}],
             "usage": {"input": 100, "output": 20}}, {"text": "Done."}]


def test_four_shards_merge_to_the_unsharded_run_on_the_real_cli(atlante_project: Project, tmp_path: Path,
                                                               hosts_path: Callable[[], str], private_tmp: Path) -> None:
    project = atlante_project
    project.config(config_doc(host=ONE_HOST, budget={"trials": 2, "maxSessions": 3}))
    (project.root / "eval/scenarios/main.eval.json").unlink()
    for name, content in (("alpha", "hello\n"), ("beta", "goodbye\n"), ("gamma", "hello\n")):
        project.scenario(scenario_doc(name=name), f"eval/scenarios/{name}.eval.json")
        project.script(name, write_turn(content))
    project.build()
    env = {**os.environ, "PATH": hosts_path(), "GITHUB_RUN_ID": "real-1"}

    whole = pytest_run(project, tmp_path / "whole", env, "--atlante-scripted")
    unsharded = load(tmp_path / "whole" / "report.json")
    paths = run_shards(project, tmp_path, env, 4, "--atlante-scripted")
    done = merge(paths, tmp_path / "merged.json", env)
    merged = load(tmp_path / "merged.json")

    assert verdicts(unsharded) == {
        "eval/scenarios/alpha.eval.json::alpha[trial-1]": "pass", "eval/scenarios/alpha.eval.json::alpha[trial-2]": "pass",
        "eval/scenarios/beta.eval.json::beta[trial-1]": "fail", "eval/scenarios/beta.eval.json::beta[trial-2]": "skipped-budget",
        "eval/scenarios/gamma.eval.json::gamma[trial-1]": "skipped-budget",
        "eval/scenarios/gamma.eval.json::gamma[trial-2]": "skipped-budget"}, whole.stdout
    assert verdicts(merged) == verdicts(unsharded), done.stdout + done.stderr
    assert merged.verdicts == unsharded.verdicts and done.returncode == whole.returncode == merged.exitStatus == 1
    assert [(s.name, s.expectedTrials, s.passRate) for s in merged.scenarios] == \
        [(s.name, s.expectedTrials, s.passRate) for s in unsharded.scenarios]
    assert merged.complete and merged.host == unsharded.host and len(merged.shards or []) == 4
