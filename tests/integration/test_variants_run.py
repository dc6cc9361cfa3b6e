"""Variant runs (``--atlante-variants``) driven by a fake host (``fakehost.py``) for speed.

The arms differ the way real ones do: by what their build puts in the sandbox.  A check that the
control's skill file exists fails in the arm that removes the skill, so the lift, the per-scenario
labels and the noise floor follow from the builds.  Runs are separate ``pytest`` processes (exit
codes, xdist); the same on the real CLIs through the scripted model is
``test_variants_real.py``.  A run without variants writes exactly the report it wrote before
variants existed: ``tests/data/no-variants-report.json`` (normalised) is that report.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import Project, config_doc, scenario_doc
from fakehost import install_fake_claude
from test_shards import env_for, pytest_run

DATA = Path(__file__).resolve().parents[1] / "data"
SKILL_FILE = ".claude/skills/tidy/SKILL.md"
SCENARIOS = ("alpha", "beta", "gamma", "delta")


def suite(project: Project, tmp_path: Path, *, variants: dict[str, Any] | None, trials: int = 3,
          max_sessions: int = 100) -> Project:
    """Four scenarios; each checks the skill file its arm's build put in the sandbox."""
    install_fake_claude(tmp_path / "fakebin")
    doc = config_doc(budget={"trials": trials, "maxSessions": max_sessions})
    if variants is not None:
        doc["version"] = "0.4"
        doc["variants"] = variants
    project.config(doc)
    (project.root / "eval/scenarios/main.eval.json").unlink(missing_ok=True)
    for name in SCENARIOS:
        project.scenario(scenario_doc(name=name, task={"fixture": "eval/fixtures/app",
                                                       "prompt": "FAKE:" + json.dumps({"usage": [10]})},
                                      checks=[{"type": "file-exists", "path": SKILL_FILE}]),
                         f"eval/scenarios/{name}.eval.json")
    project.build()
    return project


VARIANTS = {"no-skill": {"harness": {"skills": {"tidy": None}}}, "again": {"replicateOf": "control"}}


def load(out: Path) -> dict[str, Any]:
    return json.loads((out / "report.json").read_text())


VOLATILE = {"runId", "startedAt", "finishedAt", "durationMs", "hostDurationMs", "meanDurationMs", "p95DurationMs",
            "seconds", "baseRunId", "newRunId"}


def normalised(report: dict[str, Any], root: Path) -> str:
    """The report's text with the values that differ between runs of one suite replaced (the keys,
    their order and every other byte kept)."""
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: ("<volatile>" if k in VOLATILE else strip(v)) for k, v in value.items()}
        if isinstance(value, list):
            return [strip(v) for v in value]
        if isinstance(value, str):
            return value.replace(str(root), "<project>")
        return value
    return json.dumps(strip(report), indent=2, ensure_ascii=False) + "\n"


def collected_ids(project: Project, tmp_path: Path, *args: str) -> list[str]:
    result = pytest_run(project, tmp_path / "collect", env_for(tmp_path), "--collect-only", *args)
    return [line for line in result.stdout.splitlines() if "::" in line]


def test_a_run_without_variants_keeps_its_ids_and_its_report_byte_for_byte(atlante_project: Project, tmp_path: Path) -> None:
    project = suite(atlante_project, tmp_path, variants=None)
    ids = collected_ids(project, tmp_path)
    assert ids[:3] == ["eval/scenarios/alpha.eval.json::alpha[trial-1]", "eval/scenarios/alpha.eval.json::alpha[trial-2]",
                       "eval/scenarios/alpha.eval.json::alpha[trial-3]"]
    out = tmp_path / "out"
    result = pytest_run(project, out, env_for(tmp_path))
    assert result.returncode == 0, result.stdout[-3000:]
    golden = DATA / "no-variants-report.json"
    text = normalised(load(out), project.root)
    if os.environ.get("ATLANTE_WRITE_GOLDEN") == "1":
        # First made by the code before variants existed (PYTHONPATH=<that checkout>). A report field
        # added on purpose later: regenerate with ATLANTE_WRITE_GOLDEN=1 and check the diff adds only it.
        golden.write_text(text)
        return
    for key in ('"variant"', '"arms"', '"lift"', '"noiseFloor"', '"usedSplit"', "control:"):
        assert key not in text   # nothing of variants in a run without them
    assert text == golden.read_text(), ("the report of a run without variants changed; if a field was added on purpose, "
                                        "regenerate tests/data/no-variants-report.json with ATLANTE_WRITE_GOLDEN=1")
    expected = text
    # Declaring variants changes nothing for a run that does not ask for them (the control only).
    suite(atlante_project, tmp_path, variants=VARIANTS)
    out2 = tmp_path / "out2"
    assert pytest_run(project, out2, env_for(tmp_path)).returncode == 0
    assert normalised(load(out2), project.root) == expected


