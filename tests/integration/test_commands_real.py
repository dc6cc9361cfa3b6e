"""Slash commands on the real CLIs (docs/reference.md, "Slash commands"): a scenario whose prompt
runs a harness command gets a ``command`` event first in its transcript, which ``command-used``
counts, and the command's text reaches the model (the request log shows it); a prompt that runs no
command counts none; a command kept in a folder runs as ``/folder:name``.  On Claude Code a
``/name`` the host does not have is answered "Unknown command" with 0 turns: the trial is an
infra-error naming it, not a later check failure.  Codex runs no slash commands: validation refuses such a
prompt there (tests/unit/foundation/test_validation_table.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_atlante.hosts.base import no_place
from pytest_atlante.hosts.names import HOST_NAMES
from pytest_atlante.hosts.registry import host_for
from trial_helpers import (
    DONE,
    HostName,
    TrialCase,
    expected_table,
    logged_requests,
    outcome_table,
    run_eval,
    with_request_log,
    write_project,
    write_turn,
)

pytestmark = pytest.mark.hosts

COMMAND_SENTINEL = "COMMAND-BODY-SENTINEL-5d2e: greet the user and write greeted.txt"
COMMAND_HOSTS = [host for host in HOST_NAMES if no_place(host_for(host), "command") is None]
WORK = [write_turn("greeted.txt", "hi\n"), DONE]


# The harness command ``/greet`` and its source file, for the cases that run it.
GREET = {"greet": {"description": "Greets.", "file": "harness/commands/greet.md"}}
GREET_FILES = {"harness/commands/greet.md": f"---\ndescription: Greets.\n---\n{COMMAND_SENTINEL} ($ARGUMENTS)\n"}


def events_of(out: Path, transcript: str | None) -> list[dict[str, Any]]:
    assert transcript is not None
    return [json.loads(line) for line in (out / transcript).read_text().splitlines()][1:]


@pytest.mark.parametrize("host", COMMAND_HOSTS)
def test_command_used_counts_the_expansion_that_reached_the_model(
    pytester: pytest.Pytester, tmp_path: Path, private_tmp: Path, on_path: None, monkeypatch: pytest.MonkeyPatch,
    host: HostName,
) -> None:
    cases = [
        TrialCase("runs-greet", WORK, [
            {"type": "command-used", "command": "greet", "min": 1, "max": 1},
            {"type": "command-used", "command": "/greet"},
            {"type": "file-exists", "path": "greeted.txt"},
        ], "pass", ("pass",) * 3, prompt="/greet the reviewers", version="0.2"),
        TrialCase("runs-no-command", WORK, [
            {"type": "command-used", "command": "greet"},
            {"type": "command-used", "command": "greet", "max": 0},
        ], "fail", ("fail", "pass"), prompt="Greet the user.", version="0.2"),
    ]
    project = write_project(tmp_path / "project", host, cases, harness={"commands": GREET}, files=GREET_FILES)
    run = run_eval(pytester, project, tmp_path / "out", *with_request_log(monkeypatch, tmp_path / "requests"))
    assert run.result.ret == 1, run.output()
    assert outcome_table(run, cases) == expected_table(cases)
    greet = events_of(run.out, run.trial("runs-greet").transcript)
    assert greet[0] == {"seq": 1, "t": greet[0]["t"], "type": "command", "turn": 1, "name": "greet",
                        "arguments": "the reviewers", "agent": None}
    assert not [e for e in events_of(run.out, run.trial("runs-no-command").transcript) if e["type"] == "command"]
    # The expansion (the command file's text, its arguments in place) is what the model was sent.
    requests = logged_requests(tmp_path / "requests")
    sent = {trial: json.dumps([r.get("body") for r in found]) for trial, found in requests.items()}
    greet_trial = next(trial for trial in sent if trial.startswith("runs-greet"))
    assert COMMAND_SENTINEL in sent[greet_trial]
    at = sent[greet_trial].index(COMMAND_SENTINEL)
    assert f"{COMMAND_SENTINEL} (the reviewers)" in sent[greet_trial], sent[greet_trial][at:at + 200]
    assert not [trial for trial in sent if trial.startswith("runs-no-command") and COMMAND_SENTINEL in sent[trial]]


@pytest.mark.parametrize("host", ["claude-code", "gemini-cli"])
def test_a_command_kept_in_a_folder_runs_by_the_hosts_folder_name(
    pytester: pytest.Pytester, tmp_path: Path, private_tmp: Path, on_path: None, monkeypatch: pytest.MonkeyPatch,
    host: HostName,
) -> None:
    """``.claude/commands/frontend/component.md`` stays in its folder in the build; Claude Code and
    Gemini CLI (``.gemini/commands/frontend/component.toml``) run it as ``/frontend:component``."""
    cases = [TrialCase("runs-the-folder-name", WORK, [{"type": "command-used", "command": "frontend:component"},
                                                      {"type": "file-exists", "path": "greeted.txt"}],
                       "pass", ("pass", "pass"), prompt="/frontend:component", version="0.2")]
    project = write_project(tmp_path / "project", host, cases,
                            harness={"commands": {"component": {"file": ".claude/commands/frontend/component.md"}}},
                            files={".claude/commands/frontend/component.md": f"{COMMAND_SENTINEL}\n"})
    run = run_eval(pytester, project, tmp_path / "out", *with_request_log(monkeypatch, tmp_path / "requests"))
    assert run.result.ret == 0, run.output()
    assert outcome_table(run, cases) == expected_table(cases)
    assert COMMAND_SENTINEL in json.dumps([r.get("body") for found in logged_requests(tmp_path / "requests").values()
                                           for r in found])


@pytest.mark.parametrize("host", ["claude-code", "opencode"])
def test_a_skill_runs_as_a_slash_command_where_the_host_runs_skills_so(
    pytester: pytest.Pytester, tmp_path: Path, private_tmp: Path, on_path: None, monkeypatch: pytest.MonkeyPatch,
    host: HostName,
) -> None:
    """Claude Code and OpenCode expand ``/tidy`` to the skill's SKILL.md (Gemini CLI sends it as text,
    which validation refuses there): ``command-used`` counts it, and ``skill-used`` counts it as the
    skill's one use (no skill tool is called: before, it counted 0)."""
    cases = [TrialCase("runs-a-skill", WORK, [{"type": "command-used", "command": "tidy", "min": 1, "max": 1},
                                              {"type": "skill-used", "skill": "tidy", "min": 1, "max": 1},
                                              {"type": "file-exists", "path": "greeted.txt"}],
                       "pass", ("pass", "pass", "pass"), prompt="/tidy the sources", version="0.2")]
    project = write_project(tmp_path / "project", host, cases)
    run = run_eval(pytester, project, tmp_path / "out", *with_request_log(monkeypatch, tmp_path / "requests"))
    assert outcome_table(run, cases) == expected_table(cases), run.output()
    assert "Keep files tidy." in json.dumps([r.get("body") for found in logged_requests(tmp_path / "requests").values()
                                             for r in found if r.get("kind") == "turn"])


