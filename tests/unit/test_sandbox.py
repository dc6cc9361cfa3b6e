"""The trial sandbox: assembly, overlay collisions, the git baseline, the diff and cleanup."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_atlante.pathnames import escape_path, unescape_path
from pytest_atlante.records import TrialRecord
from pytest_atlante.sandbox import trialdir as sandbox_module
from pytest_atlante.sandbox.trialdir import (
    OverlayCollision,
    Sandbox,
    SandboxError,
    assemble,
    collect_diff,
    path_digest,
    remove,
    remove_run_dir,
    remove_tree,
    run_dir,
    snapshot,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def run_id() -> Iterator[str]:
    rid = "t" + uuid.uuid4().hex[:12]
    yield rid
    remove_tree(run_dir(rid))


def write_tree(base: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    base.mkdir(parents=True, exist_ok=True)
    return base


def make(
    run_id: str,
    tmp_path: Path,
    files: dict[str, str | bytes],
    overlay: dict[str, str | bytes] | None = None,
    *,
    trial: int = 1,
) -> Sandbox:
    fixture = write_tree(tmp_path / f"fixture-{trial}", files)
    overlay_dir = write_tree(tmp_path / f"overlay-{trial}", overlay) if overlay else None
    return assemble(run_id, "scn", trial, fixture, overlay_dir)


def agent_shell(sb: Sandbox, command: str) -> None:
    """Run a shell command in the sandbox the way an agent's tool would (git discovery allowed)."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(sb.home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "agent",
        "GIT_AUTHOR_EMAIL": "agent@example.invalid",
        "GIT_COMMITTER_NAME": "agent",
        "GIT_COMMITTER_EMAIL": "agent@example.invalid",
    }
    subprocess.run(["sh", "-c", command], cwd=sb.root, env=env, check=True, capture_output=True)


# --- assembly ----------------------------------------------------------------------------------


def test_assemble_copies_fixture_and_overlay_into_a_fresh_layout(run_id: str, tmp_path: Path) -> None:
    sb = make(
        run_id,
        tmp_path,
        {"src/app.py": "print(1)\n", ".claude/notes.md": "mine\n"},
        {".claude/agents/a.md": "agent\n", ".claude/skills/s/SKILL.md": "skill\n"},
    )
    assert sb.trial_dir == run_dir(run_id) / "scn-1"
    assert sb.root == sb.trial_dir / "sandbox"
    assert (sb.root / "src/app.py").read_text() == "print(1)\n"
    assert (sb.root / ".claude/notes.md").read_text() == "mine\n"
    assert (sb.root / ".claude/agents/a.md").read_text() == "agent\n"
    assert (sb.root / ".claude/skills/s/SKILL.md").read_text() == "skill\n"
    assert sb.home.is_dir() and list(sb.home.iterdir()) == []
    assert sb.root not in sb.git_dir.parents and sb.git_dir.parent == sb.trial_dir
    assert (os.stat(run_dir(run_id)).st_mode & 0o777) == 0o700


def test_overlay_collision_lists_every_colliding_fixture_file(run_id: str, tmp_path: Path) -> None:
    with pytest.raises(OverlayCollision) as caught:
        make(
            run_id,
            tmp_path,
            {".claude/agents/a.md": "fixture\n", ".claude/skills": "a file where a dir goes\n"},
            {".claude/agents/a.md": "built\n", ".claude/agents/b.md": "b\n",
             ".claude/skills/s/SKILL.md": "skill\n"},
        )
    assert caught.value.paths == [".claude/agents/a.md", ".claude/skills/s/SKILL.md"]
    assert "rename or remove" in str(caught.value)
    assert not (run_dir(run_id) / "scn-1").exists()


