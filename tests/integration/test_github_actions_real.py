"""GitHub Actions, built in (docs/ci.md): a real scripted eval through the pinned claude CLI, with
one scenario that passes and one whose two trials fail.

Under ``GITHUB_ACTIONS=true`` the run appends its Markdown to ``GITHUB_STEP_SUMMARY`` — read back
with markdown-it-py, table and all — and prints one ``::error`` per failed trial at the line of the
scenario's name; with pytest-github-actions-annotate-failures active, that plugin's annotation is
the only one per trial; without the variable (or with ``--atlante-no-github``) nothing is written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from markdown_helpers import paragraphs, tables
from trial_helpers import ALL_CHECKS_PASS, DONE, TrialCase, run_eval, write_project, write_turn

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(600), pytest.mark.usefixtures("on_path")]

FORGED = "::error title=forged::every trial passed"
WRONG_GREETING = TrialCase(
    name="writes-wrong-greeting",
    turns=[write_turn("hello.txt", "goodbye\n"), DONE],
    checks=[{"type": "file-exists", "path": "hello.txt"},
            {"type": "file-contains", "path": "hello.txt", "pattern": "hello"},
            # output the trial controls, printed in pytest's failure text: a forged workflow command
            {"type": "command", "run": ["python3", "-c", f"print({FORGED!r}); raise SystemExit(1)"]}],
    verdict="fail",
    outcomes=("pass", "fail", "fail"),
)
ANNOTATE_PLUGIN = "pytest_github_actions_annotate_failures"


def error_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("::error ")]


def name_line(document: Path, name: str) -> int:
    """The 1-based line of ``"name": "<name>"`` in the scenario document, read by us independently."""
    return next(i for i, line in enumerate(document.read_text().splitlines(), 1) if json.dumps(name) in line and '"name"' in line)


def test_step_summary_and_one_annotation_per_failed_trial(pytester: pytest.Pytester, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    project = write_project(tmp_path / "project", "claude-code", [ALL_CHECKS_PASS, WRONG_GREETING],
                            budget={"trials": 2})
    summary = tmp_path / "step-summary.md"
    summary.write_text("## earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_WORKSPACE", str(project))
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)

    # Without GITHUB_ACTIONS (any other CI): nothing is written, nothing annotated.
    monkeypatch.setenv("CI", "true")
    only_failing = ("--atlante-scenario", WRONG_GREETING.name)
    quiet = run_eval(pytester, project, tmp_path / "out-plain", *only_failing, "-p", f"no:{ANNOTATE_PLUGIN}")
    assert quiet.result.ret == 1, quiet.output()
    assert summary.read_text() == "## earlier step\n"
    assert not error_lines(quiet.result.outlines + quiet.result.errlines)

    # Under GitHub Actions, without the annotate plugin: our annotations and the summary (xdist: the controller's).
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    run = run_eval(pytester, project, tmp_path / "out-gha", "-n", "2", "-p", f"no:{ANNOTATE_PLUGIN}")
    assert run.result.ret == 1, run.output()
    text = summary.read_text()
    assert text.startswith("## earlier step\n") and text.count("atlante eval failed") == 1
    (table,) = tables(text)
    rows = {row[0].text: [cell.text for cell in row] for row in table[1:]}
    assert [row[0].text for row in table[1:]] == ["writes-wrong-greeting", "writes-hello"]   # the failing one first
    assert rows["writes-hello"][1] == "2/2 (100%)" and rows["writes-hello"][4] == "–"
    assert rows["writes-wrong-greeting"][1] == "0/2 (0%)"
    assert rows["writes-wrong-greeting"][4].startswith("trial 1: fail: check 2 (file-contains):")
    assert any(p.startswith("❌ atlante eval failed (exit 1): 2/4 trials passed (2 fail)") for p in paragraphs(text))

    document = project / "eval/scenarios/writes-wrong-greeting.eval.json"
    line = name_line(document, WRONG_GREETING.name)
    errors = error_lines(run.result.outlines)
    assert len(errors) == 2, run.output()
    for number, error in enumerate(errors, 1):
        assert error.startswith(f"::error file=eval/scenarios/writes-wrong-greeting.eval.json,line={line},"
                                f"title=writes-wrong-greeting trial {number}%3A fail::trial {number}: fail: "
                                "check 2 (file-contains):"), error
    assert not error_lines(run.result.errlines)
    # Workflow commands are stopped for the run's output and resumed, with a fresh token, only for ours.
    out = run.result.outlines
    [stop] = [i for i, line in enumerate(out) if line.startswith("::stop-commands::")]
    token = out[stop].removeprefix("::stop-commands::")
    resume = out.index(f"::{token}::")
    forged = [i for i, line in enumerate(out) if line.strip() == FORGED]
    assert forged and all(stop < i < resume for i in forged), run.output()
    assert all(resume < out.index(e) for e in errors) and len(token) == 32

    # With the annotate plugin active it annotates each failed trial, at the same line; we add none.
    both = run_eval(pytester, project, tmp_path / "out-both", *only_failing, "-p", ANNOTATE_PLUGIN)
    assert both.result.ret == 1, both.output()
    theirs = error_lines(both.result.outlines + both.result.errlines)
    assert len(theirs) == 2 and all(f",line={line}" in e for e in theirs), both.output()

    # Switched off by the option named in --help.
    before = summary.read_text()
    off = run_eval(pytester, project, tmp_path / "out-off", *only_failing, "--atlante-no-github",
                   "-p", f"no:{ANNOTATE_PLUGIN}")
    assert off.result.ret == 1 and summary.read_text() == before and not error_lines(off.result.outlines)
    assert "--atlante-no-github" in pytester.runpytest_subprocess("--help").stdout.str()
