"""MkDocs hook (mkdocs.yml ``hooks``): the site's home page is the README itself, its links into
``docs/`` made relative to the site, so the README is built and link-checked in strict mode with
the rest and there is no second copy of it to drift."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_as_index(text: str) -> str:
    """The README with its ``](docs/<page>)`` links as ``](<page>)``: where they point from the site."""
    return re.sub(r"\]\(docs/", "](", text)


def on_files(files: Any, config: Any, **_: Any) -> Any:
    from mkdocs.structure.files import File

    files.append(File.generated(config, "index.md", content=readme_as_index(README.read_text(encoding="utf-8"))))
    return files