def test_root_is_the_realpath_when_the_temp_dir_is_a_symlink(
    run_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tmp_path / "real-tmp"
    real.mkdir()
    link = tmp_path / "link-tmp"
    link.symlink_to(real)
    monkeypatch.setattr(tempfile, "tempdir", str(link))
    sb = make(run_id, tmp_path, {"a.txt": "a"})
    assert sb.root == real / f"atlante-eval-{run_id}" / "scn-1" / "sandbox"
    assert str(sb.root) == os.path.realpath(sb.root)
    assert str(link) not in str(sb.root)


def test_a_failed_copy_leaves_no_trial_dir_behind(run_id: str, tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="cannot assemble the sandbox"):
        assemble(run_id, "scn", 1, tmp_path / "no-such-fixture", None)
    assert not (run_dir(run_id) / "scn-1").exists()
    fixture = write_tree(tmp_path / "f", {"a": "a"})
    assemble(run_id, "scn", 2, fixture, None)
    with pytest.raises(SandboxError, match="already exists"):
        assemble(run_id, "scn", 2, fixture, None)


def test_names_that_could_escape_the_run_dir_are_refused(run_id: str, tmp_path: Path) -> None:
    fixture = write_tree(tmp_path / "f", {"a": "a"})
    with pytest.raises(ValueError):
        assemble(run_id, "../evil", 1, fixture, None)
    with pytest.raises(ValueError):
        run_dir("a/b")


# --- baseline and diff ---------------------------------------------------------------------------


def test_diff_reports_added_modified_deleted_mode_and_binary_changes(
    run_id: str, tmp_path: Path
) -> None:
    sb = make(
        run_id,
        tmp_path,
        {"src/app.py": "a = 1\n", "gone.txt": "bye\n", "run.sh": "echo\n", "img.bin": b"\0\1\2"},
    )
    snapshot(sb, [])
    (sb.root / "src/app.py").write_text("a = 2\n")
    (sb.root / "gone.txt").unlink()
    (sb.root / "run.sh").chmod(0o755)
    (sb.root / "img.bin").write_bytes(b"\0\1\3\4")
    (sb.root / "new/deep").mkdir(parents=True)
    (sb.root / "new/deep/untracked.txt").write_text("fresh\n")
    (sb.root / "link").symlink_to("src/app.py")
    diff = collect_diff(sb, ".claude")
    assert diff.changed_paths == [
        "gone.txt", "img.bin", "link", "new/deep/untracked.txt", "run.sh", "src/app.py"
    ]
    assert "-a = 1\n+a = 2" in diff.text
    assert "deleted file mode 100644" in diff.text and "-bye" in diff.text
    assert "old mode 100644\nnew mode 100755" in diff.text
    assert "Binary files a/img.bin and b/img.bin differ" in diff.text
    assert "+fresh" in diff.text
    assert "new file mode 120000" in diff.text


def test_no_change_means_an_empty_diff(run_id: str, tmp_path: Path) -> None:
    sb = make(run_id, tmp_path, {"a.txt": "a\n", "b/c.txt": "c\n"})
    snapshot(sb, [])
    diff = collect_diff(sb, ".claude")
    assert diff.changed_paths == [] and diff.text == ""


def test_host_owned_dir_is_ignored_only_at_the_root(run_id: str, tmp_path: Path) -> None:
    sb = make(run_id, tmp_path, {"a.txt": "a\n"}, {".claude/agents/x.md": "agent\n"})
    snapshot(sb, [])
    (sb.root / ".claude/agents/x.md").write_text("changed by host\n")
    (sb.root / ".claude/session.jsonl").write_text("{}\n")
    (sb.root / "pkg/.claude").mkdir(parents=True)
    (sb.root / "pkg/.claude/x").write_text("not host-owned\n")
    (sb.root / ".opencode").mkdir()
    (sb.root / ".opencode/x").write_text("other host's dir is a normal dir here\n")
    diff = collect_diff(sb, ".claude")
    assert diff.changed_paths == [".opencode/x", "pkg/.claude/x"]
    assert "changed by host" not in diff.text
    shutil.rmtree(sb.root / ".claude")
    assert collect_diff(sb, ".claude").changed_paths == [".opencode/x", "pkg/.claude/x"]


def test_gitignore_and_gitattributes_in_the_sandbox_hide_nothing(run_id: str, tmp_path: Path) -> None:
    sb = make(run_id, tmp_path, {"a.txt": "a\n", ".gitignore": "dist/\n"})
    snapshot(sb, [])
    (sb.root / "dist").mkdir()
    (sb.root / "dist/bundle.js").write_text("x\n")
    (sb.root / ".gitignore").write_text("*\n")
    (sb.root / ".gitattributes").write_text("* -diff text eol=crlf\n")
    (sb.root / "a.txt").write_text("secret edit\n")
    (sb.root / "hidden.txt").write_text("hide me\n")
    diff = collect_diff(sb, ".claude")
    assert diff.changed_paths == [".gitattributes", ".gitignore", "a.txt", "dist/bundle.js", "hidden.txt"]
    assert "+secret edit" in diff.text  # `-diff` would have turned this into "Binary files differ"


@pytest.mark.parametrize(
    "tamper",
    [
        "git init -q && git add -A && git commit -q -m x && git reset -q --hard",
        "git init -q && git add -A && git commit -q -m x && rm -rf .git && git init -q",
        "printf 'gitdir: /nonexistent\\n' > .git",
        "git init -q && git add -A && git commit -q -m x && git reset -q --hard && "
        "git update-index --assume-unchanged a.txt && printf '[core]\\n\\tworktree = /tmp\\n' >> .git/config",
        "mkdir -p sub && cd sub && git init -q && git add -A && git commit -q -m x --allow-empty",
    ],
    ids=["reset-hard", "rm-git-and-reinit", "forged-gitfile", "rewritten-config", "nested-repo"],
)
def test_git_tricks_in_the_sandbox_cannot_hide_changes(
    run_id: str, tmp_path: Path, tamper: str
) -> None:
    sb = make(run_id, tmp_path, {"a.txt": "a\n", "sub/keep.txt": "k\n"})
    snapshot(sb, [])
    (sb.root / "a.txt").write_text("modified\n")
    (sb.root / "added.txt").write_text("added\n")
    (sb.root / "sub/added.txt").write_text("added\n")
    agent_shell(sb, tamper)
    diff = collect_diff(sb, ".claude")
    marker = "sub/.git" if "cd sub" in tamper else ".git"
    assert diff.changed_paths == sorted([marker, "a.txt", "added.txt", "sub/added.txt"])
    assert "+modified" in diff.text
    assert f"# {marker}: git metadata" in diff.text


def test_git_tricks_do_not_hide_changes_when_a_sandbox_repo_existed_at_baseline(
    run_id: str, tmp_path: Path
) -> None:
    sb = make(run_id, tmp_path, {"a.txt": "a\n"})
    agent_shell(sb, "git init -q && git add -A && git commit -q -m setup")  # a setup step
    snapshot(sb, [])
    (sb.root / "a.txt").write_text("modified\n")
    agent_shell(sb, "git add -A && git commit -q -m agent && git reset -q --hard HEAD~1 && "
                "echo again > a.txt && git add -A && git commit -q -m hidden")
    diff = collect_diff(sb, ".claude")
    assert diff.changed_paths == ["a.txt"]  # commits inside an existing .git are not a change
    agent_shell(sb, "rm -rf .git")
    assert collect_diff(sb, ".claude").changed_paths == [".git", "a.txt"]


def test_inherited_git_variables_cannot_redirect_the_baseline(
    run_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoy = tmp_path / "decoy"
    monkeypatch.setenv("GIT_DIR", str(decoy))
    monkeypatch.setenv("GIT_WORK_TREE", str(tmp_path))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "decoy-index"))
    monkeypatch.setenv("GIT_OBJECT_DIRECTORY", str(decoy))
    sb = make(run_id, tmp_path, {"a.txt": "a\n"})
    snapshot(sb, [])
    (sb.root / "b.txt").write_text("b\n")
    assert collect_diff(sb, ".claude").changed_paths == ["b.txt"]
    assert not decoy.exists() and not (tmp_path / "decoy-index").exists()


