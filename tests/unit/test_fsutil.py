"""read_capped / open_regular: every kind of path is judged without blocking and before reading."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import bind_unix
from pytest_atlante.fsutil import UnreadableFile, open_regular, read_capped

LIMIT = 1024


def make_socket(path: Path) -> None:
    server = socket.socket(socket.AF_UNIX)
    bind_unix(server, path)
    server.close()


# (id, make the path, expected reason fragment or None for a successful read)
CASES: list[tuple[str, Callable[[Path], object], str | None]] = [
    ("regular", lambda p: p.write_bytes(b"x" * LIMIT), None),
    ("empty", lambda p: p.write_bytes(b""), None),
    ("missing", lambda p: None, "does not exist"),
    ("directory", lambda p: p.mkdir(), "is a directory"),
    ("fifo", os.mkfifo, "is a FIFO (named pipe)"),
    ("socket", make_socket, "is a socket"),
    ("character-device", lambda p: p.symlink_to("/dev/null"), "is a character device"),
    ("symlink-to-fifo", lambda p: (os.mkfifo(p.with_name("real")), p.symlink_to("real")), "is a FIFO"),
    ("dangling-symlink", lambda p: p.symlink_to("nowhere"), "does not exist"),
    ("one-byte-over", lambda p: p.write_bytes(b"x" * (LIMIT + 1)), "is larger than 1024 bytes"),
    ("sparse-8gib", lambda p: os.truncate(p.write_bytes(b"") or p, 8 << 30), "is larger than 1024 bytes"),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("make", "reason"), [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_read_capped_judges_the_opened_file(tmp_path: Path, make: Callable[[Path], object], reason: str | None) -> None:
    path = tmp_path / "target"
    make(path)
    if reason is None:
        assert read_capped(path, LIMIT) == path.read_bytes()
        with open_regular(path, LIMIT) as handle:
            assert handle.read() == path.read_bytes()
        return
    for read in (lambda: read_capped(path, LIMIT), lambda: open_regular(path, LIMIT).close()):
        with pytest.raises(UnreadableFile) as info:
            read()
        assert reason in info.value.reason
        assert info.value.missing == (reason == "does not exist")
        assert info.value.too_large == reason.startswith("is larger")


def test_a_symlink_is_refused_when_links_are_not_followed(tmp_path: Path) -> None:
    (tmp_path / "real").write_text("x")
    (tmp_path / "link").symlink_to("real")
    with pytest.raises(UnreadableFile, match="is a symbolic link, not a regular file"):
        read_capped(tmp_path / "link", LIMIT, follow_symlinks=False)
    assert read_capped(tmp_path / "link", LIMIT) == b"x"
