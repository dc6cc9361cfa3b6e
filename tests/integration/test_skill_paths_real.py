"""Skills that keep working where the build puts them, on the real CLIs against the scripted model
(issue 37 items 4 and 5, docs/reference.md "Where a skill lands").

- A skill kept in ``.agents/skills/<name>`` whose instructions run its script by that path: the
  build leaves it there for Codex, Gemini CLI and OpenCode (which load ``.agents/skills``), so the
  script the skill names runs (before, the build moved it to ``.codex/skills`` and the command
  exited 127 on Codex).
- A Claude Code plugin's skill, agent and command, built as that plugin and loaded with
  ``--plugin-dir``: Claude Code knows them as ``review:lint``, ``review:critic`` and
  ``/review:ship``, and the checks name them that way (before, a scenario naming ``review:lint``
  was refused: "the harness defines no skill 'review:lint'").
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import Project, config_doc, scenario_doc
from pytest_atlante.suite.scenario import SCENARIO_SCHEMA_URIS
from trial_helpers import logged_requests, run_scripted_eval, with_request_log

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(600)]

RUNNER_SKILL = """---
name: runner
description: Runs the project's release check.
---
Run the release check with its script:

    .agents/skills/runner/scripts/run.sh

It writes `checked.txt`.
"""

RUN_SH = "#!/bin/sh\necho checked-by-runner > checked.txt\n"


@pytest.mark.parametrize("host", ["codex", "gemini-cli", "opencode"])
def test_a_skill_script_runs_by_the_path_its_instructions_use(
        pytester: pytest.Pytester, atlante_project: Project, hosts_path: Callable[[], str],
        monkeypatch: pytest.MonkeyPatch, host: str) -> None:
    """Codex, Gemini CLI and OpenCode all load ``.agents/skills``: the skill stays there and loads."""
    monkeypatch.setenv("PATH", hosts_path())
    config = config_doc(host=host)
    config["harness"] = {"skills": {"runner": {"dir": ".agents/skills/runner"}}}
    atlante_project.config(config)
    atlante_project.write(".agents/skills/runner/SKILL.md", RUNNER_SKILL)
    script = atlante_project.write(".agents/skills/runner/scripts/run.sh", RUN_SH)
    script.chmod(0o755)
    atlante_project.scenario(scenario_doc(version="0.2", **{"$schema": SCENARIO_SCHEMA_URIS["0.2"]}, checks=[
        {"type": "file-contains", "path": "checked.txt", "pattern": "checked-by-runner"},
        {"type": "skill-used", "skill": "runner", "min": 1},
        {"type": "diff-allowlist", "allow": ["checked.txt"]},
    ]))
    atlante_project.script("writes-hello", [
        {"text": "Loading the skill.", "actions": [{"type": "skill", "name": "runner"}]},
        {"text": "Running its script.", "actions": [{"type": "bash", "command": ".agents/skills/runner/scripts/run.sh"}]},
        {"text": "Done."},
    ])
    atlante_project.build()
    status, report, text = run_scripted_eval(pytester, atlante_project)
    [trial] = report.scenarios[0].trials
    assert (trial.verdict, status) == ("pass", 0), text + "\n" + str([c.model_dump() for c in trial.checks])


LINT_SKILL = """---
name: lint
description: Lints the project the team's way.
---
Write `linted.txt` holding LINT-BODY-REACHED, then use review:fix if anything is left.
"""


def test_claude_code_loads_a_plugin_skill_under_its_namespace_and_a_check_names_it_so(
        pytester: pytest.Pytester, atlante_project: Project, hosts_path: Callable[[], str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", hosts_path())
    config = config_doc(host="claude-code")
    config["harness"] = {"skills": {"lint": {"dir": "skills/lint"}}}
    atlante_project.config(config)
    atlante_project.write(".claude-plugin/plugin.json", {"name": "review", "version": "1.0.0"})
    atlante_project.write("skills/lint/SKILL.md", LINT_SKILL)
    atlante_project.scenario(scenario_doc(version="0.2", **{"$schema": SCENARIO_SCHEMA_URIS["0.2"]}, checks=[
        {"type": "file-contains", "path": "linted.txt", "pattern": "LINT-BODY-REACHED"},
        {"type": "skill-used", "skill": "review:lint", "min": 1, "max": 1},
        {"type": "skill-used", "skill": "lint", "min": 1, "max": 1},
        {"type": "diff-allowlist", "allow": ["linted.txt"]},
    ]))
    atlante_project.script("writes-hello", [
        {"text": "Loading the plugin's skill.", "actions": [{"type": "skill", "name": "review:lint"}]},
        {"text": "Linting.", "actions": [{"type": "write", "path": "linted.txt", "content": "LINT-BODY-REACHED\n"}]},
        {"text": "Done."},
    ])
    atlante_project.build()
    status, report, text = run_scripted_eval(pytester, atlante_project)
    [trial] = report.scenarios[0].trials
    assert (trial.verdict, status) == ("pass", 0), text + "\n" + str([c.model_dump() for c in trial.checks])
    # The host answered the namespaced call with the skill (no "Unknown skill"): no refused call.
    assert "refused or errored" not in text, text


CRITIC = """---
name: critic
description: Critiques a change.
tools: Read, Write
---
You critique changes.
"""


def test_claude_code_delegates_to_a_plugin_agent_by_its_namespaced_name(
        pytester: pytest.Pytester, atlante_project: Project, hosts_path: Callable[[], str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The build records ``critic`` → ``review:critic`` (``agentNames``): the script's task naming the
    harness agent reaches the plugin's agent, and ``agent-used`` counts it under either name."""
    monkeypatch.setenv("PATH", hosts_path())
    config = config_doc(host="claude-code")
    config["harness"] = {"agents": {"critic": {"prompt": "agents/critic.md"}}}
    atlante_project.config(config)
    atlante_project.write(".claude-plugin/plugin.json", {"name": "review"})
    atlante_project.write("agents/critic.md", CRITIC)
    atlante_project.scenario(scenario_doc(version="0.2", **{"$schema": SCENARIO_SCHEMA_URIS["0.2"]}, checks=[
        {"type": "agent-used", "agent": "review:critic", "min": 1, "max": 1},
        {"type": "agent-used", "agent": "critic", "min": 1, "max": 1},
    ]))
    atlante_project.script("writes-hello", [
        {"text": "Delegating.", "actions": [{"type": "task", "agent": "critic", "prompt": "Critique it.",
                                             "turns": [{"text": "Looks fine."}]}]},
        {"text": "Done."},
    ])
    atlante_project.build()
    status, report, text = run_scripted_eval(pytester, atlante_project)
    [trial] = report.scenarios[0].trials
    assert (trial.verdict, status) == ("pass", 0), text + "\n" + str([c.model_dump() for c in trial.checks])