def test_awkward_names_and_special_files_are_reported(run_id: str, tmp_path: Path) -> None:
    sb = make(run_id, tmp_path, {"a.txt": "a\n"})
    snapshot(sb, [])
    (sb.root / "line\nbreak.txt").write_text("x\n")
    (sb.root / "GIT~1").write_text("ntfs short name\n")
    (sb.root / "ünï cødé.txt").write_text("u\n")
    (sb.root / ".GIT").mkdir()
    (sb.root / ".GIT/inside").write_text("git metadata\n")
    (sb.root / ".gitmodules").symlink_to("/etc/passwd")
    os.mkfifo(sb.root / "pipe")
    diff = collect_diff(sb, ".claude")
    # A newline is shown escaped (pathnames.escape_path), as in every report field.
    assert diff.changed_paths == sorted(
        [".GIT", ".gitmodules", "GIT~1", "line\\nbreak.txt", "pipe", "ünï cødé.txt"]
    )
    assert "<atlante: fifo>" in diff.text
    assert "<atlante: symlink to /etc/passwd>" in diff.text
    assert "ünï cødé.txt" in diff.text


def _bytes_path(root: Path, name: bytes) -> bytes:
    return os.fsencode(root) + b"/" + name


def _write_bytes_name(root: Path, name: bytes, content: bytes = b"x\n") -> None:
    with open(_bytes_path(root, name), "wb") as handle:
        handle.write(content)


