"""The self-test for real: no-op trials and scripted reference trials through the pinned CLIs.

One project holds every kind of scenario the self-test tells apart — sound, vacuous, unsolvable
(its script writes the wrong file), a check command that does not exist, no script at all, and a
pack scenario — under ``maxSessions: 0``, which would skip every trial of an eval: the self-test
spends no tokens and must not count against it.  It runs serially and with ``-n 2``, and both runs
must write the same ``selftest.json``.  Telling the kinds apart, the xdist transport and the run's
clean-up are the self-test's own, the same for every host: everything here runs on ``ONE_HOST``
(tests/integration/test_init_real.py runs a self-test on every host).  Five scenarios have a
script, so a run costs five short host sessions.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import ONE_HOST, REPO_ROOT, Project, scenario_doc
from pytest_atlante.report.selftest import SelftestReport
from trial_helpers import HostName, normalise, write_project, write_turn

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(600)]

PACK_SCENARIO = "adds-module-docstring"
EXPECTED = {
    "missing-command": "check-error",
    "no-script": "no-reference",
    "sound": "sound",
    "unsolvable": "unsolvable",
    "vacuous": "vacuous",
    # A trajectory check is one the no-op trial fails (it had no session): with it the scenario
    # is not vacuous although its file check passes untouched; a `max: 0` check passes there, so
    # on its own it leaves a scenario vacuous.
    "trajectory-sound": "sound",
    "trajectory-vacuous": "vacuous",
    PACK_SCENARIO: "sound",
}
V02 = {"version": "0.2", "$schema": "https://atlante.sh/schema/v0.2/eval-scenario.json"}
VOLATILE = frozenset({"runId", "startedAt", "finishedAt", "durationMs"})


@pytest.fixture(autouse=True)
def on_path(monkeypatch: pytest.MonkeyPatch, hosts_path: Callable[[], str], private_tmp: Path) -> None:
    monkeypatch.setenv("PATH", hosts_path())


def selftest_project(root: Path, host: HostName) -> Path:
    write_project(root, host, [], include=["./packs/docstring-pack"],
                  budget={"trials": 3, "maxSessions": 0})
    shutil.copytree(REPO_ROOT / "example_project" / "packs" / "docstring-pack", root / "packs" / "docstring-pack")
    config = json.loads((root / "atlante.jsonc").read_text())
    config["packages"] = ["./packs/docstring-pack"]
    project = Project(root)
    project.config(config)
    project.scenario(scenario_doc("sound"), "eval/scenarios/sound.eval.json")
    project.script("sound", [write_turn("hello.txt", "hello\n"), {"text": "Done."}])
    project.scenario(scenario_doc("unsolvable"), "eval/scenarios/unsolvable.eval.json")
    project.script("unsolvable", [write_turn("wrong.txt", "hello\n"), {"text": "Done."}])
    # Passes on the untouched fixture: README.md is part of it and nothing changes.
    project.scenario(scenario_doc("vacuous", checks=[{"type": "file-exists", "path": "README.md"},
                                                     {"type": "diff-allowlist", "allow": ["hello.txt"]}]),
                     "eval/scenarios/vacuous.eval.json")
    project.scenario(scenario_doc("missing-command", checks=[{"type": "command", "run": ["atlante-no-such-command-7q"]},
                                                             {"type": "file-contains", "path": "hello.txt", "pattern": "hello"}]),
                     "eval/scenarios/missing-command.eval.json")
    project.scenario(scenario_doc("no-script"), "eval/scenarios/no-script.eval.json")
    project.scenario(scenario_doc("trajectory-sound", checks=[{"type": "file-exists", "path": "README.md"},
                                                              {"type": "tool-used", "tool": "write", "min": 1}], **V02),
                     "eval/scenarios/trajectory-sound.eval.json")
    project.script("trajectory-sound", [write_turn("notes.txt", "noted\n"), {"text": "Done."}])
    project.scenario(scenario_doc("trajectory-vacuous", checks=[{"type": "file-exists", "path": "README.md"},
                                                                {"type": "skill-used", "skill": "tidy", "max": 0}], **V02),
                     "eval/scenarios/trajectory-vacuous.eval.json")
    project.script("trajectory-vacuous", [{"text": "Nothing to do."}])
    project.build()
    return root


def run_selftest(pytester: pytest.Pytester, project: Path, out: Path, *args: str) -> tuple[pytest.RunResult, SelftestReport]:
    result = pytester.runpytest_subprocess("--atlante-eval", "--atlante-selftest", "--atlante-project", str(project),
                                           "--atlante-out", str(out), "-p", "no:cacheprovider", *args, timeout=300)
    path = out / "selftest.json"
    assert path.is_file(), "\n".join(result.outlines + result.errlines)
    return result, SelftestReport.model_validate_json(path.read_text())


def test_selftest_tells_every_kind_of_scenario_apart(pytester: pytest.Pytester, tmp_path: Path) -> None:
    host = ONE_HOST
    project = selftest_project(tmp_path / "project", host)
    serial, report = run_selftest(pytester, project, tmp_path / "serial")
    output = "\n".join(serial.outlines)
    assert serial.ret == 1, output
    assert {s.name: s.status for s in report.scenarios} == EXPECTED, output
    assert report.schema_ == "atlante/selftest-v1" and not report.ok and report.exitStatus == 1
    assert report.host is not None and report.host.name == host
    by_name = {s.name: s for s in report.scenarios}

    # Sound: the no-op trial fails a check, the reference (through the real CLI) passes them all,
    # although maxSessions is 0: self-test trials never take a session.
    for name in ("sound", PACK_SCENARIO):
        sound = by_name[name]
        assert sound.problems == [] and sound.reference is not None
        assert not all(c.passed for c in sound.noop.checks)
        assert all(c.passed for c in sound.reference.checks) and (sound.reference.scriptedTurns or 0) >= 2
    assert by_name[PACK_SCENARIO].source == "./packs/docstring-pack"

    # Unsolvable: the reference wrote wrong.txt, so hello.txt is missing and wrong.txt is outside the
    # allowlist; both failing checks are named.
    unsolvable = by_name["unsolvable"]
    assert [(p.status, p.trial, p.checks) for p in unsolvable.problems] == [("unsolvable", "reference", [0, 1])]
    assert "#0 file-contains" in unsolvable.problems[0].message and "wrong.txt" in unsolvable.problems[0].message

    vacuous = by_name["vacuous"]
    assert [(p.status, p.trial) for p in vacuous.problems] == [("vacuous", "no-op"), ("no-reference", None)]
    assert all(c.passed for c in vacuous.noop.checks) and vacuous.reference is None

    missing = by_name["missing-command"]
    assert [(p.status, p.trial, p.checks) for p in missing.problems] == [("check-error", "no-op", [0]),
                                                                         ("no-reference", None, [])]
    assert missing.noop.checks[0].error and "atlante-no-such-command-7q" in missing.problems[0].message

    assert [p.status for p in by_name["no-script"].problems] == ["no-reference"]

    # The trajectory check fails the no-op trial (no session: zero writes) without an error, and
    # passes the reference; a `max: 0` skill check passes both, so that scenario stays vacuous.
    trajectory = by_name["trajectory-sound"]
    assert trajectory.problems == [] and trajectory.reference is not None
    assert [(c.passed, c.error) for c in trajectory.noop.checks] == [(True, False), (False, False)]
    assert trajectory.noop.checks[1].message == "tool-used write: 0 times (no host session); wanted at least 1"
    assert [c.passed for c in trajectory.reference.checks] == [True, True]
    untriggered = by_name["trajectory-vacuous"]
    assert [(p.status, p.trial) for p in untriggered.problems] == [("vacuous", "no-op")]
    assert report.counts == {"infra-error": 0, "check-error": 1, "unsolvable": 1, "reference-tool-error": 0, "vacuous": 2,
                             "no-reference": 1, "sound": 3}

    # One diagnostics-style line per problem, then the table; no eval report for a self-test.
    for code in ("eval-selftest-unsolvable", "eval-selftest-vacuous", "eval-selftest-check-error",
                 "eval-selftest-no-reference"):
        assert code in output, output
    assert any(line.startswith("unsolvable") and "unsolvable" in line.split()[1] for line in serial.outlines), output
    assert not (tmp_path / "serial" / "report.json").exists()

    parallel, report_n2 = run_selftest(pytester, project, tmp_path / "parallel", "-n", "2")
    assert parallel.ret == 1, "\n".join(parallel.outlines)
    assert normalise(report_n2, VOLATILE) == normalise(report, VOLATILE)


def test_atlante_selftest_exits_0_when_every_scenario_is_sound(tmp_path: Path) -> None:
    import subprocess

    project = selftest_project(tmp_path / "project", ONE_HOST)
    done = subprocess.run([sys.executable, "-m", "pytest_atlante.cli", "selftest", "--atlante-project", str(project),
                           "--atlante-out", str(tmp_path / "out"), "--atlante-scenario", "sound",
                           "--atlante-scenario", "no-script", "-p", "no:cacheprovider"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    report = SelftestReport.model_validate_json((tmp_path / "out" / "selftest.json").read_text())
    assert report.ok and [s.status for s in report.scenarios] == ["no-reference", "sound"]
    assert "eval-selftest-no-reference" in done.stdout   # a warning, printed, not a failure


@pytest.mark.parametrize("workers", [0, 2], ids=["serial", "n2"])
def test_a_selftest_leaves_nothing_of_its_run_in_tmpdir(pytester: pytest.Pytester, tmp_path: Path, private_tmp: Path,
                                                        workers: int) -> None:
    """The self-test's copies of fixtures and build tree, its trial directories and its run claim
    (``$TMPDIR/atlante-eval-<run id>/``) all go at the end of the run, as an eval run's do."""
    project = Path(write_project(tmp_path / "project", ONE_HOST, []))
    Project(project).scenario(scenario_doc("no-script"), "eval/scenarios/no-script.eval.json")
    Project(project).scenario(scenario_doc("vacuous", checks=[{"type": "file-exists", "path": "README.md"}]),
                              "eval/scenarios/vacuous.eval.json")
    Project(project).build()
    extra = ("-n", str(workers)) if workers else ()
    result, report = run_selftest(pytester, project, tmp_path / "out", *extra)
    assert {s.name: s.status for s in report.scenarios} == {"no-script": "no-reference", "vacuous": "vacuous"}
    assert result.ret == 1, "\n".join(result.outlines)
    assert sorted(p.name for p in private_tmp.iterdir() if p.name.startswith("atlante-eval-")) == []