REMOVE_BUILT = "import pathlib, sys; pathlib.Path(sys.argv[1]).unlink()"


@pytest.mark.parametrize(("host", "built", "error"), [
    ("claude-code", ".claude/commands/greet.md", "Claude Code answered 'Unknown command: /greet"),
    ("opencode", ".opencode/commands/greet.md", "the prompt runs /greet and the host failed before asking the model"),
])
def test_a_command_the_host_does_not_have_makes_the_trial_an_infra_error(
    pytester: pytest.Pytester, tmp_path: Path, private_tmp: Path, on_path: None, host: HostName, built: str, error: str,
) -> None:
    """Validation knows the build defines ``/greet``; a setup step then removes the built file from
    the trial's sandbox.  Claude Code answers "Unknown command: /greet" without asking the model;
    OpenCode's ``run --command greet`` fails with an "Unexpected server error".  Before, the Claude
    Code trial failed on its file check alone (issue 37's measured bug) and OpenCode's error did not
    name the command."""
    cases = [TrialCase("unknown-to-the-host", WORK, [{"type": "file-exists", "path": "greeted.txt"}], "infra-error",
                       ("fail",), prompt="/greet", setup=["python3", "-c", REMOVE_BUILT, built])]
    project = write_project(tmp_path / "project", host, cases, harness={"commands": GREET}, files=GREET_FILES)
    run = run_eval(pytester, project, tmp_path / "out")
    assert run.result.ret == 1, run.output()
    trial = run.trial("unknown-to-the-host")
    assert trial.verdict == "infra-error", run.output()
    assert error in (trial.error or ""), trial.error
    events = events_of(run.out, trial.transcript)
    assert not [e for e in events if e["type"] == "command"]
    if host == "claude-code":
        assert "0 turns" in (trial.error or "")
        assert [e for e in events if e["type"] == "error" and e.get("unknownCommand") == "greet"]


def test_gemini_sends_a_command_it_does_not_have_as_text_and_command_used_says_so(
    pytester: pytest.Pytester, tmp_path: Path, private_tmp: Path, on_path: None,
) -> None:
    """Gemini CLI sends ``/greet`` to the model as text when its build lost the command: the session
    succeeds and the file check passes (the issue's "3/3 where the command did not exist"), but the
    transcript has no ``command`` event, so ``command-used`` fails the trial."""
    remove = ["python3", "-c", REMOVE_BUILT, ".gemini/commands/greet.toml"]
    cases = [TrialCase("lost-command", WORK, [{"type": "command-used", "command": "greet"},
                                              {"type": "file-exists", "path": "greeted.txt"}],
                       "fail", ("fail", "pass"), prompt="/greet", setup=remove, version="0.2")]
    project = write_project(tmp_path / "project", "gemini-cli", cases, harness={"commands": GREET},
                            files=GREET_FILES)
    run = run_eval(pytester, project, tmp_path / "out")
    assert outcome_table(run, cases) == expected_table(cases), run.output()
