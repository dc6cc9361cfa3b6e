"""OpenCode's rendering of the containment policy (``hosts/policy.py``): the permission block, per dialect."""

from __future__ import annotations

from typing import Any, Literal

from pytest_atlante.hosts.policy import POLICY, Capability, ContainmentPolicy

OpenCodeDialect = Literal["opencode-v1", "opencode-v2"]

# Field names that differ between the dialects (eval reference, "Host versions").
_OPENCODE_FIELDS: dict[OpenCodeDialect, dict[str, str]] = {
    "opencode-v1": {"permission": "permission", "shell": "bash", "subagent": "task", "agent": "agent"},
    "opencode-v2": {"permission": "permissions", "shell": "shell", "subagent": "subagent", "agent": "agents"},
}


def opencode_field(dialect: OpenCodeDialect, neutral: str) -> str:
    """The dialect's name for a config field: ``permission``/``shell``/``subagent``/``agent``."""
    return _OPENCODE_FIELDS[dialect][neutral]


def _opencode_capability_keys(dialect: OpenCodeDialect) -> dict[Capability, tuple[str, ...]]:
    return {
        "read": ("read", "list"),
        "write": ("edit",),  # OpenCode's `edit` permission covers write, edit and patch
        "edit": ("edit",),
        "search": ("glob", "grep"),
        "bash": (opencode_field(dialect, "shell"),),
        "skill": ("skill",),
        "subagent": (opencode_field(dialect, "subagent"),),
        "todo": ("todowrite",),
    }


def opencode_permission(dialect: OpenCodeDialect, policy: ContainmentPolicy = POLICY) -> dict[str, Any]:
    """The permission block, in the dialect's field names.

    Bash rules are globs over the whole command and the LAST matching rule wins (host-facts §8), so the
    catch-all ``"*": "allow"`` comes first and each denied prefix follows as ``"X"`` and ``"X *"``.
    ``external_directory`` is denied (its default ``ask`` would end the run); ``question`` has
    nobody to answer it; ``doom_loop`` (default ``ask``) is allowed so a repeated call does not
    end the run silently — the trial's timeout and token budget bound it instead.
    """
    shell = opencode_field(dialect, "shell")
    block: dict[str, Any] = {}
    for capability in policy.allowed:
        for key in _opencode_capability_keys(dialect)[capability]:
            block[key] = "allow"
    if "bash" in policy.allowed:
        rules: dict[str, str] = {"*": "allow"}
        for command in policy.denied_commands:
            # "*/X": the command spelled by its path (/bin/rm -r d), wherever the executable lives
            for spelling in (command, f"*/{command}"):
                rules[spelling] = "deny"
                rules[f"{spelling} *"] = "deny"
        block[shell] = rules
    for tool in policy.denied_tools:
        block[tool.replace("_", "")] = "deny"  # webfetch, websearch
    block.update({"external_directory": "deny", "question": "deny", "doom_loop": "allow", "lsp": "allow"})
    return {opencode_field(dialect, "permission"): block}


def opencode_denials(dialect: OpenCodeDialect, config: dict[str, Any]) -> tuple[frozenset[str], frozenset[str]]:
    """(denied web tools, denied command prefixes) an OpenCode rendering expresses, host-neutral."""
    block = config[opencode_field(dialect, "permission")]
    tools = {f"web_{key[3:]}" for key in ("webfetch", "websearch") if block.get(key) == "deny"}
    shell = block.get(opencode_field(dialect, "shell"), {})
    commands = {
        pattern.removesuffix(" *").removeprefix("*/")
        for pattern, action in shell.items()
        if action == "deny" and pattern.endswith(" *")
    }
    return frozenset(tools), frozenset(commands)
