"""Version probe against fake executables on a private PATH."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from pytest_atlante.diagnostics import DiagnosticError
from pytest_atlante.hosts import host_for
from pytest_atlante.hosts.base import parse_version
from pytest_atlante.hosts.probecache import CACHE_DIR_VARIABLE, CACHE_FILE, cache_path


def fake_cli(tmp_path: Path, name: str, body: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / name
    exe.write_text("#!/bin/sh\n" + body + "\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return {"PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"}


def probe_code(host: str, env: dict[str, str]) -> str:
    with pytest.raises(DiagnosticError) as caught:
        host_for(host).probe(env)  # type: ignore[arg-type]
    [diagnostic] = caught.value.diagnostics
    assert diagnostic.message and diagnostic.hint
    return diagnostic.code


@pytest.mark.parametrize(
    ("text", "expected"),
    [("2.1.197 (Claude Code)\n", (2, 1, 197)), ("1.18.33\n", (1, 18, 33)), ("\n  v2.0.0\n", (2, 0, 0)),
     ("opencode 1.2.3", None), ("", None), ("1.2", None), ("garbage\n1.2.3", None)],
)
def test_parse_version(text: str, expected: tuple[int, int, int] | None) -> None:
    assert parse_version(text) == expected


def test_claude_supported_version(tmp_path: Path) -> None:
    env = fake_cli(tmp_path, "claude", 'echo "2.1.197 (Claude Code)"')
    info = host_for("claude-code").probe(env)
    assert (info.name, info.version, info.dialect) == ("claude-code", "2.1.197", "claude-code")
    assert info.executable == str(tmp_path / "bin" / "claude")


@pytest.mark.parametrize("version", ["1.0.128 (Claude Code)", "3.0.0 (Claude Code)"])
def test_claude_unsupported_versions(tmp_path: Path, version: str) -> None:
    assert probe_code("claude-code", fake_cli(tmp_path, "claude", f'echo "{version}"')) == "eval-host-version-unsupported"


@pytest.mark.parametrize(
    ("version", "dialect"), [("1.18.29", "opencode-v1"), ("1.18.33", "opencode-v1"), ("1.99.0", "opencode-v1"), ("2.0.0", "opencode-v2"), ("2.7.1", "opencode-v2")]
)
def test_opencode_supported_versions_pick_the_dialect(tmp_path: Path, version: str, dialect: str) -> None:
    info = host_for("opencode").probe(fake_cli(tmp_path, "opencode", f"echo {version}"))
    assert (info.version, info.dialect) == (version, dialect)


@pytest.mark.parametrize("version", ["1.18.28", "1.0.0", "0.9.9", "3.0.0"])
def test_opencode_unsupported_versions(tmp_path: Path, version: str) -> None:
    assert probe_code("opencode", fake_cli(tmp_path, "opencode", f"echo {version}")) == "eval-host-version-unsupported"


@pytest.mark.parametrize(
    "body", ['echo "not a version"', "exit 0", 'echo 1.18.33; exit 3', 'echo "boom" >&2; exit 1']
)
def test_garbage_or_failing_probe(tmp_path: Path, body: str) -> None:
    assert probe_code("opencode", fake_cli(tmp_path, "opencode", body)) == "eval-host-probe-failed"


def test_missing_executable(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert probe_code("claude-code", {"PATH": str(empty)}) == "eval-host-missing"
    assert probe_code("opencode", {"PATH": str(empty)}) == "eval-host-missing"


def test_non_executable_file_on_path_is_missing(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text("echo 2.1.197")  # not executable
    assert probe_code("claude-code", {"PATH": str(bin_dir)}) == "eval-host-missing"


def test_probe_runs_version_exactly_once(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    env = fake_cli(tmp_path, "opencode", f'echo "$@" >> {log}; echo 1.18.33')
    host_for("opencode").probe(env)
    assert log.read_text() == "--version\n"


# --------------------------------------------------------------------------- the probe cache


def counting_cli(tmp_path: Path, version: str) -> tuple[dict[str, str], Path]:
    """A fake `claude` that appends a line to ``calls`` each time it runs; the env names a cache."""
    calls = tmp_path / "calls"
    env = fake_cli(tmp_path, "claude", f'echo run >> "{calls}"; echo "{version} (Claude Code)"')
    return {**env, CACHE_DIR_VARIABLE: str(tmp_path / "cache")}, calls


def runs(calls: Path) -> int:
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def test_a_second_probe_of_the_same_file_runs_nothing(tmp_path: Path) -> None:
    env, calls = counting_cli(tmp_path, "2.1.197")
    first = host_for("claude-code").probe(env)
    second = host_for("claude-code").probe(env)
    assert first == second and first.version == "2.1.197"
    assert runs(calls) == 1
    assert (tmp_path / "cache" / CACHE_FILE).is_file()


def test_a_swapped_binary_is_probed_again_even_with_its_size_and_mtime_restored(tmp_path: Path) -> None:
    env, calls = counting_cli(tmp_path, "2.1.197")
    host_for("claude-code").probe(env)
    exe = tmp_path / "bin" / "claude"
    before = exe.stat()
    # Same length, same modification time, another version: only the inode or ctime can tell.
    exe.write_text(exe.read_text().replace("2.1.197", "2.1.198"))
    os.utime(exe, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert exe.stat().st_size == before.st_size and exe.stat().st_mtime_ns == before.st_mtime_ns
    assert host_for("claude-code").probe(env).version == "2.1.198"
    assert runs(calls) == 2
    replacement = tmp_path / "claude.new"  # a new file renamed over the old one
    replacement.write_text(exe.read_text().replace("2.1.198", "2.1.199"))
    replacement.chmod(0o755)
    replacement.replace(exe)
    assert host_for("claude-code").probe(env).version == "2.1.199"
    assert runs(calls) == 3


def test_failed_probes_are_not_cached(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    env = {**fake_cli(tmp_path, "claude", f'echo run >> "{calls}"; echo nonsense'), CACHE_DIR_VARIABLE: str(tmp_path / "cache")}
    assert probe_code("claude-code", env) == "eval-host-probe-failed"
    assert probe_code("claude-code", env) == "eval-host-probe-failed"
    assert runs(calls) == 2


@pytest.mark.parametrize("content", [b"", b"{not json", b'{"schema": "other", "entries": {}}', b"\xff\xfe",
                                     b'{"schema": "atlante/host-probes-v1", "entries": {"x": [1]}}'])
def test_a_broken_cache_is_an_empty_one(tmp_path: Path, content: bytes) -> None:
    env, calls = counting_cli(tmp_path, "2.1.197")
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / CACHE_FILE).write_bytes(content)
    assert host_for("claude-code").probe(env).version == "2.1.197"
    assert host_for("claude-code").probe(env).version == "2.1.197"
    assert runs(calls) == 1  # the first probe replaced the broken cache


def test_a_forged_entry_for_another_file_is_not_used(tmp_path: Path) -> None:
    env, calls = counting_cli(tmp_path, "2.1.197")
    exe = str(tmp_path / "bin" / "claude")
    (tmp_path / "cache").mkdir()
    forged = {"schema": "atlante/host-probes-v1", "entries": {exe: {"identity": [1, 2, 3, 4, 5] * 2, "version": [2, 1, 500]}}}
    (tmp_path / "cache" / CACHE_FILE).write_text(json.dumps(forged))
    assert host_for("claude-code").probe(env).version == "2.1.197"
    assert runs(calls) == 1


def test_an_unwritable_cache_directory_costs_only_the_probe(tmp_path: Path) -> None:
    env, calls = counting_cli(tmp_path, "2.1.197")
    (tmp_path / "cache").write_text("a file where the directory should be")
    assert host_for("claude-code").probe(env).version == "2.1.197"
    assert host_for("claude-code").probe(env).version == "2.1.197"
    assert runs(calls) == 2


@pytest.mark.parametrize(("env", "expected"), [
    ({CACHE_DIR_VARIABLE: "/c", "XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/c/host-probes.json"),
    ({"XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/x/pytest-atlante/host-probes.json"),
    ({"XDG_CACHE_HOME": "relative", "HOME": "/h"}, "/h/.cache/pytest-atlante/host-probes.json"),
    ({"HOME": "/h"}, "/h/.cache/pytest-atlante/host-probes.json"),
    ({}, None),
])
def test_the_cache_lives_in_the_users_cache_directory(env: dict[str, str], expected: str | None) -> None:
    found = cache_path(env)
    assert (str(found) if found else None) == expected
