"""Reading the Markdown atlante writes the way a renderer does: markdown-it-py (CommonMark with
GFM tables), never our own reading of our own output."""

from __future__ import annotations

from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token


@dataclass
class Cell:
    text: str          # the cell's text as rendered (code spans' content included)
    tokens: list[Token]  # its inline children: what kinds of elements it renders to


def parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def tables(text: str) -> list[list[list[Cell]]]:
    """Every table of ``text``: rows (the header row first) of cells."""
    found: list[list[list[Cell]]] = []
    row: list[Cell] = []
    inside_cell = False
    for token in parser().parse(text):
        if token.type == "table_open":
            found.append([])
        elif token.type == "tr_open":
            row = []
        elif token.type == "tr_close":
            found[-1].append(row)
        elif token.type in ("th_open", "td_open"):
            inside_cell = True
            row.append(Cell("", []))
        elif token.type in ("th_close", "td_close"):
            inside_cell = False
        elif token.type == "inline" and inside_cell:
            children = token.children or []
            row[-1] = Cell(plain(children), children)
    return found


def plain(children: list[Token]) -> str:
    """What inline tokens read as: their text and code spans' content, without the markup."""
    return "".join(c.content for c in children if c.type in ("text", "code_inline"))


def paragraphs(text: str) -> list[str]:
    """The plain text of each paragraph and heading outside tables."""
    tokens = parser().parse(text)
    return [plain(t.children or []) for i, t in enumerate(tokens)
            if t.type == "inline" and i and tokens[i - 1].type in ("paragraph_open", "heading_open")]
