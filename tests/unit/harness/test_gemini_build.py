"""``atlante build`` for Gemini CLI: where each part lands, in the format Gemini CLI loads, and a
warning for each part it has no place for (docs/hosts.md, "Gemini CLI")."""

from __future__ import annotations

import json
import tomllib

from conftest import Project, config_doc
from pytest_atlante.suite.build import build, tree_dir
from pytest_atlante.suite.frontmatter import split

HOST = "gemini-cli"


def warnings(project: Project) -> list[str]:
    found: list[str] = json.loads((project.root / ".atlante/build" / HOST / "manifest.json").read_text())["warnings"]
    return found


def test_agents_skills_commands_and_instructions_land_where_gemini_loads_them(atlante_project: Project) -> None:
    atlante_project.write("harness/ship.md", "---\ndescription: Ship it\nmodel: sonnet\n---\nShip $ARGUMENTS now, then $1\n")
    atlante_project.write("harness/memory.md", "Always run the tests.\n")
    atlante_project.config(config_doc() | {"harness": {
        "agents": {"helper": {"description": "Writes small files.", "prompt": "harness/helper.md",
                              "tools": ["read", "write", "bash", "TodoWrite"]}},
        "skills": {"tidy": {"description": "Keeps files tidy.", "dir": "harness/tidy"}},
        "commands": {"ship": {"file": "harness/ship.md", "host": "claude-code"}},
        "instructions": "harness/memory.md"}})
    build(atlante_project.root)
    tree = tree_dir(atlante_project.root, HOST)
    agent = split((tree / ".gemini/agents/helper.md").read_text()).fields
    assert agent == {"name": "helper", "description": "Writes small files.", "kind": "local",
                     "tools": ["read_file", "write_file", "run_shell_command"]}
    assert split((tree / ".gemini/skills/tidy/SKILL.md").read_text()).fields == {
        "name": "tidy", "description": "Keeps files tidy."}
    command = tomllib.loads((tree / ".gemini/commands/ship.toml").read_text())
    assert command == {"description": "Ship it", "prompt": "Ship {{args}} now, then $1\n"}
    assert not (tree / ".gemini/commands/ship.md").exists()
    assert (tree / "AGENTS.md").read_text() == "Always run the tests.\n"
    found = warnings(atlante_project)
    assert any("tool 'TodoWrite' dropped for gemini-cli" in w for w in found), found
    assert any("model 'sonnet' dropped for gemini-cli" in w for w in found), found
    assert any("positional arguments" in w for w in found), found
