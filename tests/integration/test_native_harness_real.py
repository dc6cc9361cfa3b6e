"""The adopted public harness, built, run by the real CLIs against the scripted model.

What counts is what the session really had: the agents, skills, commands and memory file the
CLI's init event lists, and the tools and model it sent to the scripted server for the agent.
Each host renders and enforces the harness its own way: the parametrized tests run on ``EVERY_HOST``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import EVERY_HOST, Project, adopt_public_harness, scenario_doc
from pytest_atlante.hosts import host_for
from pytest_atlante.hosts.base import no_place
from pytest_atlante.suite.build import build, tree_dir
from pytest_atlante.suite.scenario import SCENARIO_SCHEMA_URIS
from test_hosts_real import RM_SCRIPT, Session, parent_env, run_session, turn_tools
from trial_helpers import DONE as DONE_TURN
from trial_helpers import logged_requests, run_eval, system_text, with_request_log, write_turn

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(300)]

DONE = [{"text": "Done."}]


def session_with(tmp_path: Path, host_name: str, agent: str, path: str) -> Session:
    project = tmp_path / "project"
    project.mkdir()
    adopt_public_harness(project)
    build(project)
    host = host_for(host_name)
    info = host.probe(parent_env(path))

    def overlay(sandbox: Path, home: Path) -> None:
        shutil.copytree(tree_dir(project, host_name), sandbox, dirs_exist_ok=True)

    return run_session(host, info, tmp_path / "trial", DONE, path, before=overlay, agent=agent)


def test_claude_code_runs_the_adopted_agent_with_its_tools_and_model(tmp_path: Path, hosts_path: Callable[[], str]) -> None:
    (tmp_path / "trial").mkdir()
    session = session_with(tmp_path, "claude-code", "debugger", hosts_path())
    init = json.loads(session.stdout_lines[0])
    assert init["type"] == "system" and init["subtype"] == "init"
    assert "debugger" in init["agents"] and "pattern-analyst" in init["agents"]
    assert "skill-creator" in init["skills"]
    assert "team-review" in init["slash_commands"]
    # The debugger's frontmatter: `tools: Read, Write, Edit, Bash, Glob, Grep`, `model: sonnet`.
    # 2.1.197 has no Glob or Grep tool at all (its Bash searches; host-facts §3), so the session
    # gets the four of the six that exist, and nothing else: not its 20-odd default tools.
    assert "Glob" not in init["tools"] and "Grep" not in init["tools"]
    offered = turn_tools(session)
    assert offered and all(set(tools) == {"Read", "Write", "Edit", "Bash"} for tools in offered), offered
    models = {r.model for r in session.requests if r.kind == "turn"}
    assert models and all(m is not None and "sonnet" in m for m in models), models
    # the memory file reached the model
    assert any("Run the tests with `make test`." in json.dumps(r.body) for r in session.requests if r.kind == "turn")


def test_opencode_runs_the_translated_agent_with_its_tools(tmp_path: Path, hosts_path: Callable[[], str]) -> None:
    (tmp_path / "trial").mkdir()
    session = session_with(tmp_path, "opencode", "debugger", hosts_path())
    assert session.returncode == 0, session.stderr[-2000:]
    offered = turn_tools(session)
    # Translated from Claude Code's list: no skill or task tool, the six it names.
    assert offered, session.stderr[-2000:]
    for tools in offered:
        assert {"read", "write", "edit", "bash", "glob", "grep"} <= set(tools), tools
        assert "task" not in tools and "skill" not in tools, tools
    turn = next(r for r in session.requests if r.kind == "turn")
    text = json.dumps(turn.body)
    assert "senior debugging specialist" in text  # the agent's body is its system prompt
    assert "Run the tests with `make test`." in text  # AGENTS.md was loaded
    assert session.outcome.model_identity == "atlante-scripted/scripted-model"


# The adopted debugger's tools, as each host offers them (its own tool names and tool set).
DEBUGGER_TOOLS = {"claude-code": {"Read", "Write", "Edit", "Bash"}, "opencode": {"read", "write", "edit", "bash", "glob", "grep"}}
# The hosts that have native agent files.  Codex has none (its roles are config.toml tables, and
# `codex exec` has no --agent to select one: ``hosts.base.no_place``), so the build drops the
# harness agent there and neither a task.agent nor an agent's own permissions can exist to test.
AGENT_HOSTS = [h for h in EVERY_HOST if no_place(host_for(h), "agent") is None]


@pytest.mark.usefixtures("on_path")
# Not on Gemini CLI either: it has no flag that starts a session as a sub-agent, so `task.agent`
# cannot select one there (docs/hosts.md, Gemini CLI "Build"): the session runs as the main agent.
@pytest.mark.parametrize("host", [h for h in AGENT_HOSTS if h != "gemini-cli"])
def test_an_eval_run_of_the_adopted_harness_selects_the_native_agent(
        pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str) -> None:
    """The whole road: adopt, build, verify, overlay, `task.agent` — every turn under the agent's tools."""
    tools = DEBUGGER_TOOLS[host]
    root = tmp_path / "project"
    root.mkdir()
    section = adopt_public_harness(root)
    project = Project(root)
    project.config({"version": "0.2", "harness": section,
                    "eval": {"host": host, "scenarios": "eval/scenarios/*.eval.json", "budget": {"trials": 1}}})
    project.write("eval/fixtures/app/README.md", "# app\n")
    project.scenario(scenario_doc("debugs", task={"fixture": "eval/fixtures/app", "agent": "debugger",
                                                  "prompt": "Create hello.txt containing hello."}),
                     file="eval/scenarios/debugs.eval.json")
    project.script("debugs", [write_turn("hello.txt", "hello\n"), DONE_TURN])
    project.build()
    log_dir = tmp_path / "requests"
    run = run_eval(pytester, root, tmp_path / "out", *with_request_log(monkeypatch, log_dir))
    assert run.result.ret == 0, run.output()
    assert run.trial("debugs").verdict == "pass"
    turns = [r for logged in logged_requests(log_dir).values() for r in logged if r["kind"] == "turn"]
    assert turns and all(set(r["tools_offered"]) == tools for r in turns), [r["tools_offered"] for r in turns]
    assert all("senior debugging specialist" in system_text(r) for r in turns)