def test_names_that_are_not_utf8_or_hold_control_characters_are_shown_escaped(run_id: str, tmp_path: Path) -> None:
    """Issue 22 item 2: every byte string a name can hold gives paths and diff headers in one
    escaped form, and a record holding them serialises."""
    sb = make(run_id, tmp_path, {"a.txt": "a\n"})
    _write_bytes_name(sb.root, b"gone\x1b[1m.txt", b"old\n")
    _write_bytes_name(sb.root, b"mode \xfe.sh", b"echo\n")
    snapshot(sb, [])
    os.unlink(_bytes_path(sb.root, b"gone\x1b[1m.txt"))
    os.chmod(_bytes_path(sb.root, b"mode \xfe.sh"), 0o755)
    _write_bytes_name(sb.root, b"bad\xff\xfe.txt")
    _write_bytes_name(sb.root, b"bad\\xff\\xfe.txt")  # honest backslashes: shown apart
    _write_bytes_name(sb.root, b"new\nline\tand space", b"y\n")  # git ends such a --- name with a tab
    _write_bytes_name(sb.root, b'quote"d', b"\0binary\xff")
    _write_bytes_name(sb.root, b"\xff" * 255)  # the longest name a filesystem allows
    os.mkdir(_bytes_path(sb.root, b"dir\xc3"))
    _write_bytes_name(sb.root, b"dir\xc3/inner\x7f")
    os.symlink(b"target\xff", _bytes_path(sb.root, b"link\x01"))
    os.mkdir(_bytes_path(sb.root, b"dir\xc3/.git"))
    diff = collect_diff(sb, ".claude")
    expected = {
        "gone\\x1b[1m.txt": "deleted file mode 100644",
        "mode \\xfe.sh": "old mode 100644\nnew mode 100755",
        "bad\\xff\\xfe.txt": "+x",
        "bad\\\\xff\\\\xfe.txt": "+x",
        "new\\nline\\tand space": "+y",
        'quote"d': "Binary files /dev/null and b/quote\"d differ",
        "\\xff" * 255: "+x",
        "dir\\xc3/inner\\x7f": "+x",
        "link\\x01": "new file mode 120000",
    }
    assert diff.changed_paths == sorted([*expected, "dir\\xc3/.git"])
    for shown, detail in expected.items():
        assert f"diff --git a/{shown} b/{shown}\n" in diff.text, shown
        assert detail in diff.text, (shown, detail)
        assert diff.name_of(shown) == os.fsdecode(unescape_path(shown))
    assert "--- a/gone\\x1b[1m.txt\n+++ /dev/null" in diff.text
    assert "--- /dev/null\n+++ b/new\\nline\\tand space\t\n" in diff.text
    assert "# dir\\xc3/.git: git metadata dir created by the trial" in diff.text
    assert "\ufffd" not in diff.text.replace("+target\ufffd", "")  # only content keeps U+FFFD
    record = TrialRecord(scenario="s", trial=1, nodeId="n", verdict="fail", changedPaths=diff.changed_paths, diff=diff.text)
    assert TrialRecord.model_validate_json(record.model_dump_json()) == record


