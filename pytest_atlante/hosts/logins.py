"""A stored login as a trial's HOME gets it: verbatim, or holding per-trial stand-ins.

A real-provider trial copies the user's login (Claude Code's ``.credentials.json``, Codex's and
OpenCode's ``auth.json``) into its private HOME, where the agent — untrusted code with a shell —
can read it.  Where the session's model traffic goes through the metering proxy, the copy holds a
stand-in in place of each credential (``TrialWiring.stand_in``: the proxy's ``stand_in_for``), which
the proxy swaps for the real value on the model routes it forwards (docs/integrity.md,
"Credentials"); and only the entries the session needs are copied (the login the CLI uses, not the
user's other providers or MCP servers' tokens).  A credential the CLI sends elsewhere than its
model endpoint (an OAuth refresh goes to the provider's login service, not through the proxy) stops
working in the copy: a login must be fresh enough for the session (see docs/integrity.md).
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path

from pytest_atlante.fsutil import UnreadableFile, read_capped
from pytest_atlante.hosts.base import CREDENTIALS_LIMIT, copy_private_file

__all__ = ["FieldPath", "copy_login", "exposed_fields", "with_stand_ins"]

#: A JSON path into a login document; ``"*"`` matches any key at its level.
FieldPath = tuple[str, ...]
StandIn = Callable[[str], str]


def with_stand_ins(document: Mapping[str, object], keep: Collection[str], fields: Sequence[FieldPath],
                   stand_in: StandIn) -> dict[str, object] | None:
    """``document`` with only its top-level entries ``keep``, and each non-empty string at
    ``fields`` replaced by ``stand_in(value)``; None when no credential was found there (the login
    is not of the kind the proxy can stand in for, and is not copied)."""
    kept: dict[str, object] = {name: copy.deepcopy(value) for name, value in document.items() if name in keep}
    replaced = 0
    for path in fields:
        for parent, key in _leaves(kept, path):
            value = parent[key]
            if isinstance(value, str) and value:
                parent[key] = stand_in(value)
                replaced += 1
    return kept if replaced else None


def exposed_fields(document: object, fields: Sequence[FieldPath], is_stand_in: Callable[[str], bool]) -> bool:
    """Whether a login as copied holds a real credential: a non-empty string at one of ``fields``
    that is no stand-in."""
    if not isinstance(document, dict):
        return False
    return any(isinstance(parent[key], str) and parent[key] and not is_stand_in(str(parent[key]))
               for path in fields for parent, key in _leaves(document, path))


def copy_login(source: Path, target: Path, stand_in: StandIn | None, *, keep: Collection[str],
               fields: Sequence[FieldPath]) -> bool:
    """Copy the login at ``source`` to ``target`` (readable by its owner only): verbatim without
    ``stand_in``; with it, as :func:`with_stand_ins` makes it — nothing when the login cannot be
    read as a JSON object or holds no credential there.  True when a file was written."""
    if stand_in is None:
        return copy_private_file(source, target)
    try:
        document = json.loads(read_capped(source, CREDENTIALS_LIMIT))
    except (UnreadableFile, ValueError):  # missing, not a regular file, not JSON: nothing a stand-in can be made of
        return False
    login = with_stand_ins(document, keep, fields, stand_in) if isinstance(document, dict) else None
    if login is None:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(login, handle, indent=2)
    return True


def _leaves(node: dict[str, object], path: FieldPath) -> Iterable[tuple[dict[str, object], str]]:
    """(parent object, key) of each place ``path`` names in ``node`` that exists."""
    head, rest = path[0], path[1:]
    keys = list(node) if head == "*" else [head] if head in node else []
    for key in keys:
        if not rest:
            yield node, key
        elif isinstance(child := node[key], dict):
            yield from _leaves(child, rest)
