"""The hosts' names and the one table of hosts: a leaf every layer may read.

Adding a host is one adapter module under ``hosts/`` (implementing ``hosts.base.Host``) plus its
line in ``HOSTS`` below and its name in ``HostName`` (the configuration's JSON schema validates
against it; a check at import keeps the two equal).  Everything that lists hosts derives from
here: ``--atlante-host`` and ``atlante eval --host`` choices, the configuration's version rules,
the report's host field, the provenance view.  Nothing is imported: the plugin reads these names
on every pytest run, and adapters load only when a run asks for one (``registry.host_for``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

HostName = Literal["claude-code", "opencode", "codex", "gemini-cli"]
HOST_NAMES: tuple[HostName, ...] = get_args(HostName)
# The wire dialects the adapters report (``HostInfo.dialect``): what a report's ``host.dialect`` admits.
HostDialect = Literal["claude-code", "opencode-v1", "opencode-v2", "codex-responses", "gemini-cli"]
# The host-neutral tool names: a harness agent's ``tools`` (each renderer maps them to its host's
# vocabulary) and the ``tool`` of a transcript's tool calls (each stream reader maps its host's names
# back), so a ``tool-used`` check means the same on every host.
NeutralTool = Literal["read", "write", "edit", "bash", "glob", "grep", "skill", "task"]


@dataclass(frozen=True)
class HostEntry:
    adapter: str   # "module:Class" of its adapter, imported on first use
    since: str     # the first configuration version that admits the host
    dialects: tuple[HostDialect, ...]   # the dialects its adapter reports, by version


HOSTS: dict[HostName, HostEntry] = {
    "claude-code": HostEntry("pytest_atlante.hosts.claude_code.adapter:ClaudeCodeHost", since="0.2",
                             dialects=("claude-code",)),
    "opencode": HostEntry("pytest_atlante.hosts.opencode.adapter:OpenCodeHost", since="0.1",
                          dialects=("opencode-v1", "opencode-v2")),
    "codex": HostEntry("pytest_atlante.hosts.codex.adapter:CodexHost", since="0.3", dialects=("codex-responses",)),
    "gemini-cli": HostEntry("pytest_atlante.hosts.gemini_cli.adapter:GeminiCliHost", since="0.3",
                            dialects=("gemini-cli",)),
}
if tuple(HOSTS) != HOST_NAMES:  # pragma: no cover - a host added to one and not the other
    raise ImportError(f"hosts.names: HOSTS {tuple(HOSTS)} and HostName {HOST_NAMES} disagree")
if {d for entry in HOSTS.values() for d in entry.dialects} != set(get_args(HostDialect)):  # pragma: no cover
    raise ImportError("hosts.names: the HOSTS dialects and HostDialect disagree")


def min_config_version(name: str) -> str:
    """The first ``atlante.jsonc`` version that admits ``name`` (v0.1 knew only OpenCode)."""
    entry = HOSTS.get(name)  # type: ignore[call-overload]
    return "0.1" if entry is None else entry.since
