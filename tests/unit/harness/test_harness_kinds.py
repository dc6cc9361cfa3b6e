"""The harness kinds beside agents and skills: commands, instructions, per-host models, host tools,
and what a malformed native file gets (a diagnostic with file and line, never a traceback)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import Project, config_doc
from pytest_atlante.diagnostics import DiagnosticError
from pytest_atlante.hosts.opencode.policy import opencode_permission
from pytest_atlante.suite.build import build, tree_dir, verify
from pytest_atlante.suite.digests import harness_digest
from pytest_atlante.suite.discovery import discover
from pytest_atlante.suite.frontmatter import split


def harness(project: Project, section: dict[str, Any]) -> None:
    project.config(config_doc() | {"harness": section})


def warnings(project: Project, host: str) -> list[str]:
    found: list[str] = json.loads((project.root / ".atlante/build" / host / "manifest.json").read_text())["warnings"]
    return found


def test_commands_and_instructions_are_built_digested_and_checked_for_staleness(atlante_project: Project) -> None:
    atlante_project.write("harness/ship.md", "---\ndescription: Ship it\nallowed-tools: Bash(git:*)\n---\nShip $ARGUMENTS\n")
    atlante_project.write("harness/memory.md", "Always run the tests.\n")
    harness(atlante_project, {"commands": {"ship": {"file": "harness/ship.md", "host": "claude-code"}},
                              "instructions": "harness/memory.md"})
    build(atlante_project.root)
    claude, opencode = tree_dir(atlante_project.root, "claude-code"), tree_dir(atlante_project.root, "opencode")
    assert (claude / ".claude/commands/ship.md").read_bytes() == (atlante_project.root / "harness/ship.md").read_bytes()
    assert split((opencode / ".opencode/commands/ship.md").read_text()).fields == {"description": "Ship it"}
    assert any("field 'allowed-tools' dropped for opencode" in w for w in warnings(atlante_project, "opencode"))
    assert (claude / "CLAUDE.md").read_text() == (opencode / "AGENTS.md").read_text() == "Always run the tests.\n"
    before = {h: harness_digest(atlante_project.root, h) for h in ("claude-code", "opencode")}
    for rel in ("harness/ship.md", "harness/memory.md"):
        atlante_project.write(rel, "changed\n")
        stale = verify(atlante_project.root, "claude-code")
        assert [(d.code, d.file) for d in stale] == [("eval-build-stale", rel)], stale
        build(atlante_project.root)
    assert all(harness_digest(atlante_project.root, h) != before[h] for h in before)


def test_instructions_per_host(atlante_project: Project) -> None:
    atlante_project.write("CLAUDE.md", "claude memory\n")
    harness(atlante_project, {"instructions": {"claude-code": "CLAUDE.md"}})
    build(atlante_project.root)
    assert (tree_dir(atlante_project.root, "claude-code") / "CLAUDE.md").read_text() == "claude memory\n"
    assert not (tree_dir(atlante_project.root, "opencode") / "AGENTS.md").exists()
    assert any("opencode gets none" in w for w in warnings(atlante_project, "opencode"))


def test_a_model_per_host(atlante_project: Project) -> None:
    harness(atlante_project, {"agents": {"helper": {
        "description": "d", "prompt": "harness/helper.md",
        "model": {"claude-code": "sonnet", "opencode": "anthropic/claude-sonnet-4-5"}}}})
    build(atlante_project.root)
    claude = split((tree_dir(atlante_project.root, "claude-code") / ".claude/agents/helper.md").read_text()).fields
    opencode = split((tree_dir(atlante_project.root, "opencode") / ".opencode/agents/helper.md").read_text()).fields
    assert claude is not None and opencode is not None
    assert (claude["model"], opencode["model"]) == ("sonnet", "anthropic/claude-sonnet-4-5")
    assert warnings(atlante_project, "opencode") == []


def test_a_dropped_model_names_every_host_in_its_hint(atlante_project: Project) -> None:
    """A model one host cannot take is dropped with a hint to give one per host: the hint names
    every host's key (from the table of hosts), not the first two hosts'."""
    harness(atlante_project, {"agents": {"helper": {"description": "d", "prompt": "harness/helper.md", "model": "sonnet"}}})
    build(atlante_project.root)
    [dropped] = [w for w in warnings(atlante_project, "opencode") if "model 'sonnet' dropped" in w]
    assert dropped.endswith('give one per host: {"claude-code": …, "opencode": …, "codex": …, "gemini-cli": …})'), dropped


@pytest.mark.parametrize("declared", ["claude-code", None], ids=["claude-code-file", "host-neutral-file"])
def test_model_inherit_is_the_session_model_on_every_host_not_a_dropped_model(atlante_project: Project,
                                                                               declared: str | None) -> None:
    """Claude Code's agent ``model: inherit`` means the session's model, which every host uses for an
    agent given no model: built for another host it is left out without a warning (before, opencode
    and gemini-cli each warned "model 'inherit' dropped"); Claude Code's own file keeps it as it is."""
    text = "---\nname: helper\ndescription: Helps.\nmodel: inherit\n---\nYou write small files.\n"
    atlante_project.write("harness/helper.md", text)
    atlante_project.write("harness/ship.md", "---\ndescription: Ship it\nmodel: inherit\n---\nShip $ARGUMENTS\n")
    on = {"host": declared} if declared is not None else {}
    harness(atlante_project, {"agents": {"helper": {"prompt": "harness/helper.md", **on}},
                              "commands": {"ship": {"file": "harness/ship.md", **on}}})
    build(atlante_project.root)
    for host, agent in (("opencode", ".opencode/agents/helper.md"), ("gemini-cli", ".gemini/agents/helper.md")):
        assert not [w for w in warnings(atlante_project, host) if "inherit" in w], (host, warnings(atlante_project, host))
        fields = split((tree_dir(atlante_project.root, host) / agent).read_text()).fields
        assert fields is not None and "model" not in fields, (host, fields)
    claude = (tree_dir(atlante_project.root, "claude-code") / ".claude/agents/helper.md").read_text()
    if declared is not None:
        assert claude == text
    assert not [w for w in warnings(atlante_project, "claude-code") if "inherit" in w]


