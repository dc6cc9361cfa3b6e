"""The CI workflows in ``docs/ci.md`` are real: parsed, cross-checked, and their eval and merge
commands run here (four shards side by side, artifacts handed over as each CI would, then the merge)
against a small project with a fake host (``fakehost.py``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import REPO_ROOT, Project, config_doc
from fakehost import fake_env, install_fake_claude
from markdown_helpers import tables
from pytest_atlante.report.model import EvalReport
from test_shards import SCENARIOS, fake_scenario

CI_DOC = REPO_ROOT / "docs" / "ci.md"


def workflows() -> dict[str, dict[str, Any]]:
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", CI_DOC.read_text(encoding="utf-8"), re.S)]
    return {"github": next(b for b in blocks if "jobs" in b), "gitlab": next(b for b in blocks if "stages" in b)}


@pytest.fixture
def checkout(atlante_project: Project, tmp_path: Path) -> tuple[Project, dict[str, str]]:
    """3 passing scenarios x 2 trials; PATH: this venv's pytest and atlante, then the fake host."""
    install_fake_claude(tmp_path / "fakebin")
    atlante_project.config(config_doc(budget={"trials": 2}))
    (atlante_project.root / "eval/scenarios/main.eval.json").unlink()
    for name in SCENARIOS:
        atlante_project.scenario(fake_scenario(name, {"usage": [10]}), f"eval/scenarios/{name}.eval.json")
    atlante_project.build()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CI_", "PYTEST_"))}
    env.update(fake_env(tmp_path / "fakebin"))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    return atlante_project, env


def machines(project: Project, tmp_path: Path, count: int) -> list[Path]:
    """One checkout per shard, as each CI job has its own (shards sharing one checkout would see
    each other's report writes as changes outside their sandboxes)."""
    roots = [tmp_path / f"machine-{k}" for k in range(1, count + 1)]
    for root in roots:
        shutil.copytree(project.root, root)
    return roots


def run_side_by_side(scripts: list[tuple[str, Path, dict[str, str]]]) -> list[subprocess.CompletedProcess[str]]:
    procs = [(script, subprocess.Popen(["bash", "-e", "-c", script], cwd=cwd, env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True)) for script, cwd, env in scripts]
    done = []
    for script, proc in procs:
        out, _ = proc.communicate(timeout=300)
        done.append(subprocess.CompletedProcess(script, proc.returncode, out))
    return done


def check_merged(workspace: Path, merged: subprocess.CompletedProcess[str], shards: int) -> None:
    assert merged.returncode == 0, merged.stdout
    report = EvalReport.model_validate_json((workspace / "report.json").read_text(encoding="utf-8"))
    assert report.complete and len(report.shards or []) == shards
    assert sorted((t.scenario, t.trial, t.verdict) for s in report.scenarios for t in s.trials) == \
        [(name, trial, "pass") for name in SCENARIOS for trial in (1, 2)]