def test_every_arm_runs_interleaved_and_the_report_compares_each_with_the_control(atlante_project: Project,
                                                                                    tmp_path: Path) -> None:
    project = suite(atlante_project, tmp_path, variants=VARIANTS, trials=4)
    ids = collected_ids(project, tmp_path, "--atlante-variants", "all")
    assert [i.split("::")[1] for i in ids[:6]] == [
        "alpha[control:trial-1]", "alpha[no-skill:trial-1]", "alpha[again:trial-1]",
        "alpha[control:trial-2]", "alpha[no-skill:trial-2]", "alpha[again:trial-2]"]
    assert len(ids) == 4 * 4 * 3
    reports = {}
    for workers in ("1", "2"):
        out = tmp_path / f"out-{workers}"
        args = ["--atlante-variants", "all"] + (["-n", workers] if workers != "1" else [])
        result = pytest_run(project, out, env_for(tmp_path), *args)
        assert result.returncode == 1, result.stdout[-3000:]   # the no-skill arm fails its checks
        reports[workers] = load(out)
    report = reports["1"]
    assert [a["name"] for a in report["arms"]] == ["control", "no-skill", "again"]
    assert report["arms"][2]["replicateOf"] == "control"
    assert report["arms"][0]["harnessDigest"] == report["arms"][2]["harnessDigest"] != report["arms"][1]["harnessDigest"]
    assert [(s["name"], s["variant"], s["passRate"]) for s in report["scenarios"][:3]] == [
        ("alpha", "control", 1.0), ("alpha", "no-skill", 0.0), ("alpha", "again", 1.0)]
    assert all(t["variant"] == s["variant"] for s in report["scenarios"] for t in s["trials"])
    assert {t["transcript"].split("/")[2] for s in report["scenarios"] for t in s["trials"]} == {"control", "no-skill", "again"}
    lift = {entry["variant"]: entry for entry in report["lift"]}
    # 16 passes against 0 over four scenarios: the stratified exact test decides what Holm across
    # four per-scenario Fisher tests (each 4/4 vs 0/4, p = 0.029, x4) could not.
    assert lift["no-skill"]["label"] == "worse" and lift["no-skill"]["difference"] == -1.0
    assert lift["no-skill"]["p"] == pytest.approx(2 / 70**4, rel=1e-6)   # only 0 or 16 passes are as unlikely
    assert lift["no-skill"]["estimate"] == 0.0 and lift["no-skill"]["method"] == "cmh-exact-conditional"
    assert {s["label"] for s in lift["no-skill"]["comparison"]["scenarios"]} == {"inconclusive"}
    assert lift["again"]["label"] == "within-noise" and lift["again"]["pHolm"] is None
    assert report["noiseFloor"] == {"variant": "again", "scenarios": [], "difference": 0.0}
    assert report["suite"]["meanPassRate"] == 1.0   # the top-level suite line is the control's
    # The same report at -n 1 and -n 2.
    assert normalised(reports["1"], project.root) == normalised(reports["2"], project.root)


