"""The trajectory checks (skill-used, agent-used, tool-used, usage-within) on hand-made transcripts:
counting, the min/max defaults, the truncated-transcript and no-transcript rules, the no-op trial,
and their evidence.  The same checks on real sessions of both CLIs are in
tests/integration/test_trajectory_real.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from pytest_atlante.checks import NO_SESSION, TABLE, Check, SessionView
from pytest_atlante.checks.base import CheckContext
from pytest_atlante.checks.trajectory import MATCHED_EVENTS_CAP
from pytest_atlante.records import CheckResult, CountRecord, Usage
from pytest_atlante.sandbox.trialdir import Diff, Sandbox

CHECK: TypeAdapter[Check] = TypeAdapter(Check)


def call(seq: int, tool: str, turn: int = 1, within: str | None = None, **inputs: Any) -> dict[str, Any]:
    return {"seq": seq, "t": seq * 10, "type": "tool_call", "turn": turn, "id": f"c{seq}", "tool": tool,
            "hostTool": tool.title(), "input": inputs, "agent": within}


def result(seq: int, of: int, tool: str, error: bool = False, within: str | None = None) -> dict[str, Any]:
    return {"seq": seq, "t": seq * 10, "type": "tool_result", "turn": 1, "id": f"c{of}", "tool": tool,
            "isError": error, "text": "", "chars": 0, "truncated": False, "agent": within}


EVENTS: tuple[dict[str, Any], ...] = (
    {"seq": 1, "t": 5, "type": "text", "turn": 1, "text": "Loading the skill.", "agent": None},
    call(2, "skill", name="tidy"), result(3, 2, "skill"),
    call(4, "bash", turn=2, command="rm -rf build && make"), result(5, 4, "bash", error=True),  # denied: still a call
    call(6, "task", turn=2, agent="helper", prompt="write the file"),
    # The sub-agent's own calls (Claude Code streams them, OpenCode does not): never counted.
    call(7, "write", turn=3, within="c6", path="hello.txt", content="hello"), result(8, 7, "write", within="c6"),
    call(9, "skill", turn=3, within="c6", name="tidy"), result(10, 9, "skill", within="c6"),
    result(11, 6, "task"),
    call(12, "skill", turn=3, name="tidy"), result(13, 12, "skill"),
    call(14, "skill", turn=3, name="missing"), result(15, 14, "skill", error=True),  # unknown skill: not loaded
    call(16, "task", turn=3, agent="reviewer"), result(17, 16, "task", error=True),
    call(18, "bash", turn=3, command="ls"), result(19, 18, "bash"),
    call(20, "write", turn=3, path="hello.txt", content="hello"), result(21, 20, "write"),
    {"seq": 22, "t": 90, "type": "result", "turn": 3, "usage": {}, "costUsd": 0.01, "turns": 3, "stopReason": "end_turn",
     "isError": False},
)
USAGE = Usage(inputTokens=1000, outputTokens=200, cacheReadTokens=300, cacheWriteTokens=0)
SESSION = SessionView(had_session=True, events=EVENTS, usage=USAGE, cost_usd=0.0125, duration_ms=4200)


def judge(spec: dict[str, Any], session: SessionView = SESSION) -> CheckResult:
    check = CHECK.validate_python(spec)
    # The trajectory checks look at the session only; no sandbox is touched.
    nowhere = Path("/nonexistent")
    ctx = CheckContext(sandbox=Sandbox(nowhere, nowhere, nowhere, nowhere),
                       diff=Diff(changed_paths=[], text=""), env={}, session=session)
    return TABLE[type(check)].run(0, check, ctx)


def test_skill_used_counts_the_main_sessions_loads_and_names_the_events() -> None:
    checked = judge({"type": "skill-used", "skill": "tidy"})
    assert (checked.passed, checked.error, checked.events) == (True, False, [2, 12])  # not the sub-agent's #9
    assert checked.message == "skill-used 'tidy': 2 times; wanted at least 1"
    assert checked.count == CountRecord(kind="skill", name="tidy", uses=2, min=1, max=None)
    assert checked.output is not None
    assert checked.output.splitlines() == ["#2 turn 1: skill name='tidy'", "#12 turn 3: skill name='tidy'"]


def test_a_call_the_host_refused_is_no_load_and_no_delegation() -> None:
    assert judge({"type": "skill-used", "skill": "missing", "max": 0}).passed
    assert judge({"type": "agent-used", "agent": "reviewer", "max": 0}).passed
    # tool-used counts attempts: the skill calls the host refused are skill calls all the same.
    assert judge({"type": "tool-used", "tool": "skill"}).events == [2, 12, 14]


@pytest.mark.parametrize(("bounds", "passed", "wanted"), [
    ({"max": 0}, False, "none"),
    ({"min": 2, "max": 2}, True, "exactly 2"),
    ({"min": 3}, False, "at least 3"),
    ({"min": 0, "max": 1}, False, "at least 0 and at most 1"),
    ({"max": 5}, True, "at least 1 and at most 5"),
])
def test_min_and_max_bound_the_count_inclusively(bounds: dict[str, int], passed: bool, wanted: str) -> None:
    checked = judge({"type": "skill-used", "skill": "tidy", **bounds})
    assert (checked.passed, checked.error) == (passed, False)
    assert checked.message.endswith(f"wanted {wanted}")


def test_a_skill_that_never_loaded_fails_min_and_passes_max_zero() -> None:
    assert not judge({"type": "skill-used", "skill": "other"}).passed
    untriggered = judge({"type": "skill-used", "skill": "other", "max": 0})
    assert untriggered.passed and untriggered.events == [] and untriggered.output is None
    assert untriggered.message == "skill-used 'other': 0 times; wanted none"


def test_agent_used_counts_task_calls_naming_the_agent() -> None:
    assert judge({"type": "agent-used", "agent": "helper", "min": 1, "max": 1}).events == [6]
    assert not judge({"type": "agent-used", "agent": "reviewer"}).passed


def test_agent_used_counts_a_delegation_under_the_name_the_host_knows_the_agent_by() -> None:
    """An agent file built for its own host keeps its frontmatter name (``PatternAnalyst``), which the
    host delegates by; the build records it for the harness name (``agentNames``)."""
    events = (call(1, "task", agent="PatternAnalyst", prompt="find patterns"), result(2, 1, "task"))
    named = SessionView(had_session=True, events=events, agent_names={"pattern-analyst": "PatternAnalyst"})
    assert judge({"type": "agent-used", "agent": "pattern-analyst", "min": 1, "max": 1}, named).events == [1]
    assert not judge({"type": "agent-used", "agent": "pattern-analyst"}, SessionView(had_session=True, events=events)).passed


def test_tool_used_matches_any_input_string_with_a_regular_expression() -> None:
    assert judge({"type": "tool-used", "tool": "bash"}).events == [4, 18]
    destructive = judge({"type": "tool-used", "tool": "bash", "inputMatches": r"\brm\s+-rf\b", "max": 0})
    assert (destructive.passed, destructive.events) == (False, [4])
    assert destructive.message == "tool-used bash matching '\\\\brm\\\\s+-rf\\\\b': 1 time; wanted none"
    assert judge({"type": "tool-used", "tool": "write", "inputMatches": "^hello$"}).events == [20]


def test_a_truncated_transcript_decides_only_what_its_kept_part_proves() -> None:
    cut = SessionView(had_session=True, events=(*EVENTS, {"seq": 23, "t": 95, "type": "truncated", "turn": 3,
                                                          "droppedLines": 40}), usage=USAGE)
    assert judge({"type": "skill-used", "skill": "tidy"}, cut).passed  # two seen: at least one, whatever was cut
    assert not judge({"type": "skill-used", "skill": "tidy", "max": 1}, cut).passed  # already over
    for undecided in ({"type": "skill-used", "skill": "tidy", "max": 2}, {"type": "skill-used", "skill": "x"}):
        checked = judge(undecided, cut)
        assert (checked.passed, checked.error, checked.count) == (False, True, None)
        assert "cut by the stream cap" in checked.message


def test_a_session_without_a_transcript_makes_them_error_checks() -> None:
    lost = SessionView(had_session=True, events=None, usage=USAGE, cost_usd=0.01, duration_ms=10)
    for spec in ({"type": "skill-used", "skill": "tidy", "max": 0}, {"type": "usage-within", "turns": 5}):
        checked = judge(spec, lost)
        assert (checked.passed, checked.error) == (False, True), spec
    # A bound that needs no transcript still has its figure.
    assert judge({"type": "usage-within", "totalTokens": 2000}, lost).passed


def test_the_no_op_trial_has_zero_uses_and_no_usage() -> None:
    assert not judge({"type": "skill-used", "skill": "tidy"}, NO_SESSION).passed
    silent = judge({"type": "skill-used", "skill": "tidy", "max": 0}, NO_SESSION)
    assert silent.passed and silent.message == "skill-used 'tidy': 0 times (no host session); wanted none"
    usage = judge({"type": "usage-within", "turns": 100}, NO_SESSION)
    assert (usage.passed, usage.error) == (False, False)


def test_usage_within_compares_every_bound_inclusively() -> None:
    within = judge({"type": "usage-within", "turns": 3, "inputTokens": 1000, "outputTokens": 200,
                    "totalTokens": 1500, "costUsd": 0.0125, "durationMs": 4200})
    assert within.passed, within.message
    assert within.message == ("usage-within: turns 3 ≤ 3, inputTokens 1000 ≤ 1000, outputTokens 200 ≤ 200, "
                              "totalTokens 1500 ≤ 1500, costUsd 0.0125 ≤ 0.0125, durationMs 4200 ≤ 4200")
    over = judge({"type": "usage-within", "turns": 2, "totalTokens": 1499})
    assert (over.passed, over.error) == (False, False)
    assert over.message == "usage-within: turns 3 > 2, totalTokens 1500 > 1499"


def test_usage_within_is_an_error_when_the_host_reported_no_figure() -> None:
    unreported = SessionView(had_session=True, events=EVENTS, usage=None, cost_usd=None, duration_ms=10)
    checked = judge({"type": "usage-within", "totalTokens": 10, "costUsd": 1.0, "durationMs": 100}, unreported)
    assert (checked.passed, checked.error) == (False, True)
    assert checked.message == ("usage-within: cannot tell; totalTokens: the host reported no usage; "
                              "costUsd: the host reported no cost; durationMs 10 ≤ 100")


def test_turns_fall_back_to_the_highest_turn_without_a_result_event() -> None:
    partial = SessionView(had_session=True, events=EVENTS[:-1], usage=USAGE)
    assert judge({"type": "usage-within", "turns": 3}, partial).passed
    assert not judge({"type": "usage-within", "turns": 2}, partial).passed


def test_the_matched_event_list_is_capped() -> None:
    many = tuple(call(seq, "bash", command="true") for seq in range(1, MATCHED_EVENTS_CAP + 50))
    checked = judge({"type": "tool-used", "tool": "bash"}, SessionView(had_session=True, events=many))
    assert checked.events == list(range(1, MATCHED_EVENTS_CAP + 1))
    assert checked.output is not None and len(checked.output) <= 2000
    assert checked.message.startswith(f"tool-used bash: {MATCHED_EVENTS_CAP + 49} times")


# --------------------------------------------------------------------------- command-used

COMMAND = {"seq": 1, "t": 0, "type": "command", "turn": 1, "name": "review", "arguments": "src/app.py", "agent": None}
COMMANDED = SessionView(had_session=True, events=(COMMAND, *({**e, "seq": e["seq"] + 1} for e in EVENTS)), usage=USAGE)


def test_command_used_counts_the_command_events_of_the_main_session() -> None:
    checked = judge({"type": "command-used", "command": "review"}, COMMANDED)
    assert (checked.passed, checked.error, checked.events) == (True, False, [1])
    assert checked.message == "command-used 'review': 1 time; wanted at least 1"
    assert checked.count == CountRecord(kind="command", name="review", uses=1, min=1, max=None)
    assert checked.output == "#1 turn 1: /review arguments='src/app.py'"
    # The prompt's spelling names the same command.
    assert judge({"type": "command-used", "command": "/review", "min": 1, "max": 1}, COMMANDED).passed


@pytest.mark.parametrize("session", [SESSION, NO_SESSION], ids=["no-command-event", "no-op-trial"])
def test_a_command_that_never_ran_fails_min_and_passes_max_zero(session: SessionView) -> None:
    checked = judge({"type": "command-used", "command": "review"}, session)
    assert (checked.passed, checked.error) == (False, False)
    assert judge({"type": "command-used", "command": "review", "max": 0}, session).passed


@pytest.mark.parametrize("event", [
    {**COMMAND, "name": "other"},
    {**COMMAND, "agent": "c6"},  # a sub-agent's: never the prompt's command
    {**COMMAND, "unverified": True, "unverifiedReason": "not the host's own"},
    {**call(1, "skill", name="review"), "type": "tool_call"},  # a skill of that name is no command
])
def test_only_the_main_sessions_own_command_event_of_that_name_counts(event: dict[str, Any]) -> None:
    session = SessionView(had_session=True, events=(event,), usage=USAGE)
    assert judge({"type": "command-used", "command": "review", "max": 0}, session).passed


def test_command_used_needs_a_transcript_and_min_at_most_max() -> None:
    lost = SessionView(had_session=True, events=None, usage=USAGE)
    assert (judge({"type": "command-used", "command": "review"}, lost).error) is True
    with pytest.raises(ValueError, match="command"):
        CHECK.validate_python({"type": "command-used"})
    with pytest.raises(ValueError, match="command"):
        CHECK.validate_python({"type": "command-used", "command": ""})


# --------------------------------------------------------------------------- a skill run as /name

SKILL_COMMAND = {**COMMAND, "name": "tidy", "arguments": "now please"}


def test_skill_used_counts_a_skill_run_as_a_command_where_the_host_runs_skills_so() -> None:
    """Claude Code and OpenCode run a harness skill as ``/tidy …`` (its SKILL.md is the expansion)
    without any skill tool call: the runner's ``command`` event is that skill's use."""
    commanded = SessionView(had_session=True, events=(SKILL_COMMAND,), usage=USAGE, skills_run_as_commands=True)
    checked = judge({"type": "skill-used", "skill": "tidy", "min": 1, "max": 1}, commanded)
    assert (checked.passed, checked.error, checked.events) == (True, False, [1])
    assert checked.output == "#1 turn 1: /tidy arguments='now please'"
    assert checked.count == CountRecord(kind="skill", name="tidy", uses=1, min=1, max=1)
    # With the tool loads after it, each use counts once, in transcript order.
    both = SessionView(had_session=True, events=(SKILL_COMMAND, *({**e, "seq": e["seq"] + 1} for e in EVENTS)),
                       usage=USAGE, skills_run_as_commands=True)
    checked = judge({"type": "skill-used", "skill": "tidy"}, both)
    assert (checked.passed, checked.events) == (True, [1, 3, 13])
    # A plugin's skill run as /plugin:tidy is the skill tidy, as its tool load would be.
    plugin = SessionView(had_session=True, events=({**SKILL_COMMAND, "name": "house:tidy"},), usage=USAGE,
                         skills_run_as_commands=True)
    assert judge({"type": "skill-used", "skill": "tidy", "min": 1, "max": 1}, plugin).passed


@pytest.mark.parametrize("session", [
    SessionView(had_session=True, events=(SKILL_COMMAND,), usage=USAGE),  # a host that runs no skill as /name
    SessionView(had_session=True, events=({**SKILL_COMMAND, "agent": "c6"},), usage=USAGE, skills_run_as_commands=True),
    SessionView(had_session=True, events=({**SKILL_COMMAND, "unverified": True},), usage=USAGE,
                skills_run_as_commands=True),
    SessionView(had_session=True, events=({**SKILL_COMMAND, "name": "review"},), usage=USAGE,
                skills_run_as_commands=True),
], ids=["host-without-skill-commands", "sub-agent", "unverified", "other-name"])
def test_a_command_event_counts_as_a_skill_use_only_when_it_is_that_skill_run_by_the_host(session: SessionView) -> None:
    assert judge({"type": "skill-used", "skill": "tidy", "max": 0}, session).passed
