"""The seal a run puts on the report it writes, so a report file someone else wrote is never used
where a report is picked up without being named (docs/integrity.md, "Reports a trial did not write").

``--atlante-forecast`` and ``--atlante-max-cost`` (history), ``--atlante-shard`` (durations), ``atlante
view`` without an argument (the newest run) and a ``--atlante-baseline`` inside the project's
``.atlante/eval/`` all take reports from ``.atlante/eval/``, a directory a trial can write with
isolation off.  So every report a run writes gets a seal beside it, ``report.json.seal``: an
HMAC-SHA256 of the report's bytes under a per-user key kept outside every project
(``$XDG_STATE_HOME/atlante/report-key``, by default ``~/.local/state/atlante/report-key``, mode
0600, made by the first run).  Those readers use a report only when its seal verifies over the very
bytes they parse.  Under namespace isolation HOME is a private mount of the trial, so a trial can
neither read the key nor write ``.atlante/eval/``; with isolation off a trial that reads the key can
forge a seal (the limit the integrity page states).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from pytest_atlante.fsutil import UnreadableFile, atomic_write_text, read_capped

__all__ = ["SEAL_SUFFIX", "is_sealed", "key_file", "write_seal"]

SEAL_SUFFIX = ".seal"
_KEY_BYTES = 32
_MAX_SEAL_BYTES = 4096


def key_file(env: Mapping[str, str] | None = None) -> Path:
    """Where this user's report key lives (outside every project)."""
    env = os.environ if env is None else env
    state = env.get("XDG_STATE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".local", "state")
    return Path(state) / "atlante" / "report-key"


def write_seal(report: Path, data: bytes) -> None:
    """Seal ``data``, the bytes just written to ``report``; a key that cannot be made or read
    leaves the report unsealed (it is then only used where it is named), never fails the run."""
    key = _key(create=True)
    if key is not None:
        with contextlib.suppress(OSError):
            atomic_write_text(_seal_path(report), _mac(key, data) + "\n")


def is_sealed(report: Path, data: bytes) -> bool:
    """``data`` (the bytes read from ``report``) carries a valid seal of this user's runs."""
    key = _key(create=False)
    if key is None:
        return False
    try:
        found = read_capped(_seal_path(report), _MAX_SEAL_BYTES, follow_symlinks=False).decode("ascii").strip()
    except (UnreadableFile, UnicodeDecodeError):
        return False
    return hmac.compare_digest(found, _mac(key, data))


def _seal_path(report: Path) -> Path:
    return report.with_name(report.name + SEAL_SUFFIX)


def _mac(key: bytes, data: bytes) -> str:
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def _key(*, create: bool) -> bytes | None:
    path = key_file()
    try:
        return bytes.fromhex(read_capped(path, 256, follow_symlinks=False).decode("ascii").strip())
    except UnreadableFile as exc:
        if not (create and exc.missing):
            return None
    except (UnicodeDecodeError, ValueError):
        return None
    key = secrets.token_bytes(_KEY_BYTES)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:  # another run made it meanwhile: use that one
        return _key(create=False)
    except OSError:
        return None
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(key.hex() + "\n")
    return key
