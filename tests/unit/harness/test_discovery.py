"""`discover_native_harness` / `harness_section_for`: the native layouts `atlante init` adopts."""

from __future__ import annotations

from pathlib import Path

from pytest_atlante.suite.config import Harness
from pytest_atlante.suite.native import NativePart, discover_native_harness, harness_section_for


def write(root: Path, rel: str, text: str = "---\ndescription: d\n---\nbody\n") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_every_layout_is_found_with_its_host(tmp_path: Path) -> None:
    for rel in (".claude/agents/debugger.md", ".claude/skills/skill-creator/SKILL.md",
                ".claude/commands/tools/Tdd_Red.md", "CLAUDE.md", ".opencode/agent/review.md",
                ".opencode/commands/ship.md", ".opencode/skills/tidy/SKILL.md", "AGENTS.md",
                ".claude-plugin/plugin.json", "agents/plugin-agent.md", "commands/plug.md", "skills/pskill/SKILL.md"):
        write(tmp_path, rel)
    write(tmp_path, ".claude/skills/not-a-skill/README.md")
    write(tmp_path, ".claude/agents/sub/file-name.md", "---\nname: nested-one\ndescription: d\n---\nbody\n")
    write(tmp_path, ".opencode/agent/sub/code/deep.md")
    parts = set(discover_native_harness(tmp_path).parts)
    assert parts == {
        NativePart("agent", "debugger", ".claude/agents/debugger.md", "claude-code"),
        # nested agents load too (host-facts §11): Claude Code's by their frontmatter name
        NativePart("agent", "nested-one", ".claude/agents/sub/file-name.md", "claude-code"),
        NativePart("agent", "deep", ".opencode/agent/sub/code/deep.md", "opencode"),
        NativePart("skill", "skill-creator", ".claude/skills/skill-creator", "claude-code"),
        NativePart("command", "tdd-red", ".claude/commands/tools/Tdd_Red.md", "claude-code"),
        NativePart("instructions", "claude-code", "CLAUDE.md", "claude-code"),
        NativePart("agent", "review", ".opencode/agent/review.md", "opencode"),
        NativePart("command", "ship", ".opencode/commands/ship.md", "opencode"),
        NativePart("skill", "tidy", ".opencode/skills/tidy", "opencode"),
        NativePart("instructions", "opencode", "AGENTS.md", "opencode"),
        NativePart("instructions", "codex", "AGENTS.md", "codex"),  # Codex loads AGENTS.md too
        NativePart("agent", "plugin-agent", "agents/plugin-agent.md", "claude-code"),
        NativePart("command", "plug", "commands/plug.md", "claude-code"),
        NativePart("skill", "pskill", "skills/pskill", "claude-code"),
    }


def test_a_plugin_layout_needs_its_manifest(tmp_path: Path) -> None:
    write(tmp_path, "agents/loose.md")
    assert discover_native_harness(tmp_path).parts == ()


def test_hooks_mcp_and_settings_are_warnings_not_parts(tmp_path: Path) -> None:
    write(tmp_path, ".claude/settings.json", '{"hooks": {"PreToolUse": []}}')
    write(tmp_path, ".mcp.json", '{"mcpServers": {}}')
    write(tmp_path, "opencode.json", '{"mcp": {"x": {}}}')
    write(tmp_path, "hooks/hooks.json", "{}")
    native = discover_native_harness(tmp_path)
    assert native.parts == ()
    text = "\n".join(native.unsupported)
    for expected in (".claude/settings.json: hooks", ".claude/settings.json: settings", ".mcp.json: MCP",
                     "opencode.json: MCP", "opencode.json: settings", "hooks/hooks.json: hooks"):
        assert expected in text, native.unsupported


def test_the_section_adopts_the_files_in_place(tmp_path: Path) -> None:
    for rel in (".claude/agents/debugger.md", ".claude/skills/skill-creator/SKILL.md", ".claude/commands/ship.md",
                "CLAUDE.md", "AGENTS.md", ".opencode/agents/debugger.md"):
        write(tmp_path, rel)
    section = harness_section_for(discover_native_harness(tmp_path))
    assert section == {
        "agents": {"debugger": {"prompt": ".claude/agents/debugger.md", "host": "claude-code"},
                   "debugger-2": {"prompt": ".opencode/agents/debugger.md", "host": "opencode"}},
        "skills": {"skill-creator": {"dir": ".claude/skills/skill-creator", "host": "claude-code"}},
        "commands": {"ship": {"file": ".claude/commands/ship.md", "host": "claude-code"}},
        "instructions": {"claude-code": "CLAUDE.md", "codex": "AGENTS.md", "opencode": "AGENTS.md"},
    }
    Harness.model_validate(section)  # what init writes is a valid harness section
    assert harness_section_for(discover_native_harness(tmp_path / "none")) == {}
