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

The agent must not choose what is redacted (docs/integrity.md, "Credentials"): every known value is
fixed before the session starts, when nothing the agent wrote exists yet.  After the session only
:func:`refreshed_credentials` may add values, and only what a host's token refresh writes: a
credential field of the login file's own format (``Host.refreshed_fields``) that the copy already
held, now holding a different token-shaped value — never a string under any other key.  And
redaction never hides that something changed: names (changed paths, escapes) go through
:meth:`Secrets.numbered`, so a redacted name still appears, as ``<redacted-N>`` (one number per
secret of the trial), and still fails the check it failed.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pytest_atlante.sandbox.trialdir import SANDBOX_DIR_PREFIX

__all__ = ["MIN_SECRET_CHARS", "REDACTED", "FieldPath", "Secrets", "login_document", "redact", "refreshed_credentials",
           "secrets_in_env", "secrets_in_file"]

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
# What a refreshed OAuth token looks like (Anthropic's ``sk-ant-oat01-…``, a JWT, GitHub's
# ``gho_…``): one run of URL-safe characters.  No ``/`` and no whitespace, so a path or a sentence
# the agent writes into a credential field is never adopted as a secret.
_TOKEN_SHAPE = re.compile(r"[A-Za-z0-9._~+=-]{20,}")
# A JSON path into a login file; ``*`` matches any key (a provider's name in OpenCode's auth.json).
FieldPath = tuple[str, ...]


class Secrets:
    """The credential values one trial knows about; grows as the trial learns more (a copied login,
    the session's environment, a token the host refreshed).  Calling it redacts a text."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._values: set[str] = set()
        self._value_of: dict[str, str] = {}  # every form a value may appear in -> the value
        self._forms: tuple[str, ...] = ()
        self._numbers: dict[str, int] = {}  # secret -> its N in ``<redacted-N>``
        self.add(values)

    def add(self, values: Iterable[str]) -> Secrets:
        self._values.update(v for v in values if len(v) >= MIN_SECRET_CHARS and v != REDACTED)
        self._value_of = {form: v for v in self._values
                          for form in (v, json.dumps(v)[1:-1], json.dumps(v, ensure_ascii=False)[1:-1])}
        self._forms = tuple(sorted(self._value_of, key=lambda v: (-len(v), v)))
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

    def numbered(self, name: str) -> str:
        """``name`` (a changed path, an escape) with each secret in it replaced by ``<redacted-N>``.

        N numbers the trial's secrets in the order its names meet them, so two names holding
        different secrets stay two names, and a redacted name still shows that something is there."""
        for form in self._forms:
            if form in name:
                name = name.replace(form, self._placeholder(self._value_of[form]))
        return _KEY_SHAPE.sub(lambda match: self._placeholder(match.group(0)), name)

    def _placeholder(self, secret: str) -> str:
        number = self._numbers.setdefault(secret, len(self._numbers) + 1)
        return f"<redacted-{number}>"


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
    """Secret-looking string values of a JSON credentials file (nothing when absent or not JSON).

    Only for a file read before the session (the user's login, the trial's copy as copied): every
    string under a secret-named key counts, since nothing the agent wrote is in it yet."""
    return list(_secret_leaves(login_document(path), secret=False))


def login_document(path: Path) -> object:
    """A JSON login file as parsed, or ``None`` (absent, a special file, too big, not JSON).  Opened
    without following a symlink, so a link the agent planted to a file of its choosing reads as
    nothing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            data = handle.read(_MAX_FILE_BYTES + 1)
        if len(data) > _MAX_FILE_BYTES:
            return None
        return json.loads(data.decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None


def refreshed_credentials(before: object, path: Path, fields: Sequence[FieldPath]) -> list[str]:
    """The tokens the host's refresh wrote into the login at ``path`` since it was ``before``.

    A value counts only where a token refresh could have put it: at one of the host's credential
    ``fields`` (its login format's, ``Host.refreshed_fields``), which already held a string in the
    copy, now holding a different token-shaped one (:data:`_TOKEN_SHAPE`).  A string the agent
    writes under any other key, into a login that was never copied (scripted runs), or shaped like
    a path or a sentence, is not a secret and redacts nothing."""
    after = login_document(path)
    old = dict(_field_values(before, fields))
    return [value for where, value in _field_values(after, fields)
            if isinstance(old.get(where), str) and value != old[where] and _TOKEN_SHAPE.fullmatch(value)]


def _field_values(document: object, fields: Sequence[FieldPath]) -> Iterable[tuple[FieldPath, str]]:
    """``(concrete path, string)`` for every string of ``document`` at one of ``fields``."""
    for field in fields:
        found: list[tuple[FieldPath, object]] = [((), document)]
        for key in field:
            found = [((*where, name), item) for where, value in found if isinstance(value, dict)
                     for name, item in value.items() if key in ("*", name)]
        yield from ((where, value) for where, value in found if isinstance(value, str))


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
