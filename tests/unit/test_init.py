"""``atlante init`` without a host: what it writes, that it never overwrites, and what it adopts.

The round trip through the real CLIs (init, build, selftest and ``eval --scripted`` on both hosts)
is tests/integration/test_init_real.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_atlante.cli import main
from pytest_atlante.suite import jsonc
from pytest_atlante.suite.build import build_command
from pytest_atlante.suite.discovery import discover
from pytest_atlante.suite.init import CURRENT_VERSION, init_project
from pytest_atlante.suite.native import discover_native_harness, harness_section_for


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".atlante" not in p.relative_to(root).parts}


def test_an_empty_directory_gets_a_valid_suite_with_one_scripted_scenario(tmp_path: Path) -> None:
    root = tmp_path / "new"
    result = init_project(root, "opencode")
    assert sorted(result.created) == [".gitignore", "atlante.jsonc", "eval/conftest.py",
                                      "eval/fixtures/adds-farewell/greeter.py", "eval/fixtures/adds-farewell/test_greeter.py",
                                      "eval/scenarios/adds-farewell.eval.json", "eval/scenarios/scripted/adds-farewell.json"]
    config = jsonc.loads((root / "atlante.jsonc").read_text())
    assert config["version"] == CURRENT_VERSION == "0.4"
    assert config["$schema"] == "https://atlante.sh/schema/v0.4/config.json" and config["eval"]["host"] == "opencode"
    assert (root / ".gitignore").read_text() == ".atlante/\n"
    assert build_command(root, "all") == 0
    suite = discover(root, scripted=True)
    assert suite.diagnostics == []
    [entry] = suite.validated().scenarios
    assert entry.scenario.name == "adds-farewell" and entry.script is not None


def test_a_second_run_changes_nothing_and_says_what_is_there(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(tmp_path)]) == 0
    before = tree(tmp_path)
    assert main(["init", str(tmp_path), "--host", "opencode"]) == 0
    out = capsys.readouterr().out
    assert tree(tmp_path) == before                      # not even the host changed
    assert "atlante init: kept atlante.jsonc (already there; not changed)" in out
    assert "atlante init: nothing to do: every file is already there" in out and "created" not in out.split("nothing")[-1]


def test_it_never_overwrites_a_file_and_adds_only_the_missing_gitignore_line(tmp_path: Path) -> None:
    (tmp_path / "atlante.jsonc").write_text("// mine\n{}\n")
    (tmp_path / "eval/fixtures/adds-farewell").mkdir(parents=True)
    (tmp_path / "eval/fixtures/adds-farewell/greeter.py").write_text("# my greeter\n")
    (tmp_path / ".gitignore").write_bytes(b"node_modules/\n\xff-not-utf8")
    result = init_project(tmp_path)
    assert (tmp_path / "atlante.jsonc").read_text() == "// mine\n{}\n"
    assert (tmp_path / "eval/fixtures/adds-farewell/greeter.py").read_text() == "# my greeter\n"
    assert {"atlante.jsonc", "eval/fixtures/adds-farewell/greeter.py"} <= set(result.kept)
    assert any("eval.scenarios must match eval/scenarios/adds-farewell.eval.json" in w for w in result.warnings)
    assert (tmp_path / ".gitignore").read_bytes() == b"node_modules/\n\xff-not-utf8\n.atlante/\n"
    assert init_project(tmp_path).kept[-1] == ".gitignore"


def test_a_native_harness_is_adopted_in_place_with_a_starting_scenario_and_warnings(tmp_path: Path) -> None:
    agent = tmp_path / ".claude/agents/debugger.md"
    agent.parent.mkdir(parents=True)
    original = "---\nname: debugger\ndescription: Finds bugs.\ntools: Read, Edit, Bash\nmodel: sonnet\n---\nYou debug.\n"
    agent.write_text(original)
    (tmp_path / ".claude/settings.json").write_text('{"hooks": {"PreToolUse": []}}')
    (tmp_path / ".mcp.json").write_text("{}")
    result = init_project(tmp_path)
    config = jsonc.loads((tmp_path / "atlante.jsonc").read_text())
    assert config["harness"] == harness_section_for(discover_native_harness(tmp_path))
    assert config["harness"]["agents"]["debugger"]["prompt"] == ".claude/agents/debugger.md"
    assert config["eval"]["host"] == "claude-code"       # the layout the harness was found in
    assert agent.read_text() == original                 # adopted, never rewritten
    assert result.adopted == ["agent debugger (.claude/agents/debugger.md, claude-code layout)"]
    assert any("hooks are not evaluated" in w for w in result.warnings)
    assert any(".mcp.json: MCP servers are not evaluated" in w for w in result.warnings)
    scenario = json.loads((tmp_path / "eval/scenarios/debugger-starter.eval.json").read_text())
    assert scenario["task"]["agent"] == "debugger" and scenario["task"]["fixture"] == "eval/fixtures/debugger-starter"
    assert build_command(tmp_path, "claude-code") == 0
    assert discover(tmp_path, scripted=True).diagnostics == []


def test_a_skill_alone_gets_a_starting_scenario_that_names_it(tmp_path: Path) -> None:
    skill = tmp_path / ".opencode/skills/tidy/SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: tidy\ndescription: Keeps files tidy.\n---\nKeep files tidy.\n")
    init_project(tmp_path)
    config = jsonc.loads((tmp_path / "atlante.jsonc").read_text())
    assert config["eval"]["host"] == "opencode" and "tidy" in config["harness"]["skills"]
    scenario = json.loads((tmp_path / "eval/scenarios/tidy-starter.eval.json").read_text())
    assert "the tidy skill" in scenario["task"]["prompt"] and "agent" not in scenario["task"]


def test_plain_pytest_in_the_new_project_collects_no_fixture_test(pytester: pytest.Pytester) -> None:
    init_project(pytester.path)
    assert pytester.runpytest_inprocess("-p", "no:cacheprovider").ret == pytest.ExitCode.NO_TESTS_COLLECTED
    (pytester.path / "eval/conftest.py").unlink()   # without it the fixture's failing test is collected
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, failed=1)


def test_a_file_where_the_directory_should_be_is_a_diagnostic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "taken").write_text("")
    assert main(["init", str(tmp_path / "taken")]) == 2
    assert "init-not-a-directory" in capsys.readouterr().err


def test_init_adopts_real_public_harness_files_and_the_build_gives_back_what_claude_code_loads(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`atlante init` in a copy of the public harness files (tests/data/harnesses, their licences
    beside them), kept where a user keeps them: the harness section it writes is the adoption in
    place, the files are untouched, and the Claude Code build holds the agent, the command and every
    file of the skill byte for byte (the same-host round trip of tests/unit/harness)."""
    import shutil

    from conftest import COMMAND, DEBUGGER, SKILL
    from pytest_atlante.suite.build import tree_dir

    root = tmp_path / "mine"
    shutil.copytree(SKILL, root / ".claude/skills/skill-creator")
    for source, target in ((DEBUGGER, ".claude/agents/debugger.md"), (COMMAND, ".claude/commands/team-review.md")):
        (root / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, root / target)
    before = tree(root)
    assert main(["init", str(root)]) == 0
    out = capsys.readouterr().out
    assert "adopted" in out, out
    config = jsonc.loads((root / "atlante.jsonc").read_text())
    assert config["harness"] == harness_section_for(discover_native_harness(root))
    assert {name: data for name, data in tree(root).items() if name in before} == before  # nothing rewritten
    assert build_command(root, "claude-code") == 0
    built = tree_dir(root, "claude-code")
    assert (built / ".claude/agents/debugger.md").read_bytes() == DEBUGGER.read_bytes()
    assert (built / ".claude/commands/team-review.md").read_bytes() == COMMAND.read_bytes()
    for path in SKILL.rglob("*"):
        if path.is_file():
            copy = built / ".claude/skills/skill-creator" / path.relative_to(SKILL)
            assert copy.read_bytes() == path.read_bytes() and copy.stat().st_mode & 0o111 == path.stat().st_mode & 0o111, path
    assert discover(root, scripted=True).diagnostics == []