def test_a_reference_the_host_refused_a_call_of_is_flagged(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """Claude Code refuses an edit of a file the session has not read ("File has not been read
    yet"): the reference's checks still pass (hello.txt is written), but the reference is not the
    solution it seems, so the self-test says which call the host refused and what it answered."""
    project = Path(write_project(tmp_path / "project", "claude-code", []))
    Project(project).scenario(scenario_doc("edits-unread"), "eval/scenarios/edits-unread.eval.json")
    Project(project).script("edits-unread", [
        {"text": "Editing.", "actions": [{"type": "edit", "path": "README.md", "old": "# app\n", "new": "# App\n"}]},
        write_turn("hello.txt", "hello\n"), {"text": "Done."}])
    Project(project).scenario(scenario_doc("reads-first"), "eval/scenarios/reads-first.eval.json")
    Project(project).script("reads-first", [
        {"text": "Reading.", "actions": [{"type": "read", "path": "README.md"}]},
        write_turn("hello.txt", "hello\n"), {"text": "Done."}])
    Project(project).build()
    result, report = run_selftest(pytester, project, tmp_path / "out")
    output = "\n".join(result.outlines)
    assert result.ret == 1, output
    by_name = {s.name: s for s in report.scenarios}
    assert by_name["reads-first"].status == "sound", by_name["reads-first"]
    flagged = by_name["edits-unread"]
    assert flagged.status == "reference-tool-error" and flagged.reference is not None
    assert all(c.passed for c in flagged.reference.checks)   # the checks alone would have called it sound
    [problem] = flagged.problems
    assert problem.trial == "reference" and "Edit" in problem.message and "README.md" in problem.message
    assert "has not been read yet" in problem.message, problem.message
    assert "eval-selftest-reference-tool-error" in output and "has not been read yet" in output, output

    # `eval --scripted` passes the trial (its checks pass) but no longer says nothing of the refusal.
    scripted = pytester.runpytest_subprocess("--atlante-eval", "--atlante-scripted", "--atlante-project", str(project),
                                             "--atlante-out", str(tmp_path / "eval"), "-p", "no:cacheprovider",
                                             "--atlante-scenario", "edits-unread", "--atlante-scenario", "reads-first",
                                             timeout=300)
    text = "\n".join(scripted.outlines)
    assert scripted.ret == 0, text
    warned = [line for line in scripted.outlines if "scripted tool call(s)" in line]
    assert warned and all("edits-unread" in line and "has not been read yet" in line for line in warned), text
