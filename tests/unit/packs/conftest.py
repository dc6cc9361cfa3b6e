"""Fixtures for the resource-pack tests: a valid eval project plus packs written next to it.

``PackProject`` extends the root ``atlante_project`` (one local scenario ``writes-hello``) with
``pack(...)``, which lays out a pack — root preset, optional presets, a suite with one scenario, its
fixture and scripted-model script — at ``./packs/<dir>`` or under ``node_modules/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import Project, config_doc, scenario_doc
from pytest_atlante.suite.discovery import Suite, discover

PACK_SCENARIO = "pack-writes-notes"
PACK_FIXTURE = "eval/fixtures/notes-app"


def pack_scenario(name: str = PACK_SCENARIO, fixture: str = PACK_FIXTURE, **overrides: Any) -> dict[str, Any]:
    doc = scenario_doc(name, task={"fixture": fixture, "prompt": "Create notes.txt containing notes."},
                       checks=[{"type": "file-contains", "path": "notes.txt", "pattern": "notes"},
                               {"type": "diff-allowlist", "allow": ["notes.txt"]}])
    doc.update(overrides)
    return doc


class PackProject(Project):
    def select(self, packages: list[str], include: list[str] | None = None, host: str = "claude-code",
               **eval_overrides: Any) -> None:
        """Rewrite atlante.jsonc: the same project, selecting ``packages`` and including ``include``."""
        doc = config_doc(host, **eval_overrides)
        doc["packages"] = packages
        if include is not None:
            doc["eval"]["include"] = include
        self.config(doc)

    def pack(self, where: str, *, suite: dict[str, Any] | None = None, presets: dict[str, Any] | None = None,
             scenarios: list[dict[str, Any]] | None = None, with_fixture: bool = True, no_suite: bool = False,
             agent: str = "note-taker", **top: Any) -> Path:
        """A pack at ``where`` (project-relative, e.g. ``packs/notes`` or ``node_modules/@acme/notes``)."""
        root = self.root / where
        doc: dict[str, Any] = {"version": "0.2",
                               "harness": {"agents": {agent: {"description": "Takes notes.", "prompt": "harness/note-taker.md"}}}}
        if not no_suite:
            doc["eval"] = suite if suite is not None else {"scenarios": "eval/scenarios/*.eval.json*"}
        if presets is not None:
            doc["presets"] = presets
        doc.update(top)
        self.write(f"{where}/atlante.jsonc", doc)
        self.write(f"{where}/harness/note-taker.md", "You take notes.\n")
        if with_fixture:
            self.write(f"{where}/{PACK_FIXTURE}/README.md", "# notes app (from the pack)\n")
        for scenario in scenarios if scenarios is not None else [pack_scenario()]:
            self.write(f"{where}/eval/scenarios/{scenario['name']}.eval.json", scenario)
            self.write(f"{where}/eval/scenarios/scripted/{scenario['name']}.json",
                       {"schema": "atlante/scripted-model-v1", "turns": [
                           {"text": "Writing.", "actions": [{"type": "write", "path": "notes.txt", "content": "notes\n"}]},
                           {"text": "Done."}]})
        return root

    def discover(self, **kwargs: Any) -> Suite:
        return discover(self.root, **kwargs)


@pytest.fixture
def project(atlante_project: Project) -> PackProject:
    return PackProject(atlante_project.root)


def codes(suite: Suite) -> list[tuple[str, str, str]]:
    """(code, file, location) of every diagnostic, for compact assertions."""
    return [(d.code, d.file, d.location) for d in suite.diagnostics]


def only(suite: Suite, code: str) -> Any:
    """The single diagnostic with ``code``; fails when there is none or more than one."""
    found = [d for d in suite.diagnostics if d.code == code]
    assert len(found) == 1, suite.diagnostics
    assert found[0].message and found[0].hint, found[0]
    return found[0]
