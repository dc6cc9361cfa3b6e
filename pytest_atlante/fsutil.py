"""Small filesystem helpers shared by the report writer, the build and the Atlas commands."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so readers see the old file or the new one, never a torn one.

    The temp file lives in the target's directory (``os.replace`` is atomic only within one
    filesystem) and is fsynced before the rename so a crash cannot leave an empty file behind.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 16), b""):
            digest.update(chunk)
    return digest.hexdigest()


# --- bounded, non-blocking reads of untrusted files ---------------------------------------------

# User documents (atlante.jsonc, scenarios, scripts, harness sources) are hand-written JSONC; past
# this a file is a mistake, not a document.
MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
# Atlas corpora, results and receipts hold up to hundreds of thousands of cases (a 100,000-case
# corpus is tens of MiB); past this a file is a mistake, and reading it would only exhaust memory.
MAX_INPUT_BYTES = 256 * 1024 * 1024

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISLNK, "a symbolic link"),  # only seen when links are not followed
)


class UnreadableFile(Exception):
    """A file that must not be read: missing, not a regular file, too large, or an OS error.

    ``reason`` names what the file is ("a FIFO (named pipe)", "larger than 4194304 bytes", ...) so
    each caller can build its own diagnostic with its own code.
    """

    def __init__(self, reason: str, *, missing: bool = False, too_large: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.missing = missing
        self.too_large = too_large


def file_kind(mode: int) -> str | None:
    """What a non-regular file is, in words; ``None`` for a regular file."""
    for test, words in _KINDS:
        if test(mode):
            return words
    return None if stat.S_ISREG(mode) else "not a regular file"


def _open_regular(path: Path, follow_symlinks: bool) -> int:
    """A descriptor on the regular file ``path``; FIFOs, devices and directories are refused."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise UnreadableFile("does not exist", missing=True) from None
    except OSError as exc:
        # Some kinds refuse the open itself (a socket: ENXIO); name the kind when stat can tell it.
        try:
            kind = file_kind(os.stat(path, follow_symlinks=follow_symlinks).st_mode)
        except OSError:
            kind = None
        if kind is not None:
            raise UnreadableFile(f"is {kind}, not a regular file") from None
        raise UnreadableFile(f"cannot be opened ({exc.strerror or exc})") from None
    try:
        kind = file_kind(os.fstat(fd).st_mode)
    except OSError as exc:
        os.close(fd)
        raise UnreadableFile(f"cannot be read ({exc.strerror or exc})") from None
    if kind is not None:
        os.close(fd)
        raise UnreadableFile(f"is {kind}, not a regular file")
    return fd


def open_regular(path: Path, limit: int) -> BinaryIO:
    """The regular file ``path`` (at most ``limit`` bytes) opened for streaming reads."""
    fd = _open_regular(path, follow_symlinks=True)
    size = os.fstat(fd).st_size
    if size > limit:
        os.close(fd)
        raise UnreadableFile(f"is larger than {limit} bytes ({size} bytes)", too_large=True)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_capped(path: Path, limit: int, *, follow_symlinks: bool = True) -> bytes:
    """The bytes of the regular file ``path`` (at most ``limit``), or :class:`UnreadableFile`.

    ``O_NONBLOCK`` keeps a FIFO from hanging the open, and the type and size checks run on the
    opened descriptor (a symlink to a device is judged by what it points at).  The size is checked
    before anything is read and a file that grows meanwhile is refused, so memory stays within
    ``limit`` whatever sits at the path.
    """
    fd = _open_regular(path, follow_symlinks)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise UnreadableFile(f"is larger than {limit} bytes ({size} bytes)", too_large=True)
        # One read of the announced size makes one buffer; chunks joined afterwards would hold the
        # input twice.  Only a short read (rare for a regular file) falls back to chunks.
        data = os.read(fd, size) if size else b""
        if len(data) < size:
            chunks = [data]
            total = len(data)
            while total <= size and (got := os.read(fd, 1 << 20)):
                chunks.append(got)
                total += len(got)
            data = b"".join(chunks)
        if len(data) > size or os.read(fd, 1):
            raise UnreadableFile("grew while being read", too_large=True)
    except OSError as exc:
        raise UnreadableFile(f"cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    return data


DIGEST_PREFIX = "sha256:"


def fingerprint(value: Any) -> str:
    """``sha256:<hex>`` of ``value``'s canonical JSON (sorted keys, no whitespace)."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return DIGEST_PREFIX + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def no_duplicate_keys(pairs: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``'s ``object_pairs_hook`` refusing a key given twice (``ValueError``).

    Two values for one key would let one document say two things (a report one pass rate to one
    reader and another to the next), depending on which duplicate each parser keeps."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {json.dumps(key)}")
        out[key] = value
    return out
