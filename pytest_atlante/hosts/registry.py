"""The host registry: the adapter for a host name (``names.HOSTS`` says which module serves it).

Adapters are imported only when a run asks for one.  Tests may add a host of their own with
:func:`register`.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING

from pytest_atlante.hosts.names import HOSTS

if TYPE_CHECKING:
    from pytest_atlante.hosts.base import Host

_EXTRA: dict[str, Callable[[], Host]] = {}


def host_for(name: str) -> Host:
    """The adapter for ``name`` (adapters are stateless; a new one per call is fine)."""
    if name in _EXTRA:
        return _EXTRA[name]()
    entry = HOSTS.get(name)  # type: ignore[call-overload]
    if entry is None:
        raise ValueError(f"unknown host {name!r}")
    module, _, cls = entry.adapter.partition(":")
    factory: Callable[[], Host] = getattr(import_module(module), cls)
    return factory()


def register(name: str, factory: Callable[[], Host]) -> Callable[[], None]:
    """Add a host outside the configuration's names (test hosts); returns its removal."""
    _EXTRA[name] = factory

    def unregister() -> None:
        _EXTRA.pop(name, None)

    return unregister
