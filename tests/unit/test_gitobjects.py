"""The objects gitobjects writes by hand are the ones git itself would write: same ids, valid store."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pytest_atlante.sandbox import gitobjects


def git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    env = {"PATH": os.environ["PATH"], "GIT_DIR": str(repo), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": os.devnull, "HOME": str(repo)}
    return subprocess.run(["git", *args], input=stdin, env=env, capture_output=True, check=True).stdout.decode(errors="surrogateescape")


# Names chosen for git's ordering rules: a directory sorts as if its name ended in "/", so "a-b"
# and "a.b" ("-" and "." are below "/") come before the directory "a", and "a0" after it.
TREE = {
    "a-b": b"dash\n",
    "a.b": b"dot\n",
    "a/b": b"in a\n",
    "a/c/d": b"deep\n",
    "a0": b"zero\n",
    "run.sh": b"#!/bin/sh\n",
    "space name.txt": b"spaces\n",
    "\udcff-latin1": b"not utf-8\n",
    "empty": b"",
}


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    for rel, data in TREE.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (root / "run.sh").chmod(0o755)
    (root / "link").symlink_to("a/b")
    return root


def test_blob_and_tree_ids_match_git(sandbox: Path, tmp_path: Path) -> None:
    repo = tmp_path / "ours.git"
    gitobjects.init_bare(repo)
    entries, markers, _ = gitobjects.scan(sandbox, None, repo / "objects")
    assert markers == {}
    tree = gitobjects.write_tree(repo / "objects", entries)

    # git's own answer, from a separate repository: add every file with its mode, write the tree.
    theirs = tmp_path / "theirs.git"
    subprocess.run(["git", "init", "-q", "--bare", str(theirs)], check=True)
    index_info = b""
    for rel, (mode, _) in entries.items():
        path = sandbox / rel
        data = os.fsencode(os.readlink(path)) if path.is_symlink() else path.read_bytes()
        oid = git(theirs, "hash-object", "-w", "--stdin", stdin=data).strip()
        assert oid == entries[rel][1], rel
        index_info += f"{mode} {oid}\t".encode() + os.fsencode(rel) + b"\0"
    env_index = {"GIT_INDEX_FILE": str(tmp_path / "index")}
    subprocess.run(["git", "update-index", "-z", "--index-info"], input=index_info, check=True,
                   env={**os.environ, "GIT_DIR": str(theirs), **env_index})
    expected = subprocess.run(["git", "write-tree"], capture_output=True, check=True, text=True,
                              env={**os.environ, "GIT_DIR": str(theirs), **env_index}).stdout.strip()
    assert tree == expected
    assert entries["run.sh"][0] == gitobjects.MODE_EXEC and entries["link"][0] == gitobjects.MODE_LINK

    # The hand-made repository is one git reads and finds complete and well-formed.
    git(repo, "fsck", "--strict", "--no-dangling", tree)
    assert git(repo, "ls-tree", "-r", "--name-only", "-z", tree).split("\0")[:-1] == sorted(
        git(repo, "ls-tree", "-r", "--name-only", "-z", tree).split("\0")[:-1]
    )
    assert git(repo, "cat-file", "-p", f"{tree}:a/c/d") == "deep\n"


def test_a_git_entry_is_a_marker_never_stored(sandbox: Path, tmp_path: Path) -> None:
    (sandbox / "sub").mkdir()
    (sandbox / "sub" / ".GIT").mkdir()
    (sandbox / "sub" / ".GIT" / "config").write_text("[core]\n")
    (sandbox / ".git").write_text("gitdir: /elsewhere\n")
    entries, markers, _ = gitobjects.scan(sandbox, None, None)
    assert markers == {"sub/.GIT": "dir", ".git": "file"}
    assert not any(".git" in rel.lower() for rel in entries)


def test_copy_verified_refuses_an_altered_object(sandbox: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    entries, _, _ = gitobjects.scan(sandbox, None, store)
    oid_a, oid_b = entries["a-b"][1], entries["a.b"][1]
    target = tmp_path / "target"
    target.mkdir()
    gitobjects.copy_verified(store, target, oid_a)
    assert (target / oid_a[:2] / oid_a[2:]).read_bytes() == (store / oid_a[:2] / oid_a[2:]).read_bytes()
    # Swap b's object in for a's: the name says a, the content hashes to b.
    swapped = store / oid_a[:2] / oid_a[2:]
    swapped.chmod(0o644)
    swapped.write_bytes((store / oid_b[:2] / oid_b[2:]).read_bytes())
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    with pytest.raises(ValueError, match="does not match"):
        gitobjects.copy_verified(store, fresh, oid_a)


def test_a_streamed_file_that_changes_size_while_read_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Files over the in-memory limit are read twice (hash, then compress); the size stat gave is
    # what the object header says, so a file that grew or shrank in between must not be stored.
    path = tmp_path / "growing"
    path.write_bytes(b"x" * (2 << 20))
    real_stat = os.stat

    def stale_stat(p: str, *args: object, **kwargs: object) -> os.stat_result:
        result = real_stat(p, *args, **kwargs)  # type: ignore[arg-type]
        return os.stat_result((result.st_mode, *result[1:6], result.st_size - 1, *result[7:]))

    monkeypatch.setattr(os, "stat", stale_stat)
    with pytest.raises(gitobjects.ChangedWhileReading):
        gitobjects.store_entry(None, "growing", "file", str(path))


def test_random_deep_trees_match_git(tmp_path: Path) -> None:
    # Names from characters that sort around "/" ("-", ".", "0", "a"), at varying depths, so the
    # one-pass writer opens and closes directories in every order git's sorting produces.
    import random

    rng = random.Random(1234)
    entries: dict[str, tuple[str, str]] = {}
    for _ in range(400):
        depth = rng.randint(1, 4)
        parts = ["".join(rng.choice("-.0a") for _ in range(rng.randint(1, 3))) for _ in range(depth)]
        rel = "/".join(parts)
        if {".", ".."} & set(parts):
            continue  # not names a directory walk can meet
        if any(rel.startswith(p + "/") or p.startswith(rel + "/") for p in entries):
            continue  # a path cannot be both a file and a directory
        entries[rel] = (rng.choice([gitobjects.MODE_FILE, gitobjects.MODE_EXEC]), f"{rng.getrandbits(160):040x}")
    repo = tmp_path / "theirs.git"
    subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
    env = {**os.environ, "GIT_DIR": str(repo), "GIT_INDEX_FILE": str(tmp_path / "index")}
    index_info = b"".join(f"{mode} {oid}\t{rel}\0".encode() for rel, (mode, oid) in entries.items())
    subprocess.run(["git", "update-index", "-z", "--index-info"], input=index_info, check=True, env=env)
    expected = subprocess.run(["git", "write-tree", "--missing-ok"], capture_output=True, check=True, text=True,
                              env=env).stdout.strip()
    assert gitobjects.write_tree(None, entries) == expected
