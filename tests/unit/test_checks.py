"""The file and command check types against a real sandbox: pass, fail and error for each, and their messages;
and the dispatch table, which must name exactly the models of the ``Check`` union."""

from __future__ import annotations

import importlib
import os
import pkgutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Literal, Union, get_args

import pytest
from pydantic import Field, TypeAdapter

import pytest_atlante.checks as checks_package
from pytest_atlante.checks import TABLE, Check, CommandCheck, check_table, run_checks, union_members
from pytest_atlante.checks.base import CheckContext, CheckKind, Rules
from pytest_atlante.models import StrictModel
from pytest_atlante.records import CheckResult
from pytest_atlante.sandbox.process import allowlisted_environment
from pytest_atlante.sandbox.trialdir import Diff, Sandbox, assemble, collect_diff, remove_tree, run_dir, snapshot

CHECK: TypeAdapter[Check] = TypeAdapter(Check)
NO_DIFF = Diff(changed_paths=[], text="")


@pytest.fixture
def sb(tmp_path: Path) -> Iterator[Sandbox]:
    fixture = tmp_path / "fixture"
    (fixture / "src").mkdir(parents=True)
    (fixture / "src/app.py").write_text('def health():\n    return {"status": "ok"}\n')
    (fixture / "README.md").write_text("readme\n")
    rid = "c" + uuid.uuid4().hex[:12]
    sandbox = assemble(rid, "checks", 1, fixture, None)
    snapshot(sandbox, ["README.md", "src/app.py", "later.txt"])
    yield sandbox
    remove_tree(run_dir(rid))


def check(sandbox: Sandbox, spec: dict[str, object], diff: Diff = NO_DIFF) -> CheckResult:
    env = allowlisted_environment(os.environ, home=sandbox.home)
    [result] = run_checks([CHECK.validate_python(spec)], sandbox=sandbox, diff=diff, env=env)
    return result


# --- command -----------------------------------------------------------------------------------


def test_command_passes_on_the_expected_exit_in_the_sandbox_root(sb: Sandbox) -> None:
    result = check(sb, {"type": "command", "run": ["sh", "-c", "pwd; ls src"],
                        "outputMatches": "app\\.py"})
    assert result.passed and not result.error and result.exitCode == 0
    assert result.output is not None and result.output.splitlines()[0] == str(sb.root)
    assert result.message == 'command `sh -c \'pwd; ls src\'`: exit 0 and output matches "app\\.py"'


def test_command_fails_on_another_exit_code_and_names_the_last_output_line(sb: Sandbox) -> None:
    result = check(sb, {"type": "command", "run": ["sh", "-c", "echo running; echo boom >&2; exit 3"]})
    assert not result.passed and not result.error and not result.timedOut
    assert result.exitCode == 3
    assert result.output == "running\nboom\n"
    assert result.message == (
        "command `sh -c 'echo running; echo boom >&2; exit 3'`: exit 3 (expected 0); last output: boom"
    )


def test_command_expect_exit_can_require_failure(sb: Sandbox) -> None:
    assert check(sb, {"type": "command", "run": ["false"], "expectExit": 1}).passed
    assert not check(sb, {"type": "command", "run": ["true"], "expectExit": 1}).passed


def test_output_pattern_is_a_regex_over_stdout_and_stderr(sb: Sandbox) -> None:
    spec = {"type": "command", "run": ["sh", "-c", "echo 'tests: 3 passed'; echo 'warn: slow' >&2"]}
    assert check(sb, {**spec, "outputMatches": r"\d+ passed"}).passed
    assert check(sb, {**spec, "outputMatches": "(?m)^warn: slow$"}).passed
    missed = check(sb, {**spec, "outputMatches": "[1-9] failed"})
    assert not missed.passed and not missed.error
    assert 'output does not match "[1-9] failed"' in missed.message


