"""Claude Code's rendering of the containment policy (``hosts/policy.py``): ``.claude/settings.json`` permissions."""

from __future__ import annotations

from typing import Any

from pytest_atlante.hosts.policy import COMMAND_DIRS, POLICY, Capability, ContainmentPolicy, WebTool

_CLAUDE_TOOLS: dict[Capability, tuple[str, ...]] = {
    "read": ("Read",),
    "write": ("Write",),
    "edit": ("Edit", "MultiEdit", "NotebookEdit"),
    "search": ("Glob", "Grep"),
    "bash": ("Bash",),
    "skill": ("Skill",),
    # The subagent tool is `Agent` in requests and `Task` in the init event (host-facts §3).
    "subagent": ("Agent", "Task"),
    "todo": ("TodoWrite",),
}
_CLAUDE_WEB: dict[WebTool, str] = {"web_fetch": "WebFetch", "web_search": "WebSearch"}


def claude_settings(policy: ContainmentPolicy = POLICY) -> dict[str, Any]:
    """``.claude/settings.json``: only ``permissions.allow`` and ``permissions.deny``.

    Deny rules win over allow rules in Claude Code, so a broad ``Bash`` allow (needed for shell
    writes inside the project, host-facts §4) still leaves ``Bash(rm -rf:*)`` denied.
    """
    allow = [tool for capability in policy.allowed for tool in _CLAUDE_TOOLS[capability]]
    deny = [_CLAUDE_WEB[tool] for tool in policy.denied_tools]
    deny += [f"Bash({command}:*)" for command in policy.denied_commands]
    deny += [f"Bash({directory}/{command}:*)" for command in policy.denied_commands for directory in COMMAND_DIRS]
    return {"permissions": {"allow": allow, "deny": deny}}


def claude_denials(settings: dict[str, Any]) -> tuple[frozenset[str], frozenset[str]]:
    """(denied web tools, denied command prefixes) a Claude rendering expresses, host-neutral."""
    web_by_name = {name: neutral for neutral, name in _CLAUDE_WEB.items()}
    tools: set[str] = set()
    commands: set[str] = set()
    for rule in settings["permissions"]["deny"]:
        if rule in web_by_name:
            tools.add(web_by_name[rule])
        elif rule.startswith("Bash(") and rule.endswith(":*)"):
            command = rule[len("Bash(") : -len(":*)")]
            # an absolute-path spelling (/bin/rm -r) denies the same command as its bare form
            commands.add(command.rsplit("/", 1)[-1] if command.startswith("/") else command)
    return frozenset(tools), frozenset(commands)
