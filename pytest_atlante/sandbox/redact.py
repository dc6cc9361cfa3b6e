"""The one definition of a secret, and the one function that removes secrets from any text we keep.

A trial's agent has a shell: it can copy its environment, its private HOME's login or the parent's
``/proc/<pid>/environ`` into a file, and the diff, a check's output or a transcript would carry it
into the report.  So every text that leaves a trial (report fields: diff, changed paths, check
messages and output, error text; the transcript and the raw host stream; JUnit, terminal and HTML
text, which are rendered from the record) goes through :func:`redact` with the trial's
:class:`Secrets`.  A secret is, and is nowhere else defined as:

- a *known value*: the value of a secret-named variable (:data:`_SECRET_NAME`: ``*KEY*``,
  ``*TOKEN*``, ``*SECRET*``, ``*PRIVATE*``, ...) of the runner's own environment and of the
  environment the host session was given, or a string under a secret-named key of the host's
  stored-credential files (the user's own and the trial's copy: Claude Code's
  ``.credentials.json``, OpenCode's ``auth.json``) — verbatim or in its JSON-escaped form;
- a *key shape* (:data:`_KEY_SHAPE`), recognised with no variable naming it: ``sk-…`` /
  ``sk-ant-…`` API keys and ``Bearer …`` tokens.

Values are replaced first (whole, longest first), then shapes.  Values shorter than
:data:`MIN_SECRET_CHARS` are not treated as secrets (``1`` or ``true`` would blank out unrelated
text).  Redaction replaces whole values only: a secret that an agent encodes (base64, reversed) is
not recognised.
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
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|ACCESS|REFRESH|PRIVATE",
                          re.IGNORECASE)
# Credential shapes that need no variable to be recognised: an ``sk-``/``sk-ant-`` API key and a
# bearer token (the word ``Bearer`` included).  ``sk-`` starts a key only where a word does (so
# ``risk-assessment-framework`` in a diff stays) or right after a JSON escape (``\nsk-…``).
_KEY_SHAPE = re.compile(r"(?:(?<![A-Za-z0-9_-])|(?<=\\[nrtbf]))sk-(?:ant-)?[A-Za-z0-9_-]{16,}"
                        r"|(?i:bearer)\s+[A-Za-z0-9._~+/=-]{16,}")
# Credential files are small JSON documents; anything bigger is not one and is not read whole.
_MAX_FILE_BYTES = 1 << 20


class Secrets:
    """The credential values one trial knows about; grows as the trial learns more (a copied login,
    the session's environment, a token the host refreshed).  Calling it redacts a text."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._values: set[str] = set()
        self._forms: tuple[str, ...] = ()
        self.add(values)

    def add(self, values: Iterable[str]) -> Secrets:
        self._values.update(v for v in values if len(v) >= MIN_SECRET_CHARS and v != REDACTED)
        forms = {form for v in self._values
                 for form in (v, json.dumps(v)[1:-1], json.dumps(v, ensure_ascii=False)[1:-1])}
        self._forms = tuple(sorted(forms, key=lambda v: (-len(v), v)))
        return self

    @property
    def values(self) -> tuple[str, ...]:
        """Longest first, so no secret is half-replaced by a shorter one inside it."""
        return tuple(sorted(self._values, key=lambda v: (-len(v), v)))

    @property
    def forms(self) -> tuple[str, ...]:
        """Every known value as it may appear in a text: verbatim, or JSON-escaped inside a string
        of a JSON document (a host stream), longest first."""
        return self._forms

    def __call__(self, text: str) -> str:
        return redact(text, self)


def redact(text: str, secrets: Secrets) -> str:
    """``text`` with every secret replaced by ``<redacted>``: the known values (longest first), then
    anything of a credential's shape."""
    for value in secrets.forms:
        if value in text:
            text = text.replace(value, REDACTED)
    return _KEY_SHAPE.sub(REDACTED, text)


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
