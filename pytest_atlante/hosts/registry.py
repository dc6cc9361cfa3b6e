"""The host registry: the names of the hosts, and which adapter module serves each.

Adding a host is one adapter module (implementing ``hosts.base.Host``) plus one entry in
``_ADAPTERS`` (and its name in ``HostName``, which the configuration's JSON schema validates).
Cheap to import — the plugin reads ``HOST_NAMES`` for ``--atlante-host`` — so adapters are imported
only when a run asks for one.  Tests may add a host of their own with :func:`register`.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Callable, Literal, get_args

if TYPE_CHECKING:
    from pytest_atlante.hosts.base import Host

HostName = Literal["claude-code", "opencode"]
HOST_NAMES: tuple[HostName, ...] = get_args(HostName)

# name → "module:Class" of its adapter, and the first configuration version that admits it.
_ADAPTERS: dict[str, str] = {
    "claude-code": "pytest_atlante.hosts.claude_code:ClaudeCodeHost",
    "opencode": "pytest_atlante.hosts.opencode:OpenCodeHost",
}
_MIN_CONFIG_VERSION: dict[str, str] = {"claude-code": "0.2", "opencode": "0.1"}
_EXTRA: dict[str, Callable[[], Host]] = {}


def host_for(name: str) -> Host:
    """The adapter for ``name`` (adapters are stateless; a new one per call is fine)."""
    if name in _EXTRA:
        return _EXTRA[name]()
    try:
        module, _, cls = _ADAPTERS[name].partition(":")
    except KeyError:
        raise ValueError(f"unknown host {name!r}") from None
    factory: Callable[[], Host] = getattr(import_module(module), cls)
    return factory()


def min_config_version(name: str) -> str:
    """The first ``atlante.jsonc`` version that admits ``name`` (v0.1 knew only OpenCode)."""
    return _MIN_CONFIG_VERSION.get(name, "0.1")


def register(name: str, factory: Callable[[], Host]) -> Callable[[], None]:
    """Add a host outside the configuration's names (test hosts); returns its removal."""
    _EXTRA[name] = factory

    def unregister() -> None:
        _EXTRA.pop(name, None)

    return unregister