def test_init_dir_says_cd_dir_first_and_collects_jsonc_scenarios(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """``init DIR``'s next step starts in DIR; its glob takes a second scenario saved as .eval.jsonc."""
    monkeypatch.chdir(tmp_path)
    assert main(["init", "my project"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "next: cd 'my project' && atlante build && atlante selftest && atlante eval --scripted")
    assert main(["init"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "next: atlante build && atlante selftest && atlante eval --scripted"
    root = tmp_path / "my project"
    assert jsonc.loads((root / "atlante.jsonc").read_text())["eval"]["scenarios"] == "eval/scenarios/*.eval.json*"
    first = root / "eval/scenarios/adds-farewell.eval.json"
    second = jsonc.loads(first.read_text()) | {"name": "second"}
    (root / "eval/scenarios/second.eval.jsonc").write_text("// a comment\n" + json.dumps(second))
    assert sorted(e.scenario.name for e in discover(root).validated().scenarios) == ["adds-farewell", "second"]


@pytest.mark.parametrize("damage", ["emptied", "deleted", "no-farewell", "done"])
def test_the_starting_command_check_fails_on_an_emptied_or_deleted_test(tmp_path: Path, damage: str) -> None:
    """Python 3.11's unittest exits 0 on "Ran 0 tests": the check names each test, so a test file an
    agent emptied or deleted fails it, as the missing farewell() does; only the task done passes."""
    import subprocess
    import sys

    init_project(tmp_path)
    scenario = jsonc.loads((tmp_path / "eval/scenarios/adds-farewell.eval.json").read_text())
    [command] = [c["run"] for c in scenario["checks"] if c["type"] == "command"]
    fixture = tmp_path / "eval/fixtures/adds-farewell"
    greeter = fixture / "greeter.py"
    greeter.write_text(greeter.read_text() + '\n\ndef farewell(name: str) -> str:\n    return f"Goodbye, {name}!"\n')
    if damage == "emptied":
        (fixture / "test_greeter.py").write_text("")
    elif damage == "deleted":
        (fixture / "test_greeter.py").unlink()
    elif damage == "no-farewell":
        greeter.write_text('def greet(name: str) -> str:\n    return f"Hello, {name}!"\n')
    done = subprocess.run([sys.executable, *command[1:]], cwd=fixture, capture_output=True, text=True, check=False,
                          timeout=60)
    assert (done.returncode == 0) == (damage == "done"), done.stderr
