"""git's diff text as the report shows it: every path of a header line in its shown form.

git writes a path in a diff header as raw bytes or C-quoted; the report shows each changed path one
way only (``pathnames.escape_path``), so the header lines are rewritten from the known changed paths.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from pytest_atlante.pathnames import escape_path

# git's C-style quoting of a path (``quote_c_style`` with ``core.quotePath=false``): a path holding a
# control character, DEL, ``"`` or ``\`` is written in double quotes with these escapes (octal for
# the rest); bytes from 0x80 up are written as they are.
_GIT_ESCAPES = {7: b"\\a", 8: b"\\b", 9: b"\\t", 10: b"\\n", 11: b"\\v", 12: b"\\f", 13: b"\\r",
                0x22: b'\\"', 0x5C: b"\\\\"}
_GIT_NULL = b"/dev/null"


def git_quoted(raw: bytes) -> bytes:
    """``raw`` as git writes a path in a diff header."""
    if not any(byte < 0x20 or byte in (0x22, 0x5C, 0x7F) for byte in raw):
        return raw
    out = bytearray(b'"')
    for byte in raw:
        if byte in _GIT_ESCAPES:
            out += _GIT_ESCAPES[byte]
        elif byte < 0x20 or byte == 0x7F:
            out += b"\\%03o" % byte
        else:
            out.append(byte)
    return bytes(out + b'"')


def shown_diff(out: bytes, paths: Iterable[str]) -> str:
    """git's diff output as text, every path of its header lines in the shown form (``escape_path``).

    git writes names as raw bytes (not always UTF-8) or C-quoted; the report shows each changed
    path one way only, so the ``diff --git``, ``---``/``+++`` and ``Binary files`` lines of each
    file are rewritten from the known changed paths (a name git wrote is looked up, never parsed
    loosely).  Hunk lines are content and stay as they are (bytes that are not UTF-8 become U+FFFD).
    """
    old_side: dict[bytes, str] = {_GIT_NULL: "/dev/null"}
    new_side: dict[bytes, str] = {_GIT_NULL: "/dev/null"}
    for path in paths:
        raw, shown = os.fsencode(path), escape_path(path)
        old_side[git_quoted(b"a/" + raw)] = "a/" + shown
        new_side[git_quoted(b"b/" + raw)] = "b/" + shown
    lines: list[str] = []
    in_header = False
    for line in out.split(b"\n"):
        if line.startswith(b"diff --git "):
            in_header = True
        elif line.startswith(b"@@"):
            in_header = False
        lines.append((_shown_header(line, old_side, new_side) if in_header else None)
                     or line.decode("utf-8", "replace"))
    return "\n".join(lines)


def _shown_header(line: bytes, old_side: dict[bytes, str], new_side: dict[bytes, str]) -> str | None:
    """One header line with its paths shown; ``None`` when it names no path (or none known)."""
    def pair(old: bytes, new: bytes, between: str) -> str | None:
        if old in old_side and new in new_side:
            return old_side[old] + between + new_side[new]
        return None

    if line.startswith(b"diff --git "):
        rest = line[len(b"diff --git "):]
        # --no-renames: both sides name the same path, quoted alike, so the halves are equally long.
        half = (len(rest) - 1) // 2
        shown = pair(rest[:half], rest[half + 1:], " ") if rest[half:half + 1] == b" " else None
        return None if shown is None else "diff --git " + shown
    for prefix, side in ((b"--- ", old_side), (b"+++ ", new_side)):
        if line.startswith(prefix):
            name = line[len(prefix):]
            tab = name.endswith(b"\t") and name not in side  # git ends a name holding a space with a tab
            name = name[:-1] if tab else name
            return prefix.decode() + side[name] + ("\t" if tab else "") if name in side else None
    if line.startswith(b"Binary files ") and line.endswith(b" differ"):
        rest = line[len(b"Binary files "):-len(b" differ")]
        half = (len(rest) - len(b" and ")) // 2
        splits = [(rest[:half], rest[half + 5:])]
        if rest.startswith(_GIT_NULL + b" and "):
            splits.append((_GIT_NULL, rest[len(_GIT_NULL) + 5:]))
        if rest.endswith(b" and " + _GIT_NULL):
            splits.append((rest[:-len(_GIT_NULL) - 5], _GIT_NULL))
        for old, new in splits:
            shown = pair(old, new, " and ")
            if shown is not None:
                return f"Binary files {shown} differ"
    return None