def test_host_specific_tools_are_kept_for_their_host_and_named_for_the_other(atlante_project: Project) -> None:
    harness(atlante_project, {"agents": {"helper": {
        "description": "d", "prompt": "harness/helper.md", "tools": ["read", "TodoWrite", "mcp__github__get_issue", "webfetch"]}}})
    build(atlante_project.root)
    claude = split((tree_dir(atlante_project.root, "claude-code") / ".claude/agents/helper.md").read_text()).fields
    assert claude is not None and claude["tools"] == "Read, TodoWrite, mcp__github__get_issue"
    assert any("tool 'webfetch' dropped for claude-code" in w for w in warnings(atlante_project, "claude-code"))
    opencode = split((tree_dir(atlante_project.root, "opencode") / ".opencode/agents/helper.md").read_text()).fields
    assert opencode is not None and opencode["permission"]["bash"] == "deny"  # type: ignore[index]
    # OpenCode's own webfetch is its tool, but the containment policy denies it, agent or not
    assert opencode["permission"]["webfetch"] == "deny"  # type: ignore[index]
    dropped = warnings(atlante_project, "opencode")
    assert any("permission 'webfetch' denied for opencode" in w for w in dropped), dropped
    assert any("tool 'TodoWrite' dropped for opencode" in w for w in dropped), dropped
    assert any("tool 'mcp__github__get_issue' dropped for opencode" in w for w in dropped), dropped


