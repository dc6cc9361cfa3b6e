"""JSONC parsing (``suite.jsonc``): the fast paths agree with a character-by-character reading,
every error keeps its line and column, and no input makes the scan quadratic."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from pytest_atlante.suite.jsonc import JsoncError, loads


def reference(text: str) -> str:
    """JSONC → JSON one character at a time: comments become a space, trailing commas go."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] not in '"\n':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            out.append(" ")
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                out.append(text[i:])  # unterminated: left in, so the text is refused
                break
            i = j + 2
            out.append(" ")
        else:
            out.append(c)
            i += 1
    joined = "".join(out)
    kept: list[str] = []
    in_string = False
    k = 0
    while k < len(joined):  # a comma whose next non-blank is a closing bracket goes
        c = joined[k]
        if c == '"':
            in_string = not in_string
        elif in_string and c == "\\":
            kept.append(joined[k : k + 2])
            k += 2
            continue
        elif not in_string and c == "," and joined[k + 1 :].lstrip()[:1] in ("]", "}"):
            k += 1
            continue
        kept.append(c)
        k += 1
    return "".join(kept)


def outcome(parse: Any, text: str) -> tuple[str, object]:
    try:
        return "ok", parse(text)
    except (ValueError, RecursionError):
        return "error", None


def test_random_texts_parse_as_the_character_reading_does() -> None:
    alphabet = ['"', "\\", "/", "*", ",", "]", "}", "[", "{", "1", " ", "\n", "a", ":", '"k"', "//", "/*", "*/", "tru", "e"]
    generator = random.Random(28)
    for _ in range(40_000):
        text = "".join(generator.choice(alphabet) for _ in range(generator.randint(1, 16)))
        expected = outcome(lambda t: json.loads(reference(t)), text)
        assert outcome(loads, text) == expected, repr(text)


@pytest.mark.parametrize(("text", "value"), [
    ('{"a": 1}', {"a": 1}),
    ('{"a": 1, // c\n "b": [1, 2,], /* x */ }', {"a": 1, "b": [1, 2]}),
    ('{"a": "// not a comment", "b": "/* no */", "c": "x,]",}', {"a": "// not a comment", "b": "/* no */", "c": "x,]"}),
    ('{"a": [1, /* c */ ], // tail\n }', {"a": [1]}),
    ('{"url": "http://x/*", "n": 1, /* c */}', {"url": "http://x/*", "n": 1}),
    ('[1 /* a "quoted" comment */, 2 // and "this"\n,]', [1, 2]),
    ('{"x": "\\"/*", "y": 2}', {"x": '"/*', "y": 2}),
])
def test_jsonc_values(text: str, value: object) -> None:
    assert loads(text) == value


@pytest.mark.parametrize(("text", "message", "line", "column"), [
    ('{"a": 1,\n "a": 2}', "duplicate key 'a'", 2, 2),
    ('{"a": 1, // "a": 2\n "a": 3}', "duplicate key 'a'", 2, 2),  # a key in a comment is no key
    ('{"a": 1, /* c */ "a": 3,}', "duplicate key 'a'", 1, 18),
    ('{"a\\u0062": 1, "ab": 2}', "duplicate key 'ab'", 1, 16),
    ('{"a": 1,\n  "b": }', "Expecting value", 2, 8),
    ('// head\n{"a": /* c */ ,}', "Expecting value", 2, 15),
    ("[1,,]", "Expecting value", 1, 4),
    ('{\n  "a": /* open', "unterminated /* comment", 2, 8),
    ('{"a": "unterminated\n}', "Invalid control character", 1, 20),
    ("[1/**/2]", "Expecting ',' delimiter", 1, 7),
    ("[" * 100_000, "nested too deeply", 1, 1),
])
def test_errors_keep_line_and_column(text: str, message: str, line: int, column: int) -> None:
    with pytest.raises(JsoncError) as caught:
        loads(text)
    assert (caught.value.message, caught.value.line, caught.value.column) == (message, line, column)
    assert (caught.value.duplicate_key is not None) == message.startswith("duplicate key")


@pytest.mark.parametrize("text", [
    "/*" * 200_000,                       # unterminated comments, each would scan to the end
    '"\\"' * 200_000,                     # an unterminated string of escaped quotes
    "[" + ", // c\n" * 100_000 + "]",     # comments after every comma
    "[1," + " " * 400_000 + "x",          # a long blank run after a comma, then no bracket
])
def test_hostile_texts_are_refused_in_linear_time(text: str) -> None:
    # No wall-time assertion (the machine is shared): a quadratic scan of these 400,000-character
    # texts would not finish within the test timeout.
    with pytest.raises(JsoncError):
        loads(text)