def test_every_single_byte_in_a_name_matches_gits_own_quoting(run_id: str, tmp_path: Path) -> None:
    sb = make(run_id, tmp_path, {"a.txt": "a\n"})
    snapshot(sb, [])
    names = [b"n" + bytes([byte]) + b"." for byte in range(1, 256) if byte != ord("/")]
    for name in names:
        _write_bytes_name(sb.root, name)
    diff = collect_diff(sb, ".claude")
    assert len(diff.changed_paths) == len(names)
    for name in names:
        shown = escape_path(name)
        assert shown in diff.changed_paths
        assert f"diff --git a/{shown} b/{shown}\nnew file mode 100644\n" in diff.text, name
        tab = "\t" if b" " in name else ""  # git ends a ---/+++ name holding a space with a tab
        assert f"--- /dev/null\n+++ b/{shown}{tab}\n" in diff.text, name
    assert '"' not in diff.text.replace('n"', "")  # git's own quoting is gone everywhere


def test_baseline_tree_is_deterministic_and_held_in_memory(run_id: str, tmp_path: Path) -> None:
    first = make(run_id, tmp_path, {"a.txt": "a\n", "b/c": "c"}, trial=1)
    second = make(run_id, tmp_path, {"a.txt": "a\n", "b/c": "c"}, trial=2)
    for sb in (first, second):
        snapshot(sb, [])
    assert first.baseline_tree == second.baseline_tree and len(first.baseline_tree) == 40
    assert set(first.baseline_entries) == {"a.txt", "b/c"}
    # No ref names the baseline: there is nothing for the agent to move.
    refs = subprocess.run(["git", "--git-dir", str(first.git_dir), "for-each-ref"], capture_output=True, text=True, check=False)
    assert refs.stdout == ""


def _agent_git(sb: Sandbox, *args: str) -> None:
    """git as the agent would run it from the sandbox: GIT_DIR=../baseline.git."""
    env = {**os.environ, "GIT_DIR": "../baseline.git", "GIT_WORK_TREE": ".", "GIT_INDEX_FILE": "../agent-index",
           "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@x", "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@x"}
    subprocess.run(["git", *args], cwd=sb.root, env=env, check=True, capture_output=True)


