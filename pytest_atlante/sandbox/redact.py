"""Known credential values, and the one function that removes them from any text we keep.

A trial's agent has a shell: it can copy its environment, its private HOME's login or the parent's
``/proc/<pid>/environ`` into a file, and the diff, a check's output or a transcript would carry it
into the report.  So every text that leaves a trial (report fields, JUnit and terminal text, which
are rendered from the record, and any transcript) goes through :func:`redact` with the trial's
:class:`Secrets`, built from:

- the values of secret-looking variables (``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ...) of the
  runner's own environment and of the environment the host session was given;
- the secret-looking string values of the host's stored-credential files (the user's own and the
  trial's copy: Claude Code's ``.credentials.json``, OpenCode's ``auth.json``).

Values shorter than :data:`MIN_SECRET_CHARS` are not treated as secrets (``1`` or ``true`` would
blank out unrelated text).  Redaction replaces whole values only: a secret that an agent encodes
(base64, reversed) is not recognised.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pytest_atlante.sandbox.trialdir import SANDBOX_DIR_PREFIX

__all__ = ["MIN_SECRET_CHARS", "REDACTED", "Secrets", "redact", "secrets_in_env", "secrets_in_file"]

REDACTED = "<redacted>"
MIN_SECRET_CHARS = 8
# Variable names and JSON keys whose values are credentials.
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|ACCESS|REFRESH", re.IGNORECASE)
# Credential files are small JSON documents; anything bigger is not one and is not read whole.
_MAX_FILE_BYTES = 1 << 20


class Secrets:
    """The credential values one trial knows about; grows as the trial learns more (a copied login,
    the session's environment, a token the host refreshed).  Calling it redacts a text."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._values: set[str] = set()
        self.add(values)

    def add(self, values: Iterable[str]) -> Secrets:
        self._values.update(v for v in values if len(v) >= MIN_SECRET_CHARS and v != REDACTED)
        return self

    @property
    def values(self) -> tuple[str, ...]:
        """Longest first, so no secret is half-replaced by a shorter one inside it."""
        return tuple(sorted(self._values, key=lambda v: (-len(v), v)))

    def __call__(self, text: str) -> str:
        return redact(text, self)


def redact(text: str, secrets: Secrets) -> str:
    """``text`` with every known credential value replaced by ``<redacted>``."""
    for value in secrets.values:
        if value in text:
            text = text.replace(value, REDACTED)
    return text


def secrets_in_env(env: Mapping[str, str]) -> list[str]:
    """Values of the variables in ``env`` whose names say they hold a credential."""
    return [value for name, value in env.items() if _SECRET_NAME.search(name)]


def secrets_in_file(path: Path) -> list[str]:
    """Secret-looking string values of a JSON credentials file (nothing when absent or not JSON)."""
    try:
        if not path.is_file() or path.stat().st_size > _MAX_FILE_BYTES:
            return []
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return []
    return list(_secret_leaves(document, secret=False))


def _secret_leaves(value: object, *, secret: bool) -> Iterable[str]:
    """String leaves under a secret-looking key (at any depth above them)."""
    if isinstance(value, str):
        if secret:
            yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _secret_leaves(item, secret=secret or bool(_SECRET_NAME.search(str(key))))
    elif isinstance(value, list):
        for item in value:
            yield from _secret_leaves(item, secret=secret)


# An absolute path (no whitespace, quotes or brackets) through a run directory: a component that is
# exactly ``atlante-eval-<id>``.  A relative path (``d/atlante-eval-notes.txt``, a file the agent
# named so) or a longer name (``/tmp/atlante-eval-notes.txt``) is not a temp path and stays.
_DELIMS = r"""\s'"`<>()\[\]{},;"""



_SANDBOX_TOKEN = re.compile(
    rf"""(?<![^{_DELIMS}=])(?:[A-Za-z]:)?[/\\][^{_DELIMS}=]*?[/\\]"""
    + re.escape(SANDBOX_DIR_PREFIX)
    + rf"""[A-Za-z0-9_-]+(?![^{_DELIMS}/\\])[^{_DELIMS}]*"""
)



_INSIDE_SANDBOX = re.compile(r"[/\\]sandbox(?:[/\\](?P<rest>.*))?$")



def scrub_paths(text: str, roots: Sequence[str]) -> str:
    """Replace every occurrence of a sandbox root in ``text`` with ``.``.

    Longer roots go first so a trial's ``…/sandbox`` is not half-replaced by its parent dir.
    A root followed by a separator becomes ``./``, so ``/tmp/atlante-eval-x/a-1/sandbox/src/a.ts``
    reads ``./src/a.ts`` in the report.
    """
    for root in sorted({r.rstrip("/\\") for r in roots if r.rstrip("/\\")}, key=len, reverse=True):
        # Only whole path components: the root ``…/sandbox`` must not eat ``…/sandbox2``.
        text = re.sub(re.escape(root) + r"(?![\w.-])", ".", text)
    return text



def _redact_token(match: re.Match[str]) -> str:
    token = match.group(0)
    inside = _INSIDE_SANDBOX.search(token[token.find(SANDBOX_DIR_PREFIX) :])
    if inside is None:
        return "<atlante-temp>"
    rest = inside.group("rest")
    return f"./{rest}" if rest else "."



def redact_sandbox_paths(text: str) -> str:
    """Backstop for :func:`scrub_paths`: rewrite any remaining ``…/atlante-eval-*`` path.

    A path into a trial's ``sandbox/`` keeps its sandbox-relative tail; any other path under the
    run directory (the private HOME, a kept trial dir) becomes ``<atlante-temp>``.
    """
    if SANDBOX_DIR_PREFIX not in text:
        return text
    return _SANDBOX_TOKEN.sub(_redact_token, text)
