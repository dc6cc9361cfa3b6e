"""``atlante init``: a project that evaluates from its first minute (docs/design.md §13).

In an empty directory it writes a configuration at the current version (``$schema`` set), one
scenario with its fixture, checks and scripted-model script that is ``sound`` under
``atlante selftest`` and passes ``atlante eval --scripted`` on both hosts, the ``.gitignore`` entry
for ``.atlante/``, and ``eval/conftest.py``, which keeps the fixtures (whose tests fail until the
task is done, on purpose) out of an ordinary ``pytest`` run.

In a directory that already has a harness in a host's own layout (``suite/native.py`` finds it) the
configuration adopts it in place — its ``harness`` section names those files, nothing is copied —
and the starting scenario exercises one agent (or skill).  What eval cannot run (hooks, MCP servers,
settings) comes back as warnings.

It never overwrites a file: a file already there is kept and said to be, so a second run changes
nothing.  The only edit of an existing file is adding the missing ``.atlante/`` line to
``.gitignore``.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from pytest_atlante.diagnostics import Diagnostic, DiagnosticError
from pytest_atlante.hosts.names import HostName
from pytest_atlante.projectroot import CONFIG_FILE
from pytest_atlante.suite.config import CONFIG_SCHEMA_URIS
from pytest_atlante.suite.native import NativeHarness, NativePart, discover_native_harness, harness_section_for
from pytest_atlante.suite.scenario import SCENARIO_SCHEMA_URI
from pytest_atlante.suite.script import SCRIPT_SCHEMA

#: The configuration version init writes: the newest, the one that admits every host.
CURRENT_VERSION = max(CONFIG_SCHEMA_URIS)
GITIGNORE_ENTRY = ".atlante/"
SCENARIO_DIR = "eval/scenarios"
FIXTURE_DIR = "eval/fixtures"

# Kept out of plain `pytest` by eval/conftest.py; the eval itself never collects fixtures.
_CONFTEST = '''\
# Written by `atlante init`.  The fixtures under eval/fixtures/ are the starting points of eval
# trials: their tests fail until an agent has done the task, on purpose, so a plain `pytest` run
# of this project must not collect them.  (`pytest --atlante-eval` never collects them either.)
collect_ignore_glob = ["fixtures/*"]
'''

_GREETER = '''\
def greet(name: str) -> str:
    return f"Hello, {name}!"
'''

_GREETER_TEST = '''\
"""Fails until farewell() exists: the eval's task.  Run with `python3 -m unittest test_greeter`."""

import unittest

import greeter


class GreeterTest(unittest.TestCase):
    def test_greet(self) -> None:
        self.assertEqual(greeter.greet("Ada"), "Hello, Ada!")

    def test_farewell(self) -> None:
        self.assertEqual(greeter.farewell("Ada"), "Goodbye, Ada!")
