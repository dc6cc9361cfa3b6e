"""git's object format written by this process: the sandbox walk, loose blobs, trees, a bare layout.

Why by hand and not with git: a trial's baseline needs every sandbox entry hashed as a blob and the
tree id of the whole (``sandbox.snapshot``), and the diff needs two trees in a fresh repository
(``sandbox.collect_diff``).  Done with git that was ``init``, ``update-index`` and ``write-tree``
per tree: three to six processes per trial, most of a short trial's fixed cost, and under
``-n 8`` on two cores the start of every process competes with the other workers.  The formats
are small and stable (``blob <size>\\0<bytes>`` and ``tree <size>\\0`` of ``<mode> <name>\\0<20-byte
id>`` entries in git's name order, zlib-compressed under ``objects/xx/…``), so writing them here
gives byte-identical objects (a unit test compares the ids with git's own) with no process at all;
git is still what renders the diff text.

Trade-off: git's ``update-index`` also refused names it considers unsafe (a ``.git`` path
component); here such names cannot occur, because the walk reports every ``.git`` entry (any case)
as a marker and never stores or enters it.
"""

from __future__ import annotations

import hashlib
import os
import stat
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

from pytest_atlante.fsutil import sha256_file

# Entries of a tree: relative path -> (git mode, object id).
Entry = tuple[str, str]
MODE_FILE = "100644"
MODE_EXEC = "100755"
MODE_LINK = "120000"
_MODE_TREE = b"40000"
# Files up to this size are read once and kept in memory while their blob is written; larger ones
# are streamed twice (hash first, then compress only if the object is new).
_IN_MEMORY_LIMIT = 1 << 20
CHUNK = 1 << 16
# A file larger than this is stored as a one-line summary holding its size and SHA-256, so a change
# to it still shows and nothing ever loads it whole (``sandbox`` docstring).
LARGE_FILE_BYTES = 8 << 20


class ChangedWhileReading(Exception):
    """A file's size changed between ``stat`` and reading it: the walk saw a moving target."""


def init_bare(git_dir: Path) -> None:
    """Make ``git_dir`` (new, or an empty directory) a bare repository: what ``git init --bare
    --template=`` writes that git needs, ``HEAD``, ``config``, ``objects/`` and ``refs/``."""
    git_dir.mkdir(mode=0o700, exist_ok=True)
    (git_dir / "objects").mkdir()
    (git_dir / "refs").mkdir()
    (git_dir / "HEAD").write_bytes(b"ref: refs/heads/main\n")
    (git_dir / "config").write_bytes(b"[core]\n\trepositoryformatversion = 0\n\tbare = true\n")


def walk(root: Path, ignore_dir: str | None) -> Iterator[tuple[str, str, str]]:
    """Yield (relative posix path, kind, absolute path) for every non-directory entry.

    Kinds: file, symlink, special (fifo, socket, device), unreadable-dir; a `.git` entry is
    yielded with kind dir/file/symlink and never descended into.
    """
    stack: list[tuple[str, str]] = [("", str(root))]
    while stack:
        prefix, directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            yield prefix.rstrip("/"), "unreadable-dir", directory
            continue
        for entry in entries:
            rel = prefix + entry.name
            if ignore_dir is not None and rel == ignore_dir:
                continue
            if entry.is_symlink():
                yield rel, "symlink", entry.path
            elif entry.is_dir(follow_symlinks=False):
                if entry.name.lower() == ".git":
                    yield rel, "dir", entry.path
                else:
                    stack.append((rel + "/", entry.path))
            elif entry.is_file(follow_symlinks=False):
                yield rel, "file", entry.path
            else:
                yield rel, "special", entry.path


def scan(
    root: Path, ignore_dir: str | None, objects: Path | None
) -> tuple[dict[str, Entry], dict[str, str], dict[str, str]]:
    """Hash every entry under ``root`` as a git blob (stored in ``objects`` unless ``None``).

    Returns ``{path: (mode, oid)}``, the ``.git`` entries found, and ``{path: kind}`` (an entry's
    absolute path is ``os.path.join(root, path)``: not kept per entry, which cost a sandbox of
    200,000 files some 40 MB of path strings).
    """
    entries: dict[str, Entry] = {}
    markers: dict[str, str] = {}
    walked: dict[str, str] = {}
    made: set[str] = set()
    for rel, kind, path in walk(root, ignore_dir):
        if os.path.basename(rel).lower() == ".git":
            markers[rel] = kind
            continue
        entries[rel] = store_entry(objects, rel, kind, path, made)
        walked[rel] = kind
    return entries, markers, walked


