"""The metering proxy serves model calls only, one at a time, and counts every token it relays
(issue 38, item 2; ``provider/routes.py``, docs/design.md §10).

The scripted hostile agent of this file (Claude Code, namespace isolation, the network shared)
reads its own model address from its environment and talks to its trial's proxy itself:

- ``routes``: the provider's Message Batches results and creation, its Files API and a Gemini
  stream asked for as a JSON array (no ``alt=sse``, a framing the meter does not read), then a
  streamed answer of 90,000 tokens it hangs up on after its first kilobyte;
- ``burst``: six model requests at once, each of 30,000 tokens, with 50,000 left;
- ``large``: a Responses answer whose ``response.completed`` event is over 4 MiB (90,000 tokens).

Before: the off-route requests reached the model, the abandoned and the large answer were never
counted (both trials passed under ``maxTokens``), and the burst got more answers than the one that
crossed.  After: the off-route requests are refused by the proxy and named in the trial's record,
never reach the model; the abandoned answer is drained and the large event read, so both trials
are ``budget-exceeded``; the burst reaches the model twice (the second answer crosses, the rest are
refused).  What is the proxy's is host-neutral: it runs on ``ONE_HOST``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import ONE_HOST
from trial_helpers import TrialCase, bash_turn, logged_requests, run_eval, with_request_log, write_project, write_turn

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(600)]

PROBE = r'''import json, os, socket, sys, threading, urllib.parse
parts = urllib.parse.urlsplit(os.environ["ANTHROPIC_BASE_URL"])
TOOLS = [{"name": "Bash", "description": "run", "input_schema": {"type": "object", "properties": {}}}]
def history(answers):
    return [m for _ in range(answers) for m in ({"role": "user", "content": "go"},
                                                 {"role": "assistant", "content": "ok"})] + [{"role": "user", "content": "go"}]
def send(method, path, body=None, read=None):
    data = json.dumps(body).encode() if body is not None else b""
    s = socket.create_connection((parts.hostname, parts.port), timeout=120)
    s.sendall(b"%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
              b"Connection: close\r\n\r\n%s" % (method.encode(), (parts.path + path).encode(), len(data), data))
    answer = b""
    while chunk := s.recv(65536):
        answer += chunk
        if read is not None and len(answer) >= read:
            break  # hang up on the answer
    s.close()
    return answer.split(b" ", 2)[1].decode() if answer else "none"
mode = sys.argv[1]
if mode == "routes":
    print("batch-results", send("GET", "/v1/messages/batches/msgbatch_1/results"), flush=True)
    print("batch", send("POST", "/v1/messages/batches", {"requests": []}), flush=True)
    print("files", send("POST", "/v1/files", {}), flush=True)
    print("gemini-array", send("POST", "/v1beta/models/m:streamGenerateContent",
                               {"contents": [{"role": "user", "parts": [{"text": "go"}]}], "tools": []}), flush=True)
    print("abandoned", send("POST", "/v1/messages", {"model": "m", "max_tokens": 9, "stream": True, "tools": TOOLS,
                                                   "messages": history(5)}, read=1000), flush=True)
elif mode == "burst":
    got = []
    def one():
        got.append(send("POST", "/v1/messages", {"model": "m", "max_tokens": 9, "tools": TOOLS, "messages": history(5)}))
    threads = [threading.Thread(target=one) for _ in range(6)]
    for t in threads: t.start()
    for t in threads: t.join()
    print("burst", " ".join(sorted(got)), flush=True)
else:
    items = [i for _ in range(5) for i in (
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]})]
    items.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]})
    print("large", send("POST", "/v1/responses", {"model": "m", "stream": True, "input": items, "tools": [
        {"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {}}}]}), flush=True)
'''
#: Turns 3 and 4 are never played; turn 5 is what the agent's own requests ask for (five answers
#: in their history), after the host's session ended on turn 2.
FILLER = {"text": "unused"}


def case(name: str, mode: str, big: dict[str, object]) -> TrialCase:
    return TrialCase(name=name, turns=[write_turn("probe.py", PROBE), bash_turn(f"python3 probe.py {mode} > net.txt 2>&1"),
                                       {"text": "Done.", "usage": {"input": 10, "output": 1}}, FILLER, FILLER, big],
                     checks=[{"type": "file-exists", "path": "probe.py"}], verdict="budget-exceeded", outcomes=("pass",))


ROUTES = case("abandons-a-stream", "routes", {"text": "x" * 4_000_000, "usage": {"input": 10, "output": 90000}})
BURST = case("bursts", "burst", {"text": "burst", "usage": {"input": 10, "output": 30000}})
#: 900,000 characters outside the Basic Multilingual Plane: 3.6 MB in the script (under its 4 MiB
#: cap), a 10.8 MB ``response.completed`` once JSON-escaped as surrogate pairs.
LARGE = case("large-event", "large", {"text": "\U0001F600" * 900_000, "usage": {"input": 10, "output": 90000}})


def write_scripts_unescaped(project: Path, cases: list[TrialCase]) -> None:
    """The scripts as UTF-8 (the project helper escapes them to ASCII, 12 bytes a character), rebuilt."""
    from conftest import Project

    for trial_case in cases:
        path = project / "eval/scenarios/scripted" / f"{trial_case.name}.json"
        path.write_text(json.dumps({"schema": "atlante/scripted-model-v1", "turns": trial_case.turns},
                                   ensure_ascii=False), encoding="utf-8")
    Project(project).build()


@pytest.mark.usefixtures("on_path")
def test_the_proxy_serves_model_calls_only_one_at_a_time_and_counts_what_it_relays(
        pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cases = [ROUTES, BURST, LARGE]
    project = write_project(tmp_path / "project", ONE_HOST, cases, isolation="namespace",
                            budget={"trials": 1, "maxTokens": 50000})
    write_scripts_unescaped(project, cases)
    log_dir = tmp_path / "requests"
    run = run_eval(pytester, project, tmp_path / "out", *with_request_log(monkeypatch, log_dir))
    seen = logged_requests(log_dir)
    for trial_case in cases:
        trial = run.trial(trial_case.name)
        assert trial.verdict == "budget-exceeded", (trial_case.name, trial, run.output())
        assert trial.usage is not None and trial.usage.total > 50000, trial

    routes = run.trial(ROUTES.name)
    assert routes.proxyRefused == 4, routes
    assert [r.split(":")[0] for r in routes.proxyRefusedRequests] == [
        "GET /v1/messages/batches/msgbatch_1/results", "POST /v1/messages/batches", "POST /v1/files",
        "POST /v1beta/models/m"], routes.proxyRefusedRequests
    paths = [r["path"] for r in seen[f"{ROUTES.name}-1"]]
    assert not [p for p in paths if "batches" in p or "files" in p or "GenerateContent" in p], paths
    assert routes.usage is not None and routes.usage.outputTokens >= 90000  # drained to its last usage event

    burst_turns = [r for r in seen[f"{BURST.name}-1"] if r.get("turn_index") == 5]
    assert len(burst_turns) == 2, burst_turns  # the second crossed; the other four never reached the model
