"""JSONC — JSON with ``//`` and ``/* */`` comments and trailing commas — at the speed of JSON.

Three paths, cheapest first (docs/design.md §2):

1. the standard library's ``json.loads``: every plain JSON document ends here;
2. otherwise comments and trailing commas are cut by one regular-expression split that runs in C
   (strings are matched whole and kept, so nothing inside a string is touched), and the result
   goes to ``json.loads`` again;
3. a document that still does not parse (or has a duplicate key), and the rare one whose comment
   sits between two token characters, takes the slow path: the same cuts made position-preserving
   (each comment and trailing comma becomes blanks, newlines kept), so ``json``'s line and column
   are the original text's.

Duplicate keys are rejected in every path: two values for one key would let one document say two
things depending on which one a reader keeps.  Nesting too deep for the parser is an error too.
"""

from __future__ import annotations

import bisect
import json
import re
from typing import Any

__all__ = ["JsoncError", "loads"]

# A JSON string, unrolled (no per-character alternation): the regex engine skips it in one go.
# An unterminated one ends at its line's end, so every match moves the scan forward and no input
# makes it quadratic (``json`` rejects the string afterwards; JSON strings hold no raw newline).
_STRING = r'"[^"\\\n]*(?:\\.[^"\\\n]*)*\\?(?:"|(?=\n)|\Z)'
# Both comments are atomic: inside the trailing-comma look-ahead a line comment must not give back
# characters (``, // x }`` has no trailing comma), and a block comment can match in one way only.
_LINE_COMMENT = r"//[^\n]*+"
_BLOCK_COMMENT = r"/\*(?>(?:[^*]|\*+[^*/])*)\*+/"
_TRAILING_COMMA = rf",(?=(?:\s|{_LINE_COMMENT}|{_BLOCK_COMMENT})*[\]}}])"
# The fast path: one split keeps each string (the one group) and drops comments and trailing
# commas, all inside the regex engine.  A line comment leaves its newline, which still separates
# the tokens around it; a block comment between two token characters (``1/**/2``) would join
# them, so such texts (:data:`_JOINING_COMMENT`) take the slow path.
_FAST = re.compile(rf"({_STRING})|{_LINE_COMMENT}|{_BLOCK_COMMENT}|{_TRAILING_COMMA}")
# ``/*`` first, then the character before it: a literal start lets the engine skip to each ``/*``
# (a character class first made it try every position: as slow as parsing the document).
_JOINING_COMMENT = re.compile(r"/\*(?<=[\w.+\-]/\*)")
# The slow path: strings (1), comments (2), an unterminated block comment's start (3), and
# trailing commas, each replaced by as many blanks, newlines kept: positions stay the original's.
_LOCATED = re.compile(rf"({_STRING})|({_LINE_COMMENT}|{_BLOCK_COMMENT})|(/\*)|{_TRAILING_COMMA}")


class JsoncError(ValueError):
    """Why a JSONC text does not parse, and where (1-based line and column of the original)."""

    def __init__(self, message: str, line: int, column: int, *, duplicate_key: str | None = None) -> None:
        super().__init__(f"{message} (line {line}, column {column})")
        self.message = message
        self.line = line
        self.column = column
        self.duplicate_key = duplicate_key


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)  # built in C; only a short count means a key came twice
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _value in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return result


def loads(text: str) -> Any:
    """Parse a JSON or JSONC text; raise :class:`JsoncError` with the problem's location."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError:
        pass
    except (_DuplicateKey, RecursionError):
        return _located(text)
    if _JOINING_COMMENT.search(text) or text.rfind("/*") > text.rfind("*/"):
        return _located(text)  # a comment that joins tokens, or one never closed
    stripped = "".join(filter(None, _FAST.split(text)))
    try:
        return json.loads(stripped, object_pairs_hook=_unique_keys)
    except (json.JSONDecodeError, _DuplicateKey, RecursionError):
        return _located(text)


def _located(text: str) -> Any:
    """Parse with every position kept: the value, or the :class:`JsoncError` saying where."""
    dropped_commas: list[int] = []

    def blank(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return match.group(1)
        if match.group(3) is not None:
            raise JsoncError("unterminated /* comment", *_position(text, match.start()))
        if match.group(2) is None:
            dropped_commas.append(match.start())
        return re.sub(r"[^\n]", " ", match.group(0))

    blanked = _LOCATED.sub(blank, text)
    try:
        return json.loads(blanked, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        error = _misplaced_comma(blanked, exc, dropped_commas) or exc
        raise JsoncError(error.msg.removesuffix(" at"), error.lineno, error.colno) from None
    except _DuplicateKey as exc:
        line, column = _second_key(blanked, exc.key)
        raise JsoncError(f"duplicate key {exc.key!r}", line, column, duplicate_key=exc.key) from None
    except RecursionError:
        raise JsoncError("nested too deeply", 1, 1) from None


def _misplaced_comma(blanked: str, error: json.JSONDecodeError, dropped: list[int]) -> json.JSONDecodeError | None:
    """The error at a comma that was taken for a trailing one (``[1,,]``, ``{"a": ,}``): with it
    dropped, ``json`` would point at the bracket after it instead."""
    at = bisect.bisect_left(dropped, error.pos)  # offsets were recorded in order
    if at == 0 or blanked[dropped[at - 1] : error.pos].strip():
        return None
    comma = dropped[at - 1]
    try:
        json.loads(blanked[:comma] + "," + blanked[comma + 1 :])
    except json.JSONDecodeError as restored:
        return restored if restored.pos <= comma else None
    except (ValueError, RecursionError):
        return None
    return None


def _second_key(blanked: str, key: str) -> tuple[int, int]:
    """Line and column of the second ``"key":`` (comments are blanks here, so none is counted)."""
    spelled = re.escape(json.dumps(key)) + r"\s*:"
    matches = list(re.finditer(spelled, blanked))
    if len(matches) < 2:  # the key was written with escapes: find the text as the decoder saw it
        matches = [m for m in re.finditer(_STRING + r"\s*:", blanked) if json.loads(m.group(0).rsplit(":", 1)[0].strip()) == key]
    if not matches:
        return 1, 1
    return _position(blanked, matches[1 if len(matches) > 1 else 0].start())


def _position(text: str, offset: int) -> tuple[int, int]:
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1

