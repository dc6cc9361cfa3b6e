"""The trajectory checks on real sessions: the same scripted runs through every real CLI give the
same check verdicts, and those verdicts agree with the transcript events each trial wrote (the
checks count what the transcript says, nothing else).  ``EVERY_HOST``: each host's tool, skill and
sub-agent calls reach the transcript through its own stream reader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import EVERY_HOST
from pytest_atlante.hosts.base import no_place
from pytest_atlante.hosts.registry import host_for
from trial_helpers import (
    DONE,
    CheckOutcome,
    HostName,
    TrialCase,
    bash_turn,
    expected_table,
    outcome_table,
    run_eval,
    write_project,
    write_turn,
)

pytestmark = pytest.mark.hosts

WORK = [bash_turn("ls src"), bash_turn("git status --short"), write_turn("hello.txt", "hello\n"), DONE]
def trajectory_cases(host: HostName) -> list[TrialCase]:
    """The two trajectory scenarios for ``host``.  On a host without sub-agents (Codex, Gemini CLI)
    the failing scenario leaves out ``agent-used`` at least 1: run validation refuses that check
    there before any session (eval-check-impossible, docs/reference.md), which the validation
    table tests; ``max: 0`` stays in the passing scenario on every host."""
    delegates = no_place(host_for(host), "agent") is None
    failing: list[tuple[dict[str, Any], CheckOutcome]] = [
        ({"type": "tool-used", "tool": "bash", "max": 1}, "fail"),
        ({"type": "skill-used", "skill": "tidy"}, "fail"),
        *([({"type": "agent-used", "agent": "helper"}, "fail")] if delegates else []),
        ({"type": "usage-within", "turns": 3}, "fail"),
        ({"type": "usage-within", "totalTokens": 100}, "fail"),
        ({"type": "file-contains", "path": "hello.txt", "pattern": "hello"}, "pass"),
    ]
    return [
        TrialCase("counts-tool-calls", WORK, [
            {"type": "tool-used", "tool": "bash", "min": 2, "max": 2},
            {"type": "tool-used", "tool": "bash", "inputMatches": r"^git\b", "min": 1, "max": 1},
            {"type": "tool-used", "tool": "write", "inputMatches": r"hello\.txt"},
            {"type": "tool-used", "tool": "edit", "max": 0},
            {"type": "skill-used", "skill": "tidy", "max": 0},
            {"type": "agent-used", "agent": "helper", "max": 0},
            {"type": "usage-within", "turns": 4, "totalTokens": 10_000, "durationMs": 300_000},
        ], "pass", ("pass",) * 7, version="0.2"),
        TrialCase("fails-what-it-did-not-do", WORK, [check for check, _ in failing], "fail",
                  tuple(outcome for _, outcome in failing), version="0.2"),
    ]


def transcript_calls(out: Path, trial_transcript: str) -> list[tuple[str, dict[str, Any]]]:
    events = [json.loads(line) for line in (out / trial_transcript).read_text().splitlines()]
    return [(e["tool"], e["input"]) for e in events if e.get("type") == "tool_call"]


@pytest.mark.parametrize("host", EVERY_HOST)
def test_trajectory_checks_agree_with_the_transcript_on_each_host(
    pytester: pytest.Pytester, tmp_path: Path, private_tmp: Path, on_path: None, host: HostName
) -> None:
    cases = trajectory_cases(host)
    project = write_project(tmp_path / "project", host, cases)
    run = run_eval(pytester, project, tmp_path / "out")
    assert run.result.ret == 1, run.output()
    assert outcome_table(run, cases) == expected_table(cases)
    trial = run.trial("counts-tool-calls")
    assert trial.transcript is not None
    calls = transcript_calls(run.out, trial.transcript)
    assert [tool for tool, _ in calls] == ["bash", "bash", "write"]
    assert calls[1][1]["command"] == "git status --short"
    # Each count check names the events it counted, and those are the transcript's calls.
    bash_events = trial.checks[0].events
    assert bash_events is not None and len(bash_events) == 2
    events = {json.loads(line)["seq"]: json.loads(line) for line in (run.out / trial.transcript).read_text().splitlines()[1:]}
    assert [events[seq]["tool"] for seq in bash_events] == ["bash", "bash"]
    assert trial.checks[1].events is not None and [events[s]["input"]["command"] for s in trial.checks[1].events] == [
        "git status --short"]
    failing = run.trial("fails-what-it-did-not-do")
    messages = [c.message for c in failing.checks]
    assert messages[:2] == ["tool-used bash: 2 times; wanted exactly 1", "skill-used 'tidy': 0 times; wanted at least 1"]
    if no_place(host_for(host), "agent") is None:
        assert messages[2] == "agent-used 'helper': 0 times; wanted at least 1"
    assert "usage-within: turns 4 > 3" in messages


SUBAGENT_PROMPT = "Write notes.txt saying delegated, then report back."
DELEGATING = [
    {"text": "Loading the house style.", "actions": [{"type": "skill", "name": "tidy"}]},
    {"text": "Delegating the notes.", "actions": [
        {"type": "task", "agent": "helper", "prompt": SUBAGENT_PROMPT, "description": "Write the notes", "turns": [
            {"text": "House style first.", "actions": [{"type": "skill", "name": "tidy"}]},
            {"text": "Writing.", "actions": [{"type": "write", "path": "notes.txt", "content": "delegated\n"}]},
            {"text": "Wrote notes.txt."}]}]},
    DONE,
]
HARNESS_CASES = [
    TrialCase("uses-skill-and-agent", DELEGATING, [
        # The main session loaded tidy once; the sub-agent's own load and write are not counted on
        # either host (OpenCode does not stream them), so these agree across hosts.
        {"type": "skill-used", "skill": "tidy", "min": 1, "max": 1},
        {"type": "agent-used", "agent": "helper", "min": 1, "max": 1},
        {"type": "tool-used", "tool": "write", "max": 0},
        {"type": "tool-used", "tool": "task", "inputMatches": "notes\\.txt"},
        {"type": "file-contains", "path": "notes.txt", "pattern": "delegated"},
    ], "pass", ("pass",) * 5, version="0.2"),
    TrialCase("leaves-the-harness-alone", [write_turn("notes.txt", "by hand\n"), DONE], [
        {"type": "skill-used", "skill": "tidy", "max": 0},
        {"type": "agent-used", "agent": "helper", "max": 0},
        {"type": "skill-used", "skill": "tidy"},
    ], "fail", ("pass", "pass", "fail"), version="0.2"),
]


# Not Codex: `codex exec` has no sub-agent tool the scripted model can call (docs/scripted-model.md).
@pytest.mark.parametrize("host", [host for host in EVERY_HOST if host != "codex"])
def test_skill_and_agent_checks_on_a_scripted_delegation(
    pytester: pytest.Pytester, tmp_path: Path, private_tmp: Path, on_path: None, host: HostName
) -> None:
    project = write_project(tmp_path / "project", host, HARNESS_CASES)
    config = json.loads((project / "atlante.jsonc").read_text())
    config["harness"]["agents"]["helper"]["tools"] = ["read", "write", "skill"]
    (project / "atlante.jsonc").write_text(json.dumps(config))
    from pytest_atlante.suite.build import build

    build(project)
    run = run_eval(pytester, project, tmp_path / "out")
    assert run.result.ret == 1, run.output()
    assert outcome_table(run, HARNESS_CASES) == expected_table(HARNESS_CASES)
    trial = run.trial("uses-skill-and-agent")
    assert [c.message for c in trial.checks[:2]] == ["skill-used 'tidy': 1 time; wanted exactly 1",
                                                      "agent-used 'helper': 1 time; wanted exactly 1"]
    # The counted events are the transcript's main-session skill and task calls.
    assert trial.transcript is not None
    events = {e["seq"]: e for e in (json.loads(line) for line in (run.out / trial.transcript).read_text().splitlines()[1:])}
    [skill_seq], [task_seq] = trial.checks[0].events or [], trial.checks[1].events or []
    assert (events[skill_seq]["tool"], events[skill_seq]["input"]["name"], events[skill_seq]["agent"]) == ("skill", "tidy", None)
    assert (events[task_seq]["tool"], events[task_seq]["input"]["agent"]) == ("task", "helper")
    rates = {s.name: [(r.kind, r.name, r.used, r.trials, r.wanted) for r in s.triggerRates] for s in run.report.scenarios}
    assert rates == {"uses-skill-and-agent": [("agent", "helper", 1, 1, "use"), ("skill", "tidy", 1, 1, "use")],
                     # the first check on a name gives the direction: `max: 0`
                     "leaves-the-harness-alone": [("agent", "helper", 0, 1, "no-use"), ("skill", "tidy", 0, 1, "no-use")]}
