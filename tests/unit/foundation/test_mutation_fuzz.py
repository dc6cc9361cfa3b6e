"""Mutated documents are either valid or diagnostics — never an exception (hypothesis).

Runs 2,000 examples per document kind under the ``ci`` profile (CI=true), 200 otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import Project, config_doc, scenario_doc
from pytest_atlante.suite.discovery import discover

EXAMPLES = 2000 if os.environ.get("CI") else 200

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                         st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                                 st.dictionaries(st.text(max_size=10), inner, max_size=4)),
                           max_leaves=10)


def paths_of(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += paths_of(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += paths_of(child, (*prefix, index))
    return found


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any]) -> str:
    doc = json.loads(json.dumps(base))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        targets = paths_of(doc)
        path = draw(st.sampled_from(targets))
        action = draw(st.sampled_from(["replace", "delete", "add", "text"]))
        if not path:
            if action == "replace":
                doc = draw(json_values)
            continue
        parent: Any = doc
        for part in path[:-1]:
            parent = parent[part]
        key = path[-1]
        if action == "replace":
            parent[key] = draw(json_values)
        elif action == "delete":
            del parent[key]
        elif action == "add" and isinstance(parent[key], dict):
            parent[key][draw(st.text(max_size=12))] = draw(json_values)
        elif action == "add" and isinstance(parent[key], list):
            parent[key].append(draw(json_values))
        elif isinstance(parent[key], str):
            parent[key] = draw(st.sampled_from(["", "/abs", "../up", ".git/x", "node_modules", "(", "[a-", "a b", "x" * 300]))
    text = json.dumps(doc, allow_nan=True)
    if draw(st.booleans()) and len(text) > 2:
        cut = draw(st.integers(min_value=0, max_value=len(text) - 1))
        text = text[:cut] + draw(st.sampled_from(["", ",", "}", "{", "//", "\x00", "\"", "\ud800"[:0]])) + text[cut + 1:]
    return text


@pytest.fixture(scope="module")
def project() -> Iterator[Project]:
    root = Path(tempfile.mkdtemp(prefix="atlante-fuzz-"))
    project = Project(root)
    project.config(config_doc())
    project.write("harness/helper.md", "x\n")
    project.write("harness/tidy/SKILL.md", "x\n")
    project.write("eval/fixtures/app/README.md", "x\n")
    project.scenario(scenario_doc())
    project.script("writes-hello", [{"text": "done"}])
    yield project
    shutil.rmtree(root)


def with_document(project: Project, rel: str, text: str) -> None:
    """Write ``text`` at ``rel`` for one example, check it, then restore the valid original."""
    path = project.root / rel
    original = path.read_bytes()
    try:
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        assert_valid_or_diagnostics(project)
    finally:
        path.write_bytes(original)


def assert_valid_or_diagnostics(project: Project) -> None:
    suite = discover(project.root, scripted=True)
    for problem in suite.diagnostics:
        assert problem.code.startswith("eval-") and problem.message
    if not suite.diagnostics:
        assert suite.scenarios


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(mutated(scenario_doc()))
def test_mutated_scenarios_never_raise(project: Project, text: str) -> None:
    with_document(project, "eval/scenarios/main.eval.json", text)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(mutated(config_doc()))
def test_mutated_configs_never_raise(project: Project, text: str) -> None:
    with_document(project, "atlante.jsonc", text)


@settings(max_examples=EXAMPLES // 4, deadline=None, suppress_health_check=list(HealthCheck))
@given(mutated({"schema": "atlante/scripted-model-v1", "turns": [
    {"text": "t", "actions": [{"type": "write", "path": "a", "content": "c"}, {"type": "bash", "command": "ls"}],
     "usage": {"input": 1, "output": 2}}]}))
def test_mutated_scripts_never_raise(project: Project, text: str) -> None:
    with_document(project, "eval/scenarios/scripted/writes-hello.json", text)
