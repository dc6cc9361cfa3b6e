"""Host adapters: everything host-specific about running one trial session through a real CLI.

``host_for(name)`` returns the adapter the trial pipeline drives (``names.HOSTS`` maps names to
adapter modules, ``registry.py`` imports them); see ``docs/hosts.md``.  Importing this package imports only the registry (the
plugin reads the host names on every pytest run); the shared types load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_atlante.hosts.names import HOST_NAMES, HostName
from pytest_atlante.hosts.registry import host_for

if TYPE_CHECKING:
    from pytest_atlante.hosts.base import (
        AgentSpec,
        Host,
        HostInfo,
        ScriptedEndpoint,
        SessionOutcome,
        StreamMonitor,
        TrialWiring,
    )

__all__ = [
    "HOST_NAMES",
    "AgentSpec",
    "Host",
    "HostInfo",
    "HostName",
    "ScriptedEndpoint",
    "SessionOutcome",
    "StreamMonitor",
    "TrialWiring",
    "credential_env_names",
    "host_for",
]

_FROM_BASE = {"AgentSpec", "Host", "HostInfo", "ScriptedEndpoint", "SessionOutcome", "StreamMonitor", "TrialWiring"}


def __getattr__(name: str) -> Any:
    if name in _FROM_BASE:
        from pytest_atlante.hosts import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def credential_env_names(name: HostName) -> tuple[str, ...]:
    """Variables that carry the host's credentials into the session (never into checks)."""
    return host_for(name).credential_env
