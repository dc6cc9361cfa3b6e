"""Plugin namespaces kept (issue 37, item 5; docs/reference.md "Plugins"): a Claude Code plugin's
skills, agents and commands are built as a plugin for Claude Code (loaded with ``--plugin-dir``, so
they keep their ``plugin:name`` names), every other host's build warns that the namespace is
lost, a check may name a plugin's part ``plugin:name`` (validation and counting), and ``atlante
init`` names a plugin's other-host parts: a Gemini CLI extension, OpenCode's code plugins."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from conftest import Project, scenario_doc
from pytest_atlante.checks import TABLE, Check, SessionView
from pytest_atlante.checks.base import CheckContext
from pytest_atlante.checks.trajectory import same_part
from pytest_atlante.hosts.registry import host_for
from pytest_atlante.run.evalrun import validate
from pytest_atlante.sandbox.trialdir import Diff, Sandbox
from pytest_atlante.suite.build import build
from pytest_atlante.suite.init import init_project
from pytest_atlante.suite.scenario import SCENARIO_SCHEMA_URIS

LINT = "---\nname: lint\ndescription: Lints.\n---\nLint, then use review:fix.\n"
AGENT = "---\nname: critic\ndescription: Critiques.\n---\nYou critique.\n"
COMMAND = "---\ndescription: Ship it.\n---\nShip $ARGUMENTS.\n"


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def plugin(root: Path) -> None:
    write(root, ".claude-plugin/plugin.json", json.dumps({"name": "review", "version": "1.0.0",
                                                          "hooks": "./hooks/hooks.json"}))
    write(root, "skills/lint/SKILL.md", LINT)
    write(root, "agents/critic.md", AGENT)
    write(root, "commands/ship.md", COMMAND)


def manifest(root: Path, host: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((root / f".atlante/build/{host}/manifest.json").read_text())
    return loaded


@pytest.fixture
def built_plugin(tmp_path: Path) -> Path:
    plugin(tmp_path)
    write(tmp_path, "atlante.jsonc", json.dumps({"version": "0.2", "harness": {
        "skills": {"lint": {"dir": "skills/lint"}}, "agents": {"critic": {"prompt": "agents/critic.md"}},
        "commands": {"ship": {"file": "commands/ship.md"}}}}))
    build(tmp_path)
    return tmp_path


def test_claude_code_gets_the_plugin_as_a_plugin(built_plugin: Path) -> None:
    found = manifest(built_plugin, "claude-code")
    outputs = {o["path"] for o in found["outputs"]}
    home = ".claude/plugins/review"
    assert {f"{home}/.claude-plugin/plugin.json", f"{home}/skills/lint/SKILL.md", f"{home}/agents/critic.md",
            f"{home}/commands/ship.md"} <= outputs, outputs
    assert not any(path.startswith((".claude/skills/", ".claude/agents/", ".claude/commands/")) for path in outputs)
    built = json.loads((built_plugin / f".atlante/build/claude-code/tree/{home}/.claude-plugin/plugin.json").read_text())
    assert built == {"name": "review", "version": "1.0.0"}  # hooks are not evaluated: said so
    assert any(".claude-plugin/plugin.json: hooks not evaluated" in w for w in found["warnings"]), found["warnings"]
    assert found["agentNames"] == {"critic": "review:critic"}  # the host selects and counts it so
    assert not any("without the plugin's namespace" in w for w in found["warnings"])


def test_the_claude_code_session_loads_each_built_plugin(built_plugin: Path) -> None:
    tree = built_plugin / ".atlante/build/claude-code/tree"
    args = host_for("claude-code").plugin_args(tree)  # type: ignore[attr-defined]
    assert args == ["--plugin-dir", str(tree / ".claude/plugins/review")]
    assert host_for("claude-code").plugin_args(built_plugin / "nowhere") == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("host", ["opencode", "codex", "gemini-cli"])
def test_a_host_without_plugin_namespaces_gets_a_warning_for_each_part(built_plugin: Path, host: str) -> None:
    warnings = manifest(built_plugin, host)["warnings"]
    lost = [w for w in warnings if "without the plugin's namespace" in w]
    assert any(w.startswith("skills/lint: skill 'lint' of plugin 'review' loads as 'lint' on " + host) for w in lost), lost
    assert any("'review:lint'" in w for w in lost)
    placed = {"agent", "command"} - ({"agent", "command"} if host == "codex" else set())
    for kind, name in (("agent", "critic"), ("command", "ship")):
        assert any(f"{kind} {name!r} of plugin 'review'" in w for w in lost) == (kind in placed), lost


def judge(spec: dict[str, Any], events: tuple[dict[str, Any], ...]) -> bool:
    check = TypeAdapter(Check).validate_python(spec)
    nowhere = Path("/nonexistent")
    ctx = CheckContext(sandbox=Sandbox(nowhere, nowhere, nowhere, nowhere), diff=Diff(changed_paths=[], text=""),
                       env={}, session=SessionView(had_session=True, events=events))
    return TABLE[type(check)].run(0, check, ctx).passed


def skill_call(name: str) -> tuple[dict[str, Any], ...]:
    return ({"seq": 1, "t": 1, "type": "tool_call", "turn": 1, "id": "c1", "tool": "skill", "hostTool": "Skill",
             "input": {"name": name}, "agent": None},
            {"seq": 2, "t": 2, "type": "tool_result", "turn": 1, "id": "c1", "tool": "skill", "isError": False,
             "text": "", "chars": 0, "truncated": False, "agent": None})


def test_a_check_counts_a_plugin_skill_by_either_name_never_another_plugin_s() -> None:
    namespaced, plain = skill_call("review:lint"), skill_call("lint")
    for events in (namespaced, plain):  # Claude Code loads review:lint, the other hosts lint
        assert judge({"type": "skill-used", "skill": "review:lint", "min": 1, "max": 1}, events)
        assert judge({"type": "skill-used", "skill": "lint", "min": 1, "max": 1}, events)
    assert not judge({"type": "skill-used", "skill": "other:lint"}, namespaced)
    assert same_part("review:lint", "lint") and not same_part("a:lint", "b:lint") and not same_part(None, "lint")


def test_a_scenario_may_name_a_plugin_skill_with_its_namespace(atlante_project: Project) -> None:
    plugin(atlante_project.root)
    config = json.loads((atlante_project.root / "atlante.jsonc").read_text())
    config["harness"]["skills"]["lint"] = {"dir": "skills/lint"}
    atlante_project.config(config)
    atlante_project.scenario(scenario_doc(version="0.2", **{"$schema": SCENARIO_SCHEMA_URIS["0.2"]}, checks=[
        {"type": "skill-used", "skill": "review:lint"}, {"type": "skill-used", "skill": "lint"}]))
    atlante_project.build()
    _, problems = validate(atlante_project.root, scripted=True)
    assert problems == [], problems
    atlante_project.scenario(scenario_doc(version="0.2", **{"$schema": SCENARIO_SCHEMA_URIS["0.2"]}, checks=[
        {"type": "skill-used", "skill": "other:lint"}]))
    _, problems = validate(atlante_project.root, scripted=True)
    assert [(p.code, p.location) for p in problems] == [("eval-scenario-invalid", "$.checks[0].skill")], problems
    assert "review:lint" in problems[0].message  # the names it defines, namespaced ones among them


def test_init_names_a_plugin_s_other_host_parts(tmp_path: Path) -> None:
    plugin(tmp_path)
    write(tmp_path, "gemini-extension.json", json.dumps({"name": "review", "contextFileName": "GEMINI.md",
                                                         "mcpServers": {}}))
    write(tmp_path, "GEMINI.md", "@./skills/lint/SKILL.md\n")
    write(tmp_path, ".opencode/plugins/review.js", "export default async () => ({})\n")
    warnings = init_project(tmp_path).warnings
    claude = [w for w in warnings if w.startswith(".claude-plugin/plugin.json:")]
    assert claude and "'review:NAME'" in claude[0] and "agents, commands, skills (3 parts)" in claude[0], warnings
    gemini = [w for w in warnings if w.startswith("gemini-extension.json:")]
    assert any("gemini-cli extension 'review'" in w and "skills" in w for w in gemini), gemini
    assert any("GEMINI.md" in w and "instructions" in w for w in gemini), gemini
    assert any("mcpServers are not evaluated" in w for w in gemini), gemini
    assert any(w.startswith(".opencode/plugins: ") and ".opencode/plugins/review.js" in w and "cannot adopt" in w
               for w in warnings), warnings


def test_a_script_naming_the_harness_skill_reaches_the_plugin_skill_where_namespaced(built_plugin: Path,
                                                                                      tmp_path: Path) -> None:
    """The build records ``lint`` → ``review:lint`` for Claude Code only (``skillNames``), and the
    scripted model names the skill so, as it names a harness agent by the host's name."""
    from pytest_atlante.provider.scripted import ScriptedModelServer
    from pytest_atlante.suite.build import host_agent_names
    from pytest_atlante.suite.script import Script, SkillAction

    assert manifest(built_plugin, "claude-code")["skillNames"] == {"lint": "review:lint"}
    assert all("skillNames" not in manifest(built_plugin, host) for host in ("opencode", "codex", "gemini-cli"))
    names = host_agent_names(built_plugin, "claude-code", key="skillNames")
    script = Script.model_validate({"schema": "atlante/scripted-model-v1", "turns": [{"text": "Done."}]})
    server = ScriptedModelServer(script, sandbox_root=tmp_path, skill_names=names)
    action = SkillAction.model_validate({"type": "skill", "name": "lint"})
    other = SkillAction.model_validate({"type": "skill", "name": "tidy"})
    assert [a.name for a in server._as_host_names([action, other])] == ["review:lint", "tidy"]  # type: ignore[union-attr]


