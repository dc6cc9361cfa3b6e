"""Run-level prerequisites, checked once before any trial: host on PATH, its version, git, the V2
model rule — and where the report goes by default."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from conftest import Project, config_doc
from fakehost import fake_env, install_fake_claude


def fake_version_executable(bin_dir: Path, name: str, version: str) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text(f"#!{sys.executable}\nimport sys\nprint({version!r})\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def run(pytester: pytest.Pytester, project: Project, *args: str) -> tuple[int, str, dict[str, object] | None]:
    out = pytester.path / "out"
    result = pytester.runpytest_inprocess("--atlante-eval", "--atlante-project", str(project.root), "--atlante-out", str(out),
                                          "--rootdir", str(project.root), "-p", "no:cacheprovider", *args)
    text = result.stdout.str() + result.stderr.str()
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else None
    assert "Traceback" not in text and "INTERNALERROR" not in text, text
    return int(result.ret), text, report


def only_on_path(monkeypatch: pytest.MonkeyPatch, *dirs: Path) -> None:
    """PATH with just these dirs plus the one holding python and git (no real claude/opencode)."""
    keep = [str(d) for d in dirs] + [os.path.dirname(sys.executable), "/usr/bin", "/bin"]
    monkeypatch.setenv("PATH", os.pathsep.join(keep))


def test_a_host_missing_from_path_is_exit_3_before_any_trial(pytester: pytest.Pytester, atlante_project: Project,
                                                            monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    only_on_path(monkeypatch, tmp_path / "empty")
    status, text, report = run(pytester, atlante_project, "--atlante-scripted")
    assert status == 3 and "eval-host-missing" in text
    assert report is not None and report["scenarios"][0]["trials"] == []


@pytest.mark.parametrize(("host", "version"), [("claude-code", "1.0.128 (Claude Code)"), ("claude-code", "3.0.0 (Claude Code)"),
                                               ("opencode", "1.18.28"), ("opencode", "3.1.0"), ("opencode", "not a version")])
def test_an_unsupported_host_version_is_exit_3(pytester: pytest.Pytester, atlante_project: Project, monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path, host: str, version: str) -> None:
    fake_version_executable(tmp_path / "bin", "claude" if host == "claude-code" else "opencode", version)
    only_on_path(monkeypatch, tmp_path / "bin")
    atlante_project.config(config_doc(host=host))
    atlante_project.build()
    status, text, _ = run(pytester, atlante_project, "--atlante-scripted")
    assert status == 3, text
    assert "eval-host-version-unsupported" in text or "eval-host-probe-failed" in text


def test_opencode_v2_needs_a_model(pytester: pytest.Pytester, atlante_project: Project, monkeypatch: pytest.MonkeyPatch,
                                   tmp_path: Path) -> None:
    fake_version_executable(tmp_path / "bin", "opencode", "2.0.0")
    only_on_path(monkeypatch, tmp_path / "bin")
    atlante_project.config(config_doc(host="opencode"))
    atlante_project.build()
    status, text, _ = run(pytester, atlante_project, "--atlante-scripted")
    assert status == 2, text
    assert "eval-config-invalid: atlante.jsonc at $.eval.model" in text


def test_no_git_on_path_is_exit_3(pytester: pytest.Pytester, atlante_project: Project, monkeypatch: pytest.MonkeyPatch,
                                  tmp_path: Path) -> None:
    install_fake_claude(tmp_path / "bin")
    python_only = tmp_path / "python-only"
    python_only.mkdir()
    os.symlink(sys.executable, python_only / "python3")
    monkeypatch.setenv("PATH", os.pathsep.join([str(tmp_path / "bin"), str(python_only)]))
    status, text, _ = run(pytester, atlante_project, "--atlante-scripted")
    assert status == 3 and "eval-git-missing" in text


def test_the_default_report_location_and_its_gitignore(pytester: pytest.Pytester, atlante_project: Project,
                                                       monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key, value in fake_env(tmp_path / "bin").items():
        monkeypatch.setenv(key, value)
    install_fake_claude(tmp_path / "bin")
    (atlante_project.root / ".atlante" / ".gitignore").write_text("build-cache/\n")
    # --atlante-out is used as given, relative to the working directory; the ignore file stays as it is
    custom = tmp_path / "custom-out"
    monkeypatch.chdir(tmp_path)
    result = pytester.runpytest_inprocess("--atlante-eval", "--atlante-project", str(atlante_project.root),
                                          "--atlante-out", "custom-out", "-p", "no:cacheprovider")
    assert result.ret == 1  # the fake host writes nothing, so the scenario's checks fail
    assert (custom / "report.json").exists()
    assert (atlante_project.root / ".atlante" / ".gitignore").read_text() == "build-cache/\n"
    assert not (atlante_project.root / ".atlante" / "eval").exists()
    # the default: <project>/.atlante/eval/<run-id>/report.json, and eval/ added to the ignore file
    result = pytester.runpytest_inprocess("--atlante-eval", "--atlante-project", str(atlante_project.root), "-p", "no:cacheprovider")
    assert result.ret == 1
    [report] = list((atlante_project.root / ".atlante" / "eval").glob("*/report.json"))
    assert json.loads(report.read_text())["runId"] == report.parent.name
    assert (atlante_project.root / ".atlante" / ".gitignore").read_text() == "build-cache/\neval/\n"


def test_a_report_that_cannot_be_written_is_exit_3(pytester: pytest.Pytester, atlante_project: Project,
                                                    monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key, value in fake_env(tmp_path / "bin").items():
        monkeypatch.setenv(key, value)
    install_fake_claude(tmp_path / "bin")
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the output directory should be\n")
    result = pytester.runpytest_inprocess("--atlante-eval", "--atlante-project", str(atlante_project.root),
                                          "--atlante-out", str(blocker), "-p", "no:cacheprovider")
    text = result.stdout.str()
    assert result.ret == 3, text
    assert "eval-report-write-failed" in text and "Traceback" not in text