@pytest.mark.parametrize(("text", "line", "words"), [
    ("---\ndescription: d\ntools: [Read\n---\nbody\n", 4, "not valid YAML"),
    ("---\ndescription: d\n", 1, "never closed"),
    ("---\n- a list\n---\nbody\n", 2, "not a mapping"),
    ("---\ndescription: d\n---\n---\nname: again\n---\nbody\n", 4, "second frontmatter block"),
    ("---\ndescription: d\na: &x [1, 2]\nb: [*x, *x, *x]\n---\nbody\n", 4, "YAML alias"),
    ("---\ndescription: " + "[" * 30_000 + "\n---\nbody\n", 2, "nests too deeply"),
    ("---\ndescription: " + "x" * 70_000 + "\n---\nbody\n", 2, "over 64 KiB"),
])
def test_malformed_frontmatter_is_a_diagnostic_with_file_and_line(atlante_project: Project, text: str, line: int,
                                                                  words: str) -> None:
    atlante_project.write("harness/helper.md", text)
    with pytest.raises(DiagnosticError) as caught:
        build(atlante_project.root)
    [problem] = caught.value.diagnostics
    assert (problem.code, problem.file, problem.location) == ("eval-harness-invalid", "harness/helper.md", f"line {line}")
    assert words in problem.message


def test_a_native_file_gives_the_description_atlante_jsonc_leaves_out(atlante_project: Project) -> None:
    atlante_project.write("harness/helper.md", "---\nname: helper\ndescription: From the file\n---\nBody\n")
    harness(atlante_project, {"agents": {"helper": {"prompt": "harness/helper.md", "host": "claude-code"}}})
    build(atlante_project.root)
    built = (tree_dir(atlante_project.root, "claude-code") / ".claude/agents/helper.md").read_text()
    assert built == "---\nname: helper\ndescription: From the file\n---\nBody\n"
    atlante_project.write("harness/helper.md", "No frontmatter here.\n")
    with pytest.raises(DiagnosticError) as caught:
        build(atlante_project.root)
    assert [d.location for d in caught.value.diagnostics] == ["$.harness.agents.helper"]
    assert "no description" in caught.value.diagnostics[0].message


def test_tool_names_no_host_knows_are_config_errors(atlante_project: Project) -> None:
    harness(atlante_project, {"agents": {"helper": {"description": "d", "prompt": "harness/helper.md",
                                                    "tools": ["read", "TodoWrite", "Teleport"]}}})
    problems = discover(atlante_project.root).diagnostics
    assert [d.location for d in problems if d.code == "eval-config-invalid"] == ["$.harness.agents.helper.tools[2]"]


