"""The containment policy: one host-neutral statement, one rendering per host (``hosts/<host>/policy.py``).

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
from typing import Literal

Capability = Literal["read", "write", "edit", "search", "bash", "skill", "subagent", "todo"]
WebTool = Literal["web_fetch", "web_search"]


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
