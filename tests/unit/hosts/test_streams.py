"""Stream monitors over the verbatim CLI transcripts in tests/unit/hosts/samples (docs/host-facts.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_atlante.hosts.claude_code.stream import ClaudeStreamMonitor
from pytest_atlante.hosts.opencode.stream import OpenCodeStreamMonitor
from pytest_atlante.records import Usage

# Verbatim streams measured with the real CLIs (docs/host-facts.md), kept beside the tests that parse them.
SAMPLES = Path(__file__).parent / "samples"


def feed(monitor: ClaudeStreamMonitor | OpenCodeStreamMonitor, sample: str) -> None:
    for line in (SAMPLES / sample).read_text().splitlines():
        monitor.feed(line)


# --------------------------------------------------------------------------- Claude Code


def test_claude_write_stream_takes_usage_cost_and_model_from_the_result() -> None:
    monitor = ClaudeStreamMonitor()
    feed(monitor, "claude-2.1.197-write-stream.jsonl")
    outcome = monitor.outcome()
    assert outcome.usage == Usage(inputTokens=200, outputTokens=40, cacheReadTokens=10, cacheWriteTokens=20)
    assert outcome.cost_usd == pytest.approx(0.00213)
    assert outcome.model_identity == "claude-opus-4-8[1m]"
    assert (outcome.is_error, outcome.error_message) == (False, None)
    assert outcome.usage_events == 4  # three assistant events with usage + the result
    assert outcome.budget_unmonitored is False
    assert monitor.cumulative_tokens == 270


def test_claude_running_total_counts_each_message_id_once_before_the_result() -> None:
    lines = (SAMPLES / "claude-2.1.197-write-stream.jsonl").read_text().splitlines()
    monitor = ClaudeStreamMonitor()
    assert monitor.cumulative_tokens is None
    monitor.feed(lines[0])  # init
    assert monitor.cumulative_tokens is None
    monitor.feed(lines[1])  # text block of message 1: usage 100+1+10+5
    assert monitor.cumulative_tokens == 116
    monitor.feed(lines[2])  # tool_use block of the SAME message id: not counted again
    assert monitor.cumulative_tokens == 116
    monitor.feed(lines[3])  # tool result (user)
    monitor.feed(lines[4])  # final text, a new message id
    assert monitor.cumulative_tokens == 232
    monitor.feed(lines[5])  # result replaces the partial figures (output_tokens was 1 per message)
    assert monitor.cumulative_tokens == 270


def test_claude_subagent_usage_is_included_through_model_usage() -> None:
    monitor = ClaudeStreamMonitor()
    feed(monitor, "claude-2.1.197-skill-subagent-stream.jsonl")
    outcome = monitor.outcome()
    # result.usage holds only the main loop (300/60/15/30); modelUsage adds the sonnet subagent.
    assert outcome.usage == Usage(inputTokens=500, outputTokens=100, cacheReadTokens=25, cacheWriteTokens=50)
    assert outcome.cost_usd == pytest.approx(0.004473)
    assert outcome.model_identity == "claude-opus-4-8[1m]"


def test_claude_2_1_332_result_with_reordered_keys() -> None:
    monitor = ClaudeStreamMonitor()
    feed(monitor, "claude-2.1.332-write-stream.jsonl")
    outcome = monitor.outcome()
    assert outcome.usage is not None and outcome.usage.total == 270
    assert outcome.model_identity == "claude-opus-5-5"
    assert outcome.is_error is False


def test_claude_unauthenticated_stream_is_an_error_without_a_synthetic_model() -> None:
    monitor = ClaudeStreamMonitor()
    feed(monitor, "claude-2.1.197-unauth-stream.jsonl")
    outcome = monitor.outcome()
    assert outcome.is_error is True
    assert outcome.error_message == "Not logged in · Please run /login"
    assert outcome.model_identity is None  # "<synthetic>" is not a model
    assert outcome.cost_usd == 0


def test_claude_http_500_and_sigint_abort_are_errors_with_messages() -> None:
    failed = ClaudeStreamMonitor()
    feed(failed, "claude-2.1.197-http500-stream.jsonl")
    assert failed.outcome().is_error is True
    assert (failed.outcome().error_message or "").startswith("API Error: 500 scripted error")

    aborted = ClaudeStreamMonitor()
    feed(aborted, "claude-2.1.197-sigint-stream.jsonl")
    outcome = aborted.outcome()
    assert outcome.is_error is True
    assert outcome.error_message == "[ede_diagnostic] result_type=user last_content_type=n/a stop_reason=tool_use"
    assert outcome.usage == Usage(inputTokens=100, outputTokens=20, cacheReadTokens=5, cacheWriteTokens=10)


def test_claude_stream_cut_before_the_result_keeps_partial_usage_and_is_an_error() -> None:
    lines = (SAMPLES / "claude-2.1.197-http401-retry-stream.jsonl").read_text().splitlines()
    monitor = ClaudeStreamMonitor()
    for line in lines:
        monitor.feed(line)
    outcome = monitor.outcome()
    assert outcome.usage is None and outcome.usage_events == 0
    assert outcome.budget_unmonitored is True
    assert outcome.is_error is True and "without a result event" in (outcome.error_message or "")


@pytest.mark.parametrize(
    "junk",
    ["", "not json", "[1, 2]", "null", '{"type": "assistant", "message": 5}', '{"type": "result", "usage": "x"}',
     '{"type": "assistant", "message": {"id": 1, "usage": {"input_tokens": -5, "output_tokens": true}}}', "{" * 5000],
)
def test_monitors_never_raise_on_junk(junk: str) -> None:
    for monitor in (ClaudeStreamMonitor(), OpenCodeStreamMonitor()):
        monitor.feed(junk)
        monitor.outcome()
        assert monitor.cumulative_tokens in (None, 0)


# --------------------------------------------------------------------------- OpenCode


def test_opencode_write_stream_sums_step_finish_tokens_and_cost() -> None:
    monitor = OpenCodeStreamMonitor()
    lines = (SAMPLES / "opencode-1.18.33-write-stream.jsonl").read_text().splitlines()
    monitor.feed(lines[0])
    assert monitor.cumulative_tokens is None
    for line in lines[1:4]:
        monitor.feed(line)
    assert monitor.cumulative_tokens == 120  # first step_finish: 95 + 20 + 5 cached
    for line in lines[4:]:
        monitor.feed(line)
    outcome = monitor.outcome()
    assert outcome.usage == Usage(inputTokens=190, outputTokens=40, cacheReadTokens=10, cacheWriteTokens=0)
    assert outcome.cost_usd == pytest.approx(0.001173)
    assert outcome.model_identity is None  # not in the stream: the stored session has it
    assert outcome.usage_events == 2 and outcome.budget_unmonitored is False
    assert outcome.is_error is False
    assert monitor.session_id == "ses_dd485b425ffePArjq9AwJIY7X8"
    assert monitor.subagent_session_ids == []


def test_opencode_reasoning_tokens_count_as_output() -> None:
    monitor = OpenCodeStreamMonitor()
    monitor.feed(json.dumps({"type": "step_finish", "part": {"tokens": {"input": 1, "output": 2, "reasoning": 3, "cache": {"read": 4, "write": 5}}, "cost": 0.5}}))
    assert monitor.outcome().usage == Usage(inputTokens=1, outputTokens=5, cacheReadTokens=4, cacheWriteTokens=5)
    assert monitor.cumulative_tokens == 15


def test_opencode_error_event_marks_the_session_failed() -> None:
    monitor = OpenCodeStreamMonitor()
    feed(monitor, "opencode-1.18.33-http500-error.jsonl")
    outcome = monitor.outcome()
    assert outcome.is_error is True
    assert outcome.error_message == "APIError: scripted error"
    assert outcome.usage is None and outcome.budget_unmonitored is True


def test_opencode_subagent_session_ids_are_collected() -> None:
    monitor = OpenCodeStreamMonitor()
    feed(monitor, "opencode-1.18.33-task-subagent-stream.jsonl")
    assert monitor.session_id == "ses_dd47c828cffeamea7Pmr3yOAas"
    assert monitor.subagent_session_ids == ["ses_dd47c7e33ffeKrETCXKmTlu1EP"]


def test_opencode_denied_and_rejected_tool_calls_are_not_session_errors() -> None:
    monitor = OpenCodeStreamMonitor()
    feed(monitor, "opencode-1.18.33-permissions-ask-deny-stream.jsonl")
    outcome = monitor.outcome()
    assert outcome.is_error is False
    assert outcome.usage_events == 5


# --------------------------------------------------------------------------- the stream is untrusted (docs/design.md §10)

BAD_VALUES = [-25, -1, float("nan"), float("inf"), 10**30, "12", True, [3], {"n": 1}]


def _claude_result(**fields: object) -> str:
    return json.dumps({"type": "result", "subtype": "success", "is_error": False, **fields})


@pytest.mark.parametrize("bad", BAD_VALUES, ids=repr)
def test_claude_invalid_cost_and_counts_are_ignored_and_noted(bad: object) -> None:
    monitor = ClaudeStreamMonitor()
    monitor.feed(_claude_result(total_cost_usd=bad, usage={"input_tokens": bad, "output_tokens": 5}))
    outcome = monitor.outcome()
    assert outcome.cost_usd is None
    assert outcome.usage == Usage(outputTokens=5)
    assert any("ignored cost" in note for note in outcome.notes)
    assert any("ignored token count" in note for note in outcome.notes)


@pytest.mark.parametrize("bad", BAD_VALUES, ids=repr)
def test_opencode_invalid_cost_and_counts_are_ignored_and_noted(bad: object) -> None:
    monitor = OpenCodeStreamMonitor()
    for cost in (0.5, bad):
        monitor.feed(json.dumps({"type": "step_finish", "part": {"tokens": {"input": bad, "output": 7}, "cost": cost}}))
    outcome = monitor.outcome()
    assert outcome.cost_usd == 0.5
    assert outcome.usage == Usage(outputTokens=14)
    assert any("ignored cost" in note for note in outcome.notes)
    assert any("ignored token count" in note for note in outcome.notes)


def test_claude_second_result_lowers_nothing() -> None:
    monitor = ClaudeStreamMonitor()
    feed(monitor, "claude-2.1.197-write-stream.jsonl")
    before = monitor.outcome()
    monitor.feed(_claude_result(total_cost_usd=0, usage={"input_tokens": 0}, modelUsage={"forged": {}}))
    after = monitor.outcome()
    assert (after.usage, after.cost_usd, after.model_identity, after.is_error) == (
        before.usage, before.cost_usd, before.model_identity, False)
    assert any("second result" in note for note in after.notes)


def test_claude_real_result_after_a_forged_one_still_counts() -> None:
    # a forged result first (zero usage, negative cost): the real one that follows is not lost
    monitor = ClaudeStreamMonitor()
    monitor.feed(_claude_result(total_cost_usd=-25, usage={"input_tokens": 0, "output_tokens": 0}))
    feed(monitor, "claude-2.1.197-write-stream.jsonl")
    outcome = monitor.outcome()
    assert outcome.usage == Usage(inputTokens=200, outputTokens=40, cacheReadTokens=10, cacheWriteTokens=20)
    assert outcome.cost_usd == pytest.approx(0.00213)


def test_claude_error_result_is_not_undone_by_a_later_one() -> None:
    monitor = ClaudeStreamMonitor()
    monitor.feed(_claude_result(is_error=True, result="API Error: 500"))
    monitor.feed(_claude_result(is_error=False, result="all fine"))
    outcome = monitor.outcome()
    assert (outcome.is_error, outcome.error_message) == (True, "API Error: 500")


def test_claude_forged_zero_result_never_lowers_the_running_total() -> None:
    # the attack of issue 26: a tool writes a zero-usage result into the CLI's stdout mid-session
    lines = (SAMPLES / "claude-2.1.197-write-stream.jsonl").read_text().splitlines()
    monitor = ClaudeStreamMonitor()
    totals = []
    for index, line in enumerate(lines):
        monitor.feed(line)
        if index == 2:
            monitor.feed(_claude_result(usage={"input_tokens": 0, "output_tokens": 0}, total_cost_usd=0))
        totals.append(monitor.cumulative_tokens or 0)
    assert totals == sorted(totals)  # counts only go up
    assert totals[-1] > 0
    outcome = monitor.outcome()
    assert outcome.usage is not None and outcome.usage.total == totals[-1] == 270  # the real result's figures
    assert any("second result" in note for note in outcome.notes)


def test_notes_are_capped() -> None:
    monitor = OpenCodeStreamMonitor()
    for _ in range(1000):
        monitor.feed(json.dumps({"type": "step_finish", "part": {"tokens": {"input": -1}, "cost": -1}}))
    notes = monitor.outcome().notes
    assert len(notes) == 21 and notes[-1].startswith("and ")
