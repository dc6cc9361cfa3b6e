"""Each host's native layout behind the host (issue 37, item 2): ``atlante init`` finds Gemini CLI's
and Codex's layouts as it finds Claude Code's and OpenCode's, because it asks each host where its
harness lives (``native_layouts``); ``eval.host`` is the layout's host; the host's own settings
are named as not evaluated; and the adopted files build for every host."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_atlante.suite.build import build
from pytest_atlante.suite.init import init_project
from pytest_atlante.suite.jsonc import loads as jsonc_loads
from pytest_atlante.suite.native import discover_native_harness

SKILL = "---\nname: {name}\ndescription: {name} things\n---\nDo {name} things.\n"


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def found(root: Path) -> set[tuple[str, str, str, str]]:
    return {(p.kind, p.name, p.path, p.host) for p in discover_native_harness(root).parts}


def config(root: Path) -> dict[str, object]:
    loaded: dict[str, object] = jsonc_loads((root / "atlante.jsonc").read_text())
    return loaded


def test_a_gemini_cli_layout_is_adopted_with_its_host(tmp_path: Path) -> None:
    write(tmp_path, "GEMINI.md", "Run the tests before you finish.\n")
    write(tmp_path, ".gemini/skills/release/SKILL.md", SKILL.format(name="release"))
    write(tmp_path, ".gemini/commands/git/review.toml", 'description = "Review"\nprompt = "Review {{args}}."\n')
    write(tmp_path, ".gemini/settings.json", "{}\n")
    assert found(tmp_path) == {
        ("skill", "release", ".gemini/skills/release", "gemini-cli"),
        ("command", "review", ".gemini/commands/git/review.toml", "gemini-cli"),
        ("instructions", "gemini-cli", "GEMINI.md", "gemini-cli"),
    }
    result = init_project(tmp_path)
    assert any(".gemini/settings.json" in line for line in result.warnings), result.warnings
    loaded = config(tmp_path)
    assert loaded["eval"]["host"] == "gemini-cli"  # type: ignore[index]
    assert loaded["harness"]["commands"] == {  # type: ignore[index]
        "review": {"file": ".gemini/commands/git/review.toml", "host": "gemini-cli"}}
    build(tmp_path)  # every host; the TOML command is read as TOML
    assert (tmp_path / ".atlante/build/claude-code/tree/.claude/commands/git/review.md").is_file()
    assert (tmp_path / ".atlante/build/gemini-cli/tree/.gemini/commands/git/review.toml").is_file()


def test_a_gemini_extension_is_adopted_from_its_manifest(tmp_path: Path) -> None:
    write(tmp_path, "gemini-extension.json", json.dumps({"name": "ext", "version": "1.0.0"}))
    write(tmp_path, "commands/deploy.toml", 'prompt = "Deploy."\n')
    write(tmp_path, "skills/ship/SKILL.md", SKILL.format(name="ship"))
    assert found(tmp_path) == {("command", "deploy", "commands/deploy.toml", "gemini-cli"),
                               ("skill", "ship", "skills/ship", "gemini-cli")}


def test_a_codex_layout_is_adopted_with_its_host(tmp_path: Path) -> None:
    write(tmp_path, "AGENTS.md", "Keep diffs small.\n")
    write(tmp_path, ".agents/skills/lint/SKILL.md", SKILL.format(name="lint"))
    write(tmp_path, ".codex/skills/format/SKILL.md", SKILL.format(name="format"))
    parts = found(tmp_path)
    assert {("skill", "lint", ".agents/skills/lint", "codex"), ("skill", "format", ".codex/skills/format", "codex"),
            ("instructions", "codex", "AGENTS.md", "codex")} <= parts
    init_project(tmp_path)
    loaded = config(tmp_path)
    assert loaded["eval"]["host"] == "codex"  # type: ignore[index]
    assert loaded["harness"]["instructions"] == "AGENTS.md"  # one file, whichever hosts load it  # type: ignore[index]
    assert set(loaded["harness"]["skills"]) == {"lint", "format"}  # type: ignore[index]
    build(tmp_path)


def test_a_skill_both_a_claude_plugin_and_a_gemini_extension_load_is_adopted_once(tmp_path: Path) -> None:
    """obra/superpowers ships one skills/ folder for its Claude Code plugin and its Gemini CLI
    extension: each skill is one harness skill (the first layout's), not a second ``-2`` copy whose
    name then contradicts its own frontmatter at build."""
    write(tmp_path, ".claude-plugin/plugin.json", json.dumps({"name": "superpowers"}))
    write(tmp_path, "gemini-extension.json", json.dumps({"name": "superpowers", "version": "1.0.0"}))
    write(tmp_path, "skills/writing-plans/SKILL.md", SKILL.format(name="writing-plans"))
    assert found(tmp_path) == {("skill", "writing-plans", "skills/writing-plans", "claude-code")}
    init_project(tmp_path)
    assert config(tmp_path)["harness"]["skills"] == {  # type: ignore[index]
        "writing-plans": {"dir": "skills/writing-plans", "host": "claude-code"}}
    build(tmp_path)  # no eval-harness-conflict
