"""``atlante eval``: the eval reference's flags, translated to the plugin's options; the rest to pytest."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import Project, scenario_doc
from pytest_atlante.cli import main
from pytest_atlante.hosts.names import HOST_NAMES
from pytest_atlante.run.evalcmd import pytest_args


@pytest.mark.parametrize(("argv", "expected"), [
    (["--scenario", "a", "--scenario=b", "-n", "2"],
     ["--atlante-eval", "--atlante-scenario", "a", "--atlante-scenario", "b", "-n", "2"]),
    (["-k", "trial-2", "--out", "o", "--keep", "--host", "opencode", "--scripted", "-x"],
     ["--atlante-eval", "--atlante-out", "o", "--atlante-host", "opencode", "--atlante-keep", "--atlante-scripted",
      "-k", "trial-2", "-x"]),
    (["--", "--lf", "--atlante-out", "o"], ["--atlante-eval", "--lf", "--atlante-out", "o"]),
    (["--sc", "a"], ["--atlante-eval", "--sc", "a"]),  # no abbreviations: pytest decides what --sc is
])
def test_short_forms_become_atlante_options_and_the_rest_passes_through(argv: list[str], expected: list[str]) -> None:
    assert pytest_args(argv) == expected


def test_selftest_takes_full_and_eval_leaves_it_to_pytest() -> None:
    assert pytest_args(["--full", "-n", "2"], selftest=True) == ["--atlante-eval", "--atlante-selftest",
                                                                "--atlante-selftest-full", "-n", "2"]
    assert pytest_args(["-n", "2"], selftest=True) == ["--atlante-eval", "--atlante-selftest", "-n", "2"]
    assert pytest_args(["--full"]) == ["--atlante-eval", "--full"]   # not an eval flag: pytest refuses it


def test_help_shows_the_flags_and_the_pass_through_note(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag in ("--scenario NAME", "--out DIR", "--keep", "--host {" + ",".join(HOST_NAMES) + "}", "--scripted"):
        assert flag in text
    assert "every other argument is passed to pytest unchanged" in text


def test_atlante_eval_selects_a_scenario_by_its_reference_flag(atlante_project: Project, tmp_path: Path) -> None:
    atlante_project.scenario(scenario_doc("other"), "eval/scenarios/other.eval.json")
    atlante_project.script("other", [{"text": "Done."}])
    atlante_project.build()
    command = [sys.executable, "-m", "pytest_atlante.cli", "eval", "--scenario", "other", "--out", str(tmp_path / "out"),
               "--scripted", "--collect-only", "-q", "-p", "no:cacheprovider"]
    done = subprocess.run(command, cwd=atlante_project.root, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line for line in done.stdout.splitlines() if "::" in line] == ["eval/scenarios/other.eval.json::other[trial-1]"]
    unknown = subprocess.run([*command[:5], "nope", *command[6:]], cwd=atlante_project.root, capture_output=True, text=True,
                             timeout=120, check=False)
    assert unknown.returncode == 2 and "no scenario named 'nope'" in unknown.stdout + unknown.stderr
