"""Native harness files read as such: YAML frontmatter, then a body kept byte for byte.

Claude Code and OpenCode both read an agent, skill or command file as a ``---`` line, a YAML
mapping, a closing ``---`` line and the Markdown body; only the first block counts (docs/design.md
§9). ``atlante build`` parses that block with a YAML parser — the files' fields are the harness's
fields — and writes at most one block back, so a native file never gains a second one.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import cast

OPEN = "---"
# Frontmatter is a few fields; PyYAML's scanner slows down quadratically on deep flow nesting, so a
# block past these is refused before it is parsed rather than left to stall the build.
MAX_FRONTMATTER_BYTES = 64 * 1024
MAX_FLOW_DEPTH = 64


class FrontmatterError(ValueError):
    """Malformed frontmatter: ``line`` is 1-based in the whole file."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


@dataclass(frozen=True)
class NativeFile:
    """A harness file split: its frontmatter fields (None: it has no block), body, raw text."""

    fields: dict[str, object] | None
    body: str
    text: str
    # field → 1-based line of its key, for diagnostics that name the place
    lines: dict[str, int] = field(default_factory=dict)


def _flow_depth(block: str) -> int:
    """The deepest run of unclosed ``[``/``{`` (quotes not considered: an upper bound)."""
    depth = deepest = 0
    for char in block:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}" and depth:
            depth -= 1
    return deepest


def _delimiter(line: str) -> bool:
    return line.rstrip("\r\n").rstrip() == OPEN


def split(text: str) -> NativeFile:
    """Parse ``text``; raises :class:`FrontmatterError` when its block is not a YAML mapping."""
    import yaml  # only a build reads frontmatter: an eval run never loads the YAML parser

    lines = text.splitlines(keepends=True)
    if not lines or not _delimiter(lines[0]):
        return NativeFile(None, text, text)
    for index in range(1, len(lines)):
        if _delimiter(lines[index]):
            break
    else:
        raise FrontmatterError(1, "the frontmatter block opened on line 1 is never closed by a '---' line")
    block = "".join(lines[1:index])
    body = "".join(lines[index + 1:])
    if len(block.encode()) > MAX_FRONTMATTER_BYTES:
        raise FrontmatterError(2, f"the frontmatter is over {MAX_FRONTMATTER_BYTES // 1024} KiB; keep the fields short")
    if _flow_depth(block) > MAX_FLOW_DEPTH:
        raise FrontmatterError(2, "the frontmatter nests too deeply to read")
    try:
        # An alias repeats a node without copying it; writing the block back (or copying its
        # values) would expand every repetition, so a few lines could become gigabytes.
        alias = next((t for t in yaml.scan(block, Loader=yaml.SafeLoader) if isinstance(t, yaml.AliasToken)), None)
        if alias is not None:
            raise FrontmatterError(alias.start_mark.line + 2, "the frontmatter uses a YAML alias (*name); write the value out")
        node = yaml.compose(block, Loader=yaml.SafeLoader)
        value = yaml.safe_load(block)
    except RecursionError:
        raise FrontmatterError(2, "the frontmatter nests too deeply to read") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 2 if mark is not None else 2
        raise FrontmatterError(line, f"the frontmatter is not valid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise FrontmatterError(2, f"the frontmatter is not valid YAML: {exc}") from None
    if value is None:
        value = {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise FrontmatterError(2, "the frontmatter is not a mapping of field names to values")
    keys: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, _ in node.value:
            keys[str(key_node.value)] = key_node.start_mark.line + 2
    parsed = NativeFile(cast(dict[str, object], value), body, text, keys)
    if split(body).fields is not None:
        raise FrontmatterError(index + 2, "a second frontmatter block follows the first; hosts read only the first")
    return parsed


def compose(fields: Mapping[str, object], body: str) -> str:
    """One frontmatter block (block style, no line folding) and the body unchanged."""
    import yaml
    dumped = yaml.safe_dump(dict(fields), sort_keys=False, allow_unicode=True, width=1 << 16,
                            default_flow_style=False)
    return f"{OPEN}\n{dumped}{OPEN}\n{body}"


def render(source: NativeFile | None, fields: Mapping[str, object], body: str) -> str:
    """The built file: the source's own bytes when nothing changed, else one re-emitted block."""
    if source is not None and source.fields is not None and dict(fields) == source.fields:
        return source.text
    return compose(fields, body)


def as_text(value: object) -> str | None:
    """A scalar field as the string the hosts read (YAML dates and numbers are still text to them)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float, datetime.date)) and not isinstance(value, bool):
        return str(value)
    return None

