"""Scripted ``skill`` and ``task`` actions through both real CLIs (docs/scripted-model.md).

One eval run per host (Claude Code also on its newest release), with the scripted server's requests logged (``trial_helpers``' spy): the
main session loads the harness skill ``tidy`` (and calls one the harness lacks), then delegates
to the harness agent ``helper``, whose own scripted turns load ``tidy`` too and write a file.  What must hold, from what the CLI really sent:

- the skill was really loaded: the request after the skill call carries the SKILL.md body as the
  host's answer to that call (``skills_loaded``), and a call for a skill the harness lacks brings
  none (the host answers it with an error);
- the sub-agent really ran as ``helper``: its requests are told apart from the main session's,
  their system prompt holds the agent's body, the tools they offer are exactly the agent's
  restricted set and the model is the agent's;
- the file the sub-agent wrote is in the sandbox (the check passes);
- the host-neutral transcript records both as ``tool_call`` events (``skill`` with ``name``,
  ``task`` with ``agent``), the shapes the trajectory checks read (docs/transcripts.md).
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import EVERY_HOST, Project, claude_path, config_doc, scenario_doc
from pytest_atlante.hosts import host_for
from pytest_atlante.hosts.base import no_place
from pytest_atlante.provider.scripted import ScriptedModelServer
from pytest_atlante.provider.wire.shared import MessageShape, parse_sse
from pytest_atlante.suite.script import Script, ScriptError, load_script
from trial_helpers import logged_requests, run_eval, system_text, with_request_log

SKILL_BODY = "SKILL-BODY-SENTINEL-51c2: keep every file tidy and end it with a newline."
AGENT_BODY = "AGENT-BODY-SENTINEL-93ae: you are the helper agent; write only what you are asked."
SUBAGENT_PROMPT = "Write notes.txt saying delegated, then report back."
SCENARIO_PROMPT = "Tidy the project, then have the helper write the notes."
AGENT_TOOLS = ["read", "write", "skill"]  # the helper's restricted tools, host-neutral
# The agent's model, per host: Claude Code takes a model id (a full one: an alias such as ``haiku``
# resolves differently per release), OpenCode a provider/model reference (only the scripted
# provider exists in a scripted run).
AGENT_MODEL = {"claude-code": "claude-haiku-4-5-20251001", "opencode": "atlante-scripted/scripted-agent-model"}
AGENT_MODEL["gemini-cli"] = "gemini-2.5-flash-lite"  # a Gemini model id (the build drops other hosts' names)
# What the sub-agent's requests must carry for them (measured, docs/host-facts.md §5 and §8):
# OpenCode's permissions cannot tell ``write`` from ``edit`` (one ``edit`` key); its other tools
# (``todowrite``, ``list``, …) the built agent denies, as Claude Code offers only the listed ones.
SUBAGENT_MODEL = {"claude-code": "claude-haiku-4-5-20251001", "opencode": "scripted-agent-model"}
SUBAGENT_OFFERED = {"claude-code": {"Read", "Write", "Skill"}, "opencode": {"read", "write", "edit", "skill"}}
SUBAGENT_MODEL["gemini-cli"] = "gemini-2.5-flash-lite"
# Gemini CLI adds complete_task to every sub-agent: the tool it ends its run and reports back with.
SUBAGENT_OFFERED["gemini-cli"] = {"read_file", "write_file", "activate_skill", "complete_task"}
MAIN_TOOL = {("claude-code", "skill"): "Skill", ("claude-code", "task"): "Agent", ("claude-code", "write"): "Write",
             ("opencode", "skill"): "skill", ("opencode", "task"): "task", ("opencode", "write"): "write"}
MAIN_TOOL |= {("gemini-cli", "skill"): "activate_skill", ("gemini-cli", "task"): "invoke_agent",
              ("gemini-cli", "write"): "write_file"}
#: The pinned release of each host but Claude Code (whose release is the test's parameter).
PINNED_VERSION = {"opencode": "1.18.33"}
PINNED_VERSION["gemini-cli"] = "0.61.0"

#: What a host's error for a skill the harness lacks says, where it does not name the skill.
ABSENT_SKILL_ERROR = {
    "gemini-cli": "must be equal to one of the allowed values",  # activate_skill's name is an enum of the skills
}

SUBAGENT_TURNS: list[dict[str, Any]] = [
    {"text": "Reading the house style first.", "actions": [{"type": "skill", "name": "tidy"}]},
    {"text": "Writing the notes.", "actions": [{"type": "write", "path": "notes.txt", "content": "delegated\n"}]},
    {"text": "Wrote notes.txt."},
]
MAIN_TURNS: list[dict[str, Any]] = [
    {"text": "Loading the house style.", "actions": [{"type": "skill", "name": "tidy"}]},
    {"text": "And a skill the harness lacks.", "actions": [{"type": "skill", "name": "absent"}]},
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


# --------------------------------------------------------------------------- script documents


def script_diagnostics(tmp_path: Path, turns: list[dict[str, Any]]) -> list[tuple[str, str]]:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"schema": "atlante/scripted-model-v1", "turns": turns}))
    with pytest.raises(ScriptError) as caught:
        load_script(path)
    return [(d.location, d.message) for d in caught.value.diagnostics]


def test_skill_and_task_actions_are_validated_where_they_are_written(tmp_path: Path) -> None:
    task = {"type": "task", "agent": "helper", "prompt": "p", "turns": [{"text": "ok"}]}
    found = script_diagnostics(tmp_path, [
        {"actions": [{"type": "skill"}, {"type": "skill", "name": "tidy", "args": "x"}]},
        {"actions": [{"type": "task", "agent": "helper", "prompt": "p"}]},
        {"actions": [{**task, "turns": [{"actions": [{"type": "write", "path": "/etc/passwd", "content": ""}]}]}]},
        {"actions": [{**task, "turns": [{"actions": [task]}]}]},
    ])
    assert [location for location, _ in found] == [
        "$.turns[0].actions[0].name",
        "$.turns[0].actions[1].args",
        "$.turns[1].actions[0].turns",
        "$.turns[2].actions[0].turns[0].actions[0].path",  # inside the sub-agent's own turns
        "$.turns[3].actions[0]",
    ]
    assert "cannot delegate again" in found[-1][1]
    repeated = script_diagnostics(tmp_path, [{"actions": [task, {**task, "agent": "other"}]}, {"text": "done"}])
    assert repeated == [("$", "task prompts must differ (the server tells sub-agents apart by their prompt): 'p' repeats")]


# --------------------------------------------------------------------------- the wire, both wire formats

WIRE_SCRIPT = Script.model_validate({"schema": "atlante/scripted-model-v1", "turns": [
    {"actions": [{"type": "skill", "name": "tidy"}]},
    {"actions": [{"type": "task", "agent": "helper", "prompt": "Write notes", "turns": [
        {"actions": [{"type": "write", "path": "notes.txt", "content": "short\n"}]}, {"text": "short done"}]},
        {"type": "task", "agent": "helper", "prompt": "Write notes twice", "description": "Twice", "turns": [
            {"text": "long done"}]}]},
    {"text": "Done."},
]})
# The tools each host offers its main session and its sub-agent (argument names as measured).
WIRE_TOOLS: dict[MessageShape, list[dict[str, Any]]] = {
    "anthropic": [{"name": name, "input_schema": {"properties": {p: {} for p in props}}} for name, props in [
        ("Skill", ["skill", "args"]), ("Agent", ["description", "prompt", "subagent_type", "model"]),
        ("Write", ["file_path", "content"])]],
    "openai": [{"type": "function", "function": {"name": name, "parameters": {"properties": {p: {} for p in props}}}}
               for name, props in [("skill", ["name"]), ("task", ["description", "prompt", "subagent_type", "task_id"]),
                                   ("write", ["filePath", "content"])]],
}
ROUTES: dict[MessageShape, str] = {"anthropic": "/v1/messages", "openai": "/v1/chat/completions"}


def assistant(wire: MessageShape, call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    if wire == "anthropic":
        return {"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": name, "input": arguments}]}
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def answer(wire: MessageShape, call_id: str, result: str, beside: str | None = None) -> list[dict[str, Any]]:
    """The host's answer to a call: a tool result and, as Claude Code does for a skill, a text beside it."""
    if wire == "anthropic":
        blocks = [{"type": "tool_result", "tool_use_id": call_id, "content": result}]
        return [{"role": "user", "content": blocks + ([{"type": "text", "text": beside}] if beside else [])}]
    return [{"role": "tool", "tool_call_id": call_id, "content": result}] + \
        ([{"role": "user", "content": beside}] if beside else [])


