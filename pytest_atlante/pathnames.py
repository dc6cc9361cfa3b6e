"""The one shown form of a file name: any byte string a POSIX name can hold, as printable text.

A trial's agent can give a file any name the filesystem allows: bytes that are not UTF-8, control
characters, newlines, 255 bytes of them.  Python hands such a name over as a ``str`` carrying
surrogate escapes (``'bad\\udcff'``), which no report, transcript or HTML page can encode.  Every
place that puts a path into something a trial produces (changed paths, the diff's headers, check
messages, escapes, transcript tool paths) shows it through :func:`escape_path`:

- valid UTF-8 that prints stays as it is (``ünï cødé.txt``, spaces included);
- ``\\`` becomes ``\\\\``, so an honest name holding a backslash can never read like an escape;
- ``\\t``, ``\\n`` and ``\\r`` for tab, newline and carriage return; ``\\xNN`` (``NN`` below ``80``)
  for the other ASCII control characters and DEL (``\\x1b`` for ESC);
- ``\\xNN`` (``NN`` from ``80`` to ``ff``) for a byte that is not part of valid UTF-8;
- ``\\uNNNN`` / ``\\UNNNNNNNN`` for a valid character that does not print (C1 controls such as
  U+0085, U+2028, bidirectional overrides, non-breaking spaces: ``str.isprintable`` is false).

That is Python's ``backslashreplace``/``repr`` style, with one deliberate difference: a valid but
non-printing character below U+0100 is ``\\u0085``, never ``\\x85``, so ``\\x80``–``\\xff`` always
means a raw byte.  Each escape reads back one way, so the mapping is injective
(:func:`unescape_path` inverts it): two different names never show alike.
"""

from __future__ import annotations

import os

__all__ = ["escape_path", "escape_surrogates", "unescape_path"]

_NAMED = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}
_UNNAMED = {"\\\\": "\\", "\\t": "\t", "\\n": "\n", "\\r": "\r"}


def escape_path(name: str | bytes) -> str:
    """``name`` (bytes, or a ``str`` from ``os.fsdecode``/``os.scandir``) in its one shown form."""
    if isinstance(name, bytes):
        raw = name
    else:
        try:
            raw = os.fsencode(name)
        except UnicodeEncodeError:  # a lone surrogate no filesystem name decodes to (from JSON)
            raw = name.encode("utf-8", "surrogatepass")
    out: list[str] = []
    text = raw.decode("utf-8", "surrogateescape")  # undecodable bytes become U+DC80..U+DCFF
    for char in text:
        code = ord(char)
        if char in _NAMED:
            out.append(_NAMED[char])
        elif 0xDC80 <= code <= 0xDCFF:  # a byte that is not valid UTF-8
            out.append(f"\\x{code - 0xDC00:02x}")
        elif code < 0x80 and not char.isprintable():
            out.append(f"\\x{code:02x}")
        elif not char.isprintable() and char != " ":
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(char)
    return "".join(out)


def escape_surrogates(text: str) -> str:
    """Free text that may carry a name's surrogate escapes (an error message): those become
    ``\\xNN`` as in :func:`escape_path`; everything else is left alone.  A backstop, so a record
    is always encodable; paths themselves go through :func:`escape_path`."""
    if not any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        return text
    return "".join(
        f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF
        else f"\\u{ord(c):04x}" if 0xD800 <= ord(c) <= 0xDFFF else c
        for c in text
    )


def unescape_path(shown: str) -> bytes:
    """The name's bytes back from :func:`escape_path`'s form (``ValueError`` for a malformed one)."""
    out = bytearray()
    i = 0
    while i < len(shown):
        char = shown[i]
        if char != "\\":
            out += char.encode("utf-8")
            i += 1
            continue
        two = shown[i : i + 2]
        if two in _UNNAMED:
            out += _UNNAMED[two].encode()
            i += 2
            continue
        width = {"\\x": 2, "\\u": 4, "\\U": 8}.get(two)
        digits = shown[i + 2 : i + 2 + width] if width else ""
        if width is None or len(digits) != width or not all(c in "0123456789abcdef" for c in digits):
            raise ValueError(f"malformed escape at {i} in {shown!r}")
        value = int(digits, 16)
        if two == "\\x":
            out.append(value)  # below 0x80 a control character, else a raw byte: the same byte
        else:
            out += chr(value).encode("utf-8")
        i += 2 + width
    return bytes(out)
