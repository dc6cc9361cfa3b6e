"""Scripted ``skill`` and ``task`` actions through both real CLIs (docs/scripted-model.md).

One eval run per host, with the scripted server's requests logged (``trial_helpers``' spy): the
main session loads the harness skill ``tidy`` and then delegates to the harness agent ``helper``,
whose own scripted turns write a file.  What must hold, from what the CLI really sent:

- the skill was really loaded: the request after the skill call carries the SKILL.md body as the
  host's answer to that call (``skills_loaded``);
- the sub-agent really ran as ``helper``: its requests are told apart from the main session's,
  their system prompt holds the agent's body, the tools they offer are exactly the agent's
  restricted set and the model is the agent's;
- the file the sub-agent wrote is in the sandbox (the check passes);
- the host-neutral transcript records both as ``tool_call`` events (``skill`` with ``name``,
  ``task`` with ``agent``), the shapes the trajectory checks read (docs/transcripts.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import Project, config_doc, scenario_doc
from trial_helpers import logged_requests, run_eval, system_text, with_request_log

pytestmark = pytest.mark.hosts

SKILL_BODY = "SKILL-BODY-SENTINEL-51c2: keep every file tidy and end it with a newline."
AGENT_BODY = "AGENT-BODY-SENTINEL-93ae: you are the helper agent; write only what you are asked."
SUBAGENT_PROMPT = "Write notes.txt saying delegated, then report back."
SCENARIO_PROMPT = "Tidy the project, then have the helper write the notes."
AGENT_TOOLS = ["read", "write"]  # the helper's restricted tools, host-neutral
# The agent's model, per host: Claude Code takes an alias it resolves itself, OpenCode a
# provider/model reference (only the scripted provider exists in a scripted run).
AGENT_MODEL = {"claude-code": "haiku", "opencode": "atlante-scripted/scripted-agent-model"}
# What the sub-agent's requests must carry for them (measured, docs/host-facts.md §5 and §8):
# Claude Code resolves the alias; OpenCode's permissions cannot tell ``write`` from ``edit`` (one
# ``edit`` key) and the rendered agent leaves ``todowrite`` alone.
SUBAGENT_MODEL = {"claude-code": "claude-haiku-4-5-20251001", "opencode": "scripted-agent-model"}
SUBAGENT_OFFERED = {"claude-code": {"Read", "Write"}, "opencode": {"read", "write", "edit", "todowrite"}}
MAIN_TOOL = {("claude-code", "skill"): "Skill", ("claude-code", "task"): "Agent", ("claude-code", "write"): "Write",
             ("opencode", "skill"): "skill", ("opencode", "task"): "task", ("opencode", "write"): "write"}

SUBAGENT_TURNS: list[dict[str, Any]] = [
    {"text": "Writing the notes.", "actions": [{"type": "write", "path": "notes.txt", "content": "delegated\n"}]},
    {"text": "Wrote notes.txt."},
]
MAIN_TURNS: list[dict[str, Any]] = [
    {"text": "Loading the house style.", "actions": [{"type": "skill", "name": "tidy"}]},
    {"text": "Delegating the notes.", "actions": [
        {"type": "task", "agent": "helper", "prompt": SUBAGENT_PROMPT, "description": "Write the notes",
         "turns": SUBAGENT_TURNS}]},
    {"text": "Done."},
]


def delegation_project(root: Path, host: str) -> Path:
    project = Project(root)
    root.mkdir(parents=True)
    config = config_doc(host)
    config["harness"]["agents"]["helper"].update(tools=AGENT_TOOLS, model=AGENT_MODEL[host])
    project.config(config)
    project.write("harness/helper.md", AGENT_BODY + "\n")
    project.write("harness/tidy/SKILL.md", SKILL_BODY + "\n")
    project.write("eval/fixtures/app/README.md", "# app\n")
    project.scenario(scenario_doc("delegates", task={"fixture": "eval/fixtures/app", "prompt": SCENARIO_PROMPT},
                                  checks=[{"type": "file-contains", "path": "notes.txt", "pattern": "delegated"}]),
                     file="eval/scenarios/delegates.eval.json")
    project.script("delegates", MAIN_TURNS)
    project.build()
    return root


@pytest.mark.parametrize("host", ["claude-code", "opencode"])
def test_scripted_skill_and_subagent_run_through_the_real_cli(
    pytester: pytest.Pytester, tmp_path: Path, hosts_path: Callable[[], str], monkeypatch: pytest.MonkeyPatch,
    private_tmp: Path, host: str,
) -> None:
    monkeypatch.setenv("PATH", hosts_path())
    log_dir = tmp_path / "requests"
    plugin_args = with_request_log(monkeypatch, log_dir)
    run = run_eval(pytester, delegation_project(tmp_path / "project", host), tmp_path / "out", *plugin_args)
    trial = run.trial("delegates")
    assert trial.verdict == "pass", run.output()  # notes.txt, written by the sub-agent's own turn
    requests = [r for r in logged_requests(log_dir)["delegates-1"] if r["kind"] == "turn"]
    main = [r for r in requests if r["subagent"] is None]
    sub = [r for r in requests if r["subagent"] is not None]
    assert [r["turn_index"] for r in main] == [0, 1, 2] and [r["tool_calls"] for r in main] == \
        [[MAIN_TOOL[host, "skill"]], [MAIN_TOOL[host, "task"]], []]
    assert [(r["subagent"], r["turn_index"], r["tool_calls"]) for r in sub] == \
        [("helper", 0, [MAIN_TOOL[host, "write"]]), ("helper", 1, [])]

    # The skill was loaded: every request after the call carries the body as the host's answer to it.
    assert main[0]["skills_loaded"] == []
    for later in main[1:]:
        (loaded,) = later["skills_loaded"]
        assert loaded["name"] == "tidy" and SKILL_BODY in loaded["text"], loaded
    assert not any(SKILL_BODY in system_text(r) for r in main)  # only the call brought it in

    # The sub-agent ran as the helper: its prompt, its body, its tools, its model.
    for request in sub:
        assert SUBAGENT_PROMPT in json.dumps(request["body"]["messages"][:2])
        assert AGENT_BODY in system_text(request)
        assert set(request["tools_offered"]) == SUBAGENT_OFFERED[host], request["tools_offered"]
        assert request["model"] == SUBAGENT_MODEL[host]
    for request in main:
        assert AGENT_BODY not in system_text(request)
        assert request["model"] != SUBAGENT_MODEL[host]
        assert {MAIN_TOOL[host, "skill"], MAIN_TOOL[host, "task"]} <= set(request["tools_offered"])

    # The transcript: both as tool_call events in the main session's shape (docs/transcripts.md).
    assert trial.transcript is not None
    events = [json.loads(line) for line in (tmp_path / "out" / trial.transcript).read_text().splitlines()[1:]]
    calls = [e for e in events if e["type"] == "tool_call"]
    skill_call, task_call = (e for e in calls if e["tool"] in ("skill", "task"))
    assert (skill_call["tool"], skill_call["hostTool"], skill_call["input"]["name"], skill_call["agent"]) == \
        ("skill", MAIN_TOOL[host, "skill"], "tidy", None)
    assert (task_call["tool"], task_call["hostTool"], task_call["input"]["agent"], task_call["agent"]) == \
        ("task", MAIN_TOOL[host, "task"], "helper", None)
    assert task_call["input"]["prompt"] == SUBAGENT_PROMPT
    (skill_result,) = [e for e in events if e["type"] == "tool_result" and e["id"] == skill_call["id"]]
    assert skill_result["tool"] == "skill" and not skill_result["isError"]
    (task_result,) = [e for e in events if e["type"] == "tool_result" and e["id"] == task_call["id"]]
    assert task_result["tool"] == "task" and not task_result["isError"]
    if host == "claude-code":  # the sub-agent's own calls are streamed, under its parent call's id
        (inner,) = [e for e in calls if e["agent"] is not None]
        assert (inner["tool"], inner["agent"], inner["input"]["path"]) == ("write", task_call["id"], "./notes.txt")
    else:  # OpenCode does not stream a sub-agent's calls (host-facts §8)
        assert [e["agent"] for e in calls] == [None, None]