def test_max_sessions_is_shared_round_robin_across_arms(atlante_project: Project, tmp_path: Path) -> None:
    project = suite(atlante_project, tmp_path, variants=VARIANTS, trials=2, max_sessions=7)
    out = tmp_path / "out"
    pytest_run(project, out, env_for(tmp_path), "--atlante-variants", "all", "-n", "2")
    report = load(out)
    ran = {}
    for record in report["scenarios"]:
        ran[record["variant"]] = ran.get(record["variant"], 0) + sum(t["verdict"] != "skipped-budget" for t in record["trials"])
    assert ran == {"control": 3, "no-skill": 2, "again": 2}   # items alternate arms: none is starved


def test_a_shard_pair_merges_into_the_unsharded_report(atlante_project: Project, tmp_path: Path) -> None:
    project = suite(atlante_project, tmp_path, variants=VARIANTS, trials=2)
    whole = tmp_path / "whole"
    pytest_run(project, whole, env_for(tmp_path), "--atlante-variants", "all")
    env = env_for(tmp_path, ATLANTE_RUN_GROUP="g1")
    shards = []
    for index in (1, 2):
        out = tmp_path / f"shard-{index}"
        pytest_run(project, out, env, "--atlante-variants", "all", "--atlante-shard", f"{index}/2")
        shards.append(str(out / "report.json"))
    merged = tmp_path / "merged.json"
    result = subprocess.run([sys.executable, "-m", "pytest_atlante.cli", "report", "merge", *shards, "-o", str(merged)],
                            capture_output=True, text=True,
                            check=False, env=env)
    assert result.returncode == 1, result.stderr
    ours, theirs = json.loads(merged.read_text()), load(whole)
    for report in (ours, theirs):
        for key in ("shards", "runGroup", "suiteDigest", "selectedTrials", "selection"):
            report.pop(key, None)
        for record in report["scenarios"]:
            for trial in record["trials"]:
                trial.pop("transcript", None), trial.pop("hostStream", None)
    assert normalised(ours, project.root) == normalised(theirs, project.root)


def test_an_unknown_variant_is_refused_before_any_session(atlante_project: Project, tmp_path: Path) -> None:
    project = suite(atlante_project, tmp_path, variants=VARIANTS)
    out = tmp_path / "out"
    result = pytest_run(project, out, env_for(tmp_path), "--atlante-variants", "no-skill,nope")
    assert result.returncode == 2
    problems = json.loads((out / "diagnostics.json").read_text())["diagnostics"]
    assert [(d["code"], d["location"]) for d in problems] == [("eval-variant-unknown", "--atlante-variants")]
    assert not re.search(r"trial-\d", result.stdout)