def test_claude_code_runs_a_plugin_command_by_its_namespaced_name(
        pytester: pytest.Pytester, atlante_project: Project, hosts_path: Callable[[], str],
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``/review:ship`` runs the plugin's command (its body reaches the model) and ``command-used``
    counts it under either name."""
    monkeypatch.setenv("PATH", hosts_path())
    config = config_doc(host="claude-code")
    config["harness"] = {"commands": {"ship": {"file": "commands/ship.md"}}}
    atlante_project.config(config)
    atlante_project.write(".claude-plugin/plugin.json", {"name": "review"})
    atlante_project.write("commands/ship.md", "---\ndescription: Ships it.\n---\nSHIP-COMMAND-BODY: ship $ARGUMENTS.\n")
    atlante_project.scenario(scenario_doc(version="0.2", **{"$schema": SCENARIO_SCHEMA_URIS["0.2"]},
                                          task={"fixture": "eval/fixtures/app", "prompt": "/review:ship the release"},
                                          checks=[{"type": "command-used", "command": "review:ship", "min": 1, "max": 1},
                                                  {"type": "command-used", "command": "ship", "min": 1, "max": 1}]))
    atlante_project.script("writes-hello", [{"text": "Shipped."}])
    atlante_project.build()
    log_dir = tmp_path / "requests"
    args = with_request_log(monkeypatch, log_dir)
    status, report, text = run_scripted_eval(pytester, atlante_project, *args)
    [trial] = report.scenarios[0].trials
    assert (trial.verdict, status) == ("pass", 0), text + "\n" + str([c.model_dump() for c in trial.checks])
    served = [r for logged in logged_requests(log_dir).values() for r in logged if r["kind"] == "turn"]
    assert any("SHIP-COMMAND-BODY: ship the release." in json.dumps(r["body"]) for r in served), served


SUPERPOWERS = Path(__file__).parents[1] / "data" / "harnesses" / "obra-superpowers"
IMPORTED = "If you think there is even a 1% chance a skill might apply"  # using-superpowers/SKILL.md


@pytest.mark.parametrize("host", ["claude-code", "gemini-cli"])
def test_the_superpowers_plugin_keeps_its_namespace_and_its_memory_imports(
        pytester: pytest.Pytester, tmp_path: Path, hosts_path: Callable[[], str],
        monkeypatch: pytest.MonkeyPatch, host: str) -> None:
    """obra/superpowers, adopted by init as it is: on Claude Code a check names its skill
    ``superpowers:executing-plans`` and the session loads it so; on both hosts the memory file's
    ``@./skills/using-superpowers/SKILL.md`` import reaches the model (before, the build put the skill
    in the host's folder and the import dangled)."""
    from pytest_atlante.suite.init import init_project
    from pytest_atlante.suite.jsonc import loads as jsonc_loads

    monkeypatch.setenv("PATH", hosts_path())
    root = tmp_path / "project"
    shutil.copytree(SUPERPOWERS, root)
    init_project(root)
    project = Project(root)
    harness = jsonc_loads((root / "atlante.jsonc").read_text())["harness"]
    config = config_doc(host=host)
    config["harness"] = harness
    project.config(config)
    project.write("eval/fixtures/app/README.md", "# app\n")
    namespaced = host == "claude-code"
    skill = "superpowers:executing-plans" if namespaced else "executing-plans"
    project.scenario(scenario_doc(version="0.2", **{"$schema": SCENARIO_SCHEMA_URIS["0.2"]}, checks=[
        {"type": "skill-used", "skill": "superpowers:executing-plans", "min": 1, "max": 1}]))
    project.script("writes-hello", [{"text": "Loading the plan skill.", "actions": [{"type": "skill", "name": skill}]},
                                    {"text": "Done."}])
    project.build()
    assert not any("dangle" in w for w in json.loads((root / f".atlante/build/{host}/manifest.json").read_text())["warnings"])
    log_dir = tmp_path / "requests"
    status, report, text = run_scripted_eval(pytester, project, *with_request_log(monkeypatch, log_dir))
    [trial] = report.scenarios[0].trials
    assert (trial.verdict, status) == ("pass", 0), text + "\n" + str([c.model_dump() for c in trial.checks])
    served = [r for logged in logged_requests(log_dir).values() for r in logged if r["kind"] == "turn"]
    assert served and IMPORTED in json.dumps(served[0]["body"]), "the imported skill text never reached the model"
    assert any("writing-plans" in s["text"] or "executing" in s["text"].lower()
               for r in served for s in r["skills_loaded"]), [r["skills_loaded"] for r in served]
