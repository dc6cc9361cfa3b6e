"""The one shown form of a file name (``pathnames.escape_path``) and its inverse."""

from __future__ import annotations

import os
import random

import pytest

from pytest_atlante.pathnames import escape_path, escape_surrogates, unescape_path

CASES = [
    # (name bytes, shown form)
    (b"plain/dir/file.txt", "plain/dir/file.txt"),
    (b"with space.txt", "with space.txt"),
    ("ünï cødé 😀.txt".encode(), "ünï cødé 😀.txt"),
    (b"bad\xff\xfe.txt", "bad\\xff\\xfe.txt"),
    (b"line\nbreak", "line\\nbreak"),
    (b"tab\tcr\r", "tab\\tcr\\r"),
    (b"esc\x1b[31mred", "esc\\x1b[31mred"),
    (b"nul-ish\x01\x7f", "nul-ish\\x01\\x7f"),
    (b"back\\slash", "back\\\\slash"),
    (b"bad\\xff.txt", "bad\\\\xff.txt"),  # an honest backslash never reads like an escape
    ("c1\u0085".encode(), "c1\\u0085"),  # a valid non-printing character below U+0100 ...
    (b"raw\x85", "raw\\x85"),  # ... is told apart from the raw byte 0x85
    ("bidi\u202eevil".encode(), "bidi\\u202eevil"),
    ("nbsp\u00a0sep\u2028".encode(), "nbsp\\u00a0sep\\u2028"),
    (b"\xed\xa0\x80surrogate", "\\xed\\xa0\\x80surrogate"),  # an encoded surrogate is not UTF-8
    (b"\xc3", "\\xc3"),  # a cut multi-byte sequence
    (b'quote"s', 'quote"s'),
]


@pytest.mark.parametrize(("raw", "shown"), CASES, ids=[repr(c[0]) for c in CASES])
def test_each_kind_of_name_has_one_shown_form(raw: bytes, shown: str) -> None:
    assert escape_path(raw) == shown
    assert escape_path(os.fsdecode(raw)) == shown  # the str a walk yields shows the same
    assert unescape_path(shown) == raw
    shown.encode("utf-8")  # always encodable
    assert all(c.isprintable() for c in shown)


def test_a_name_up_to_the_255_byte_limit() -> None:
    raw = b"\xff" * 255
    assert escape_path(raw) == "\\xff" * 255 and unescape_path(escape_path(raw)) == raw
    long_control = b"\x1b" * 254 + b"."
    assert escape_path(long_control) == "\\x1b" * 254 + "."


def test_the_mapping_is_injective_over_random_names() -> None:
    rng = random.Random(22)
    seen: dict[str, bytes] = {}
    for _ in range(20_000):
        raw = bytes(rng.choice(b"\\xa/nt\x00\x01\x1b\x7f\x80\x85\xc2\xc3\xa9\xe2\x80\xae\xff") for _ in range(rng.randrange(1, 10)))
        shown = escape_path(raw)
        assert unescape_path(shown) == raw
        assert seen.setdefault(shown, raw) == raw, (shown, raw, seen[shown])
        assert all(c.isprintable() for c in shown)


def test_a_lone_surrogate_from_json_is_still_shown() -> None:
    assert escape_path("a\ud800b") == "a\\xed\\xa0\\x80b"


def test_escape_surrogates_only_touches_surrogates() -> None:
    assert escape_surrogates("cannot read bad\udcff\udcfe.txt: no\n") == "cannot read bad\\xff\\xfe.txt: no\n"
    assert escape_surrogates("plain \\ text\n") == "plain \\ text\n"
    assert escape_surrogates("odd \ud800") == "odd \\ud800"


@pytest.mark.parametrize("shown", ["a\\", "a\\q", "\\x4", "\\u12g4", "\\U0001"])
def test_a_malformed_shown_form_is_refused(shown: str) -> None:
    with pytest.raises(ValueError):
        unescape_path(shown)
