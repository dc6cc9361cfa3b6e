"""The adopted public harness, built, run by the real CLIs against the scripted model.

What counts is what the session really had: the agents, skills, commands and memory file the
CLI's init event lists, and the tools and model it sent to the scripted server for the agent.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import adopt_public_harness
from pytest_atlante.hosts import host_for
from pytest_atlante.suite.build import build, tree_dir
from test_hosts_real import Session, parent_env, run_session, turn_tools

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
    assert "debugger" in init["agents"] and "codebase-pattern-analyst" in init["agents"]
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