def test_github_actions_workflow(checkout: tuple[Project, dict[str, str]], tmp_path: Path) -> None:
    project, env = checkout
    jobs = workflows()["github"]["jobs"]
    shards = jobs["eval"]["strategy"]["matrix"]["shard"]
    assert shards == list(range(1, len(shards) + 1))
    steps = {s.get("id"): s for s in jobs["eval"]["steps"]}
    run = steps["shard"]["run"]
    assert f"--atlante-shard ${{{{ matrix.shard }}}}/{len(shards)}" in run and " -n 2 " in run
    upload = next(s for s in jobs["eval"]["steps"] if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["if"] == "always()" and upload["with"]["path"] == "shard-reports/${{ matrix.shard }}/"
    assert "--atlante-out shard-reports/${{ matrix.shard }}" in run
    merge_job = jobs["merge"]
    assert merge_job["needs"] == "eval" and merge_job["if"] == "always()"
    download = next(s for s in merge_job["steps"] if s.get("uses", "").startswith("actions/download-artifact"))
    assert upload["with"]["name"].replace("${{ matrix.shard }}", "*") == download["with"]["pattern"]
    merge_run = next(s for s in merge_job["steps"] if s.get("id") == "merge")["run"]

    github = {**env, "GITHUB_RUN_ID": "9001", "GITHUB_RUN_ATTEMPT": "1"}
    roots = machines(project, tmp_path, len(shards))
    results = run_side_by_side([(run.replace("${{ matrix.shard }}", str(k)), roots[k - 1], github) for k in shards])
    assert all(r.returncode == 0 for r in results), [r.stdout for r in results]
    workspace = tmp_path / "merge-job"
    for k in shards:  # download-artifact: one directory per artifact, named after it
        target = workspace / download["with"]["path"] / upload["with"]["name"].replace("${{ matrix.shard }}", str(k))
        shutil.copytree(roots[k - 1] / f"shard-reports/{k}", target)  # the directory's contents, as uploaded
    [merged] = run_side_by_side([(merge_run, workspace, github)])
    check_merged(workspace, merged, len(shards))
    check_comment(merge_job, workspace, github, tmp_path)


def check_comment(merge_job: dict[str, Any], workspace: Path, env: dict[str, str], tmp_path: Path) -> None:
    """The Markdown step writes the file the sticky comment posts, and the job's summary gets it too."""
    steps = merge_job["steps"]
    markdown = next(s for s in steps if s.get("id") == "markdown")
    comment = next(s for s in steps if s.get("uses", "").startswith("marocchino/sticky-pull-request-comment@"))
    assert steps.index(markdown) < steps.index(comment) and markdown["if"] == "always()"
    assert "github.event_name == 'pull_request'" in comment["if"] and comment["with"]["header"]
    assert merge_job["permissions"]["pull-requests"] == "write"
    written = re.search(r"atlante report md report\.json -o (\S+)", markdown["run"])
    assert written is not None and written[1] == comment["with"]["path"]
    summary = tmp_path / "step-summary.md"
    [done] = run_side_by_side([(markdown["run"], workspace, {**env, "GITHUB_STEP_SUMMARY": str(summary)})])
    assert done.returncode == 0, done.stdout
    text = (workspace / comment["with"]["path"]).read_text(encoding="utf-8")
    assert summary.read_text(encoding="utf-8") == text
    (table,) = tables(text)
    assert sorted(row[0].text for row in table[1:]) == sorted(SCENARIOS)
    assert all(row[1].text == "2/2 (100%)" for row in table[1:])


def test_gitlab_ci_pipeline(checkout: tuple[Project, dict[str, str]], tmp_path: Path) -> None:
    project, env = checkout
    pipeline = workflows()["gitlab"]
    count = pipeline["eval"]["parallel"]
    assert pipeline["stages"] == ["eval", "merge"] and pipeline["merge"]["needs"] == ["eval"]
    [shard_cmd] = [line for line in pipeline["eval"]["script"] if "pytest --atlante-eval" in line]
    assert "--atlante-shard ${CI_NODE_INDEX}/${CI_NODE_TOTAL}" in shard_cmd
    assert pipeline["eval"]["artifacts"] == {"when": "always", "paths": ["shard-reports/"]}
    [merge_cmd] = [line for line in pipeline["merge"]["script"] if "atlante report merge" in line]

    gitlab = {**env, "CI_PIPELINE_ID": "77", "CI_NODE_TOTAL": str(count)}
    roots = machines(project, tmp_path, count)
    results = run_side_by_side([(shard_cmd, roots[k - 1], {**gitlab, "CI_NODE_INDEX": str(k)})
                                for k in range(1, count + 1)])
    assert all(r.returncode == 0 for r in results), [r.stdout for r in results]
    workspace = tmp_path / "merge-job"  # GitLab extracts every eval job's artifacts into one workspace
    for root in roots:
        shutil.copytree(root / "shard-reports", workspace / "shard-reports", dirs_exist_ok=True)
    [merged] = run_side_by_side([(merge_cmd, workspace, gitlab)])
    check_merged(workspace, merged, count)