def store_entry(objects: Path | None, rel: str, kind: str, path: str, made: set[str] | None = None) -> Entry:
    """Hash one walked entry as a blob (written into ``objects`` unless ``None``); return (git mode, object id).

    ``made`` remembers the ``objects/xx`` directories already created, so a 1,000-file sandbox does
    not pay 1,000 ``mkdir`` calls for at most 256 directories.
    """
    def blob(data: bytes) -> str:
        return _store(objects, b"blob", lambda: iter((data,)), len(data), made)

    if kind == "symlink":
        target = os.fsencode(os.readlink(path))
        # git refuses a symlinked `.gitmodules`; keep the change visible as a placeholder file.
        if os.path.basename(rel).lower() == ".gitmodules":
            return MODE_FILE, blob(b"<atlante: symlink to " + target + b">\n")
        return MODE_LINK, blob(target)
    if kind == "file":
        try:
            info = os.stat(path, follow_symlinks=False)
            mode = MODE_EXEC if info.st_mode & stat.S_IXUSR else MODE_FILE
            if info.st_size > LARGE_FILE_BYTES:
                summary = f"<atlante: large file, {info.st_size} bytes, sha256 {sha256_file(Path(path))}>\n"
                return mode, blob(summary.encode())
            if info.st_size <= _IN_MEMORY_LIMIT:
                with open(path, "rb") as handle:
                    return mode, blob(handle.read())

            def chunks() -> Iterator[bytes]:
                with open(path, "rb") as handle:
                    yield from iter(lambda: handle.read(CHUNK), b"")

            return mode, _store(objects, b"blob", chunks, info.st_size, made)
        except PermissionError:
            return MODE_FILE, blob(b"<atlante: unreadable file>\n")
    if kind == "unreadable-dir":
        return MODE_FILE, blob(b"<atlante: unreadable directory>\n")
    info = os.stat(path, follow_symlinks=False)
    what = "fifo" if stat.S_ISFIFO(info.st_mode) else "socket" if stat.S_ISSOCK(info.st_mode) else "device"
    return MODE_FILE, blob(f"<atlante: {what}>\n".encode())


def write_tree(objects: Path | None, entries: dict[str, Entry]) -> str:
    """Write the tree objects for ``entries`` (blobs need not be present); return the root tree id.

    Git orders a tree's entries by name bytes, a subdirectory compared as if its name ended in
    ``/``; sorting the full paths as bytes gives exactly that order inside every directory, and
    keeps each directory's paths together.  So one pass over the sorted paths with a stack of the
    open directories writes every tree, holding only the open directories' bodies: 200,000 files
    cost a few tens of MiB, not the hundred a nested dict of them took.
    """
    made: set[str] = set()

    def close(body: bytearray) -> bytes:
        return bytes.fromhex(_store(objects, b"tree", lambda: iter((bytes(body),)), len(body), made))

    # (path components of the directory, its body so far); the root is always at the bottom.
    stack: list[tuple[list[bytes], bytearray]] = [([], bytearray())]
    for rel in sorted(entries, key=os.fsencode):
        mode, oid = entries[rel]
        *dirs, name = os.fsencode(rel).split(b"/")
        common = 0
        while common < len(dirs) and common < len(stack) - 1 and stack[common + 1][0][-1] == dirs[common]:
            common += 1
        while len(stack) - 1 > common:
            path, body = stack.pop()
            stack[-1][1].extend(_MODE_TREE + b" " + path[-1] + b"\0" + close(body))
        for part in dirs[common:]:
            stack.append(([*stack[-1][0], part], bytearray()))
        stack[-1][1].extend(mode.encode() + b" " + name + b"\0" + bytes.fromhex(oid))
    while len(stack) > 1:
        path, body = stack.pop()
        stack[-1][1].extend(_MODE_TREE + b" " + path[-1] + b"\0" + close(body))
    return close(stack[0][1]).hex()


def copy_verified(source: Path, target: Path, oid: str) -> None:
    """Copy the loose object ``oid`` from ``source`` into ``target`` after checking it hashes to ``oid``.

    Raises ``FileNotFoundError`` when it is missing, ``ValueError`` when it does not match, and
    ``OSError``/``zlib.error`` when it cannot be read or inflated.
    """
    name = oid[:2] + "/" + oid[2:]
    hasher = hashlib.sha1()
    inflate = zlib.decompressobj()
    (target / oid[:2]).mkdir(exist_ok=True)
    with open(source / name, "rb") as handle, open(target / name, "wb") as out:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            hasher.update(inflate.decompress(chunk))
            out.write(chunk)
        hasher.update(inflate.flush())
    if hasher.hexdigest() != oid or not inflate.eof:
        raise ValueError(f"object {oid[:12]} does not match its id")


def _store(objects: Path | None, kind: bytes, chunks: Callable[[], Iterator[bytes]], size: int,
           made: set[str] | None) -> str:
    """Hash ``kind <size>\\0<content>``; write it as a loose object into ``objects`` unless ``None`` or present."""
    header = b"%s %d\0" % (kind, size)
    digest = hashlib.sha1(header)
    seen = 0
    for chunk in chunks():
        digest.update(chunk)
        seen += len(chunk)
    if seen != size:
        raise ChangedWhileReading()
    oid = digest.hexdigest()
    if objects is None:
        return oid
    fan_out = os.path.join(objects, oid[:2])
    target = os.path.join(fan_out, oid[2:])
    if os.path.lexists(target):
        return oid
    if made is None or oid[:2] not in made:
        os.makedirs(fan_out, exist_ok=True)
        if made is not None:
            made.add(oid[:2])
    # Written in place, not through a temporary name: every store is a fresh directory of this
    # trial that nothing else writes while it is filled, and O_EXCL|O_NOFOLLOW refuses anything
    # already there.  (mkstemp + rename cost two metadata operations more per object.)
    compressor = zlib.compressobj(1)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o444)
    with os.fdopen(fd, "wb") as out:
        out.write(compressor.compress(header))
        for chunk in chunks():
            out.write(compressor.compress(chunk))
        out.write(compressor.flush())
    return oid