@pytest.mark.parametrize(("host", "prompt", "wanted"), [
    ("claude-code", "/ship now", "/review:ship"),     # Claude Code answers "Unknown command: /ship"
    ("opencode", "/review:ship now", "/ship"),        # OpenCode loads it as ship
    ("claude-code", "/review:ship now", None),
    ("opencode", "/ship now", None),
])
def test_a_prompt_names_a_plugin_command_as_the_host_knows_it(atlante_project: Project, host: str, prompt: str,
                                                              wanted: str | None) -> None:
    plugin(atlante_project.root)
    config = json.loads((atlante_project.root / "atlante.jsonc").read_text())
    config["harness"]["commands"] = {"ship": {"file": "commands/ship.md"}}
    config["eval"]["host"] = host
    atlante_project.config(config)
    atlante_project.scenario(scenario_doc(task={"fixture": "eval/fixtures/app", "prompt": prompt}))
    atlante_project.build()
    _, problems = validate(atlante_project.root, scripted=True)
    found = [(p.code, p.location, p.message) for p in problems]
    if wanted is None:
        assert found == [], found
    else:
        assert [(code, where) for code, where, _ in found] == [("eval-command-unknown", "$.task.prompt")], found
        assert f"does not define for {host} (it defines: {wanted}, /tidy)" in found[0][2], found  # and the skill it runs as a command
