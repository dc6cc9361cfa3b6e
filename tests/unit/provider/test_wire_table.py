"""The one table of wire formats: every route reaches its format, and a new format is one module
(a ``WireFormat`` subclass) plus its line in ``WIRE_FORMATS`` — the scripted model and the metering
proxy's route test then serve and meter it with nothing else changed (docs/architecture.md,
"Where to add")."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_atlante.provider import wire
from pytest_atlante.provider.meter import ResponseMeter
from pytest_atlante.provider.proxy import _is_model_request
from pytest_atlante.provider.routes import refusal
from pytest_atlante.provider.scripted import ScriptedModelServer
from pytest_atlante.provider.wire import WIRE_FORMATS, metered_wire, wire_for
from pytest_atlante.provider.wire.shared import CallSink, MessageWire, Reply, UsageReading
from pytest_atlante.suite.script import Script

ROUTES = [
    ("/v1/messages", "anthropic", True),
    ("/v1/messages/count_tokens", "anthropic", False),
    ("/v1/chat/completions", "openai", True),
    ("/v1/responses", "responses", True),
    ("/v1beta/models/gemini-2.5-pro:streamGenerateContent", "gemini", True),
]


@pytest.mark.parametrize(("route", "name", "metered"), ROUTES)
def test_each_route_reaches_its_format_and_only_model_requests_are_metered(route: str, name: str, metered: bool) -> None:
    found = wire_for(route)
    assert found is not None and found.name == name
    assert _is_model_request("POST", route) is metered
    assert (metered_wire(route) is found) is metered


def test_an_unknown_route_has_no_format() -> None:
    assert wire_for("/v1/unknown") is None and metered_wire("/v1/unknown") is None
    assert not _is_model_request("POST", "/v1/unknown")


def test_every_format_in_the_table_is_named_by_its_key() -> None:
    assert {name: fmt.name for name, fmt in WIRE_FORMATS.items()} == {name: name for name in WIRE_FORMATS}
    assert set(WIRE_FORMATS) == {"anthropic", "openai", "responses", "gemini"}


class PlainText(MessageWire):
    """A made-up fifth format: chat-shaped requests, the reply as plain text."""

    name = "plain"  # type: ignore[assignment]
    shape = "openai"
    routes = ("/v1/plain",)
    suffixes = ("/plain",)
    proxied_calls = re.compile(r"^(?:/v1)?/plain$")
    model_lists = re.compile(r"^/v1/plain-models$")

    def refused_call(self, route: str, query: str) -> str | None:
        return "a plain call asking for a stream" if "stream" in query else None

    def says_something(self, body: Mapping[str, Any]) -> bool | None:
        return bool(body["plain_text"]) if "plain_text" in body else None

    def served_model(self, body: Mapping[str, Any]) -> str | None:
        return str(body["plain_model"]) if "plain_model" in body else None

    def read_calls(self, body: Mapping[str, Any], calls: CallSink) -> bool:
        if "plain_call" not in body:
            return False
        calls.add_json(body["plain_call"]["id"], body["plain_call"]["name"], body["plain_call"]["args"])
        return True

    def render(self, reply: Reply, stream: bool, body: Mapping[str, Any]) -> tuple[str, bytes]:
        calls = ",".join(f"{call.name}{json.dumps(call.arguments, sort_keys=True)}" for call in reply.tool_calls)
        return "text/plain", f"{reply.text}|{calls}".encode()

    def error(self, status: int, message: str) -> dict[str, Any]:
        return {"plain-error": message}

    def read_usage(self, body: Mapping[str, Any]) -> UsageReading | None:
        usage = body.get("plain_usage")
        return UsageReading({"inputTokens": usage["in"], "outputTokens": usage["out"]}) if isinstance(usage, dict) else None


def test_a_new_format_is_one_class_and_one_table_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table: dict[str, Any] = wire.WIRE_FORMATS  # type: ignore[assignment]
    monkeypatch.setitem(table, "plain", PlainText())
    script = Script.model_validate({"schema": "atlante/scripted-model-v1", "turns": [
        {"text": "Writing.", "actions": [{"type": "write", "path": "a.txt", "content": "x"}]},
        {"error": {"status": 503, "message": "outage"}}]})
    server = ScriptedModelServer(script, sandbox_root=tmp_path)
    tools = [{"type": "function", "function": {"name": "write", "parameters": {"properties": {"filePath": {}, "content": {}}}}}]
    first = server.answer_post("/v1/plain", {}, json.dumps({"messages": [{"role": "user", "content": "go"}],
                                                               "tools": tools}).encode())
    assert (first.status, first.content_type) == (200, "text/plain")
    assert first.payload.decode() == f'Writing.|write{{"content": "x", "filePath": "{tmp_path.resolve() / "a.txt"}"}}'
    history = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "Writing."}]
    second = server.answer_post("/v1/plain", {}, json.dumps({"messages": history, "tools": tools}).encode())
    assert second.status == 503 and json.loads(second.payload) == {"plain-error": "outage"}
    assert [(r.wire, r.turn_index) for r in server.requests] == [("plain", 0), ("plain", 1)]
    assert _is_model_request("POST", "/provider/v1/plain")


def test_the_meter_reads_usage_through_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    body = json.dumps({"plain_usage": {"in": 7, "out": 3}}).encode()
    unknown = ResponseMeter("application/json", len(body))
    unknown.feed(body)
    unknown.finish()
    assert not unknown.reported  # no format in the table claims the document
    table: dict[str, Any] = wire.WIRE_FORMATS  # type: ignore[assignment]
    monkeypatch.setitem(table, "plain", PlainText())
    meter = ResponseMeter("application/json", len(body))
    meter.feed(body)
    meter.finish()
    assert meter.reported and (meter.usage.inputTokens, meter.usage.outputTokens) == (7, 3)


def test_the_proxy_routes_a_new_format_through_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """The metering proxy's allowlist is the formats' own routes: a fifth format is served (and its
    own refusal kept) with nothing changed in ``provider/routes.py``."""
    assert refusal("POST", "/v1/plain") == refusal("GET", "/v1/plain-models") == "not a model route"
    table: dict[str, Any] = wire.WIRE_FORMATS  # type: ignore[assignment]
    monkeypatch.setitem(table, "plain", PlainText())
    assert refusal("POST", "/v1/plain") is None and refusal("POST", "/plain/") is None
    assert refusal("GET", "/v1/plain-models") is None and refusal("HEAD", "/v1/plain-models") is None
    assert refusal("POST", "/v1/plain?stream=1") == "a plain call asking for a stream"
    assert refusal("GET", "/v1/plain") == "not a model route"  # a model call is a POST


def test_the_meter_reads_content_model_and_tool_calls_through_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a response said, the model it names and the tools it called are read by the format the
    document is in."""

    def metered(document: dict[str, Any]) -> ResponseMeter:
        body = json.dumps(document).encode()
        meter = ResponseMeter("application/json", len(body))
        meter.feed(body)
        meter.finish()
        return meter

    said = {"plain_text": "hello", "plain_call": {"id": "c1", "name": "write", "args": '{"path": "a"}'},
            "plain_model": "plain-1"}
    before = metered(said)
    assert before.empty and before.tool_calls.calls == [] and before.model is None
    table: dict[str, Any] = wire.WIRE_FORMATS  # type: ignore[assignment]
    monkeypatch.setitem(table, "plain", PlainText())
    after = metered(said)
    assert not after.empty and after.model == "plain-1"
    assert [(c.id, c.name, c.arguments) for c in after.tool_calls.calls] == [("c1", "write", {"path": "a"})]
    assert metered({"plain_text": ""}).empty