'''


@dataclass
class InitResult:
    """What init did, for the command to print: each path created or kept, and the warnings."""

    created: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)   # "agent debugger (.claude/agents/debugger.md)"
    directory: str = "."   # the project directory as the user named it: "next:" starts there

    def lines(self) -> list[str]:
        out = [f"atlante init: created {path}" for path in self.created]
        out += [f"atlante init: kept {path} (already there; not changed)" for path in self.kept]
        out += [f"atlante init: adopted {part}" for part in self.adopted]
        out += [f"atlante init: warning: {warning}" for warning in self.warnings]
        if not self.created:
            out.append("atlante init: nothing to do: every file is already there")
        cd = "" if self.directory in ("", ".") else f"cd {shlex.quote(self.directory)} && "
        out.append(f"next: {cd}atlante build && atlante selftest && atlante eval --scripted")
        return out


@dataclass(frozen=True)
class _Starter:
    """The starting scenario: its name, fixture files, prompt, checks and scripted run."""

    name: str
    fixture: dict[str, str]
    prompt: str
    checks: list[dict[str, object]]
    turns: list[dict[str, object]]
    agent: str | None = None
    description: str | None = None


def _greeter_starter() -> _Starter:
    return _Starter(
        name="adds-farewell",
        description="Starting scenario written by atlante init: edit the task and checks to your harness's job.",
        fixture={"greeter.py": _GREETER, "test_greeter.py": _GREETER_TEST},
        prompt="Add farewell(name) to greeter.py returning 'Goodbye, <name>!'.",
        checks=[
            {"type": "file-contains", "path": "greeter.py", "pattern": "def farewell("},
            # Each test named: an emptied test_greeter.py ("Ran 0 tests", exit 0 on Python 3.11) or a
            # deleted one fails the check instead of passing it.
            {"type": "command", "run": ["python3", "-m", "unittest", "-q", "test_greeter.GreeterTest.test_greet",
                                        "test_greeter.GreeterTest.test_farewell"]},
            {"type": "diff-allowlist", "allow": ["greeter.py"]},
        ],
        turns=[
            {"text": "Reading greeter.py.", "actions": [{"type": "read", "path": "greeter.py"}],
             "usage": {"input": 900, "output": 40}},
            {"text": "Adding farewell().", "actions": [{
                "type": "edit", "path": "greeter.py",
                "old": '    return f"Hello, {name}!"\n',
                "new": '    return f"Hello, {name}!"\n\n\ndef farewell(name: str) -> str:\n    return f"Goodbye, {name}!"\n'}],
             "usage": {"input": 1000, "output": 80}},
            {"text": "Done.", "usage": {"input": 1100, "output": 10}},
        ],
    )


def _part_starter(part: NativePart) -> _Starter:
    """A scenario that runs one adopted agent (or names one skill): a start to edit, sound as written.

    The task is an edit of a file the fixture has (the edit tool is the one a working agent most
    surely keeps; an agent without it makes the scripted run fail and the self-test say so)."""
    how = f"the {part.name} skill" if part.kind == "skill" else "your instructions"
    todo = f"TODO: what the {part.name} {part.kind} can do for this project.\n"
    return _Starter(
        name=f"{part.name}-starter",
        description=(f"Starting scenario for the {part.kind} {part.name} ({part.path}), written by atlante init: "
                     "replace the task and checks with the job it exists for."),
        fixture={"NOTES.md": f"# Notes\n\n{todo}"},
        prompt=(f"Using {how}, edit NOTES.md: replace the TODO line with a short list of what you can do "
                "for this project, one line each, every line starting with '- '."),
        checks=[
            {"type": "file-contains", "path": "NOTES.md", "pattern": "\n- "},
            {"type": "diff-allowlist", "allow": ["NOTES.md"]},
        ],
        turns=[
            {"text": "Reading NOTES.md.", "actions": [{"type": "read", "path": "NOTES.md"}],
             "usage": {"input": 900, "output": 30}},
            {"text": "Listing what I can do.", "actions": [{
                "type": "edit", "path": "NOTES.md", "old": todo,
                "new": f"- Work on this project as the {part.name} {part.kind} says.\n"}],
             "usage": {"input": 1000, "output": 60}},
            {"text": "Done.", "usage": {"input": 1100, "output": 10}},
        ],
        agent=part.name if part.kind == "agent" else None,
    )


def _starter_part(native: NativeHarness) -> NativePart | None:
    for kind in ("agent", "skill"):
        for part in native.parts:
            if part.kind == kind:
                return part
    return None


def _config_text(host: HostName, harness: dict[str, object]) -> str:
    doc: dict[str, object] = {
        "$schema": CONFIG_SCHEMA_URIS[CURRENT_VERSION],
        "version": CURRENT_VERSION,
        # A trailing star: a scenario saved as .eval.jsonc (comments allowed) is collected too.
        "eval": {"host": host, "scenarios": f"{SCENARIO_DIR}/*.eval.json*", "budget": {"trials": 3}},
    }
    if harness:
        doc["harness"] = harness
    head = ("// Written by `atlante init`: the eval configuration (docs/reference.md, \"Configuration\").\n"
            "// `atlante schema config` prints its JSON Schema; the $schema URI maps to it offline.\n")
    return head + json.dumps(doc, indent=2) + "\n"


def _scenario_text(starter: _Starter) -> str:
    task: dict[str, object] = {"fixture": f"{FIXTURE_DIR}/{starter.name}", "prompt": starter.prompt}
    if starter.agent is not None:
        task["agent"] = starter.agent
    doc: dict[str, object] = {"$schema": SCENARIO_SCHEMA_URI, "version": "0.2", "name": starter.name}
    if starter.description:
        doc["description"] = starter.description
    doc.update(task=task, checks=starter.checks)
    return json.dumps(doc, indent=2) + "\n"


def _script_text(starter: _Starter) -> str:
    return json.dumps({"schema": SCRIPT_SCHEMA, "turns": starter.turns}, indent=2) + "\n"


def _write_new(root: Path, rel: str, text: str, result: InitResult) -> None:
    """Create ``rel`` unless anything is at that path already (a file, a directory, a dangling link)."""
    path = root / rel
    if path.exists() or path.is_symlink():
        result.kept.append(rel)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("x", encoding="utf-8") as out:   # "x": never replace what appeared meanwhile
        out.write(text)
    result.created.append(rel)


def _ensure_gitignore(root: Path, result: InitResult) -> None:
    path = root / ".gitignore"
    if path.is_symlink() or (path.exists() and not path.is_file()):
        result.warnings.append(".gitignore is not a regular file: add the line '.atlante/' yourself")
        return
    if not path.exists():
        _write_new(root, ".gitignore", GITIGNORE_ENTRY + "\n", result)
        return
    text = path.read_bytes().decode("utf-8", errors="surrogateescape")
    if any(line.strip() in (GITIGNORE_ENTRY, ".atlante", "/.atlante", "/.atlante/") for line in text.splitlines()):
        result.kept.append(".gitignore")
        return
    with path.open("a", encoding="utf-8", errors="surrogateescape") as out:
        out.write(("" if text.endswith("\n") or not text else "\n") + GITIGNORE_ENTRY + "\n")
    result.created.append(".gitignore (the line .atlante/)")


def _import_skill_evals(root: Path, native: NativeHarness, result: InitResult) -> None:
    """An adopted skill that keeps Agent Skills evals (``<skill>/evals/evals.json``): its scenarios too."""
    from pytest_atlante.suite.skillevals import EVALS_FILE, import_evals

    for part in native.parts:
        evals = root / part.path / "evals" / EVALS_FILE
        if part.kind != "skill" or evals.is_symlink() or not evals.is_file():
            continue
        try:
            found = import_evals(evals, root, skill=part.name)
        except DiagnosticError as exc:   # a broken evals.json does not stop init: said, not imported
            result.warnings += [f"{part.path}/evals/{EVALS_FILE} not imported: {d.message}" for d in exc.diagnostics]
            continue
        result.created += found.created
        result.kept += found.kept
        result.warnings += found.warnings
        result.adopted.append(f"{len(found.scenarios)} scenario(s) from {part.path}/evals/{EVALS_FILE}")


def init_project(root: Path, host: HostName | None = None) -> InitResult:
    """Write the starting project into ``root`` (created if missing); see the module docstring."""
    if root.exists() and not root.is_dir():
        raise DiagnosticError([Diagnostic(str(root), "", "init-not-a-directory", f"{root} is not a directory",
                                          "pass a directory (it is created when missing)")])
    root.mkdir(parents=True, exist_ok=True)
    result = InitResult(directory=str(root))
    native = discover_native_harness(root)
    part = _starter_part(native)
    chosen: HostName = host or (part.host if part is not None else "claude-code")
    starter = _part_starter(part) if part is not None else _greeter_starter()
    result.adopted = [f"{p.kind} {p.name} ({p.path}, {p.host} layout)" for p in native.parts]
    result.warnings += list(native.unsupported)
    if part is None and native.parts:
        result.warnings.append("no agent or skill to start a scenario with: the starting scenario uses no harness part")
        starter = _greeter_starter()
    _write_new(root, CONFIG_FILE, _config_text(chosen, harness_section_for(native) if native.parts else {}), result)
    _write_new(root, f"{SCENARIO_DIR}/{starter.name}.eval.json", _scenario_text(starter), result)
    _write_new(root, f"{SCENARIO_DIR}/scripted/{starter.name}.json", _script_text(starter), result)
    for name, text in starter.fixture.items():
        _write_new(root, f"{FIXTURE_DIR}/{starter.name}/{name}", text, result)
    _write_new(root, "eval/conftest.py", _CONFTEST, result)
    _import_skill_evals(root, native, result)
    _ensure_gitignore(root, result)
    scenario_file = f"{SCENARIO_DIR}/{starter.name}.eval.json"
    if CONFIG_FILE in result.kept and scenario_file in result.created:
        result.warnings.append(f"{CONFIG_FILE} was already there: its eval.scenarios must match {scenario_file} "
                               "for the new scenario to run")
    return result


__all__ = ["CURRENT_VERSION", "InitResult", "init_project"]