def test_command_sees_only_the_environment_it_is_given(
    sb: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    result = check(sb, {"type": "command", "run": ["env"]})
    assert result.passed and result.output is not None
    assert "sk-secret" not in result.output
    assert f"HOME={sb.home}" in result.output


def test_command_argv_is_never_given_to_a_shell(sb: Sandbox) -> None:
    result = check(sb, {"type": "command", "run": ["echo", "$HOME; touch pwned"]})
    assert result.passed and result.output == "$HOME; touch pwned\n"
    assert not (sb.root / "pwned").exists()


def test_command_output_keeps_the_last_2000_characters(sb: Sandbox) -> None:
    result = check(sb, {"type": "command", "run": ["sh", "-c", "seq 1 5000"]})
    assert result.output is not None and len(result.output) == 2000
    assert result.output.endswith("4999\n5000\n")


def test_command_timeout_is_a_failed_check_and_leaves_nothing_running(sb: Sandbox) -> None:
    started = time.monotonic()
    result = check(sb, {"type": "command", "timeoutMs": 500,
                        "run": ["sh", "-c", "echo $$ > pids; sleep 30 & echo $! >> pids; sleep 30"]})
    elapsed = time.monotonic() - started
    assert result.timedOut and not result.passed and not result.error
    assert result.message == (
        "command `sh -c 'echo $$ > pids; sleep 30 & echo $! >> pids; sleep 30'`: timed out after 500 ms"
    )
    assert elapsed < 15
    pids = [int(line) for line in (sb.root / "pids").read_text().split()]
    assert len(pids) == 2
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or _state(pid) == "Z"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"


def test_command_that_cannot_start_is_an_error(sb: Sandbox) -> None:
    result = check(sb, {"type": "command", "run": ["no-such-program-atlante", "x"]})
    assert result.error and not result.passed and result.exitCode is None
    assert result.message.startswith("command `no-such-program-atlante x`: could not start: ")
    assert "no-such-program-atlante" in result.message.split("could not start: ")[1]


# --- file-exists / file-absent -------------------------------------------------------------------


def test_file_exists_accepts_files_and_directories(sb: Sandbox) -> None:
    assert check(sb, {"type": "file-exists", "path": "src/app.py"}).message == (
        "file-exists src/app.py: file exists"
    )
    assert check(sb, {"type": "file-exists", "path": "src"}).passed
    assert check(sb, {"type": "file-exists", "path": "src/"}).passed


def test_file_exists_fails_for_missing_paths_and_symlinks(sb: Sandbox) -> None:
    missing = check(sb, {"type": "file-exists", "path": "src/health.py"})
    assert not missing.passed and missing.message == "file-exists src/health.py: does not exist"
    (sb.root / "link.py").symlink_to("src/app.py")
    linked = check(sb, {"type": "file-exists", "path": "link.py"})
    assert not linked.passed and "is a symlink" in linked.message
    assert not check(sb, {"type": "file-exists", "path": "README.md/child"}).passed


def test_file_absent_passes_for_missing_paths_and_symlinks(sb: Sandbox) -> None:
    assert check(sb, {"type": "file-absent", "path": "dist"}).passed
    (sb.root / "dangling").symlink_to("nowhere")
    result = check(sb, {"type": "file-absent", "path": "dangling"})
    assert result.passed and "symlink" in result.message


def test_file_absent_fails_when_the_path_exists(sb: Sandbox) -> None:
    result = check(sb, {"type": "file-absent", "path": "README.md"})
    assert not result.passed and result.message == "file-absent README.md: file exists"


def test_paths_behind_a_symlinked_directory_to_outside_are_not_sandbox_paths(
    sb: Sandbox, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("the status is known\n")
    (sb.root / "escape").symlink_to(outside)
    exists = check(sb, {"type": "file-exists", "path": "escape/secret.txt"})
    assert not exists.passed and "outside the sandbox" in exists.message
    assert check(sb, {"type": "file-absent", "path": "escape/secret.txt"}).passed


# --- file-unchanged ------------------------------------------------------------------------------


def test_file_unchanged_passes_when_untouched(sb: Sandbox) -> None:
    assert check(sb, {"type": "file-unchanged", "path": "README.md"}).message == (
        "file-unchanged README.md: unchanged"
    )
    assert check(sb, {"type": "file-unchanged", "path": "later.txt"}).passed  # missing both times


def test_file_unchanged_fails_on_edit_delete_create_and_symlink_swap(sb: Sandbox) -> None:
    (sb.root / "README.md").write_text("edited\n")
    edited = check(sb, {"type": "file-unchanged", "path": "README.md"})
    assert not edited.passed and "content changed (sha256 " in edited.message
    (sb.root / "later.txt").write_text("new\n")
    created = check(sb, {"type": "file-unchanged", "path": "later.txt"})
    assert not created.passed and "now a regular file" in created.message
    (sb.root / "src/app.py").unlink()
    (sb.root / "src/app.py").symlink_to("../README.md")
    swapped = check(sb, {"type": "file-unchanged", "path": "src/app.py"})
    assert not swapped.passed and "deleted or replaced" in swapped.message


def test_file_unchanged_without_a_baseline_digest_is_an_error(sb: Sandbox) -> None:
    result = check(sb, {"type": "file-unchanged", "path": "src/other.py"})
    assert result.error and not result.passed


# --- file-contains -------------------------------------------------------------------------------


def test_file_contains_literal_text_by_default(sb: Sandbox) -> None:
    found = check(sb, {"type": "file-contains", "path": "src/app.py", "pattern": '"status": "ok"'})
    assert found.passed and found.message == (
        'file-contains src/app.py: pattern "\\"status\\": \\"ok\\"" found'
    )
    # Regex syntax is literal text here: "st.tus" is not in the file.
    literal = check(sb, {"type": "file-contains", "path": "src/app.py", "pattern": "st.tus"})
    assert not literal.passed
    assert literal.message == 'file-contains src/app.py: pattern "st.tus" not found'


def test_file_contains_regex_when_asked(sb: Sandbox) -> None:
    spec = {"type": "file-contains", "path": "src/app.py", "regex": True}
    assert check(sb, {**spec, "pattern": r"def \w+\(\):"}).passed
    missed = check(sb, {**spec, "pattern": r"^return"})
    assert not missed.passed and missed.message == 'file-contains src/app.py: regex "^return" not found'


def test_file_contains_missing_file_directory_and_fifo_fail_clearly(sb: Sandbox) -> None:
    spec = {"type": "file-contains", "pattern": "x"}
    assert check(sb, {**spec, "path": "nope.py"}).message == "file-contains nope.py: file not found"
    assert check(sb, {**spec, "path": "src"}).message == "file-contains src: is a directory, not a regular file"
    os.mkfifo(sb.root / "pipe")
    assert check(sb, {**spec, "path": "pipe"}).message == "file-contains pipe: is a FIFO (named pipe), not a regular file"


def test_file_contains_reads_invalid_utf8_with_replacement(sb: Sandbox) -> None:
    (sb.root / "mixed.txt").write_bytes(b"caf\xe9 status: ok\n")
    assert check(sb, {"type": "file-contains", "path": "mixed.txt", "pattern": "status: ok"}).passed
    assert check(sb, {"type": "file-contains", "path": "mixed.txt", "pattern": "caf\ufffd"}).passed


def test_file_contains_follows_links_inside_and_refuses_links_outside(
    sb: Sandbox, tmp_path: Path
) -> None:
    (sb.root / "inner").symlink_to("src/app.py")
    assert check(sb, {"type": "file-contains", "path": "inner", "pattern": "status"}).passed
    outside = tmp_path / "secret.txt"
    outside.write_text("status\n")
    (sb.root / "outer").symlink_to(outside)
    refused = check(sb, {"type": "file-contains", "path": "outer", "pattern": "status"})
    assert not refused.passed
    assert refused.message == "file-contains outer: symlink leads outside the sandbox; refusing to read it"


# --- diff-allowlist ------------------------------------------------------------------------------


def allow(sb: Sandbox, entries: list[str], changed: list[str]) -> CheckResult:
    return check(sb, {"type": "diff-allowlist", "allow": entries}, Diff(sorted(changed), ""))


def test_allowlist_exact_paths_and_directories(sb: Sandbox) -> None:
    changed = ["src/routes.ts", "src/health/test.ts", "docs/x.md"]
    assert allow(sb, ["src", "docs/x.md"], changed).passed
    assert allow(sb, ["src/", "docs/"], changed).passed
    partial = allow(sb, ["src/routes.ts"], changed)
    assert not partial.passed
    assert partial.message == (
        "diff-allowlist: 2 changed path(s) outside the allowlist: docs/x.md, src/health/test.ts"
    )
    # A directory entry is a whole path segment, not a string prefix.
    assert not allow(sb, ["src"], ["srcfoo.ts"]).passed


def test_allowlist_globs_stay_within_a_segment_unless_double_star(sb: Sandbox) -> None:
    assert allow(sb, ["src/*.ts"], ["src/a.ts", "src/b.ts"]).passed
    assert not allow(sb, ["src/*.ts"], ["src/sub/a.ts"]).passed
    assert allow(sb, ["src/**/*.ts"], ["src/a.ts", "src/sub/deep/b.ts"]).passed
    assert allow(sb, ["**/*.test.ts"], ["a.test.ts", "x/y/b.test.ts"]).passed
    assert allow(sb, ["src/*"], ["src/sub/a.ts"]).passed  # matches the directory src/sub
    assert allow(sb, ["[ab].txt", "c?.md"], ["a.txt", "b.txt", "c1.md"]).passed
    assert not allow(sb, ["[!ab].txt"], ["a.txt"]).passed
    assert allow(sb, ["file[1].txt"], ["file1.txt"]).passed
    assert allow(sb, ["weird[.txt"], ["weird[.txt"]).passed  # an unclosed bracket is literal
    assert allow(sb, ["v[0-9].md", "x[[&].md"], ["v7.md", "x[.md", "x&.md"]).passed
    assert not allow(sb, ["v[0-9].md"], ["v-.md"]).passed


def test_allowlist_passes_for_an_empty_diff_and_caps_the_listed_paths(sb: Sandbox) -> None:
    assert allow(sb, ["src"], []).message == "diff-allowlist: all 0 changed path(s) are allowed"
    many = allow(sb, ["src"], [f"f{i:02}.txt" for i in range(13)])
    assert many.message.endswith("f09.txt, ... and 3 more")
    assert many.message.startswith("diff-allowlist: 13 changed path(s) outside the allowlist: f00.txt")


def test_allowlist_matches_a_name_that_is_not_utf8_in_either_form_and_shows_it_escaped(sb: Sandbox) -> None:
    root = os.fsencode(sb.root)
    for name in (b"bad\xff\xfe.txt", b"bad\\xff\\xfe.txt", b"esc\x1b\nnl.txt"):
        with open(root + b"/" + name, "wb") as handle:
            handle.write(b"x")
    diff = collect_diff(sb, ".claude")
    assert diff.changed_paths == ["bad\\\\xff\\\\xfe.txt", "bad\\xff\\xfe.txt", "esc\\x1b\\nnl.txt"]
    refused = check(sb, {"type": "diff-allowlist", "allow": ["other.txt"]}, diff)
    assert refused.message == ("diff-allowlist: 3 changed path(s) outside the allowlist: "
                               "bad\\\\xff\\\\xfe.txt, bad\\xff\\xfe.txt, esc\\x1b\\nnl.txt")
    # The name itself: an undecodable byte is one character for a glob; a control character is itself.
    assert check(sb, {"type": "diff-allowlist", "allow": ["bad??.txt", "bad\\xff\\xfe.txt", "esc\x1b\nnl.txt"]}, diff).passed
    # The shown form, as copied from a report, allows what the report named, and nothing else.
    copied = check(sb, {"type": "diff-allowlist", "allow": ["bad\\xff\\xfe.txt", "esc\\x1b\\nnl.txt"]}, diff)
    assert copied.passed  # the honest backslash name is allowed by its own (unescaped) name here
    only_bytes = check(sb, {"type": "diff-allowlist", "allow": ["bad\\\\xff\\\\xfe.txt", "esc*"]}, diff)
    assert only_bytes.message == "diff-allowlist: 1 changed path(s) outside the allowlist: bad\\xff\\xfe.txt"


def test_check_paths_are_shown_escaped_in_messages(sb: Sandbox) -> None:
    # A scenario's path is valid Unicode (validation); a control character in it is shown escaped.
    (sb.root / "tab\there\x1b").write_text("hello\n")
    assert check(sb, {"type": "file-exists", "path": "tab\there\x1b"}).message == "file-exists tab\\there\\x1b: file exists"
    assert check(sb, {"type": "file-absent", "path": "new\nline"}).message == "file-absent new\\nline: does not exist"
    found = check(sb, {"type": "file-contains", "path": "tab\there\x1b", "pattern": "hello"})
    assert found.passed and found.message == 'file-contains tab\\there\\x1b: pattern "hello" found'


# --- all together --------------------------------------------------------------------------------


def test_every_check_runs_after_earlier_failures_and_errors(sb: Sandbox) -> None:
    specs = [
        {"type": "command", "run": ["no-such-program-atlante"]},
        {"type": "file-exists", "path": "missing"},
        {"type": "file-contains", "path": "README.md", "pattern": "readme"},
        {"type": "diff-allowlist", "allow": ["src"]},
    ]
    env = allowlisted_environment(os.environ, home=sb.home)
    results = run_checks(
        [CHECK.validate_python(spec) for spec in specs],
        sandbox=sb,
        diff=Diff(["src/app.py"], ""),
        env=env,
    )
    assert [(r.index, r.type, r.passed, r.error) for r in results] == [
        (0, "command", False, True),
        (1, "file-exists", False, False),
        (2, "file-contains", True, False),
        (3, "diff-allowlist", True, False),
    ]


# --- the dispatch table ----------------------------------------------------------------------------


def test_the_dispatch_table_and_the_union_name_the_same_models() -> None:
    members = union_members(Check)
    assert len(members) == 11
    assert set(TABLE) == set(members)
    assert all(kind.model is model for model, kind in TABLE.items())
    # Each model's discriminator names the check type its runner reports.
    assert sorted(get_args(kind.model.model_fields["type"].annotation)[0] for kind in TABLE.values()) == [
        "agent-used", "command", "command-used", "diff-allowlist", "file-absent", "file-contains", "file-exists", "file-unchanged",
        "skill-used", "tool-used", "usage-within",
    ]


def test_every_kind_a_check_module_defines_is_in_the_table() -> None:
    """A new check module whose kind was left out of ``_KINDS`` is caught here, not in a trial."""
    listed = list(TABLE.values())
    for info in pkgutil.iter_modules(checks_package.__path__):
        module = importlib.import_module(f"{checks_package.__name__}.{info.name}")
        kinds = [value for value in vars(module).values() if isinstance(value, CheckKind)]
        assert info.name == "base" or kinds, f"checks/{info.name}.py defines no CheckKind"
        assert all(kind in listed for kind in kinds), f"checks/{info.name}.py has a kind outside the table"


class SpareCheck(StrictModel):
    type: Literal["spare"]


def _spare_run(index: int, check: SpareCheck, ctx: CheckContext) -> CheckResult:
    return CheckResult(index=index, type=check.type, passed=True, message="spare")


def _spare_rules(check: SpareCheck, where: str, found: Rules) -> None:
    return None


SPARE = CheckKind(SpareCheck, _spare_run, _spare_rules)
WIDER = Annotated[CommandCheck | SpareCheck, Field(discriminator="type")]


def test_a_union_member_without_a_table_entry_is_refused() -> None:
    with pytest.raises(TypeError, match="in the Check union without a runner in the table: SpareCheck"):
        check_table(WIDER, [TABLE[CommandCheck]])
    with pytest.raises(TypeError, match="without a runner in the table: SpareCheck"):
        every_and_spare = Union[(*union_members(Check), SpareCheck)]  # type: ignore[valid-type]
        check_table(Annotated[every_and_spare, Field(discriminator="type")], TABLE.values())


def test_a_table_entry_outside_the_union_or_listed_twice_is_refused() -> None:
    with pytest.raises(TypeError, match="in the table but not in the Check union: SpareCheck"):
        check_table(Check, [*TABLE.values(), SPARE])
    with pytest.raises(TypeError, match="CommandCheck is listed twice"):
        check_table(Check, [*TABLE.values(), TABLE[CommandCheck]])


def test_a_matching_union_and_table_make_a_table_that_dispatches(sb: Sandbox) -> None:
    table = check_table(WIDER, [TABLE[CommandCheck], SPARE])
    assert set(table) == {CommandCheck, SpareCheck}
    ctx = CheckContext(sandbox=sb, diff=NO_DIFF, env={})
    assert table[SpareCheck].run(0, SpareCheck(type="spare"), ctx).message == "spare"
