"""Agent Skills evals in, scenario documents out: ``atlante import evals FILE`` and ``atlante init``.

A skill that keeps its cases in the Agent Skills convention has ``<skill>/evals/evals.json``::

    {"skill_name": "pdf", "evals": [{"id": 1, "prompt": "…", "expected_output": "…",
                                     "files": ["evals/files/a.pdf"], "expectations": ["…"]}]}

and, from skill-creator's description optimisation, a trigger file beside it (a list of
``{"query", "should_trigger"}``).  Each eval becomes one v0.2 scenario document:

- ``prompt`` → ``task.prompt``; ``files`` (relative to the skill's directory) → copied into the
  scenario's fixture (``eval/fixtures/<name>/``); a file that is missing or outside the skill is named
  in a warning;
- a ``skill-used`` check on the skill: ``min: 1``, or ``max: 0`` when the eval says the skill
  should not be used (``should_trigger: false``, or a phrase of ``expected_output`` such as "should
  not trigger" — the warning quotes the phrase that decided it);
- ``expectations`` (or ``assertions``, as some tools write them) and ``expected_output`` (or
  ``expected_behavior``) are kept in the scenario's ``description``: they are natural language and
  there is no model judge, so each scenario that has them gets one warning that they need
  deterministic checks;
- ``name`` (slugged) names the scenario, else ``<skill>-<id>``; every other field is named in a
  warning as not mapped.

Each trigger query becomes one scenario, ``<skill>-trigger-<n>``, ``min: 1`` or ``max: 0``.  No
scripted run is written: a reference needs a known-good session, so ``atlante selftest`` says
``no-reference`` (and ``vacuous`` for a ``max: 0`` scenario, which an agent that does nothing
passes: its warning says so).  Nothing is overwritten: a path that exists is kept and said.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pytest_atlante.diagnostics import Diagnostic, DiagnosticError
from pytest_atlante.fsutil import MAX_DOCUMENT_BYTES, UnreadableFile, no_duplicate_keys, read_capped
from pytest_atlante.suite.native import slug_for
from pytest_atlante.suite.scenario import SCENARIO_SCHEMA_URI

__all__ = ["EVALS_FILE", "ImportResult", "import_evals", "negative_phrase", "skill_evals_files"]

EVALS_FILE = "evals.json"
SCENARIO_DIR = "eval/scenarios"
FIXTURE_DIR = "eval/fixtures"
CODE = "import-evals-invalid"
_HINT = "an Agent Skills evals.json: {\"skill_name\": …, \"evals\": [{\"id\", \"prompt\", …}]}"
# The fields each eval's mapping reads; any other is named in a warning.
_MAPPED = {"id", "name", "prompt", "expected_output", "expected_behavior", "files", "expectations", "assertions",
           "should_trigger"}
_MAX_FILE_BYTES = 8 * 1024 * 1024
# "should not trigger", "does not use the skill", "must never activate", "shouldn't invoke" …
_NEGATIVE = re.compile(
    r"\b(?:should\s+not|shouldn't|must\s+not|mustn't|does\s+not|doesn't|do\s+not|don't|will\s+not|won't|never|not)"
    r"(?:\s+(?:be|\w+ly))?\s+(?:trigger(?:ed)?|use[sd]?|activate[sd]?|invoke[sd]?|load(?:ed)?|fire[sd]?|engage[sd]?)\b",
    re.IGNORECASE)


@dataclass
class ImportResult:
    created: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    scenarios: list[str] = field(default_factory=list)

    def lines(self, prefix: str = "atlante import") -> list[str]:
        out = [f"{prefix}: created {path}" for path in self.created]
        out += [f"{prefix}: kept {path} (already there; not changed)" for path in self.kept]
        out += [f"{prefix}: warning: {warning}" for warning in self.warnings]
        return out


def negative_phrase(text: str) -> str | None:
    """The phrase of ``text`` that says the skill should not be used, if any."""
    match = _NEGATIVE.search(text)
    return match.group(0) if match else None


def _fail(path: Path, where: str, message: str) -> DiagnosticError:
    return DiagnosticError([Diagnostic(str(path), where, CODE, message, _HINT)])


def _load(path: Path) -> Any:
    try:
        data = read_capped(path, MAX_DOCUMENT_BYTES)
    except UnreadableFile as exc:
        raise _fail(path, "", f"cannot read it: {exc.reason}") from None
    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=no_duplicate_keys)
    except (UnicodeDecodeError, ValueError) as exc:
        raise _fail(path, "", f"not JSON: {exc}") from None


def _strings(value: Any, path: Path, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(path, where, "must be a list of strings")
    return list(value)


@dataclass(frozen=True)
class _Case:
    """One scenario to write."""

    name: str
    prompt: str
    negative: bool
    description: str
    files: list[str]


def _description(source: str, expected: str | None, expectations: list[str]) -> str:
    parts = [f"Imported from {source}."]
    if expected:
        parts.append(f"Expected output: {expected}")
    if expectations:
        parts.append("Expectations (natural language, not checked: write deterministic checks for them): "
                     + " ".join(f"({i}) {text}" for i, text in enumerate(expectations, 1)))
    return " ".join(parts)


def _unique(name: str, taken: set[str]) -> str:
    candidate, n = name, 2
    while candidate in taken:
        candidate, n = f"{name}-{n}", n + 1
    taken.add(candidate)
    return candidate


def _eval_case(entry: Any, index: int, skill: str, path: Path, rel: str, taken: set[str],
               result: ImportResult) -> _Case:
    where = f"$.evals[{index}]"
    if not isinstance(entry, dict):
        raise _fail(path, where, "each eval must be an object")
    prompt = entry.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise _fail(path, f"{where}.prompt", "each eval needs a non-empty prompt")
    ident = entry.get("id", index + 1)
    if not isinstance(ident, (int, str)) or isinstance(ident, bool):
        raise _fail(path, f"{where}.id", "id must be an integer or a string")
    raw_name = entry.get("name")
    if raw_name is not None and not isinstance(raw_name, str):
        raise _fail(path, f"{where}.name", "name must be a string")
    name = _unique(slug_for(raw_name) if raw_name else slug_for(f"{skill}-{ident}"), taken)
    expected = entry.get("expected_output", entry.get("expected_behavior"))
    if expected is not None and not isinstance(expected, str):
        raise _fail(path, f"{where}.expected_output", "expected_output must be a string")
    key = "expectations" if "expectations" in entry else "assertions"
    expectations = _strings(entry.get(key), path, f"{where}.{key}")
    files = _strings(entry.get("files"), path, f"{where}.files")
    trigger = entry.get("should_trigger")
    if trigger is not None and not isinstance(trigger, bool):
        raise _fail(path, f"{where}.should_trigger", "should_trigger must be true or false")
    negative = False
    if trigger is False:
        negative = True
        result.warnings.append(f"{name}: \"should_trigger\": false: the skill-used check is max: 0 (the skill must not be used)")
    elif trigger is None and expected and (phrase := negative_phrase(expected)):
        negative = True
        result.warnings.append(f"{name}: expected_output says {phrase!r}: the skill-used check is max: 0 (the skill must "
                               "not be used)")
    if negative:
        result.warnings.append(f"{name}: a max: 0 scenario passes when the agent does nothing (the self-test calls it "
                               "vacuous): add a check of what the agent should do instead")
    if expectations or expected:
        count = len(expectations)
        result.warnings.append(f"{name}: {count} expectation{'s' if count != 1 else ''}"
                               f"{' and the expected output' if expected else ''} kept in the description only: there "
                               "is no model judge, so write deterministic checks for them")
    for other in sorted(set(entry) - _MAPPED):
        result.warnings.append(f"{name}: field {other!r} is not mapped (ignored)")
    return _Case(name, prompt, negative, _description(f"{rel} ({skill}, id {ident})", expected, expectations), files)


def _trigger_cases(path: Path, skill: str, rel: str, taken: set[str], result: ImportResult) -> list[_Case]:
    """A skill-creator trigger file: ``[{"query", "should_trigger"}]``; anything else is not one (None)."""
    data = _load(path)
    if not isinstance(data, list) or not data or not all(isinstance(e, dict) and "query" in e for e in data):
        return []
    cases = []
    for index, entry in enumerate(data):
        where = f"$[{index}]"
        query, wanted = entry.get("query"), entry.get("should_trigger")
        if not isinstance(query, str) or not query.strip() or not isinstance(wanted, bool):
            raise _fail(path, where, "a trigger entry needs a non-empty query and should_trigger true or false")
        name = _unique(f"{skill}-trigger-{index + 1:02d}", taken)
        for other in sorted(set(entry) - {"query", "should_trigger", "id"}):
            result.warnings.append(f"{name}: field {other!r} of {rel} is not mapped (ignored)")
        if not wanted:
            result.warnings.append(f"{name}: should_trigger false: a max: 0 scenario passes when the agent does nothing "
                                   "(the self-test calls it vacuous)")
        cases.append(_Case(name, query, not wanted, f"Imported from {rel} ({skill}, query {index + 1}): "
                           f"the skill should {'not ' if not wanted else ''}trigger.", []))
    return cases


def _write_new(root: Path, rel: str, data: bytes, result: ImportResult) -> bool:
    target = root / rel
    if target.exists() or target.is_symlink():
        result.kept.append(rel)
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("xb") as out:
        out.write(data)
    result.created.append(rel)
    return True


def _document(case: _Case, skill: str) -> bytes:
    check: dict[str, object] = {"type": "skill-used", "skill": skill}
    check.update({"max": 0} if case.negative else {"min": 1})
    doc = {"$schema": SCENARIO_SCHEMA_URI, "version": "0.2", "name": case.name, "description": case.description,
           "task": {"fixture": f"{FIXTURE_DIR}/{case.name}", "prompt": case.prompt}, "checks": [check]}
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _fixture(root: Path, case: _Case, skill_dir: Path, result: ImportResult) -> None:
    """The scenario's fixture: the eval's files copied from the skill, each at its relative path."""
    fixture = root / FIXTURE_DIR / case.name
    fixture.mkdir(parents=True, exist_ok=True)
    for name in case.files:
        rel = PurePosixPath(name)
        source = skill_dir / rel
        if rel.is_absolute() or ".." in rel.parts or not rel.parts:
            result.warnings.append(f"{case.name}: file {name!r} is not a path inside the skill: not copied")
        elif source.is_symlink() or not source.is_file():
            result.warnings.append(f"{case.name}: file {name!r} is not a regular file in {skill_dir}: not copied "
                                   "(the fixture lacks it)")
        elif source.stat().st_size > _MAX_FILE_BYTES:
            result.warnings.append(f"{case.name}: file {name!r} is over 8 MiB: not copied")
        else:
            _write_new(root, f"{FIXTURE_DIR}/{case.name}/{rel.as_posix()}", source.read_bytes(), result)
    marker = fixture / ".atlante-fixture"
    if not any(fixture.iterdir()):
        # git keeps no empty directory: the fixture is a tree with one file saying where it came from.
        _write_new(root, f"{FIXTURE_DIR}/{case.name}/{marker.name}", b"imported from an Agent Skills eval: no files\n",
                   result)


def skill_evals_files(evals_file: Path) -> list[Path]:
    """Trigger files beside ``evals.json``: ``*trigger*.json`` in its directory, sorted."""
    return sorted(p for p in evals_file.parent.glob("*trigger*.json") if p.is_file() and not p.is_symlink())


def import_evals(evals_file: Path, project_root: Path, *, skill: str | None = None) -> ImportResult:
    """Write one scenario document per eval (and per trigger query) into ``project_root``."""
    data = _load(evals_file)
    if not isinstance(data, dict) or not isinstance(data.get("evals"), list):
        raise _fail(evals_file, "$.evals", "an object with an \"evals\" list is required")
    declared = data.get("skill_name")
    if declared is not None and not isinstance(declared, str):
        raise _fail(evals_file, "$.skill_name", "skill_name must be a string")
    if not (skill or declared):
        raise _fail(evals_file, "$.skill_name", "no skill_name: pass --skill NAME")
    name = slug_for(skill or declared or "")
    result = ImportResult()
    if declared and slug_for(declared) != declared:
        result.warnings.append(f"skill_name {declared!r} is not a harness name: the checks name {name!r}")
    for other in sorted(set(data) - {"skill_name", "evals"}):
        result.warnings.append(f"top-level field {other!r} of {evals_file.name} is not mapped (ignored)")
    skill_dir = evals_file.resolve().parent.parent
    rel = _shown(evals_file, project_root)
    # Names are unique within the import; a document already at a name is kept (a re-import changes nothing).
    taken: set[str] = set()
    cases = [_eval_case(entry, i, name, evals_file, rel, taken, result) for i, entry in enumerate(data["evals"])]
    for trigger_file in skill_evals_files(evals_file):
        cases += _trigger_cases(trigger_file, name, _shown(trigger_file, project_root), taken, result)
    for case in cases:
        _fixture(project_root, case, skill_dir, result)
        if _write_new(project_root, f"{SCENARIO_DIR}/{case.name}.eval.json", _document(case, name), result):
            result.scenarios.append(case.name)
    if not _declares(project_root, name):
        result.warnings.append(f"{project_root / 'atlante.jsonc'} declares no skill {name!r} under harness.skills: the "
                               "skill-used checks name a skill the harness must provide (atlante init adopts it)")
    return result


def _declares(project_root: Path, skill: str) -> bool:
    from pytest_atlante.suite.config import load_project_config

    project, _, _ = load_project_config(project_root)
    harness = getattr(project, "harness", None)
    return skill in (getattr(harness, "skills", None) or {})


def _shown(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.name
