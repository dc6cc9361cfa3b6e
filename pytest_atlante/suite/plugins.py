"""Plugin namespaces: which plugin a harness part belongs to, and the names it loads under.

A Claude Code plugin (a folder with ``.claude-plugin/plugin.json``) loads its skills, agents and
commands as ``plugin:name``; its skills refer to each other that way.  ``atlante build`` keeps
that on a host that namespaces plugins (an adapter that is a ``hosts.base.PluginLoader``: the
plugin is written to its own folder and loaded as a plugin) and warns on every other host, where
the part loads under its plain name.  A check may name such a part either way
(``skill-used`` of ``plugin:name`` or ``name``): ``checks.trajectory.same_part`` is the one
comparison.

Which manifests make a namespace is the hosts' own knowledge: a manifest of a root layout
(``native_layouts`` with ``base == ""``) of a host that loads plugins.  Nothing here names a host.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from pytest_atlante.fsutil import MAX_DOCUMENT_BYTES, UnreadableFile, read_capped
from pytest_atlante.hosts.base import PluginLoader
from pytest_atlante.hosts.names import HOST_NAMES, HostName
from pytest_atlante.hosts.registry import host_for

#: Claude Code's plugin names: kebab-case, no spaces (a ``:`` would break the namespace).
_PLUGIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
#: Manifest fields a built plugin keeps; the rest (hooks, mcpServers, paths) eval does not run.
KEPT_MANIFEST_FIELDS = ("name", "description", "version")


@dataclass(frozen=True)
class Plugin:
    """The plugin a part's source lies in."""

    name: str
    host: HostName        # the host whose plugin format it is
    root: Path            # the folder holding the manifest
    manifest: str         # the manifest's path under ``root``
    display: str          # the manifest as warnings name it (relative to the harness's root)

    def namespaced(self, name: str) -> str:
        return f"{self.name}:{name}"


def _manifests() -> list[tuple[HostName, str]]:
    found = []
    for host in HOST_NAMES:
        adapter = host_for(host)
        if isinstance(adapter, PluginLoader):
            found += [(host, layout.manifest) for layout in getattr(adapter, "native_layouts", ())
                      if layout.manifest is not None and not layout.base]
    return found


def read_manifest(path: Path) -> dict[str, object] | None:
    try:
        value = json.loads(read_capped(path, MAX_DOCUMENT_BYTES))
    except (UnreadableFile, ValueError):
        return None
    return value if isinstance(value, dict) else None


def plugin_of(path: Path, base: Path) -> Plugin | None:
    """The plugin whose folder holds ``path`` (at or below ``base``), if its manifest names one."""
    manifests = _manifests()
    for parent in path.parents:
        for host, manifest in manifests:
            if (parent / manifest).is_file():
                name = (read_manifest(parent / manifest) or {}).get("name")
                if isinstance(name, str) and _PLUGIN_NAME.match(name):
                    where = parent.relative_to(base).as_posix() if parent.is_relative_to(base) else str(parent)
                    return Plugin(name, host, parent, manifest, manifest if where == "." else f"{where}/{manifest}")
        if parent == base or parent == parent.parent:
            break
    return None


def built_manifest(plugin: Plugin) -> tuple[bytes, list[str]]:
    """The manifest a built plugin gets (its name, description and version, byte-stable) and the
    fields it leaves out, named."""
    source = read_manifest(plugin.root / plugin.manifest) or {}
    kept = {key: source[key] for key in KEPT_MANIFEST_FIELDS if isinstance(source.get(key), str)}
    dropped = sorted(key for key in source if key not in kept)
    return (json.dumps(kept, indent=2, sort_keys=True) + "\n").encode(), dropped

