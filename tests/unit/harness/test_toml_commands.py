"""Commands in both formats (issue 37, item 3): a Gemini CLI ``*.toml`` command is read as TOML,
built for Gemini CLI as the same file, and translated for the Markdown hosts with every part they
cannot run warned; a TOML file that is no command is refused by name.  Never a ``.toml`` file a
host does not load, never ``NAME.toml.toml``."""

from __future__ import annotations

import json

import pytest

from conftest import Project, config_doc
from pytest_atlante.diagnostics import DiagnosticError
from pytest_atlante.suite.build import build, tree_dir
from pytest_atlante.suite.frontmatter import split

REVIEW = '''description = "Review the staged changes"
prompt = """
Review the staged diff for {{args}}.
Staged files: !{git diff --staged --name-only}
"""
'''


def built(project: Project, host: str) -> dict[str, str]:
    tree = tree_dir(project.root, host)
    return {path.relative_to(tree).as_posix(): path.read_text() for path in tree.rglob("*")
            if path.is_file() and "commands" in path.parts}


def warnings(project: Project, host: str) -> list[str]:
    found: list[str] = json.loads((project.root / ".atlante/build" / host / "manifest.json").read_text())["warnings"]
    return found


@pytest.fixture
def toml_command(atlante_project: Project) -> Project:
    atlante_project.write(".gemini/commands/git/review.toml", REVIEW)
    atlante_project.config(config_doc() | {"harness": {
        "commands": {"review": {"file": ".gemini/commands/git/review.toml"}}}})
    build(atlante_project.root)
    return atlante_project


def test_gemini_gets_the_toml_command_as_it_was_written(toml_command: Project) -> None:
    assert built(toml_command, "gemini-cli") == {".gemini/commands/git/review.toml": REVIEW}


@pytest.mark.parametrize(("host", "target"), [("claude-code", ".claude/commands/git/review.md"),
                                              ("opencode", ".opencode/commands/git/review.md")])
def test_a_markdown_host_gets_the_prompt_as_markdown_with_the_losses_warned(toml_command: Project, host: str,
                                                                            target: str) -> None:
    files = built(toml_command, host)
    assert list(files) == [target], files
    command = split(files[target])
    assert command.fields == {"description": "Review the staged changes"}
    assert command.body == "Review the staged diff for $ARGUMENTS.\nStaged files: !{git diff --staged --name-only}\n"
    found = warnings(toml_command, host)
    assert any("review.toml" in w and "!{" in w and host in w for w in found), found


def test_a_toml_file_that_is_no_command_is_refused_by_name(atlante_project: Project) -> None:
    atlante_project.write(".gemini/commands/broken.toml", 'description = "no prompt"\n')
    atlante_project.write(".gemini/commands/junk.toml", "prompt = [\n")
    atlante_project.config(config_doc() | {"harness": {"commands": {
        "broken": {"file": ".gemini/commands/broken.toml"}, "junk": {"file": ".gemini/commands/junk.toml"}}}})
    with pytest.raises(DiagnosticError) as raised:
        build(atlante_project.root)
    found = {(d.location, d.code) for d in raised.value.diagnostics}
    assert ("$.harness.commands.broken.file", "eval-harness-invalid") in found, found
    assert ("$.harness.commands.junk.file", "eval-harness-invalid") in found, found
    messages = " ".join(d.message for d in raised.value.diagnostics)
    assert "prompt" in messages and "TOML" in messages


def test_every_built_command_is_a_file_its_host_loads(toml_command: Project) -> None:
    suffix = {"claude-code": ".md", "opencode": ".md", "gemini-cli": ".toml"}
    for host, wanted in suffix.items():
        names = list(built(toml_command, host))
        assert names and all(name.endswith(wanted) and not name.endswith(".toml.toml") for name in names), (host, names)
