"""The scripted model: a loopback server that plays a script of model turns to a real host CLI.

``--atlante-scripted`` runs a suite offline, at zero token cost, through the real ``claude`` and
``opencode`` binaries: instead of a provider, the host talks to this server, which answers each
model request with the next turn of a per-scenario script (text, host-neutral tool calls, usage).
The host really runs the tools, so a scenario's checks see real effects on disk.

Which turn to play is derived from the request alone — the number of assistant messages already in
``messages`` — so a host's retry gets the same turn again and parallel sessions do not disturb each
other. Requests that offer no tools (OpenCode's title generator) are side requests: they get a short
title and consume no turn. A sub-agent started by a ``task`` action is recognised by the delegated
prompt opening its conversation and is played that action's own turns; each request also records
the skill calls in its history with what the host answered them with (the SKILL.md body). The script document itself (``Script``, ``load_script``) is
``suite/script.py``; see ``docs/scripted-model.md`` for the format.  Each host's wiring (Claude
Code's environment, OpenCode's provider block) is its adapter's, from :attr:`ScriptedModelServer.endpoint`.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pytest_atlante.hosts.base import SCRIPTED_MODEL_ID, ScriptedEndpoint, ShellTools
from pytest_atlante.provider.loopback import LoopbackServer, LoopbackService, strip_trial_key
from pytest_atlante.provider.wire import wire_for
from pytest_atlante.provider.wire.shared import (
    Action,
    LoadedSkill,
    Reply,
    ReplyUsage,
    WireFormat,
    WireName,
)
from pytest_atlante.suite.script import Script, SkillAction, TaskAction

#: The model id the server lists and answers as when a request names none.
MODEL_ID = SCRIPTED_MODEL_ID
#: What a turn reports when the script gives no ``usage``: small, non-zero, obviously synthetic.
DEFAULT_USAGE = ReplyUsage(input=100, output=20)
#: Replies that play no scripted turn report no tokens, so a host's totals are exactly the sum of
#: the scripted figures.
NO_USAGE = ReplyUsage(input=0, output=0)
SIDE_REPLY_TEXT = "Scripted session"
EXHAUSTED_REPLY_TEXT = "The scripted model has no more turns."


# --------------------------------------------------------------------------- request log


RequestKind = Literal["turn", "side", "exhausted", "other", "rejected"]


@dataclass(frozen=True)
class RequestRecord:
    """One request the server saw.

    ``kind``: ``turn`` played scripted turn ``turn_index`` (an error turn too, see ``status``);
    ``side`` a request offering no tools (title generation); ``exhausted`` a request after the last
    turn; ``other`` a health check, model list or token count; ``rejected`` an unknown route or a
    body that is not JSON.
    """

    seq: int
    method: str
    path: str
    wire: WireName | None  # the wire format it came in (provider/wire/)
    kind: RequestKind
    status: int
    turn_index: int | None = None
    session_id: str | None = None
    model: str | None = None
    stream: bool = False
    tools_offered: tuple[str, ...] = ()
    tool_calls: tuple[str, ...] = ()
    #: Actions whose tool the host did not offer; they were called anyway under a guessed name.
    unoffered_tools: tuple[str, ...] = ()
    #: The ``agent`` of the ``task`` action whose sub-agent sent this request (its ``turn_index``
    #: counts that sub-agent's turns); ``None`` for the main session.
    subagent: str | None = None
    #: Which ``task`` action that is: its index among the script's tasks, in order (``s<N>`` in
    #: the ids of the calls its turns make).
    task_index: int | None = None
    #: Skill calls in the request's history and the text the host answered each with (the
    #: SKILL.md body, when the host really loaded the skill).
    skills_loaded: tuple[LoadedSkill, ...] = ()
    body: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class _Answer:
    status: int
    content_type: str
    payload: bytes


# --------------------------------------------------------------------------- server


class ScriptedModelServer(LoopbackService):
    """Serve one script on ``127.0.0.1:<ephemeral port>`` in every wire format until stopped."""

    def __init__(self, script: Script, *, sandbox_root: Path, trial_key: str | None = None,
                 agent_names: Mapping[str, str] | None = None, skill_names: Mapping[str, str] | None = None,
                 shell_tools: ShellTools | None = None) -> None:
        """``trial_key``: serve only paths under ``/<trial_key>`` (``loopback.strip_trial_key``).
        ``agent_names``: harness agent → the name the host delegates to it by, where the build kept
        another (a ``task`` action names the harness agent; the host knows the other).
        ``skill_names``: the same for skills (a ``skill`` action naming a plugin's skill by its
        harness name reaches it as ``plugin:name`` where the host namespaces plugins).
        ``shell_tools``: the host's, where its model has no file tools (``Host.shell_tools``)."""
        self.script = script
        self.trial_key = trial_key
        self.agent_names = dict(agent_names or {})
        self.skill_names = dict(skill_names or {})
        self.shell_tools = shell_tools
        # The host's cwd is the sandbox's real path (getcwd resolves symlinks); tool paths must
        # match it for Claude Code's in-project permission checks.
        self.sandbox_root = sandbox_root.resolve()
        self._lock = threading.Lock()
        self._requests: list[RequestRecord] = []
        self._server = LoopbackServer("atlante-scripted-model")

    # -- lifecycle

    def start(self) -> None:
        self._server.start_serving(_handler_for(self))

    def stop(self) -> None:
        self._server.stop()

    # -- addresses

    @property
    def anthropic_base_url(self) -> str:
        """For Claude Code's ``ANTHROPIC_BASE_URL`` (the client appends ``/v1/messages``)."""
        return f"http://127.0.0.1:{self.port}{self._prefix}"

    @property
    def openai_base_url(self) -> str:
        """For an ``@ai-sdk/openai-compatible`` provider's ``baseURL``."""
        return f"http://127.0.0.1:{self.port}{self._prefix}/v1"

    @property
    def _prefix(self) -> str:
        return f"/{self.trial_key}" if self.trial_key is not None else ""

    @property
    def endpoint(self) -> ScriptedEndpoint:
        """Where the host is pointed: each adapter derives its own wiring from it."""
        return ScriptedEndpoint(self.anthropic_base_url, self.openai_base_url, MODEL_ID)

    # -- observations

    @property
    def requests(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._requests)

    @property
    def turns_served(self) -> int:
        """Distinct scripted turns played (per session); a retried turn counts once."""
        with self._lock:
            return len({(r.session_id, r.task_index, r.turn_index) for r in self._requests if r.kind == "turn"})

    def _record(self, **fields: Any) -> None:
        with self._lock:
            self._requests.append(RequestRecord(seq=len(self._requests), **fields))

    # -- answering

    def answer_get(self, method: str, path: str) -> _Answer:
        route = urlsplit(path).path.rstrip("/")
        if route == "":
            answer = _Answer(200, "text/plain", b"atlante scripted model\n")
        elif route == "/v1/models":
            model = {"id": MODEL_ID, "object": "model", "type": "model", "owned_by": "atlante",
                     "display_name": "Atlante scripted model", "created": 0}
            listing = {"object": "list", "data": [model], "has_more": False,
                       "first_id": MODEL_ID, "last_id": MODEL_ID}
            answer = _Answer(200, "application/json", json.dumps(listing).encode())
        else:
            answer = _Answer(404, "application/json", json.dumps({"error": {"message": "not found"}}).encode())
        self._record(method=method, path=path, wire=None, kind="other" if answer.status == 200 else "rejected",
                     status=answer.status)
        return answer

    def answer_post(self, path: str, headers: Mapping[str, str], raw: bytes) -> _Answer:
        route = urlsplit(path).path.rstrip("/")
        wire = wire_for(route)
        name = None if wire is None else wire.name
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        if wire is None or not isinstance(body, dict):
            status = 404 if wire is None else 400
            self._record(method="POST", path=path, wire=name, kind="rejected", status=status)
            return _Answer(status, "application/json", json.dumps({"error": {"message": "unsupported request"}}).encode())
        side = wire.side_answer(route)
        if side is not None:
            self._record(method="POST", path=path, wire=name, kind="other", status=200, body=body)
            return _Answer(200, "application/json", side)
        return self._answer_model_request(path, wire.for_host_tools(self.shell_tools), headers, body)

    def _answer_model_request(
        self, path: str, wire: WireFormat, headers: Mapping[str, str], sent: dict[str, Any]
    ) -> _Answer:
        named, stream, body = wire.request(urlsplit(path).path.rstrip("/"), sent)
        model = named or MODEL_ID
        tools = wire.offered_tools(body)
        assistant_turns = wire.assistant_turns(body)
        message_id = f"msg_scripted_{uuid.uuid4().hex[:16]}"
        task = self._delegated_task(body, wire)
        task_index = None if task is None else self.script.tasks().index(task)
        turns = self.script.turns if task is None else task.turns
        common: dict[str, Any] = {
            "method": "POST", "path": path, "wire": wire.name, "model": model, "stream": stream, "body": sent,
            "session_id": _session_id(headers), "tools_offered": tuple(t.name for t in tools),
            "subagent": None if task is None else task.agent, "task_index": task_index,
            "skills_loaded": wire.loaded_skills(body),
        }
        turn_index: int | None = None
        unoffered: tuple[str, ...] = ()
        if not tools:
            kind: RequestKind = "side"
            reply = Reply(message_id, str(model), SIDE_REPLY_TEXT, (), NO_USAGE)
        elif assistant_turns >= len(turns):
            kind = "exhausted"
            reply = Reply(message_id, str(model), EXHAUSTED_REPLY_TEXT, (), NO_USAGE)
        else:
            kind, turn_index = "turn", assistant_turns
            turn = turns[turn_index]
            if turn.think_ms:
                time.sleep(turn.think_ms / 1000)   # this request's own handler thread: other sessions go on
            if turn.error is not None:
                self._record(kind=kind, status=turn.error.status, turn_index=turn_index, **common)
                error = wire.error(turn.error.status, turn.error.message)
                return _Answer(turn.error.status, "application/json", json.dumps(error).encode())
            call_prefix = "" if task_index is None else f"s{task_index}_"
            calls, unoffered = wire.tool_calls(self._as_host_names(turn.actions), tools, f"{call_prefix}t{turn_index}", self.sandbox_root)
            usage = turn.usage
            reply = Reply(
                message_id,
                str(model),
                turn.text,
                calls,
                DEFAULT_USAGE if usage is None else ReplyUsage(usage.input, usage.output, usage.cache_read, usage.cache_write),
            )
        self._record(kind=kind, status=200, turn_index=turn_index,
                     tool_calls=tuple(c.name for c in reply.tool_calls), unoffered_tools=unoffered, **common)
        content_type, payload = wire.render(reply, stream, body)
        return _Answer(200, content_type, payload)

    def _delegated_task(self, body: Mapping[str, Any], wire: WireFormat) -> TaskAction | None:
        """The ``task`` action whose sub-agent sent this request, if any.

        A sub-agent starts a conversation of its own whose first user message is the prompt its
        parent delegated with (both hosts, host-facts §5, §8); the main session's first message is
        the scenario's prompt.  The longest matching prompt wins, so one prompt may contain another.
        """
        opening = wire.first_user_text(body)
        matching = [task for task in self.script.tasks() if task.prompt in opening]
        return max(matching, key=lambda task: len(task.prompt)) if matching else None

    def _as_host_names(self, actions: Sequence[Action]) -> list[Action]:
        """The turn's actions with each ``task``'s harness agent and each ``skill`` named as the host
        knows them."""
        return [action.model_copy(update={"agent": self.agent_names[action.agent]})
                if isinstance(action, TaskAction) and action.agent in self.agent_names
                else action.model_copy(update={"name": self.skill_names[action.name]})
                if isinstance(action, SkillAction) and action.name in self.skill_names else action
                for action in actions]


