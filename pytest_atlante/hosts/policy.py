"""The containment policy: one host-neutral statement, one rendering per host dialect.

Containment is tool-level policy, not OS-level isolation (eval reference, "Sandbox containment"):
the host's own permission rules deny the web tools and a fixed list of destructive shell commands
and allow everything an agent needs to do its work. The policy is identical for every compared
variant, so it is stated once here and each host only translates names.

Rules shared by every rendering:
- nothing is ever ``ask``: a headless run cannot answer, and OpenCode auto-rejects an ``ask`` and
  then silently ends the session with rc 0 (host-facts §8);
- a denied command is denied both bare and with arguments (``sudo`` and ``sudo …``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Capability = Literal["read", "write", "edit", "search", "bash", "skill", "subagent", "todo"]
WebTool = Literal["web_fetch", "web_search"]
OpenCodeDialect = Literal["opencode-v1", "opencode-v2"]


@dataclass(frozen=True)
class ContainmentPolicy:
    allowed: tuple[Capability, ...]
    denied_tools: tuple[WebTool, ...]
    # Command prefixes, matched on word boundaries: "rm -rf" denies "rm -rf build" but not "rmdir".
    denied_commands: tuple[str, ...]


#: The one policy every trial runs under. Destructive commands: deleting trees, privilege
#: escalation, publishing to a remote, formatting or overwriting devices, stopping the machine and
#: recursive permission/ownership changes.
POLICY = ContainmentPolicy(
    allowed=("read", "write", "edit", "search", "bash", "skill", "subagent", "todo"),
    denied_tools=("web_fetch", "web_search"),
    denied_commands=(
        "rm -rf",
        "rm -fr",
        "rm -r",
        "sudo",
        "git push",
        "mkfs",
        "dd",
        "shutdown",
        "reboot",
        "halt",
        "poweroff",
        "chmod -R",
        "chown -R",
    ),
)

#: Where a denied command's executable lives when it is spelled by its path (``/bin/rm -r d``):
#: a prefix rule over the command's words misses that spelling, so Claude Code and OpenCode are
#: given one for each of these directories too (docs/hosts.md "Containment per host").
COMMAND_DIRS = ("/bin", "/usr/bin", "/sbin", "/usr/sbin", "/usr/local/bin")

# --------------------------------------------------------------------------- Claude Code

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


# --------------------------------------------------------------------------- OpenCode

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


# --------------------------------------------------------------------------- reading renderings back


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