def test_a_skill_symlink_is_left_out_and_named(atlante_project: Project, tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("outside\n")
    (atlante_project.root / "harness/tidy/link").symlink_to(tmp_path / "secret")
    build(atlante_project.root)
    assert not (tree_dir(atlante_project.root, "claude-code") / ".claude/skills/tidy/link").exists()
    assert any("harness/tidy/link: not a regular file" in w for w in warnings(atlante_project, "claude-code"))


def test_a_nested_command_keeps_its_namespace(atlante_project: Project) -> None:
    atlante_project.write(".claude/commands/frontend/Make_Component.md", "---\ndescription: d\n---\nMake $ARGUMENTS\n")
    harness(atlante_project, {"commands": {"make-component": {"file": ".claude/commands/frontend/Make_Component.md"}}})
    build(atlante_project.root)
    # Claude Code calls it /frontend:Make_Component (host-facts §11): the same file at the same place
    assert (tree_dir(atlante_project.root, "claude-code") / ".claude/commands/frontend/Make_Component.md").is_file()
    assert (tree_dir(atlante_project.root, "opencode") / ".opencode/commands/frontend/Make_Component.md").is_file()


def test_hooks_and_mcp_servers_in_frontmatter_never_reach_a_trial(atlante_project: Project) -> None:
    atlante_project.write(".claude/agents/helper.md", "---\nname: helper\ndescription: d\nhooks:\n  Stop:\n"
                          "    - hooks: [{type: command, command: 'curl evil'}]\nmcpServers:\n  x: {command: evil}\n---\nBody\n")
    harness(atlante_project, {"agents": {"helper": {"prompt": ".claude/agents/helper.md"}}})
    build(atlante_project.root)
    for host, owned in (("claude-code", ".claude"), ("opencode", ".opencode")):
        fields = split((tree_dir(atlante_project.root, host) / owned / "agents/helper.md").read_text()).fields
        assert fields is not None and "hooks" not in fields and "mcpServers" not in fields
        dropped = warnings(atlante_project, host)
        assert any("'hooks' dropped" in w and "no project hooks" in w for w in dropped), dropped
        assert any("'mcpServers' dropped" in w for w in dropped), dropped


def test_an_opencode_agent_cannot_loosen_the_containment_policy(atlante_project: Project) -> None:
    """OpenCode lets an agent's permission override the configuration's (host-facts §11)."""
    atlante_project.write(".opencode/agents/loose.md", "---\ndescription: d\nmode: all\npermission:\n  bash: allow\n"
                          "  webfetch: allow\ntools:\n  websearch: true\n---\nBody\n")
    harness(atlante_project, {"agents": {"loose": {"prompt": ".opencode/agents/loose.md"}}})
    build(atlante_project.root)
    fields = split((tree_dir(atlante_project.root, "opencode") / ".opencode/agents/loose.md").read_text()).fields
    assert fields is not None
    policy_bash = opencode_permission("opencode-v1")["permission"]["bash"]
    assert fields["permission"] == {"bash": policy_bash, "webfetch": "deny"}
    assert fields["tools"] == {"websearch": False}
    assert len(warnings(atlante_project, "opencode")) == 3


def test_a_host_neutral_files_tools_reach_both_hosts(atlante_project: Project) -> None:
    atlante_project.write("harness/helper.md", "---\nname: helper\ndescription: d\ntools: Read, Bash\n---\nBody\n")
    harness(atlante_project, {"agents": {"helper": {"prompt": "harness/helper.md"}}})
    build(atlante_project.root)
    claude = split((tree_dir(atlante_project.root, "claude-code") / ".claude/agents/helper.md").read_text()).fields
    opencode = split((tree_dir(atlante_project.root, "opencode") / ".opencode/agents/helper.md").read_text()).fields
    assert claude is not None and claude["tools"] == "Read, Bash"
    assert opencode is not None and opencode["permission"]["read"] == "allow"  # type: ignore[index]
    assert opencode["permission"]["edit"] == "deny"  # type: ignore[index]


def test_a_native_agent_without_a_description_is_built_as_it_is(atlante_project: Project) -> None:
    """As OpenCode's own duplicate-pr agent: no description, and nothing invented for it."""
    text = "---\nmode: primary\nhidden: true\n---\nYou find duplicates.\n"
    atlante_project.write(".opencode/agent/dupes.md", text)
    harness(atlante_project, {"agents": {"dupes": {"prompt": ".opencode/agent/dupes.md"}}})
    build(atlante_project.root)
    assert (tree_dir(atlante_project.root, "opencode") / ".opencode/agents/dupes.md").read_text() == text
    claude = split((tree_dir(atlante_project.root, "claude-code") / ".claude/agents/dupes.md").read_text()).fields
    assert claude == {"name": "dupes"}
    assert any("field 'hidden' dropped for claude-code" in w for w in warnings(atlante_project, "claude-code"))


def test_a_skill_file_whose_mode_changed_makes_the_build_stale(atlante_project: Project) -> None:
    script = atlante_project.write("harness/tidy/scripts/run.sh", "#!/bin/sh\necho tidy\n")
    script.chmod(0o755)
    build(atlante_project.root)
    built = tree_dir(atlante_project.root, "claude-code") / ".claude/skills/tidy/scripts/run.sh"
    assert built.stat().st_mode & 0o100
    assert verify(atlante_project.root, "claude-code") == []
    script.chmod(0o644)
    assert [(d.code, d.file) for d in verify(atlante_project.root, "claude-code")] == [
        ("eval-build-stale", "harness/tidy/scripts/run.sh")]
    build(atlante_project.root)
    built.chmod(0o755)  # and an output whose mode was changed after the build is modified
    assert [d.code for d in verify(atlante_project.root, "claude-code")] == ["eval-build-modified"]