def test_the_forecast_and_the_cost_cap_cover_every_arm(atlante_project: Project, tmp_path: Path) -> None:
    """The fake host charges $0.001 a trial: 4 scenarios x 2 trials x 3 arms = 24 sessions, $0.024.
    A cap of $0.01 lets the control alone through (8 sessions) and stops the variant run before any
    session; the forecast prints each arm's share."""
    project = suite(atlante_project, tmp_path, variants=VARIANTS, trials=2)
    env = env_for(tmp_path)
    argv = [sys.executable, "-m", "pytest", "--atlante-eval", "--atlante-project", str(project.root), "-p", "no:cacheprovider",
            "--rootdir", str(project.root), "-q", "--atlante-variants", "all"]
    history = subprocess.run(argv, cwd=project.root, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert history.returncode == 1, history.stdout[-2000:]   # into .atlante/eval/: the next run's history
    forecast = subprocess.run([*argv, "--atlante-forecast"], cwd=project.root, env=env, capture_output=True, text=True,
                              timeout=300, check=False)
    assert forecast.returncode == 0, forecast.stdout[-2000:]
    assert "atlante forecast: 24 session(s)" in forecast.stdout
    for arm in ("control", "no-skill", "again"):
        assert f"arm {arm} (claude-code, model (host default)): 8 session(s), cost $0.0080 (p95 $0.0080)" in forecast.stdout
    capped = subprocess.run([*argv, "--atlante-max-cost", "0.01"], cwd=project.root, env=env, capture_output=True,
                            text=True, timeout=300, check=False)
    assert capped.returncode == 2 and "eval-max-cost-exceeded" in capped.stdout + capped.stderr
    control_only = [a for a in argv if a not in ("--atlante-variants", "all")]
    alone = subprocess.run([*control_only, "--atlante-max-cost", "0.01", "--atlante-forecast"], cwd=project.root, env=env,
                           capture_output=True, text=True, timeout=300, check=False)
    assert alone.returncode == 0 and "atlante forecast: 8 session(s)" in alone.stdout


def test_the_control_of_an_earlier_report_is_reused_or_refused_naming_the_difference(atlante_project: Project,
                                                                                     tmp_path: Path) -> None:
    project = suite(atlante_project, tmp_path, variants=VARIANTS, trials=2)
    first = tmp_path / "first"
    assert pytest_run(project, first, env_for(tmp_path), "--atlante-variants", "all").returncode == 1
    out = tmp_path / "again"
    result = pytest_run(project, out, env_for(tmp_path), "--atlante-variants", "all", "-v", "-n", "2",
                        "--atlante-control-from", str(first))
    assert result.returncode == 1, result.stdout[-3000:]
    assert "8 control trial(s) reused from" in result.stdout and "8 session(s) saved" in result.stdout
    assert "[control:trial-" not in result.stdout   # no control session in this run
    report, earlier = load(out), load(first)
    assert [(s["name"], s["variant"], s["passRate"]) for s in report["scenarios"][:3]] == [
        ("alpha", "control", 1.0), ("alpha", "no-skill", 0.0), ("alpha", "again", 1.0)]
    control = [t for s in report["scenarios"] if s["variant"] == "control" for t in s["trials"]]
    assert [t["nodeId"] for t in control] == [t["nodeId"] for s in earlier["scenarios"] if s["variant"] == "control"
                                              for t in s["trials"]]
    assert report["complete"] is True and {e["variant"]: e["label"] for e in report["lift"]}["no-skill"] == "worse"
    # A changed fixture, and a changed model: refused before any session, each difference named.
    project.write("eval/fixtures/app/NEW.md", "new\n")
    doc = json.loads((project.root / "atlante.jsonc").read_text())
    doc["eval"]["model"] = "other-model"
    project.config(doc)
    refused = tmp_path / "refused"
    result = pytest_run(project, refused, env_for(tmp_path), "--atlante-variants", "all", "--atlante-control-from", str(first))
    assert result.returncode == 2, result.stdout[-3000:]
    problems = json.loads((refused / "diagnostics.json").read_text())["diagnostics"]
    named = {d["location"] for d in problems if d["code"] == "eval-control-from-refused"}
    assert "$.model" in named and "$.scenarios['alpha'].scenarioDigest" in named, problems
    assert not (refused / "report.json").exists()


def test_a_control_from_another_host_version_is_refused_naming_it(atlante_project: Project, tmp_path: Path) -> None:
    """The same suite, but the host was upgraded since the earlier run: its control measured another
    CLI, so it is refused (exit 2) before any session, and the host version is the one difference named.
    The fake host's file changes size with its version, so the probe cache cannot answer the old one."""
    project = suite(atlante_project, tmp_path, variants=VARIANTS, trials=1)
    first = tmp_path / "first"
    assert pytest_run(project, first, env_for(tmp_path)).returncode == 0   # the control alone: 4 sessions
    assert load(first)["host"]["version"] == "2.1.197"
    install_fake_claude(tmp_path / "fakebin", version="2.2.0")
    refused = tmp_path / "refused"
    result = pytest_run(project, refused, env_for(tmp_path), "--atlante-variants", "all", "--atlante-control-from", str(first))
    assert result.returncode == 2, result.stdout[-3000:]
    problems = json.loads((refused / "diagnostics.json").read_text())["diagnostics"]
    assert [(d["code"], d["location"]) for d in problems] == [("eval-control-from-refused", "$.hostVersion")], problems
    assert "'2.1.197' in the control report, '2.2.0' in this run" in problems[0]["message"]
    assert not re.search(r"trial-\d", result.stdout) and not (refused / "report.json").exists()
