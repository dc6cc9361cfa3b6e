"""Version probe against fake executables on a private PATH."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from pytest_atlante.diagnostics import DiagnosticError
from pytest_atlante.hosts import host_for
from pytest_atlante.hosts.base import parse_version


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
