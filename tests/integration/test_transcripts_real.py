"""Transcripts on both real CLIs through the scripted model.

One run per host with these scenarios: a script of several tool steps (whose transcript must replay
the script's actions in order, host-neutrally, with usage that adds up to the trial's), a session
stopped by its timeout (what the transcript holds of the killed call is each host's own) and, on
``ONE_HOST`` only, a session aborted by ``maxTokens`` (the proxy ends it and the runner writes the
abort, the same for every host; test_budgets_real.py aborts a session on every host).  A credential-named variable of the run's
environment is written into a file and echoed by the "model": its value must not reach either file.
The run uses two xdist workers: each writes the transcripts of the trials it ran.  ``EVERY_HOST``:
each host's stream becomes the transcript through its own reader.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import EVERY_HOST, ONE_HOST, Project, config_doc, scenario_doc
from pytest_atlante.records import TrialRecord, Usage
from pytest_atlante.report.model import EvalReport
from pytest_atlante.trial.transcript import REDACTED, TRANSCRIPT_SCHEMA

pytestmark = pytest.mark.hosts
SECRET = "atl-CREDENTIAL-9f1c2b7e44d0"
STEPS: list[dict[str, Any]] = [
    {"type": "write", "path": "notes.txt", "content": f"token={SECRET}\n"},
    {"type": "bash", "command": f"echo {SECRET} > echoed.txt && echo ran"},
    {"type": "read", "path": "notes.txt"},
    {"type": "edit", "path": "notes.txt", "old": "token=", "new": "key="},
]


#: The fields of a step's neutral input a host's own tool has, where it lacks some of the action's:
#: Codex edits with ``apply_patch``, a patch of the file's lines, which has no old or new field.
STEP_FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    "codex": {"edit": ("path",)},
}
#: The hosts whose transcript holds the call the timeout killed: Claude Code and Gemini CLI stream it
#: as it starts; Codex's rollout (which the transcript is built from) has it before its output.
SHOWS_THE_KILLED_CALL = {"claude-code", "codex", "gemini-cli"}


def steps_script() -> list[dict[str, Any]]:
    # one action per turn: OpenCode runs one turn's calls concurrently, so order is only defined across turns
    turns: list[dict[str, Any]] = [{"text": f"Step {i}.", "actions": [a], "usage": {"input": 100 + i, "output": 10 + i, "cache_read": i}}
                                   for i, a in enumerate(STEPS)]
    return [*turns, {"text": "Done.", "usage": {"input": 50, "output": 5}}]


def expected_input(action: dict[str, Any]) -> dict[str, Any]:
    """The host-neutral input a transcript must show for a script action: paths sandbox-relative,
    the credential redacted."""
    fields = {k: v.replace(SECRET, REDACTED) for k, v in action.items() if k != "type"}
    if "path" in fields:
        fields["path"] = "./" + fields["path"]
    return fields


def events(out: Path, trial: TrialRecord) -> list[dict[str, Any]]:
    assert trial.transcript == f"trials/{trial.scenario}/1/transcript.jsonl"
    assert trial.hostStream == f"trials/{trial.scenario}/1/host-stream.jsonl"
    lines = (out / trial.transcript).read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.parametrize("host", EVERY_HOST)
def test_transcripts_replay_the_script_and_record_aborts(
    pytester: pytest.Pytester, atlante_project: Project, hosts_path: Callable[[], str], monkeypatch: pytest.MonkeyPatch, host: str
) -> None:
    monkeypatch.setenv("PATH", hosts_path())
    monkeypatch.setenv("ATLANTE_TEST_API_TOKEN", SECRET)
    project = atlante_project
    project.config(config_doc(host=host, budget={"trials": 1, "maxTokens": 3000}))
    project.scenario(scenario_doc("replays-steps", checks=[{"type": "file-exists", "path": "notes.txt"}]),
                     file="eval/scenarios/main.eval.json")  # replaces the fixture's own scenario
    project.script("replays-steps", steps_script())
    if host == ONE_HOST:
        project.scenario(scenario_doc("over-budget", checks=[{"type": "file-exists", "path": "README.md"}]),
                         file="eval/scenarios/budget.eval.json")
        project.script("over-budget", [
            {"text": "small", "actions": [{"type": "bash", "command": "echo a"}], "usage": {"input": 100, "output": 1}},
            {"text": "large", "actions": [{"type": "bash", "command": "echo b"}], "usage": {"input": 5000, "output": 1}},
            *[{"text": f"never {n}", "actions": [{"type": "bash", "command": f"echo {n}"}], "usage": {"input": 10, "output": 1}}
              for n in range(4)],
            {"text": "done"},
        ])
    # 20 s: the abort must come while the sleep runs, and at load ~29 on 2 cores Claude Code and
    # Gemini CLI had not reached their first request 6 s in (the transcript then held nothing).
    project.scenario(scenario_doc("times-out", budget={"timeoutMs": 20000}, checks=[{"type": "file-exists", "path": "README.md"}]),
                     file="eval/scenarios/slow.eval.json")
    # Three sleeping turns: Codex ends a command of its own after 10 s (its shell tool's default
    # timeout) and asks the model again, so one sleep would let it finish inside the 20 s; the
    # other hosts are still in the first sleep when the trial's timeout kills them.
    project.script("times-out", [*[{"text": "waiting", "actions": [{"type": "bash", "command": "sleep 300"}]}] * 3, {"text": "done"}])
    project.build()
    out = pytester.path / "out"
    result = pytester.runpytest_subprocess("--atlante-eval", "--atlante-scripted", "--atlante-project", str(project.root),
                                           "--atlante-out", str(out), "--rootdir", str(project.root),
                                           "-p", "no:cacheprovider", "-n", "2", timeout=600)
    text = result.stdout.str()
    report = EvalReport.model_validate_json((out / "report.json").read_text())
    trials = {t.scenario: t for s in report.scenarios for t in s.trials}
    budgeted = {"over-budget": "budget-exceeded"} if host == ONE_HOST else {}
    assert {n: t.verdict for n, t in trials.items()} == {"replays-steps": "pass", **budgeted, "times-out": "timeout"}, text

    steps = trials["replays-steps"]
    transcript = events(out, steps)
    header = transcript[0]
    assert (header["schema"], header["host"], header["truncated"]) == (TRANSCRIPT_SCHEMA, host, False)
    calls = [e for e in transcript if e["type"] == "tool_call"]
    assert [c["tool"] for c in calls] == [a["type"] for a in STEPS]
    for call, action in zip(calls, STEPS, strict=True):
        wanted = expected_input(action)
        if (fields := STEP_FIELDS.get(host, {}).get(action["type"])) is not None:
            # what the host's tool has instead (Codex's patch) still carries the edit, redacted
            assert all(wanted[k] in json.dumps(call["input"]) for k in wanted if k not in fields), call
            wanted = {k: v for k, v in wanted.items() if k in fields}
        assert {k: call["input"].get(k) for k in wanted} == wanted
    results = [e for e in transcript if e["type"] == "tool_result"]
    assert [r["id"] for r in results] == [c["id"] for c in calls]
    assert any("ran" in r["text"] for r in results if r["tool"] == "bash")
    assert [e["text"] for e in transcript if e["type"] == "text"][-1] == "Done."
    turns = [e for e in transcript if e["type"] == "usage"]
    (final,) = [e for e in transcript if e["type"] == "result"]
    assert steps.usage is not None and Usage(**final["usage"]) == steps.usage
    if host == "opencode":  # exact per step: the turns add up to the trial's usage
        assert Usage(**{k: sum(u["usage"][k] for u in turns) for k in Usage.model_fields}) == steps.usage
    else:  # Claude streams message_start usage: input and cache exact per turn, output only in the total
        assert sum(u["usage"]["inputTokens"] for u in turns) == steps.usage.inputTokens
        assert sum(u["usage"]["cacheReadTokens"] for u in turns) == steps.usage.cacheReadTokens
    assert [e["t"] for e in transcript[1:]] == sorted(e["t"] for e in transcript[1:])

    if host == ONE_HOST:
        budget = events(out, trials["over-budget"])
        crossed = [e for e in budget if e.get("budgetCrossed")]
        # The metering proxy ends the session right after the crossing response (turn 2): the stream
        # may or may not have shown that turn's usage by then; the abort says what the proxy counted.
        assert len(crossed) <= 1 and all(e["turn"] == 2 for e in crossed)
        assert budget[-1]["type"] == "abort" and budget[-1]["reason"] == "budget" and "maxTokens=3000" in budget[-1]["message"]
        assert budget[-1]["meteredBy"] == "proxy" and budget[-1]["cumulativeTokens"] > 3000

    slow = events(out, trials["times-out"])
    assert slow[-1]["type"] == "abort" and slow[-1]["reason"] == "timeout"
    texts = [e["text"] for e in slow if e["type"] == "text"]
    commands = [e["input"]["command"] for e in slow if e["type"] == "tool_call"]
    if host in SHOWS_THE_KILLED_CALL:
        assert commands and commands == ["sleep 300"] * len(commands) and texts == ["waiting"] * len(commands), (texts, commands)
    else:
        # OpenCode streams a part only once it has finished (host-facts §8): the killed tool call never
        # appears; the text before it appears when its part closed before the kill (timing).
        assert commands == [] and texts in ([], ["waiting"]), (texts, commands)

    for trial in trials.values():
        for rel in (trial.transcript, trial.hostStream):
            assert rel is not None
            data = (out / rel).read_text()
            assert SECRET not in data and "atlante-eval-" not in data, rel
    assert REDACTED in (out / steps.hostStream).read_text()  # type: ignore[operator]
