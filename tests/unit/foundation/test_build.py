"""`atlante build`: byte-stable native outputs, frontmatter the real CLIs load, verify()."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import Project, config_doc
from pytest_atlante.hosts.opencode.policy import opencode_permission
from pytest_atlante.suite.build import build, tree_dir, verify
from pytest_atlante.suite.frontmatter import split


def digests(project: Project, host: str) -> dict[str, str]:
    manifest = json.loads((project.root / ".atlante/build" / host / "manifest.json").read_text())
    return {o["path"]: o["sha256"] for o in manifest["outputs"]} | {s["path"]: s["sha256"] for s in manifest["sources"]}


def test_outputs_are_byte_stable(atlante_project: Project) -> None:
    first = {h: digests(atlante_project, h) for h in ("claude-code", "opencode")}
    manifests = {h: (atlante_project.root / ".atlante/build" / h / "manifest.json").read_bytes() for h in first}
    build(atlante_project.root)
    assert {h: digests(atlante_project, h) for h in first} == first
    assert {h: (atlante_project.root / ".atlante/build" / h / "manifest.json").read_bytes() for h in first} == manifests
    atlante_project.write("harness/helper.md", "You write different files.\n")
    build(atlante_project.root)
    changed = digests(atlante_project, "claude-code")
    assert changed[".claude/agents/helper.md"] != first["claude-code"][".claude/agents/helper.md"]
    assert changed[".claude/skills/tidy/SKILL.md"] == first["claude-code"][".claude/skills/tidy/SKILL.md"]


def test_native_files_carry_the_frontmatter_each_cli_loads(atlante_project: Project) -> None:
    atlante_project.config(config_doc() | {"harness": {
        "agents": {"helper": {"description": "Writes: small files", "prompt": "harness/helper.md",
                              "tools": ["read", "write", "bash"], "model": "sonnet"}},
        "skills": {"tidy": {"description": "Keeps files tidy.", "dir": "harness/tidy"}}}})
    atlante_project.write("harness/tidy/reference.txt", "extra file\n")
    build(atlante_project.root)
    claude = tree_dir(atlante_project.root, "claude-code")
    agent = split((claude / ".claude/agents/helper.md").read_text())
    assert agent.fields == {"name": "helper", "description": "Writes: small files", "tools": "Read, Write, Bash",
                            "model": "sonnet"}
    assert agent.body == "You write small files.\n"
    skill = split((claude / ".claude/skills/tidy/SKILL.md").read_text())
    assert (skill.fields, skill.body) == ({"name": "tidy", "description": "Keeps files tidy."}, "Keep files tidy.\n")
    assert (claude / ".claude/skills/tidy/reference.txt").read_text() == "extra file\n"
    opencode = tree_dir(atlante_project.root, "opencode")
    agent = split((opencode / ".opencode/agents/helper.md").read_text())
    assert agent.fields == {"description": "Writes: small files", "mode": "all", "permission": {
        # an agent's permission overrides the configuration's, so its shell keeps the policy's denials
        "bash": opencode_permission("opencode-v1")["permission"]["bash"], "edit": "allow", "glob": "deny",
        "grep": "deny", "list": "deny", "lsp": "deny", "question": "deny", "read": "allow", "skill": "deny",
        "task": "deny", "todoread": "deny", "todowrite": "deny", "webfetch": "deny", "websearch": "deny"}}
    # "sonnet" is a Claude alias; OpenCode needs provider/model, so it is dropped, and said so
    manifest = json.loads((atlante_project.root / ".atlante/build/opencode/manifest.json").read_text())
    assert any("model 'sonnet' dropped for opencode" in w for w in manifest["warnings"]), manifest["warnings"]
    assert split((opencode / ".opencode/skills/tidy/SKILL.md").read_text()).fields == {
        "name": "tidy", "description": "Keeps files tidy."}


def test_verify_reports_missing_modified_and_stale(atlante_project: Project) -> None:
    assert verify(atlante_project.root, "claude-code") == []
    (tree_dir(atlante_project.root, "claude-code") / ".claude/agents/helper.md").write_text("tampered\n")
    assert [d.code for d in verify(atlante_project.root, "claude-code")] == ["eval-build-modified"]
    (tree_dir(atlante_project.root, "claude-code") / ".claude/agents/extra.md").write_text("added\n")
    assert [d.code for d in verify(atlante_project.root, "claude-code")].count("eval-build-modified") == 2
    build(atlante_project.root)
    atlante_project.write("harness/tidy/SKILL.md", "Keep files very tidy.\n")
    stale = verify(atlante_project.root, "opencode")
    assert [(d.code, d.file) for d in stale] == [("eval-build-stale", "harness/tidy/SKILL.md")]
    assert "atlante build" in stale[0].hint


def test_build_command_reports_bad_sources_without_a_traceback(atlante_project: Project) -> None:
    atlante_project.config(config_doc() | {"harness": {"agents": {"helper": {"description": "d", "prompt": "harness/missing.md"}}}})
    result = subprocess.run([sys.executable, "-m", "pytest_atlante.cli", "--diagnostics-json", "build", "--project", str(atlante_project.root)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "eval-harness-invalid: atlante.jsonc at $.harness.agents.helper.prompt" in result.stderr
    envelope = json.loads(result.stderr[result.stderr.index("{"):])
    assert envelope["diagnostics"][0]["code"] == "eval-harness-invalid"


@pytest.mark.parametrize("tools", [["read", "teleport"]])
def test_unknown_tool_names_are_config_errors(atlante_project: Project, tools: list[str]) -> None:
    from pytest_atlante.suite.discovery import discover

    atlante_project.config(config_doc() | {"harness": {"agents": {"helper": {"description": "d", "prompt": "harness/helper.md", "tools": tools}}}})
    problems = discover(atlante_project.root).diagnostics
    assert any(d.location == "$.harness.agents.helper.tools[1]" for d in problems), problems
