"""The README is a guide and the reference lives in docs/, built as a documentation site with MkDocs
(the Material theme) in strict mode: a broken link, anchor or page fails the build, and so this test,
in CI.  The site's home page is the README itself (scripts/mkdocs_hooks.py), so its links are checked
with the rest."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README_MAX_LINES = 200
HOSTS = ("Claude Code", "OpenCode", "Codex", "Gemini CLI")


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)], cwd=root,
                          capture_output=True, text=True, timeout=600, check=False,
                          env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1"})


def copy_sources(dest: Path) -> Path:
    for name in ("mkdocs.yml", "README.md"):
        shutil.copy2(REPO / name, dest / name)
    shutil.copytree(REPO / "docs", dest / "docs")
    (dest / "scripts").mkdir()
    shutil.copy2(REPO / "scripts" / "mkdocs_hooks.py", dest / "scripts" / "mkdocs_hooks.py")
    return dest


def test_the_docs_site_builds_in_strict_mode_with_the_readme_as_its_home(tmp_path: Path) -> None:
    result = build(REPO, tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    home = (tmp_path / "site" / "index.html").read_text()
    assert "Use it in your project" in home and 'href="reference/' in home  # README links, made site-relative
    for page in ("reference", "reports", "statistics", "hosts", "ci", "architecture"):
        assert (tmp_path / "site" / page / "index.html").is_file(), page


@pytest.mark.parametrize(("file", "broken"), [
    ("docs/reference.md", "\nSee [the missing page](no-such-page.md).\n"),
    ("docs/reports.md", "\nSee [a missing section](statistics.md#no-such-section).\n"),
    ("README.md", "\nSee [the missing guide](docs/no-such-guide.md).\n"),
], ids=["page", "anchor", "readme"])
def test_a_broken_link_fails_the_strict_build(tmp_path: Path, file: str, broken: str) -> None:
    root = copy_sources(tmp_path / "src") if (tmp_path / "src").mkdir() is None else tmp_path
    with (root / file).open("a", encoding="utf-8") as f:
        f.write(broken)
    result = build(root, tmp_path / "site")
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "strict mode" in output, output
    assert re.search(r"no-such-(page|section|guide)", output), output


def test_the_readme_is_a_guide() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= README_MAX_LINES, len(lines)
    headings = [line for line in lines if line.startswith("## ")]
    assert "## Use it in your project" in headings and "## Two commands" in headings, headings
    assert "## One complete scenario" in headings and "## Where to go next" in headings, headings
    for host in HOSTS:  # every host named, and never as if there were two
        assert host in text, host
    assert not re.search(r"\b(two|both) (hosts|CLIs)\b", text, re.I)
    assert "![" in text.split("## Two commands")[0]  # one picture of the view, before the commands
