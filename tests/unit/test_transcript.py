"""Host-neutral transcripts built from the verbatim CLI streams in tests/unit/hosts/samples."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_atlante.hosts.claude_code.stream import ClaudeStreamMonitor
from pytest_atlante.hosts.opencode.stream import OpenCodeStreamMonitor
from pytest_atlante.hosts.registry import host_for
from pytest_atlante.records import Usage
from pytest_atlante.sandbox.redact import Secrets, secrets_in_env
from pytest_atlante.trial.transcript import (
    REDACTED,
    TRANSCRIPT_SCHEMA,
    Redactor,
    StreamCapture,
    build_transcript,
    read_transcript,
    write_trial_files,
)

SAMPLES = Path(__file__).parent / "hosts" / "samples"


def capture_of(name: str, redactor: Redactor | None = None, cap: int = 2_000_000) -> StreamCapture:
    capture = StreamCapture(redactor or Redactor(Secrets(), []), cap_bytes=cap)
    for line in (SAMPLES / name).read_text().splitlines():
        capture.add(line)
    return capture


def events(name: str, host: str, **kw: Any) -> list[dict[str, Any]]:
    dialect = "claude-code" if host == "claude-code" else "opencode-v1"
    return build_transcript(capture_of(name), host=host, dialect=dialect, scenario="s", trial=1, **kw)


def of_type(transcript: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in transcript if e["type"] == kind]


def test_claude_write_stream_becomes_text_tool_call_result_and_totals() -> None:
    transcript = events("claude-2.1.197-write-stream.jsonl", "claude-code")
    header = transcript[0]
    assert header["schema"] == TRANSCRIPT_SCHEMA and header["truncated"] is False and header["events"] == len(transcript) - 1
    assert [e["seq"] for e in transcript[1:]] == list(range(1, len(transcript)))
    calls = of_type(transcript, "tool_call")
    assert [(c["tool"], c["hostTool"], sorted(c["input"])) for c in calls] == [("write", "Write", ["content", "path"])]
    assert calls[0]["input"]["content"] == "hello from fake model\n"
    results = of_type(transcript, "tool_result")
    assert results[0]["id"] == calls[0]["id"] and results[0]["tool"] == "write" and results[0]["isError"] is False
    assert [e["text"] for e in of_type(transcript, "text")][-1] == "Done: wrote hello.txt"
    monitor = ClaudeStreamMonitor()
    for line in (SAMPLES / "claude-2.1.197-write-stream.jsonl").read_text().splitlines():
        monitor.feed(line)
    (result,) = of_type(transcript, "result")
    assert Usage(**result["usage"]) == monitor.outcome().usage
    turns = of_type(transcript, "usage")
    assert [u["turn"] for u in turns] == [1, 2] and not any(u["outputExact"] for u in turns)
    # input and cache figures of the turns add up; output is only known in total (message_start says 1)
    assert sum(u["usage"]["inputTokens"] for u in turns) == result["usage"]["inputTokens"]


def test_claude_skill_and_subagent_calls_are_marked_with_their_agent() -> None:
    transcript = events("claude-2.1.197-skill-subagent-stream.jsonl", "claude-code")
    calls = of_type(transcript, "tool_call")
    assert [c["tool"] for c in calls] == ["skill", "task", "write"]
    assert calls[0]["input"] == {"name": "greet"}
    assert calls[2]["agent"] == calls[1]["id"]  # the subagent's own call names its parent tool call
    subagents = of_type(transcript, "subagent")
    assert [(s["agent"], s["status"]) for s in subagents] == [("reviewer", "started"), (None, "completed")]


@pytest.mark.parametrize(("name", "host", "skill_tool", "task_tool"), [
    ("claude-2.1.197-scripted-skill-task-stream.jsonl", "claude-code", "Skill", "Agent"),
    ("opencode-1.18.33-scripted-skill-task-stream.jsonl", "opencode", "skill", "task"),
])
def test_skill_loads_and_delegations_have_one_shape_on_both_hosts(name: str, host: str, skill_tool: str, task_tool: str) -> None:
    """The shapes docs/transcripts.md "Skills and sub-agents" promises, from the host streams of the
    scripted run in tests/integration/test_scripted_delegation.py (a skill loaded, a skill the
    harness lacks, a delegation to ``helper`` whose turn writes notes.txt)."""
    transcript = events(name, host)
    calls = of_type(transcript, "tool_call")
    main = [c for c in calls if c["agent"] is None]
    assert [(c["tool"], c["hostTool"]) for c in main] == [("skill", skill_tool), ("skill", skill_tool), ("task", task_tool)]
    tidy, absent, task = main
    assert (tidy["input"], absent["input"]) == ({"name": "tidy"}, {"name": "absent"})
    assert task["input"] == {"description": "Write the notes", "prompt": "Write notes.txt saying delegated, then report back.",
                             "agent": "helper"}
    results = {r["id"]: r for r in of_type(transcript, "tool_result")}
    assert [(results[c["id"]]["tool"], results[c["id"]]["isError"]) for c in main] == \
        [("skill", False), ("skill", True), ("task", False)]
    assert ("SKILL-BODY-SENTINEL-51c2" in results[tidy["id"]]["text"]) is (host == "opencode")  # Claude: beside it
    assert "Wrote notes.txt." in results[task["id"]]["text"]
    subagents = of_type(transcript, "subagent")
    inner = [c for c in calls if c["agent"] is not None]
    if host == "claude-code":
        assert [(s["id"], s["agent"], s["status"]) for s in subagents] == \
            [(task["id"], "helper", "started"), (task["id"], None, "completed")]
        assert [(c["tool"], c["agent"], c["input"]["path"]) for c in inner] == [("write", task["id"], "./notes.txt")]
    else:
        ((session, agent, status),) = [(s["id"], s["agent"], s["status"]) for s in subagents]
        assert session.startswith("ses_") and (agent, status) == ("helper", "completed") and inner == []


def test_claude_sigint_abort_keeps_the_error_result() -> None:
    transcript = events("claude-2.1.197-sigint-stream.jsonl", "claude-code", abort={"reason": "timeout", "message": "m"})
    (result,) = of_type(transcript, "result")
    assert result["isError"] is True
    assert transcript[-1]["type"] == "abort" and transcript[-1]["reason"] == "timeout"


def test_opencode_steps_are_turns_whose_usage_sums_to_the_total() -> None:
    name = "opencode-1.18.33-write-stream.jsonl"
    transcript = events(name, "opencode")
    monitor = OpenCodeStreamMonitor()
    for line in (SAMPLES / name).read_text().splitlines():
        monitor.feed(line)
    turns = of_type(transcript, "usage")
    assert all(u["outputExact"] for u in turns) and [u["turn"] for u in turns] == [1, 2]
    total = Usage(**{k: sum(u["usage"][k] for u in turns) for k in Usage.model_fields})
    assert total == monitor.outcome().usage == Usage(**of_type(transcript, "result")[0]["usage"])
    assert [(c["tool"], sorted(c["input"])) for c in of_type(transcript, "tool_call")] == [("write", ["content", "path"])]


def test_opencode_subagent_error_and_denied_tool() -> None:
    assert [s["agent"] for s in of_type(events("opencode-1.18.33-task-subagent-stream.jsonl", "opencode"), "subagent")] == ["reviewer"]
    (error,) = of_type(events("opencode-1.18.33-http500-error.jsonl", "opencode"), "error")
    assert "scripted error" in error["message"]
    denied = of_type(events("opencode-1.18.33-permissions-ask-deny-stream.jsonl", "opencode"), "tool_result")
    assert any(r["isError"] and "rejected permission" in r["text"] for r in denied)
    assert any(not r["isError"] for r in denied)


def test_budget_crossing_turn_is_marked_once() -> None:
    transcript = events("opencode-1.18.33-write-stream.jsonl", "opencode", max_tokens=150)
    crossed = [u for u in of_type(transcript, "usage") if u.get("budgetCrossed")]
    assert [u["turn"] for u in crossed] == [2]


def test_credentials_and_sandbox_paths_never_reach_the_files(tmp_path: Path) -> None:
    secret = "s3cr3t-VALUE-0123456789"
    env = {"MY_API_TOKEN": secret, "SHORT_KEY": "1", "PATH": "/usr/bin"}
    assert Secrets(secrets_in_env(env)).values == (secret,)
    root = "/tmp/atlante-eval-x/t-1/sandbox"
    redact = Redactor(Secrets(secrets_in_env(env)), [root], host_for("opencode").stream_path_forms(root))
    capture = StreamCapture(redact)
    capture.add(json.dumps({"type": "text", "part": {"text": f"key {secret} in /tmp/atlante-eval-x/t-1/sandbox/a.txt, sk-ant-abcdefghijklmnopqrstu"}}))
    # OpenCode's tool title under bubblewrap: the path relative to "/" (no git worktree above it)
    capture.add(json.dumps({"type": "tool_use", "part": {"type": "tool", "tool": "write", "state": {
        "status": "completed", "input": {"filePath": "a.txt"}, "title": "tmp/atlante-eval-x/t-1/sandbox/a.txt"}}}))
    transcript = build_transcript(capture, host="opencode", dialect="opencode-v2", scenario="s", trial=2)
    rel_t, rel_s = write_trial_files(tmp_path, capture, transcript, "s", 2)
    assert (rel_t, rel_s) == ("trials/s/2/transcript.jsonl", "trials/s/2/host-stream.jsonl")
    for rel in (rel_t, rel_s):
        text = (tmp_path / rel).read_text()
        assert secret not in text and "sk-ant-" not in text and "atlante-eval-" not in text and REDACTED in text
    assert of_type(read_transcript(tmp_path / rel_t), "text")[0]["text"] == f"key {REDACTED} in ./a.txt, {REDACTED}"


@pytest.mark.parametrize("host", ["claude-code", "opencode"])
def test_tool_call_paths_are_shown_in_the_reports_escaped_form(tmp_path: Path, host: str) -> None:
    root = "/tmp/atlante-eval-x/t-1/sandbox"
    capture = StreamCapture(Redactor(Secrets(), [root]))
    name = f"{root}/tab\tnl\nesc\x1b\\back.txt"
    if host == "claude-code":
        capture.add(json.dumps({"type": "assistant", "message": {"id": "m1", "content": [
            {"type": "tool_use", "id": "t1", "name": "Write", "input": {"file_path": name, "content": "x"}}]}}))
    else:
        capture.add(json.dumps({"type": "tool_use", "part": {"type": "tool", "tool": "write", "callID": "t1", "state": {
            "status": "completed", "input": {"filePath": name, "content": "x"}, "output": ""}}}))
    transcript = build_transcript(capture, host=host, dialect="claude-code" if host == "claude-code" else "opencode-v1",
                                  scenario="s", trial=1)
    rel, _ = write_trial_files(tmp_path, capture, transcript, "s", 1)
    (call,) = of_type(read_transcript(tmp_path / rel), "tool_call")
    assert call["input"]["path"] == "./tab\\tnl\\nesc\\x1b\\\\back.txt"


def test_the_cap_keeps_the_head_and_the_end_and_says_so() -> None:
    capture = capture_of("opencode-1.18.33-write-stream.jsonl", cap=600)
    for _ in range(200):
        capture.add(json.dumps({"type": "text", "part": {"text": "x" * 100}}))
    capture.add(json.dumps({"type": "step_finish", "part": {"tokens": {"input": 1, "output": 1}}}))
    assert capture.truncated and capture.kept_bytes <= 600
    transcript = build_transcript(capture, host="opencode", dialect="opencode-v1", scenario="s", trial=1)
    assert transcript[0]["truncated"] is True and transcript[0]["capBytes"] == 600
    assert of_type(transcript, "truncated")[0]["droppedLines"] == capture.dropped_lines > 0
    assert of_type(transcript, "usage")[-1]["usage"]["inputTokens"] == 1  # the end survived


@pytest.mark.parametrize("junk", ["", "not json", "[]", '{"type": "assistant", "message": 3}', '{"type":"tool_use","part":{"state":7}}'])
def test_junk_lines_never_raise(junk: str) -> None:
    for host in ("claude-code", "opencode"):
        capture = StreamCapture(Redactor(Secrets(), []))
        capture.add(junk)
        assert build_transcript(capture, host=host, dialect="x", scenario="s", trial=1)[0]["type"] == "header"


def test_each_host_names_its_own_spellings_of_a_trial_path() -> None:
    root = "/tmp/atlante-eval-x/t-1/sandbox"
    assert host_for("claude-code").stream_path_forms(root) == ("-tmp-atlante-eval-x-t-1-sandbox",)
    assert host_for("opencode").stream_path_forms(root) == ("tmp/atlante-eval-x/t-1/sandbox",)
    store = "/tmp/atlante-eval-x/t-1/home/.claude/projects/-tmp-atlante-eval-x-t-1-sandbox/s.jsonl"
    redact = Redactor(Secrets(), [root, "/tmp/atlante-eval-x/t-1/home"], host_for("claude-code").stream_path_forms(root))
    assert redact(f"stored in {store}") == "stored in ./.claude/projects/<sandbox>/s.jsonl"
    # Not only "/": every character but a letter or digit (measured: ".", "_", " " and "+").
    odd = "/work/t_1/m.x_y z+q/sandbox"
    assert host_for("claude-code").stream_path_forms(odd) == ("-work-t-1-m-x-y-z-q-sandbox",)
    redact = Redactor(Secrets(), [odd], host_for("claude-code").stream_path_forms(odd))
    assert redact("memory in /h/.claude/projects/-work-t-1-m-x-y-z-q-sandbox/memory/") == \
        "memory in /h/.claude/projects/<sandbox>/memory/"


# --------------------------------------------------------------------------- slash commands


def command_transcript(name: str, host: str, prompt: str | None) -> list[dict[str, Any]]:
    dialect = {"claude-code": "claude-code", "opencode": "opencode-v1", "gemini-cli": "gemini-cli"}[host]
    return build_transcript(capture_of(name), host=host, dialect=dialect, scenario="s", trial=1, prompt=prompt)


@pytest.mark.parametrize(("name", "host"), [
    ("claude-2.1.197-command-stream.jsonl", "claude-code"),
    ("opencode-1.18.33-command-stream.jsonl", "opencode"),
    ("gemini-0.61.0-command-stream.jsonl", "gemini-cli"),
])
def test_a_command_the_host_took_is_the_first_event(name: str, host: str) -> None:
    """Real sessions of ``/greet with args`` (the command's text reached the model; no host streams
    anything of the expansion): the runner records it first, in turn 1, and numbers the rest after."""
    transcript = command_transcript(name, host, "/greet with args")
    assert transcript[1] == {"seq": 1, "t": transcript[2]["t"], "type": "command", "turn": 1, "name": "greet",
                             "arguments": "with args", "agent": None}
    assert [e["seq"] for e in transcript[1:]] == list(range(1, len(transcript)))
    assert transcript[0]["events"] == len(transcript) - 1
    assert [e["tool"] for e in of_type(transcript, "tool_call")] == ["write"]


@pytest.mark.parametrize("prompt", [None, "Greet the user.", "/tmp/app is broken: fix it"])
def test_a_prompt_that_runs_no_command_has_no_command_event(prompt: str | None) -> None:
    assert not of_type(command_transcript("claude-2.1.197-command-stream.jsonl", "claude-code", prompt), "command")


@pytest.mark.parametrize(("name", "answer", "command"), [
    ("claude-2.1.197-unknown-command-stream.jsonl", "Unknown command: /nosuch", "nosuch"),
    # With a command of a similar name it suggests one.
    ("claude-2.1.197-unknown-command-suggestion-stream.jsonl", "Unknown command: /greet. Did you mean /reset?", "greet"),
])
def test_claude_codes_unknown_command_answer_is_an_error_event_and_no_command(name: str, answer: str, command: str) -> None:
    """``claude -p "/nosuch with args"``: a synthetic "Unknown command: /nosuch" and a result of 0 turns."""
    transcript = command_transcript(name, "claude-code", f"/{command} with args")
    assert not of_type(transcript, "command") and not of_type(transcript, "text")
    (error,) = of_type(transcript, "error")
    assert error["message"] == answer and error["unknownCommand"] == command
    assert of_type(transcript, "result")[0]["turns"] == 0
    monitor = ClaudeStreamMonitor()
    for line in (SAMPLES / name).read_text().splitlines():
        monitor.feed(line)
    outcome = monitor.outcome()
    assert outcome.is_error
    assert outcome.error_message is not None and repr(answer) in outcome.error_message
    assert "0 turns" in outcome.error_message


def test_a_command_the_host_refused_has_no_command_event() -> None:
    """``opencode run --command nosuch``: an error event, no step (the model was never asked)."""
    transcript = command_transcript("opencode-1.18.33-unknown-command-stream.jsonl", "opencode", "/nosuch")
    assert not of_type(transcript, "command") and of_type(transcript, "error")


def test_the_same_answer_text_from_the_model_is_no_unknown_command() -> None:
    """Only Claude Code's own (synthetic) message is its answer: a model saying the words is text."""
    lines = [line.replace('"model":"<synthetic>"', '"model":"claude-opus-4-8"')
             for line in (SAMPLES / "claude-2.1.197-unknown-command-stream.jsonl").read_text().splitlines()]
    capture = StreamCapture(Redactor(Secrets(), []))
    for line in lines:
        capture.add(line)
    transcript = build_transcript(capture, host="claude-code", dialect="claude-code", scenario="s", trial=1)
    assert [e["text"] for e in of_type(transcript, "text")] == ["Unknown command: /nosuch"]
    assert not [e for e in of_type(transcript, "error") if "unknownCommand" in e]
