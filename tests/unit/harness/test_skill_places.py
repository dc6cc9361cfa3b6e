"""Skills that keep working where they land (issue 37, item 4; docs/reference.md "Where a skill
lands"): a skill kept in a folder the host loads skills from stays at its source path; any other
goes to the host's own folder and, when its text names its source path, is also copied there; an
``@`` import or a harness path a skill or memory file names that the build does not carry is a
build warning naming the file and the line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_atlante.suite.build import build

RUNNER = ("---\nname: runner\ndescription: Runs the release check.\n---\n"
          "Run the release check:\n\n    .agents/skills/runner/scripts/run.sh\n")
PLAIN = "---\nname: plain\ndescription: Plain.\n---\nRun `scripts/go.sh` from this skill's folder.\n"


def write(root: Path, rel: str, text: str, mode: int = 0o644) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def project(root: Path, harness: dict[str, object]) -> None:
    write(root, "atlante.jsonc", json.dumps({"version": "0.2", "harness": harness}))


def outputs(root: Path, host: str) -> dict[str, str | None]:
    manifest = json.loads((root / f".atlante/build/{host}/manifest.json").read_text())
    return {o["path"]: o.get("mode") for o in manifest["outputs"]}


def warnings(root: Path, host: str) -> list[str]:
    return list(json.loads((root / f".atlante/build/{host}/manifest.json").read_text())["warnings"])


@pytest.fixture
def runner_project(tmp_path: Path) -> Path:
    write(tmp_path, ".agents/skills/runner/SKILL.md", RUNNER)
    write(tmp_path, ".agents/skills/runner/scripts/run.sh", "#!/bin/sh\necho ok\n", 0o755)
    project(tmp_path, {"skills": {"runner": {"dir": ".agents/skills/runner"}}})
    build(tmp_path)
    return tmp_path


@pytest.mark.parametrize("host", ["codex", "gemini-cli", "opencode"])
def test_a_skill_in_a_folder_the_host_loads_stays_at_its_source_path(runner_project: Path, host: str) -> None:
    built = outputs(runner_project, host)
    assert built[".agents/skills/runner/scripts/run.sh"] == "x"
    assert ".agents/skills/runner/SKILL.md" in built
    assert not any("/skills/runner/" in path and not path.startswith(".agents/") for path in built), built
    assert not any("dangle" in line for line in warnings(runner_project, host))


def test_a_host_that_loads_only_its_own_folder_also_gets_the_skill_where_its_text_says(runner_project: Path) -> None:
    built = outputs(runner_project, "claude-code")
    # Loaded from .claude/skills (Claude Code reads no .agents/skills), and its files where it says.
    assert built[".claude/skills/runner/scripts/run.sh"] == "x" and ".claude/skills/runner/SKILL.md" in built
    assert built[".agents/skills/runner/scripts/run.sh"] == "x"
    tree = runner_project / ".atlante/build/claude-code/tree"
    assert (tree / ".agents/skills/runner/scripts/run.sh").read_text() == "#!/bin/sh\necho ok\n"
    assert not any("dangle" in line for line in warnings(runner_project, "claude-code"))


def test_a_skill_whose_text_names_no_source_path_is_built_once(tmp_path: Path) -> None:
    write(tmp_path, "harness/plain/SKILL.md", PLAIN)
    write(tmp_path, "harness/plain/scripts/go.sh", "#!/bin/sh\n", 0o755)
    project(tmp_path, {"skills": {"plain": {"dir": "harness/plain"}}})
    build(tmp_path)
    assert set(outputs(tmp_path, "claude-code")) == {".claude/skills/plain/SKILL.md", ".claude/skills/plain/scripts/go.sh"}
    assert set(outputs(tmp_path, "codex")) == {".codex/skills/plain/SKILL.md", ".codex/skills/plain/scripts/go.sh"}


def test_an_import_the_build_does_not_carry_is_a_warning_with_its_line(tmp_path: Path) -> None:
    write(tmp_path, "GEMINI.md", "# Project\n\nFollow the style guide.\n@./docs/style.md\n"
                                 "Email me@example.com; install `@scope/tool`; use @openai/codex.\n"
                                 "```\n@./in-code.md\n```\n")
    write(tmp_path, "docs/style.md", "Tabs.\n")
    project(tmp_path, {"instructions": "GEMINI.md"})
    build(tmp_path)
    for host in ("gemini-cli", "claude-code"):
        found = [line for line in warnings(tmp_path, host) if "GEMINI.md" in line]
        assert len(found) == 1, found
        assert found[0].startswith("GEMINI.md line 4: @./docs/style.md is not in the build for ")
        assert "dangle" in found[0]


def test_an_import_of_a_built_file_is_no_warning(tmp_path: Path) -> None:
    write(tmp_path, "CLAUDE.md", "See @.claude/skills/plain/SKILL.md for the steps.\n")
    write(tmp_path, "harness/plain/SKILL.md", PLAIN)
    project(tmp_path, {"instructions": "CLAUDE.md", "skills": {"plain": {"dir": "harness/plain"}}})
    build(tmp_path)
    assert not any("dangle" in line for line in warnings(tmp_path, "claude-code"))
    # For Codex the skill is in .codex/skills: the path CLAUDE.md names dangles there.
    [line] = [line for line in warnings(tmp_path, "codex") if "dangle" in line]
    assert line.startswith("CLAUDE.md line 1: @.claude/skills/plain/SKILL.md is not in the build for codex")


def test_a_harness_path_a_skill_names_that_is_not_built_is_a_warning(tmp_path: Path) -> None:
    write(tmp_path, "harness/uses/SKILL.md", "---\nname: uses\ndescription: Uses another.\n---\nFirst\n"
                                             "then run .claude/skills/missing/scripts/x.sh to finish.\n")
    project(tmp_path, {"skills": {"uses": {"dir": "harness/uses"}}})
    build(tmp_path)
    [line] = [line for line in warnings(tmp_path, "claude-code") if "dangle" in line]
    assert line.startswith("harness/uses/SKILL.md line 6: .claude/skills/missing/scripts/x.sh is not in the build "
                           "for claude-code")


def test_a_skill_a_memory_file_imports_by_its_source_path_is_also_carried_there(tmp_path: Path) -> None:
    """A Gemini CLI extension's GEMINI.md imports its skill by its source path (obra/superpowers):
    wherever the host loads the skill from, the imported file is where the import says."""
    write(tmp_path, "GEMINI.md", "@./skills/plain/SKILL.md\n@./skills/plain/notes/more.md\n")
    write(tmp_path, "skills/plain/SKILL.md", PLAIN)
    write(tmp_path, "skills/plain/notes/more.md", "More.\n")
    project(tmp_path, {"instructions": "GEMINI.md", "skills": {"plain": {"dir": "skills/plain"}}})
    build(tmp_path)
    for host in ("gemini-cli", "claude-code", "codex", "opencode"):
        built = outputs(tmp_path, host)
        assert {"skills/plain/SKILL.md", "skills/plain/notes/more.md"} <= set(built), (host, built)
        assert not any("dangle" in line for line in warnings(tmp_path, host)), warnings(tmp_path, host)
