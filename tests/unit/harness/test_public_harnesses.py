"""Real public harness files, adopted in place and built: the lossless round trip and its warnings.

The files under tests/data/harnesses/ are unmodified upstream copies (SOURCE.md, LICENSE beside
each). They are put where a user keeps them (`.claude/…`, `.opencode/…`), the harness section is
what `harness_section_for` writes, and `atlante build` must give back what each host loads.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import COMMAND, DEBUGGER, OPENCODE_AGENT, SKILL, adopt_public_harness
from pytest_atlante.diagnostics import DiagnosticError
from pytest_atlante.hosts.opencode.policy import opencode_permission
from pytest_atlante.suite.build import build, host_agent_names, tree_dir, verify
from pytest_atlante.suite.frontmatter import split


def adopt(root: Path) -> dict[str, Any]:
    section = adopt_public_harness(root)
    build(root)
    return section


def manifest(root: Path, host: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / ".atlante/build" / host / "manifest.json").read_text())
    return data


def as_loaded(path: Path) -> tuple[object, str]:
    """A native file as a host reads it: the frontmatter as parsed YAML, the body as bytes."""
    native = split(path.read_text())
    return native.fields, native.body


def test_init_adopts_the_public_files(tmp_path: Path) -> None:
    section = adopt(tmp_path)
    assert section == {
        "agents": {"debugger": {"prompt": ".claude/agents/debugger.md", "host": "claude-code"},
                   # its frontmatter says `name: PatternAnalyst`, which names it in OpenCode too
                   "pattern-analyst": {"prompt": ".opencode/agent/codebase-pattern-analyst.md", "host": "opencode"}},
        "skills": {"skill-creator": {"dir": ".claude/skills/skill-creator", "host": "claude-code"}},
        "commands": {"team-review": {"file": ".claude/commands/team-review.md", "host": "claude-code"}},
        "instructions": "CLAUDE.md",
    }
    assert verify(tmp_path, "claude-code") == [] and verify(tmp_path, "opencode") == []


def test_building_for_the_same_host_gives_back_what_it_loads(tmp_path: Path) -> None:
    adopt(tmp_path)
    claude = tree_dir(tmp_path, "claude-code")
    for built, original in ((".claude/agents/debugger.md", DEBUGGER), (".claude/commands/team-review.md", COMMAND)):
        assert as_loaded(claude / built) == as_loaded(original)
        assert (claude / built).read_bytes() == original.read_bytes()  # nothing added: the file itself
    agent = split((claude / ".claude/agents/debugger.md").read_text()).fields
    assert agent is not None and agent["tools"] == "Read, Write, Edit, Bash, Glob, Grep" and agent["model"] == "sonnet"
    # every file of the skill, byte for byte and with its mode (scripts/ are executable upstream)
    built_skill = claude / ".claude/skills/skill-creator"
    originals = sorted(p.relative_to(SKILL).as_posix() for p in SKILL.rglob("*") if p.is_file())
    assert sorted(p.relative_to(built_skill).as_posix() for p in built_skill.rglob("*") if p.is_file()) == originals
    assert len(originals) == 18
    for rel in originals:
        assert (built_skill / rel).read_bytes() == (SKILL / rel).read_bytes(), rel
        assert bool(os.stat(built_skill / rel).st_mode & stat.S_IXUSR) == bool(os.stat(SKILL / rel).st_mode & stat.S_IXUSR), rel
    assert os.stat(built_skill / "scripts/run_eval.py").st_mode & stat.S_IXUSR
    executable = {o["path"] for o in manifest(tmp_path, "claude-code")["outputs"] if o.get("mode") == "x"}
    assert executable == {f".claude/skills/skill-creator/scripts/{n}.py" for n in (
        "aggregate_benchmark", "generate_report", "improve_description", "package_skill", "quick_validate",
        "run_eval", "run_loop")}
    assert (claude / "CLAUDE.md").read_bytes() == (tmp_path / "CLAUDE.md").read_bytes()
    opencode = tree_dir(tmp_path, "opencode")
    # The same file as OpenCode loads it, its `name: PatternAnalyst` included (parsed YAML equal):
    # OpenCode knows the agent by that name, which the manifest records for the harness name.
    fields, body = as_loaded(opencode / ".opencode/agents/pattern-analyst.md")
    original_fields, original_body = as_loaded(OPENCODE_AGENT)
    assert body == original_body
    assert fields == original_fields
    assert (opencode / ".opencode/agents/pattern-analyst.md").read_bytes() == OPENCODE_AGENT.read_bytes()
    assert manifest(tmp_path, "opencode")["agentNames"] == {"pattern-analyst": "PatternAnalyst"}
    assert host_agent_names(tmp_path, "opencode") == {"pattern-analyst": "PatternAnalyst"}
    own_warnings = [w for w in manifest(tmp_path, "opencode")["warnings"] if "codebase-pattern-analyst.md" in w]
    assert own_warnings == []  # nothing is lost
    own_claude = [w for w in manifest(tmp_path, "claude-code")["warnings"] if ".claude/" in w]
    assert own_claude == []  # the Claude Code files lose nothing on their own host
    assert (opencode / "AGENTS.md").read_bytes() == (tmp_path / "CLAUDE.md").read_bytes()
    for text in (p.read_text() for p in (claude / ".claude/agents").glob("*.md")):
        assert text.count("\n---\n") == 1 and text.startswith("---\n")  # never two frontmatter blocks


def test_building_for_the_other_host_translates_and_names_every_loss(tmp_path: Path) -> None:
    adopt(tmp_path)
    opencode = tree_dir(tmp_path, "opencode")
    fields, body = as_loaded(opencode / ".opencode/agents/debugger.md")
    assert body == as_loaded(DEBUGGER)[1]
    assert fields == {"description": as_loaded(DEBUGGER)[0]["description"], "mode": "all",  # type: ignore[index]
                      "permission": {"bash": opencode_permission("opencode-v1")["permission"]["bash"],
                                     "edit": "allow", "glob": "allow", "grep": "allow", "list": "deny", "lsp": "deny",
                                     "question": "deny", "read": "allow", "skill": "deny", "task": "deny",
                                     "todoread": "deny", "todowrite": "deny", "webfetch": "deny", "websearch": "deny"}}
    skill = split((opencode / ".opencode/skills/skill-creator/SKILL.md").read_text())
    assert skill.fields == split((SKILL / "SKILL.md").read_text()).fields
    command = split((opencode / ".opencode/commands/team-review.md").read_text())
    assert command.fields == {"description": "Launch a multi-reviewer parallel code review with specialized review dimensions"}
    assert command.body == split(COMMAND.read_text()).body
    warnings = manifest(tmp_path, "opencode")["warnings"]
    assert any("debugger.md: model 'sonnet' dropped for opencode" in w for w in warnings), warnings
    assert any("team-review.md: field 'argument-hint' dropped for opencode" in w for w in warnings), warnings

    claude = tree_dir(tmp_path, "claude-code")
    fields, body = as_loaded(claude / ".claude/agents/pattern-analyst.md")
    assert body == as_loaded(OPENCODE_AGENT)[1]
    # its `tools` map turns bash, edit and write off; what is left is what Claude Code gets
    assert fields == {"name": "pattern-analyst",
                      "description": "Codebase pattern analysis agent for finding similar implementations",
                      "tools": "Read, Glob, Grep, Skill, Task"}
    warnings = manifest(tmp_path, "claude-code")["warnings"]
    for field in ("id", "category", "type", "version", "author", "mode", "temperature", "permissions"):
        assert any(f"codebase-pattern-analyst.md: field {field!r} dropped for claude-code" in w for w in warnings), field


def test_fields_the_other_host_lacks_are_kept_for_the_host_that_has_them(tmp_path: Path) -> None:
    adopt(tmp_path)
    agent = tmp_path / ".claude/agents/debugger.md"
    agent.write_text(agent.read_text().replace("model: sonnet\n", "model: sonnet\ncolor: red\npermissionMode: plan\n"))
    skill = tmp_path / ".claude/skills/skill-creator/SKILL.md"
    skill.write_text(skill.read_text().replace("\n---\n", "\nlicense: Apache-2.0\nallowed-tools: Read, Bash(python:*)\n"
                                               "metadata:\n  owner: docs\n---\n", 1))
    build(tmp_path)
    claude = split((tree_dir(tmp_path, "claude-code") / ".claude/agents/debugger.md").read_text()).fields
    assert claude is not None and (claude["color"], claude["permissionMode"]) == ("red", "plan")
    claude_skill = split((tree_dir(tmp_path, "claude-code") / ".claude/skills/skill-creator/SKILL.md").read_text())
    assert claude_skill.fields == split(skill.read_text()).fields
    opencode_skill = split((tree_dir(tmp_path, "opencode") / ".opencode/skills/skill-creator/SKILL.md").read_text())
    assert opencode_skill.fields is not None
    assert opencode_skill.fields["license"] == "Apache-2.0" and opencode_skill.fields["metadata"] == {"owner": "docs"}
    assert "allowed-tools" not in opencode_skill.fields
    warnings = manifest(tmp_path, "opencode")["warnings"]
    for field in ("color", "permissionMode"):
        assert any(f"debugger.md: field {field!r} dropped for opencode" in w for w in warnings), field
    assert any("SKILL.md: field 'allowed-tools' dropped for opencode" in w for w in warnings), warnings


def test_what_atlante_jsonc_also_says_must_agree(tmp_path: Path) -> None:
    section = adopt(tmp_path)
    section["agents"]["debugger"] |= {"model": "opus", "description": "Use this agent when you need to diagnose "
                                      "and fix bugs, identify root causes of failures, or analyze error logs and "
                                      "stack traces to resolve issues."}
    (tmp_path / "atlante.jsonc").write_text(json.dumps({"version": "0.2", "harness": section}))
    with pytest.raises(DiagnosticError) as caught:
        build(tmp_path)
    [problem] = caught.value.diagnostics
    assert problem.code == "eval-harness-conflict"
    assert problem.location == "$.harness.agents.debugger.model (and .claude/agents/debugger.md line 5)"
    assert "'opus'" in problem.message and "'sonnet'" in problem.message
    # a per-host model for the other host adds to the file instead of contradicting it
    section["agents"]["debugger"]["model"] = {"opencode": "anthropic/claude-sonnet-4-5"}
    (tmp_path / "atlante.jsonc").write_text(json.dumps({"version": "0.2", "harness": section}))
    build(tmp_path)
    built = split((tree_dir(tmp_path, "opencode") / ".opencode/agents/debugger.md").read_text()).fields
    assert built is not None and built["model"] == "anthropic/claude-sonnet-4-5"
    assert not any("model" in w for w in manifest(tmp_path, "opencode")["warnings"])
    assert (tree_dir(tmp_path, "claude-code") / ".claude/agents/debugger.md").read_bytes() == DEBUGGER.read_bytes()


def test_the_built_yaml_is_what_the_hosts_parse(tmp_path: Path) -> None:
    adopt(tmp_path)
    for path in tree_dir(tmp_path, "opencode").rglob("*.md"):
        text = path.read_text()
        if text.startswith("---\n"):
            yaml.safe_load(text.split("\n---\n", 1)[0][4:])  # one block, and valid YAML