def test_a_forged_baseline_commit_ref_config_or_attributes_changes_nothing(run_id: str, tmp_path: Path) -> None:
    sb = make(run_id, tmp_path, {"a.txt": "a\n"})
    snapshot(sb, [])
    (sb.root / "sneaky.txt").write_text("sneaky\n")
    (sb.root / "a.txt").write_text("changed\n")
    # The forge of issue 12: commit the current tree in the baseline repository and point refs at it.
    _agent_git(sb, "add", "-A")
    _agent_git(sb, "commit", "-qm", "forged")
    _agent_git(sb, "update-ref", "refs/heads/main", "HEAD")
    tree = subprocess.run(["git", "--git-dir", str(sb.git_dir), "rev-parse", "HEAD^{tree}"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # ... make git replace the baseline tree with it, hide text diffs, and run an external diff.
    _agent_git(sb, "replace", "-f", sb.baseline_tree, tree)
    (sb.git_dir / "info").mkdir(exist_ok=True)
    (sb.git_dir / "info" / "attributes").write_text("* -diff\n")
    with (sb.git_dir / "config").open("a") as config:
        config.write("[diff]\n\texternal = true\n[core]\n\tattributesFile = /dev/null\n")
    diff = collect_diff(sb, ".claude")
    assert diff.changed_paths == ["a.txt", "sneaky.txt"]
    assert "-a\n+changed" in diff.text and "+sneaky" in diff.text


@pytest.mark.parametrize("damage", ["delete", "overwrite", "swap"])
def test_a_missing_or_altered_baseline_object_is_an_error(run_id: str, tmp_path: Path, damage: str) -> None:
    sb = make(run_id, tmp_path, {"a.txt": "a\n", "b.txt": "b\n"})
    snapshot(sb, [])
    target = sb.git_dir / "objects" / sb.baseline_entries["a.txt"][1][:2] / sb.baseline_entries["a.txt"][1][2:]
    other = sb.git_dir / "objects" / sb.baseline_entries["b.txt"][1][:2] / sb.baseline_entries["b.txt"][1][2:]
    os.chmod(target, 0o600)
    if damage == "delete":
        target.unlink()
    elif damage == "overwrite":
        target.write_bytes(b"junk")
    else:  # a valid object, but of other content: git would show it as the old a.txt
        target.write_bytes(other.read_bytes())
    (sb.root / "a.txt").write_text("changed\n")
    with pytest.raises(SandboxError, match=r"baseline copy of a\.txt .* tampered with"):
        collect_diff(sb, ".claude")


def test_git_variables_of_the_runner_do_not_reach_its_git(
    run_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoy = tmp_path / "decoy.git"
    subprocess.run(["git", "init", "-q", "--bare", str(decoy)], check=True)
    for name, value in {"GIT_DIR": str(decoy), "GIT_OBJECT_DIRECTORY": str(decoy / "objects"),
                        "GIT_CONFIG_PARAMETERS": "'diff.noprefix'='true'", "GIT_EXTERNAL_DIFF": "false"}.items():
        monkeypatch.setenv(name, value)
    sb = make(run_id, tmp_path, {"a.txt": "a\n"})
    snapshot(sb, [])
    (sb.root / "a.txt").write_text("b\n")
    diff = collect_diff(sb, ".claude")
    assert diff.changed_paths == ["a.txt"] and "--- a/a.txt" in diff.text
    assert list((decoy / "objects").glob("??/*")) == []


def test_diff_output_is_cut_at_the_read_limit(
    run_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox_module, "DIFF_READ_LIMIT", 5_000)
    sb = make(run_id, tmp_path, {"a.txt": "a\n"})
    snapshot(sb, [])
    (sb.root / "big.txt").write_text("line of text\n" * 200_000)
    diff = collect_diff(sb, ".claude")
    assert diff.changed_paths == ["big.txt"]
    assert len(diff.text) < 5_100 and diff.text.endswith("# (diff output cut)\n")


def test_snapshot_records_digests_for_unchanged_paths(run_id: str, tmp_path: Path) -> None:
    sb = make(run_id, tmp_path, {"a.txt": "a\n", "dir/b.txt": "b\n"})
    (sb.root / "link").symlink_to("a.txt")
    snapshot(sb, ["a.txt", "missing.txt", "dir", "link"])
    assert sb.digests == {
        "a.txt": "87428fc522803d31065e7bce3cf03fe475096631e5e07bbd7a0fde60c4cf25c7",
        "missing.txt": None,
        "dir": None,
        "link": None,
    }
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x").write_text("x")
    (sb.root / "escape").symlink_to(outside)
    assert path_digest(sb.root, "escape/x") is None


def test_diff_without_git_on_path_is_a_sandbox_error(
    run_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The baseline needs no git process (gitobjects writes the objects); the diff text does.
    sb = make(run_id, tmp_path, {"a.txt": "a\n"})
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    snapshot(sb, [])
    (sb.root / "a.txt").write_text("b\n")
    with pytest.raises(SandboxError, match="git is not on PATH"):
        collect_diff(sb, ".claude")


# --- cleanup -----------------------------------------------------------------------------------


UNPRIVILEGED_SCRIPT = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from pytest_atlante.sandbox.trialdir import assemble, snapshot, collect_diff, remove
    fixture = Path(sys.argv[1])
    sb = assemble("perm", "scn", 1, fixture, None)
    snapshot(sb, [])
    (sb.root / "secret.txt").write_text("changed\\n")
    os.chmod(sb.root / "secret.txt", 0)
    os.chmod(sb.root / "locked", 0)
    print(collect_diff(sb, ".claude").changed_paths)
    os.chmod(sb.root / "locked", 0o555)
    os.chmod(sb.root / "ro", 0o555)
    os.chmod(sb.root / "ro/file.txt", 0o444)
    os.chmod(sb.root, 0o555)
    remove(sb)
    print(sb.trial_dir.exists())
    """
)


def test_unreadable_entries_show_up_and_remove_copes_with_read_only_trees(tmp_path: Path) -> None:
    """Run as an unprivileged user: root ignores permission bits, which would make this vacuous."""
    work = Path(tempfile.mkdtemp(prefix="atlante-perm-"))
    try:
        write_tree(work / "fixture", {"secret.txt": "s\n", "locked/in.txt": "i\n", "ro/file.txt": "r\n"})
        # A copy of the package the unprivileged user can read: the checkout may sit in a 0700
        # directory (mktemp -d) or a 0750 home that `nobody` cannot enter.
        shutil.copytree(REPO_ROOT / "pytest_atlante", work / "src" / "pytest_atlante",
                        ignore=shutil.ignore_patterns("__pycache__"))
        env = {"PATH": os.environ["PATH"], "TMPDIR": str(work), "HOME": str(work),
               "PYTHONPATH": str(work / "src")}
        argv = [sys.executable, "-c", UNPRIVILEGED_SCRIPT, str(work / "fixture")]
        if os.getuid() == 0:
            shutil.chown(work, 65534, 65534)
            for dirpath, dirnames, filenames in os.walk(work):
                for name in dirnames + filenames:
                    os.chown(os.path.join(dirpath, name), 65534, 65534)
            # The interpreter under /root is not reachable by `nobody`; the system one is, and the
            # sandbox module needs only the standard library.
            argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                    "/usr/bin/python3", *argv[1:]]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == ["['locked', 'locked/in.txt', 'secret.txt']", "False"]
    finally:
        remove_tree(work)


def test_remove_does_not_follow_symlinks_out_of_the_sandbox(run_id: str, tmp_path: Path) -> None:
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    outside.chmod(0o500)
    sb = make(run_id, tmp_path, {"a.txt": "a"})
    (sb.root / "link").symlink_to(outside)
    remove(sb)
    assert not sb.trial_dir.exists()
    assert (outside / "keep.txt").read_text() == "keep"
    assert (outside.stat().st_mode & 0o777) == 0o500
    outside.chmod(0o700)


def test_remove_run_dir_only_removes_an_empty_run_dir(run_id: str, tmp_path: Path) -> None:
    first = make(run_id, tmp_path, {"a": "a"}, trial=1)
    make(run_id, tmp_path, {"a": "a"}, trial=2)
    remove(first)
    remove_run_dir(run_id)
    assert run_dir(run_id).is_dir()  # trial 2 is still kept there
    remove_tree(run_dir(run_id) / "scn-2")
    remove_run_dir(run_id)
    assert not run_dir(run_id).exists()
    remove_run_dir(run_id)  # already gone: no error


# --- speed (printed, never asserted) -----------------------------------------------------------


def test_measure_a_thousand_file_fixture(run_id: str, tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {
        f"pkg{i % 20}/mod{i}.py": f"value = {i}\n" * 20 for i in range(1000)
    }
    fixture = write_tree(tmp_path / "fixture", files)
    started = time.perf_counter()
    sb = assemble(run_id, "speed", 1, fixture, None)
    assembled = time.perf_counter()
    snapshot(sb, ["pkg0/mod0.py"])
    snapshotted = time.perf_counter()
    (sb.root / "pkg3/mod3.py").write_text("changed\n")
    diff = collect_diff(sb, ".claude")
    diffed = time.perf_counter()
    remove(sb)
    removed = time.perf_counter()
    assert diff.changed_paths == ["pkg3/mod3.py"]
    print(
        f"\n1,000 files: assemble {assembled - started:.3f}s, snapshot {snapshotted - assembled:.3f}s,"
        f" diff {diffed - snapshotted:.3f}s, remove {removed - diffed:.3f}s"
    )


# --------------------------------------------------------------------------- the copied login's end


def test_a_copied_login_is_emptied_wherever_the_agent_linked_or_moved_it(tmp_path: Path) -> None:
    """Issue 26: a hard link (or a rename) the agent made kept the token after the login was deleted."""
    home = tmp_path / "home"
    home.mkdir()
    login, moved = home / "login.json", home / "moved.json"
    login.write_text('{"token": "the-copied-token-value"}')
    with sandbox_module.held_logins([login]):
        os.link(login, home / "hard-link.json")
        os.rename(login, moved)  # the name now holds a new file, as a host's refresh would leave it
        login.write_text('{"token": "a-refreshed-token-value"}')
        os.link(login, home / "link-to-refreshed.json")
    assert not login.exists()
    assert [(home / name).read_text() for name in ("hard-link.json", "moved.json", "link-to-refreshed.json")] == [""] * 3


def test_a_symlink_at_the_login_is_removed_and_its_target_left_alone(tmp_path: Path) -> None:
    precious = tmp_path / "users-own-file.txt"
    precious.write_text("keep me")
    login = tmp_path / "login.json"
    with sandbox_module.held_logins([login, tmp_path / "never-there.json"]):
        login.symlink_to(precious)
    assert not os.path.lexists(login) and precious.read_text() == "keep me"
