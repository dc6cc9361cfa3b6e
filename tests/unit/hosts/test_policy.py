"""One containment policy, equivalent renderings for Claude Code and both OpenCode dialects."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_atlante.hosts.claude_code.policy import claude_denials, claude_settings
from pytest_atlante.hosts.opencode.policy import opencode_denials, opencode_permission
from pytest_atlante.hosts.policy import POLICY


def _values(node: Any) -> list[Any]:
    if isinstance(node, dict):
        return [v for value in node.values() for v in _values(value)]
    if isinstance(node, list):
        return [v for value in node for v in _values(value)]
    return [node]


def test_renderings_deny_the_same_tools_and_commands() -> None:
    expected = (frozenset(POLICY.denied_tools), frozenset(POLICY.denied_commands))
    assert claude_denials(claude_settings()) == expected
    assert opencode_denials("opencode-v1", opencode_permission("opencode-v1")) == expected
    assert opencode_denials("opencode-v2", opencode_permission("opencode-v2")) == expected
    assert {"web_fetch", "web_search"} <= expected[0]
    assert {"rm -rf", "sudo", "git push", "mkfs", "dd", "shutdown", "reboot", "chmod -R"} <= expected[1]


def test_claude_settings_hold_only_permissions_in_the_documented_rule_forms() -> None:
    settings = claude_settings()
    assert list(settings) == ["permissions"] and sorted(settings["permissions"]) == ["allow", "deny"]
    deny = settings["permissions"]["deny"]
    assert "WebFetch" in deny and "WebSearch" in deny and "Bash(rm -rf:*)" in deny
    allow = settings["permissions"]["allow"]
    for tool in ("Read", "Write", "Edit", "Glob", "Grep", "Bash", "Skill", "Agent", "Task", "TodoWrite"):
        assert tool in allow
    assert not set(allow) & set(deny)


@pytest.mark.parametrize("dialect", ["opencode-v1", "opencode-v2"])
def test_opencode_rendering_never_asks(dialect: str) -> None:
    rendered = opencode_permission(dialect)  # type: ignore[arg-type]
    assert "ask" not in _values(rendered)
    assert set(_values(rendered)) == {"allow", "deny"}


@pytest.mark.parametrize("dialect", ["opencode-v1", "opencode-v2"])
def test_opencode_bash_catch_all_comes_first_because_the_last_match_wins(dialect: str) -> None:
    block = next(iter(opencode_permission(dialect).values()))  # type: ignore[arg-type]
    shell = block["bash" if dialect == "opencode-v1" else "shell"]
    patterns = list(shell)
    assert patterns[0] == "*" and shell["*"] == "allow"
    assert all(shell[p] == "deny" for p in patterns[1:])
    # Both the bare command and the command with arguments are denied.
    assert shell["sudo"] == shell["sudo *"] == "deny"


def test_opencode_v1_and_v2_differ_only_in_field_names() -> None:
    v1 = opencode_permission("opencode-v1")
    v2 = opencode_permission("opencode-v2")
    assert list(v1) == ["permission"] and list(v2) == ["permissions"]
    renamed = {"bash": "shell", "task": "subagent"}
    assert {renamed.get(k, k): v for k, v in v1["permission"].items()} == v2["permissions"]
    assert v1["permission"]["external_directory"] == "deny"
    assert v1["permission"]["webfetch"] == v1["permission"]["websearch"] == "deny"
    for key in ("read", "edit", "glob", "grep", "skill", "task", "todowrite"):
        assert v1["permission"][key] == "allow"


def test_renderings_are_plain_json() -> None:
    for document in (claude_settings(), opencode_permission("opencode-v1"), opencode_permission("opencode-v2")):
        assert json.loads(json.dumps(document)) == document
