"""Host adapters: everything host-specific about running one trial session through a real CLI.

``host_for(name)`` returns the adapter the trial engine drives; see ``docs/hosts.md``.
"""

from __future__ import annotations

from pytest_atlante.hosts.base import (
    Host,
    HostInfo,
    HostName,
    ScriptedEndpoint,
    SessionOutcome,
    StreamMonitor,
)

__all__ = [
    "Host",
    "HostInfo",
    "HostName",
    "ScriptedEndpoint",
    "SessionOutcome",
    "StreamMonitor",
    "credential_env_names",
    "host_for",
]


def host_for(name: HostName) -> Host:
    """The adapter for ``name`` (adapters are stateless; a new one per call is fine)."""
    if name == "claude-code":
        from pytest_atlante.hosts.claude_code import ClaudeCodeHost

        return ClaudeCodeHost()
    if name == "opencode":
        from pytest_atlante.hosts.opencode import OpenCodeHost

        return OpenCodeHost()
    raise ValueError(f"unknown host {name!r}")


def credential_env_names(name: HostName) -> tuple[str, ...]:
    """Variables that carry the host's credentials into the session (never into checks).

    OpenCode has none: eval uses its stored authentication only (eval reference, "Requirements").
    """
    if name == "claude-code":
        from pytest_atlante.hosts.claude_code import CREDENTIAL_ENV

        return CREDENTIAL_ENV
    if name == "opencode":
        return ()
    raise ValueError(f"unknown host {name!r}")