def _session_id(headers: Mapping[str, str]) -> str | None:
    # ``headers`` has lower-cased names (HTTP header names are case-insensitive).
    for name in ("x-claude-code-session-id", "x-session-id", "session-id"):  # session-id: Codex
        value = headers.get(name)
        if value:
            return value
    return None


def _handler_for(server: ScriptedModelServer) -> type[BaseHTTPRequestHandler]:
    """A request handler class bound to ``server`` (a closure, so there is no module-level state)."""

    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.1 with Content-Length: both CLIs keep connections alive. Whole streams are built
        # before sending (a script is known up front), so every response has a length.
        protocol_version = "HTTP/1.1"
        timeout = 60

        def _send(self, answer: _Answer, *, with_body: bool = True) -> None:
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.content_type)
            self.send_header("Content-Length", str(len(answer.payload)))
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            if with_body:
                self.wfile.write(answer.payload)

        def _own_path(self) -> str | None:
            """The path under this trial's key; None (answered 404, nothing read) for another's."""
            path = strip_trial_key(self.path, server.trial_key)
            if path is None:
                self.close_connection = True
                self._send(_Answer(404, "application/json", b'{"error": {"message": "not found"}}'))
            return path

        def do_HEAD(self) -> None:  # http.server's naming (do_<METHOD>)
            if (path := self._own_path()) is not None:
                self._send(server.answer_get("HEAD", path), with_body=False)

        def do_GET(self) -> None:
            if (path := self._own_path()) is not None:
                self._send(server.answer_get("GET", path))

        def do_POST(self) -> None:
            if (path := self._own_path()) is None:
                return
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length > 0 else b""
            self._send(server.answer_post(path, {k.lower(): v for k, v in self.headers.items()}, raw))

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence stderr logging
            return

    return Handler
