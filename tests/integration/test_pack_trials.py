"""Pack suites run for real: the scripted model drives the pinned claude (and opencode) CLI through
pack scenarios whose fixtures, scripts and harness come from the pack.

The example project's local pack (``example_project/packs/docstring-pack``, host-neutral) is the
subject: as shipped (``./packs/...``), re-installed as a scoped ``node_modules`` package selected
through a preset, on every other host, and with a do-nothing script that its checks must fail.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import EVERY_HOST, ONE_HOST, copy_example
from pytest_atlante.suite import jsonc
from pytest_atlante.suite.build import build
from trial_helpers import check_outcome, logged_requests, run_eval, system_text, with_request_log

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(600)]

PACK_DIR = "packs/docstring-pack"
PACK_SCENARIO = "adds-module-docstring"
PACK_DOCUMENT = "eval/scenarios/module-docstring.eval.json"
PACK_AGENT_BODY = "You add docstrings to Python code."
SCOPED_DIR = "node_modules/@acme/docstring-pack"


@pytest.fixture(autouse=True)
def on_path(monkeypatch: pytest.MonkeyPatch, hosts_path: Callable[[], str]) -> None:
    monkeypatch.setenv("PATH", hosts_path())


def edit_jsonc(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    doc = jsonc.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc, indent=2) + "\n")


def example(tmp_path: Path, host: str = ONE_HOST) -> Path:
    root = copy_example(tmp_path)
    edit_jsonc(root / "atlante.jsonc", lambda doc: doc["eval"].update(host=host))
    build(root)
    return root


def test_the_example_runs_its_pack_suite_beside_the_local_suite(pytester: pytest.Pytester, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    root = example(tmp_path)
    log = tmp_path / "requests"
    run = run_eval(pytester, root, tmp_path / "out", "-v", *with_request_log(monkeypatch, log))
    assert run.result.ret == 1, run.output()  # the demo: only keeps-settings-untouched fails
    verdicts = {s.name: [t.verdict for t in s.trials] for s in run.report.scenarios}
    assert verdicts == {"documents-usage": ["pass"], "adds-farewell": ["pass"],
                        "keeps-settings-untouched": ["fail"], PACK_SCENARIO: ["pass"]}
    sources = {s.name: (s.source, s.file) for s in run.report.scenarios}
    assert sources[PACK_SCENARIO] == ("./packs/docstring-pack", f"{PACK_DIR}/{PACK_DOCUMENT}")
    assert {sources[n][0] for n in verdicts if n != PACK_SCENARIO} == {"local"}
    trial = run.trial(PACK_SCENARIO)
    assert trial.nodeId.endswith(f"{PACK_DIR}/{PACK_DOCUMENT}::{PACK_SCENARIO}[trial-1]")
    assert f"{PACK_DIR}/{PACK_DOCUMENT}::{PACK_SCENARIO}[trial-1] [sandbox] [host session] [checks] PASSED" in run.output()
    # the pack's agent (compiled by `atlante build` with the project's harness) drove the session
    requests = logged_requests(log)[f"{PACK_SCENARIO}-1"]
    assert any(PACK_AGENT_BODY in system_text(r) for r in requests)
    # the project's host and budget control the run, not the pack's metadata
    assert run.report.host is not None and run.report.host.name == ONE_HOST
    assert run.report.budget.trials == 1 and run.report.budget.timeoutMs == 120000


def install_scoped_with_preset(root: Path) -> Path:
    """Move the example pack to node_modules/@acme/docstring-pack and select it through a preset."""
    pack = root / SCOPED_DIR
    pack.parent.mkdir(parents=True)
    shutil.move(root / PACK_DIR, pack)

    def add_preset(doc: dict[str, Any]) -> None:
        # the preset's own suite declares the project's host; the root suite stays host-neutral
        doc["presets"] = {"strict": {"eval": {"host": ONE_HOST, "scenarios": "eval/scenarios/*.eval.json"}}}

    edit_jsonc(pack / "atlante.jsonc", add_preset)

    def select(doc: dict[str, Any]) -> None:
        doc["packages"] = ["@acme/docstring-pack/strict"]
        doc["eval"]["include"] = ["@acme/docstring-pack/strict"]

    edit_jsonc(root / "atlante.jsonc", select)
    build(root)
    return pack


def test_a_scoped_node_modules_preset_suite_runs_for_real(pytester: pytest.Pytester, tmp_path: Path) -> None:
    root = copy_example(tmp_path)
    install_scoped_with_preset(root)
    assert not (root / "eval/fixtures/mathutil").exists()  # only the pack root has the fixture
    run = run_eval(pytester, root, tmp_path / "out", "-v", "--atlante-scenario", PACK_SCENARIO)
    assert run.result.ret == 0, run.output()
    [scenario] = run.report.scenarios
    assert (scenario.name, scenario.source) == (PACK_SCENARIO, "@acme/docstring-pack/strict")
    assert scenario.file == f"{SCOPED_DIR}/{PACK_DOCUMENT}"
    assert run.trial(PACK_SCENARIO).verdict == "pass"
    assert f"{SCOPED_DIR}/{PACK_DOCUMENT}::{PACK_SCENARIO}[trial-1] [sandbox] [host session] [checks] PASSED" in run.output()


def test_a_do_nothing_run_fails_the_pack_checks(pytester: pytest.Pytester, tmp_path: Path) -> None:
    root = example(tmp_path)
    script = root / PACK_DIR / f"eval/scenarios/scripted/{PACK_SCENARIO}.json"
    script.write_text(json.dumps({"schema": "atlante/scripted-model-v1", "turns": [{"text": "Nothing to do."}]}))
    run = run_eval(pytester, root, tmp_path / "out", "--atlante-scenario", PACK_SCENARIO)
    assert run.result.ret == 1, run.output()
    trial = run.trial(PACK_SCENARIO)
    assert trial.verdict == "fail"
    # command and file-contains catch the missing docstring; nothing else was touched
    assert [check_outcome(c) for c in trial.checks] == ["fail", "fail", "pass", "pass"]


# Each host builds the pack's harness into its own tree: the pack suite runs on every host (the
# example's own host, ONE_HOST, in the tests above).
@pytest.mark.parametrize("host", [host for host in EVERY_HOST if host != ONE_HOST])
def test_the_host_neutral_pack_suite_runs_on_every_host(pytester: pytest.Pytester, tmp_path: Path, host: str) -> None:
    root = example(tmp_path, host=host)
    run = run_eval(pytester, root, tmp_path / "out", "-v", "--atlante-scenario", PACK_SCENARIO)
    assert run.result.ret == 0, run.output()
    assert run.report.host is not None and run.report.host.name == host
    [scenario] = run.report.scenarios
    assert (scenario.source, [t.verdict for t in scenario.trials]) == ("./packs/docstring-pack", ["pass"])
    assert f"{PACK_DIR}/{PACK_DOCUMENT}::{PACK_SCENARIO}[trial-1] [sandbox] [host session] [checks] PASSED" in run.output()
