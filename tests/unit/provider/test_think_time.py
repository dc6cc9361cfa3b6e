"""A scripted turn's ``think_ms``: the server waits that long before it answers the turn (and only then)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from pytest_atlante.provider.scripted import ScriptedModelServer
from pytest_atlante.suite.script import MAX_THINK_MS, Script

TOOLS = [{"name": "Write", "description": "write", "input_schema": {"type": "object"}}]


def script(*turns: dict[str, object]) -> Script:
    return Script.model_validate({"schema": "atlante/scripted-model-v1", "turns": list(turns)})


def test_each_turn_waits_its_own_think_time_and_a_side_request_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []
    monkeypatch.setattr("pytest_atlante.provider.scripted.time.sleep", waits.append)
    server = ScriptedModelServer(script({"text": "Thinking.", "think_ms": 1500}, {"text": "Done."}), sandbox_root=tmp_path)
    asked: list[dict[str, object]] = [{"role": "user", "content": "go"}]
    first = {"model": "m", "max_tokens": 100, "tools": TOOLS, "messages": asked}
    server.answer_post("/v1/messages", {}, json.dumps(first).encode())
    server.answer_post("/v1/messages", {}, json.dumps({**first, "tools": []}).encode())   # a title request: no turn
    second = {**first, "messages": [*asked, {"role": "assistant", "content": "Thinking."},
                                    {"role": "user", "content": "next"}]}
    server.answer_post("/v1/messages", {}, json.dumps(second).encode())
    assert waits == [1.5]
    assert [r.kind for r in server.requests] == ["turn", "side", "turn"]


@pytest.mark.parametrize("value", [-1, MAX_THINK_MS + 1, 1.5, "100"])
def test_a_think_time_out_of_range_is_refused(value: object) -> None:
    with pytest.raises(ValidationError, match="think_ms"):
        script({"text": "x", "think_ms": value})