LOOSE_AGENTS = {
    # OpenCode lets an agent's permission override the configuration's; the build puts the policy back.
    "opencode": (".opencode/agents/loose.md", "---\ndescription: d\nmode: all\npermission:\n  bash: allow\n"
                 "  webfetch: allow\n---\nYou clean up.\n", "webfetch"),
    # Claude Code's deny rules hold whatever mode an agent asks for.
    "claude-code": (".claude/agents/loose.md", "---\nname: loose\ndescription: d\npermissionMode: bypassPermissions\n"
                    "tools: Bash, WebFetch\n---\nYou clean up.\n", "WebFetch"),
    # Gemini CLI has no flag that starts the session as the agent: the session runs as the main agent
    # with this one offered through invoke_agent, and the policy must hold for it all the same.
    "gemini-cli": ("harness/loose.md", "---\nname: loose\ndescription: d\npermissionMode: bypassPermissions\n"
                   "tools: Bash, WebFetch\n---\nYou clean up.\n", "web_fetch"),
}


@pytest.mark.parametrize("host_name", AGENT_HOSTS)
def test_a_harness_agent_cannot_loosen_the_containment_policy(tmp_path: Path, hosts_path: Callable[[], str],
                                                              host_name: str) -> None:
    rel, text, web_tool = LOOSE_AGENTS[host_name]
    project = tmp_path / "project"
    (project / rel).parent.mkdir(parents=True)
    (project / rel).write_text(text)
    (project / "atlante.jsonc").write_text(json.dumps({"version": "0.2", "harness": {"agents": {"loose": {"prompt": rel}}}}))
    build(project)
    host = host_for(host_name)
    path = hosts_path()
    info = host.probe(parent_env(path))
    (tmp_path / "trial").mkdir()

    def overlay(sandbox: Path, home: Path) -> None:
        shutil.copytree(tree_dir(project, host_name), sandbox, dirs_exist_ok=True)

    session = run_session(host, info, tmp_path / "trial", RM_SCRIPT, path, before=overlay, agent="loose")
    assert (session.sandbox / "victim" / "keep.txt").read_text() == "precious\n"
    offered = turn_tools(session)
    assert offered and all(web_tool not in tools for tools in offered), offered


def test_opencode_loads_the_built_skill_and_its_own_agent(tmp_path: Path, hosts_path: Callable[[], str]) -> None:
    """Without --agent: the skill tool offers skill-creator, the task tool the OpenCode-format sub-agent."""
    (tmp_path / "trial").mkdir()
    session = session_with(tmp_path, "opencode", "", hosts_path())
    assert session.returncode == 0, session.stderr[-2000:]
    turn = next(r for r in session.requests if r.kind == "turn")
    text = json.dumps(turn.body)
    assert "skill-creator" in text and "Create new skills, modify and improve existing skills" in text
    # The file as OpenCode loads it, its own name included (the build does not rename it).
    assert "- PatternAnalyst: Codebase pattern analysis agent" in text


@pytest.mark.usefixtures("on_path")
def test_an_opencode_agent_kept_under_its_own_name_is_delegated_to_and_counted_by_its_harness_name(
        pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`name: PatternAnalyst` stays in the OpenCode build; a script's task naming the harness agent
    `pattern-analyst` reaches it, and `agent-used: pattern-analyst` counts the delegation."""
    root = tmp_path / "project"
    root.mkdir()
    section = adopt_public_harness(root)
    project = Project(root)
    project.config({"version": "0.2", "harness": section,
                    "eval": {"host": "opencode", "scenarios": "eval/scenarios/*.eval.json", "budget": {"trials": 1}}})
    project.write("eval/fixtures/app/README.md", "# app\n")
    project.scenario(scenario_doc("delegates", version="0.2", **{"$schema": SCENARIO_SCHEMA_URIS["0.2"]},
                                  task={"fixture": "eval/fixtures/app", "prompt": "Find the patterns."},
                                  checks=[{"type": "agent-used", "agent": "pattern-analyst", "min": 1, "max": 1}]),
                     file="eval/scenarios/delegates.eval.json")
    project.script("delegates", [
        {"text": "Delegating.", "actions": [{"type": "task", "agent": "pattern-analyst", "prompt": "Look for patterns now.",
                                             "turns": [{"text": "No patterns here."}]}]},
        DONE_TURN])
    project.build()
    assert json.loads((root / ".atlante/build/opencode/manifest.json").read_text())["agentNames"] == {
        "pattern-analyst": "PatternAnalyst"}
    log_dir = tmp_path / "requests"
    run = run_eval(pytester, root, tmp_path / "out", *with_request_log(monkeypatch, log_dir))
    trial = run.trial("delegates")
    assert trial.verdict == "pass", (trial.checks, run.output())
    served = [r for logged in logged_requests(log_dir).values() for r in logged if r["kind"] == "turn"]
    assert any(r["subagent"] == "pattern-analyst" for r in served), served  # the sub-agent's own turn was played
