"""The design the code cites lives in the repository: every ``docs/…`` page a docstring or comment
names exists, and nothing cites a document outside the repository (the design notes and host facts
the code relies on were moved into ``docs/design.md`` and ``docs/host-facts.md``)."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import REPO_ROOT

SOURCES = [p for top in ("pytest_atlante", "tests", "benchmarks", "scripts") for p in (REPO_ROOT / top).rglob("*")
           if p.is_file() and p.suffix in (".py", "") and "__pycache__" not in p.parts and "node_modules" not in p.parts]
# How the earlier, outside documents were cited: ``ARCHITECTURE §4``, ``FACTS §6``, ``shared/hosts/…``.
OUTSIDE = re.compile(r"\bARCHITECTURE\b(?!_)|\bFACTS\b|\bshared/(?:hosts|seeds|ARCHITECTURE)")
CITED_PAGE = re.compile(r"\bdocs/([a-z0-9-]+\.md)")


def sources_text() -> dict[Path, str]:
    found = {}
    for path in SOURCES:
        try:
            found[path] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # a binary fixture
    return found


def test_nothing_cites_a_document_outside_the_repository() -> None:
    here = Path(__file__).resolve()
    hits = [f"{path.relative_to(REPO_ROOT)}:{n}" for path, text in sources_text().items() if path != here
            for n, line in enumerate(text.splitlines(), 1) if OUTSIDE.search(line)]
    assert not hits, hits


def test_every_cited_docs_page_exists() -> None:
    # The code's own citations (test data holds paths such as ``docs/x.md`` that are no citation).
    cited = {page for path, text in sources_text().items() if "tests" not in path.relative_to(REPO_ROOT).parts[:1]
             for page in CITED_PAGE.findall(text)}
    assert {"design.md", "host-facts.md"} <= cited
    assert not {page for page in cited if not (REPO_ROOT / "docs" / page).is_file()}


# ``host-facts §8``, ``host-facts-gemini §11``, ``host facts, Codex §3`` (the spelling that cited no document).
HOST_FACTS_CITATION = re.compile(r"\bhost[- ]facts(?:-([a-z]+))?,? (?:(Codex|Gemini) )?§(\d+)(?:[–-]§(\d+))?")


def test_every_host_facts_citation_names_a_section_of_a_document_in_docs() -> None:
    """``host-facts-<cli> §N`` cites section N of docs/host-facts-<cli>.md, which must exist."""
    here = Path(__file__).resolve()
    missing = []
    for path, text in sources_text().items():
        if path == here:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            for suffix, spelled, first, last in HOST_FACTS_CITATION.findall(line):
                page = REPO_ROOT / "docs" / (f"host-facts-{suffix}.md" if suffix else "host-facts.md")
                where = f"{path.relative_to(REPO_ROOT)}:{n}"
                if spelled or not page.is_file():
                    missing.append(f"{where}: no document for {line.strip()[:80]!r}")
                    continue
                headings = {m for m in re.findall(r"^#{2,3} (\d+)\.", page.read_text(encoding="utf-8"), re.M)}
                for number in filter(None, (first, last)):
                    if number not in headings:
                        missing.append(f"{where}: {page.name} has no §{number}")
    assert not missing, missing