def opening(wire: MessageShape, prompt: str) -> list[dict[str, Any]]:
    # Claude Code puts system reminders before the prompt in the first user message; OpenCode
    # sends the system prompt as a message of its own.
    if wire == "anthropic":
        return [{"role": "user", "content": [{"type": "text", "text": "<system-reminder>x</system-reminder>"},
                                              {"type": "text", "text": prompt}]}]
    return [{"role": "system", "content": "You are the helper."}, {"role": "user", "content": prompt}]


def calls_of(server: ScriptedModelServer, wire: MessageShape, messages: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    """POST one streaming model request; the (id, tool, arguments) of the calls in the reply."""
    body = {"model": "m", "stream": True, "tools": WIRE_TOOLS[wire], "messages": messages}
    request = urllib.request.Request(server.anthropic_base_url + ROUTES[wire], data=json.dumps(body).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        frames = parse_sse(response.read())
    if wire == "anthropic":
        starts = [json.loads(d)["content_block"] for e, d in frames if e == "content_block_start"]
        deltas = [json.loads(d)["delta"] for e, d in frames if e == "content_block_delta"]
        return [(b["id"], b["name"], json.loads(d["partial_json"])) for b, d in zip(starts, deltas, strict=True)
                if b["type"] == "tool_use"]
    chunks = [json.loads(d) for _, d in frames if d != "[DONE]"]
    return [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for chunk in chunks for choice in chunk["choices"] for c in choice["delta"].get("tool_calls", [])]


@pytest.mark.parametrize("wire", ["anthropic", "openai"])
def test_skill_and_task_calls_and_the_sub_agents_own_turns(tmp_path: Path, wire: MessageShape) -> None:
    skill_tool, task_tool, write_tool = (t.get("name") or t["function"]["name"] for t in WIRE_TOOLS[wire])
    with ScriptedModelServer(WIRE_SCRIPT, sandbox_root=tmp_path) as server:
        main = opening(wire, "Tidy up and delegate the notes.")
        ((skill_id, name, arguments),) = calls_of(server, wire, main)
        assert (name, arguments) == (skill_tool, {"skill" if wire == "anthropic" else "name": "tidy"})
        main += [assistant(wire, skill_id, name, arguments),
                 *answer(wire, skill_id, "Launching skill: tidy", beside="SKILL BODY: keep it tidy")]
        delegations = calls_of(server, wire, main)
        assert [(tool, args) for _, tool, args in delegations] == [
            (task_tool, {"description": "Delegate to helper", "prompt": "Write notes", "subagent_type": "helper"}),
            (task_tool, {"description": "Twice", "prompt": "Write notes twice", "subagent_type": "helper"}),
        ]
        # Each sub-agent opens with its own prompt and gets its own turns; the longer prompt wins
        # over the one it contains.
        short = opening(wire, "Write notes")
        ((write_id, tool, write_args),) = calls_of(server, wire, short)
        assert (tool, write_args) == (write_tool, {("file_path" if wire == "anthropic" else "filePath"):
                                                   str(tmp_path.resolve() / "notes.txt"), "content": "short\n"})
        short += [assistant(wire, write_id, tool, write_args), *answer(wire, write_id, "ok")]
        assert calls_of(server, wire, short) == []
        assert calls_of(server, wire, opening(wire, "Write notes twice")) == []
        main += [assistant(wire, delegations[0][0], task_tool, delegations[0][2]), *answer(wire, delegations[0][0], "done")]
        assert calls_of(server, wire, main) == []
    records = server.requests
    assert [(r.subagent, r.task_index, r.turn_index, r.kind) for r in records] == [
        (None, None, 0, "turn"), (None, None, 1, "turn"), ("helper", 0, 0, "turn"), ("helper", 0, 1, "turn"),
        ("helper", 1, 0, "turn"), (None, None, 2, "turn")]
    assert write_id.endswith("scripted_s0_t0_a0") and skill_id.endswith("scripted_t0_a0")
    assert server.turns_served == 6  # the main session's turn 0 and each sub-agent's are distinct
    assert records[0].skills_loaded == ()
    for record in (records[1], records[-1]):  # every later main request carries the answer
        (loaded,) = record.skills_loaded
        assert (loaded.call_id, loaded.name) == (skill_id, "tidy")
        assert loaded.text == "Launching skill: tidy\nSKILL BODY: keep it tidy"
    assert [r.skills_loaded for r in records[2:5]] == [(), (), ()]  # sub-agents never loaded it


# --------------------------------------------------------------------------- the real CLIs


@pytest.mark.hosts
# Every host: each delegates and loads skills its own way (its tool names, what it streams of a
# sub-agent); the newest Claude Code release beside the pinned one as a smoke test.
# Codex is not among them: it has no agent files (``hosts.base.no_place``), so the harness's
# helper is dropped by the build, and no sub-agent tool a scripted task action could call.
@pytest.mark.parametrize(("host", "release"), [*((host, "pinned") for host in EVERY_HOST
                                                 if no_place(host_for(host), "agent") is None),
                                               ("claude-code", "newest")])
def test_scripted_skill_and_subagent_run_through_the_real_cli(
    pytester: pytest.Pytester, tmp_path: Path, hosts_path: Callable[[], str], monkeypatch: pytest.MonkeyPatch,
    private_tmp: Path, host: str, release: str,
) -> None:
    path, version = claude_path(release, hosts_path())
    monkeypatch.setenv("PATH", path)
    log_dir = tmp_path / "requests"
    plugin_args = with_request_log(monkeypatch, log_dir)
    run = run_eval(pytester, delegation_project(tmp_path / "project", host), tmp_path / "out", *plugin_args)
    assert run.report.host is not None and run.report.host.version == (version if host == "claude-code" else PINNED_VERSION[host])
    trial = run.trial("delegates")
    assert trial.verdict == "pass", run.output()  # notes.txt, written by the sub-agent's own turn
    requests = [r for r in logged_requests(log_dir)["delegates-1"] if r["kind"] == "turn"]
    main = [r for r in requests if r["subagent"] is None]
    sub = [r for r in requests if r["subagent"] is not None]
    assert [r["turn_index"] for r in main] == [0, 1, 2, 3] and [r["tool_calls"] for r in main] == \
        [[MAIN_TOOL[host, "skill"]], [MAIN_TOOL[host, "skill"]], [MAIN_TOOL[host, "task"]], []]
    assert [(r["subagent"], r["turn_index"], r["tool_calls"]) for r in sub] == \
        [("helper", 0, [MAIN_TOOL[host, "skill"]]), ("helper", 1, [MAIN_TOOL[host, "write"]]), ("helper", 2, [])]

    # The skill was loaded: every request after the call carries the body as the host's answer to
    # it; the call for a skill the harness lacks brings no body (the host answers it with an error).
    assert main[0]["skills_loaded"] == []
    assert [s["name"] for s in main[1]["skills_loaded"]] == ["tidy"]
    for later in main[1:]:
        tidy, *absent = later["skills_loaded"]
        assert tidy["name"] == "tidy" and SKILL_BODY in tidy["text"], tidy
        assert all(a["name"] == "absent" and ABSENT_SKILL_ERROR.get(host, "absent") in a["text"]
                   and SKILL_BODY not in a["text"] for a in absent), absent
    assert [s["name"] for s in main[-1]["skills_loaded"]] == ["tidy", "absent"]
    assert not any(SKILL_BODY in system_text(r) for r in main)  # only the call brought it in

    # The sub-agent ran as the helper: its prompt, its body, its tools, its model; it loaded the
    # skill in its own conversation.
    assert sub[0]["skills_loaded"] == []
    assert all([s["name"] for s in r["skills_loaded"]] == ["tidy"] and SKILL_BODY in r["skills_loaded"][0]["text"]
               for r in sub[1:]), [(r["tool_calls"], r["skills_loaded"]) for r in sub]
    for request in sub:
        assert SUBAGENT_PROMPT in json.dumps(request["body"].get("messages", request["body"].get("contents"))[:2])  # Gemini: contents
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
    skill_call, absent_call, task_call = (e for e in calls if e["tool"] in ("skill", "task") and e["agent"] is None)
    assert (skill_call["tool"], skill_call["hostTool"], skill_call["input"]["name"], skill_call["agent"]) == \
        ("skill", MAIN_TOOL[host, "skill"], "tidy", None)
    assert (absent_call["tool"], absent_call["input"]["name"]) == ("skill", "absent")
    (absent_result,) = [e for e in events if e["type"] == "tool_result" and e["id"] == absent_call["id"]]
    assert absent_result["isError"]  # a call is not a load: the result tells them apart
    assert (task_call["tool"], task_call["hostTool"], task_call["input"]["agent"], task_call["agent"]) == \
        ("task", MAIN_TOOL[host, "task"], "helper", None)
    assert task_call["input"]["prompt"] == SUBAGENT_PROMPT
    (skill_result,) = [e for e in events if e["type"] == "tool_result" and e["id"] == skill_call["id"]]
    assert skill_result["tool"] == "skill" and not skill_result["isError"]
    (task_result,) = [e for e in events if e["type"] == "tool_result" and e["id"] == task_call["id"]]
    assert task_result["tool"] == "task" and not task_result["isError"]
    inner = [e for e in calls if e["agent"] is not None]
    if host == "claude-code":  # the sub-agent's own calls are streamed, under its parent call's id
        assert [(e["tool"], e["agent"], e["input"]) for e in inner] == [
            ("skill", task_call["id"], {"name": "tidy"}),
            ("write", task_call["id"], {"path": "./notes.txt", "content": "delegated\n"})]
    else:  # OpenCode does not stream a sub-agent's calls (host-facts §8): its skill load is not there
        assert inner == [] and len(calls) == 3
