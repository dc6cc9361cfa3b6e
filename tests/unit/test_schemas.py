"""The shipped JSON Schemas: equal to what the models generate today, and agreeing with the models
(and the version rules their validators hold) on valid and invalid documents.

``jsonschema`` is a test-only dependency (the ``test`` extras): the package generates and ships the
schemas without it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from conftest import scenario_doc
from pytest_atlante.cli import main
from pytest_atlante.suite import schemas
from pytest_atlante.suite.config import load_project_config
from pytest_atlante.suite.packs import load_pack_config
from pytest_atlante.suite.scenario import SCENARIO_SCHEMA_URIS, Scenario, version_diagnostics

V01, V02 = "https://atlante.sh/schema/v0.1/config.json", "https://atlante.sh/schema/v0.2/config.json"
V02S = SCENARIO_SCHEMA_URIS["0.2"]


@pytest.mark.parametrize("name", list(schemas.SCHEMAS))
def test_the_shipped_file_is_what_the_models_generate(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    shipped = schemas.shipped_text(name)
    assert shipped == schemas.render(schemas.generate(name)), (
        f"{name}: the models changed; run `python -m pytest_atlante.suite.schemas` and commit the files")
    Draft202012Validator.check_schema(json.loads(shipped))
    assert json.loads(shipped)["$id"] == schemas.SCHEMAS[name].uri
    assert main(["schema", name]) == 0 and capsys.readouterr().out == shipped


def test_short_names_list_and_an_unknown_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "config"]) == 0 and json.loads(capsys.readouterr().out)["$id"] == "https://atlante.sh/schema/config.json"
    assert main(["schema", "scenario"]) == 0
    assert json.loads(capsys.readouterr().out)["$id"] == "https://atlante.sh/schema/eval-scenario.json"
    assert main(["schema", "config-v0.4"]) == 0 and json.loads(capsys.readouterr().out)["$id"] == "https://atlante.sh/schema/v0.4/config.json"
    assert main(["schema", "--list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == len(schemas.SCHEMAS)
    for line in listed:   # name, the URI documents name, and a file that is there (offline mapping)
        name, uri, path = line.split("  ")
        assert schemas.SCHEMAS[name].uri == uri and json.loads(Path(path).read_text())["$id"] == uri
    assert main(["schema", "config-v9"]) == 2 and "schema-unknown" in capsys.readouterr().err


def eval_section(**fields: Any) -> dict[str, Any]:
    return {"host": "claude-code", "scenarios": "eval/*.eval.json", **fields}


CONFIGS: list[tuple[str, dict[str, Any], bool]] = [
    ("minimal v0.2", {"version": "0.2", "eval": eval_section()}, True),
    ("v0.2 with its $schema, include and a harness", {
        "$schema": V02, "version": "0.2", "eval": {"host": "opencode", "include": ["packs/x"]},
        "harness": {"agents": {"helper": {"prompt": "helper.md", "model": {"claude-code": "sonnet"}, "tools": ["read"]}},
                    "skills": {"tidy": {"description": "Tidy.", "dir": "tidy"}}}}, True),
    ("v0.1 on opencode", {"$schema": V01, "version": "0.1", "eval": eval_section(host="opencode")}, True),
    ("no eval section", {"version": "0.2"}, True),
    ("$schema null", {"$schema": None, "version": "0.2"}, True),
    ("the largest trials", {"version": "0.2", "eval": eval_section(budget={"trials": 50, "maxSessions": 0})}, True),
    ("v0.1 does not admit claude-code", {"version": "0.1", "eval": eval_section()}, False),
    ("$schema of another version", {"$schema": V01, "version": "0.2"}, False),
    ("unknown version", {"version": "0.9"}, False),
    ("unknown key", {"version": "0.2", "extra": 1}, False),
    ("neither scenarios nor include", {"version": "0.2", "eval": {"host": "opencode"}}, False),
    ("an empty include", {"version": "0.2", "eval": {"host": "opencode", "include": []}}, False),
    ("zero trials", {"version": "0.2", "eval": eval_section(budget={"trials": 0})}, False),
    ("too many trials", {"version": "0.2", "eval": eval_section(budget={"trials": 51})}, False),
    ("trials as a string", {"version": "0.2", "eval": eval_section(budget={"trials": "3"})}, False),
    ("unknown isolation", {"version": "0.2", "eval": eval_section(isolation="maybe")}, False),
    ("unknown host", {"version": "0.2", "eval": eval_section(host="cursor")}, False),
    ("agent name not a slug", {"version": "0.2", "harness": {"agents": {"Bad Name": {"prompt": "a.md"}}}}, False),
    ("agent without prompt", {"version": "0.2", "harness": {"agents": {"a": {"description": "A."}}}}, False),
    ("a tool name that is no name", {"version": "0.2", "harness": {"agents": {"a": {"prompt": "a.md", "tools": ["rm -rf"]}}}}, False),
    ("a host's own tool name", {"version": "0.2", "harness": {"agents": {"a": {"prompt": "a.md", "tools": ["TodoWrite"]}}}}, True),
    ("instructions per host", {"version": "0.2", "harness": {"instructions": {"claude-code": "CLAUDE.md"}}}, True),
    ("a command without its file", {"version": "0.2", "harness": {"commands": {"c": {"description": "C."}}}}, False),
    ("a pack's root preset", {"$schema": V02, "version": "0.2", "name": "docstring-pack",
                              "harness": {"skills": {"s": {"description": "S.", "dir": "skills/s"}}},
                              "presets": {"strict": {"harness": {}}},
                              "eval": {"host": "claude-code", "scenarios": "eval/*.eval.json", "source": "."}}, True),
    ("a v0.1 pack whose suite runs on claude-code", {"version": "0.1", "name": "p",
                                                     "eval": {"host": "claude-code", "scenarios": "e/*.json"}}, False),
    ("a pack suite without scenarios", {"version": "0.2", "name": "p", "eval": {"host": "opencode"}}, False),
    ("project and pack keys mixed", {"version": "0.2", "name": "p", "packages": ["./x"]}, False),
    ("v0.4 with variants", {"version": "0.4", "eval": eval_section(), "variants": {
        "no-skill": {"harness": {"skills": {"tidy": None}}}, "on-codex": {"eval": {"host": "codex", "model": "gpt-5"}},
        "again": {"replicateOf": "control"}}}, True),
    ("variants in v0.3", {"version": "0.3", "eval": eval_section(), "variants": {"a": {"replicateOf": "control"}}}, False),
    ("a variant that sets the budget", {"version": "0.4", "eval": eval_section(),
                                        "variants": {"a": {"eval": {"budget": {"trials": 9}}}}}, False),
    ("a variant named control", {"version": "0.4", "eval": eval_section(), "variants": {"control": {"replicateOf": "x"}}}, False),
    ("v0.4 with eval.credentials", {"version": "0.4", "eval": eval_section(credentials="stand-in-only")}, True),
    ("eval.credentials in v0.3", {"version": "0.3", "eval": eval_section(credentials="stand-in-only")}, False),
    ("an unknown eval.credentials", {"version": "0.4", "eval": eval_section(credentials="any")}, False),
    ("model for an unknown host", {"version": "0.2", "harness": {"agents": {"a": {"prompt": "a.md", "model": {"cursor": "x"}}}}}, False),
]


# Tool names are checked against each host's own vocabulary (hosts/), which the schema does not list:
# an editor accepts any name there and `atlante build`/eval validation names the unknown one.
LOOSER_IN_THE_SCHEMA = [d for i, d, _ in CONFIGS if i == "a tool name that is no name"]
# The reserved arm name is refused by the variants' validation (suite/variants.py, located there),
# which loading leaves to discovery; the schema refuses it at once.
STRICTER_IN_THE_SCHEMA = [d for i, d, _ in CONFIGS if i == "a variant named control"]


@pytest.mark.parametrize(("doc", "valid"), [(d, v) for _, d, v in CONFIGS], ids=[i for i, _, _ in CONFIGS])
@pytest.mark.parametrize("version", ["0.1", "0.2", "0.4"])
def test_config_schema_and_models_agree(tmp_path: Path, doc: dict[str, Any], valid: bool, version: str) -> None:
    """Each version's schema against the model's loading, which applies that version's rules."""
    (tmp_path / "atlante.jsonc").write_text(json.dumps(doc))
    _, _, problems = load_project_config(tmp_path)
    _, pack_problems = load_pack_config(tmp_path, tmp_path)
    loads = not problems or not pack_problems   # a project's, or a pack's
    assert loads == (valid or doc in STRICTER_IN_THE_SCHEMA), (problems, pack_problems)
    schema = json.loads(schemas.shipped_text(f"config-v{version}"))
    # A document of the other version is never valid against this one's schema (version is a const).
    expected = valid and doc["version"] == version
    if doc in LOOSER_IN_THE_SCHEMA and doc["version"] == version:
        expected = True   # the one rule the schema leaves to validation (see LOOSER_IN_THE_SCHEMA)
    assert Draft202012Validator(schema).is_valid(doc) == expected, list(Draft202012Validator(schema).iter_errors(doc))


def printed_schema(name: str) -> Draft202012Validator:
    """What ``atlante schema NAME`` prints, as a validator."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["schema", name]) == 0
    return Draft202012Validator(json.loads(out.getvalue()))


@pytest.mark.parametrize(("doc", "valid"), [(d, v) for _, d, v in CONFIGS], ids=[i for i, _, _ in CONFIGS])
def test_atlante_schema_config_takes_every_version_as_the_models_do(doc: dict[str, Any], valid: bool) -> None:
    """``atlante schema config`` (the README's editor mapping for every ``atlante.jsonc``): a document
    of any version is judged by the schema of the version it names."""
    expected = valid or doc in LOOSER_IN_THE_SCHEMA
    validator = printed_schema("config")
    assert validator.is_valid(doc) == expected, list(validator.iter_errors(doc))


def without(key: str) -> dict[str, Any]:
    doc = scenario_doc()
    del doc[key]
    return doc


SCENARIOS: list[tuple[str, dict[str, Any], bool]] = [
    ("the usual scenario", scenario_doc(), True),
    ("with agent, setup, budget and every check type", scenario_doc(
        task={"fixture": "f", "prompt": "p", "agent": "helper", "setup": ["true"]}, budget={"timeoutMs": 1000},
        checks=[{"type": "command", "run": ["true"], "expectExit": 1}, {"type": "file-unchanged", "path": "a"},
                {"type": "file-contains", "path": "a", "pattern": "x+", "regex": True},
                {"type": "diff-allowlist", "allow": ["a"]}]), True),
    ("no $schema", without("$schema"), False),
    ("another $schema", scenario_doc(**{"$schema": V02}), False),
    ("version 0.2 with the 0.1 $schema", scenario_doc(version="0.2"), False),
    ("version 0.2 with every trajectory check", scenario_doc(version="0.2", **{"$schema": V02S}, checks=[
        {"type": "skill-used", "skill": "tidy", "max": 0}, {"type": "agent-used", "agent": "helper", "min": 1},
        {"type": "tool-used", "tool": "bash", "inputMatches": "^ls"}, {"type": "usage-within", "turns": 3}]), True),
    ("a trajectory check in version 0.1", scenario_doc(checks=[{"type": "skill-used", "skill": "tidy"}]), False),
    ("usage-within without a bound", scenario_doc(version="0.2", **{"$schema": V02S},
                                                  checks=[{"type": "usage-within"}]), False),
    ("tool-used with a host's tool name", scenario_doc(version="0.2", **{"$schema": V02S},
                                                       checks=[{"type": "tool-used", "tool": "Bash"}]), False),
    ("name not a slug", scenario_doc(name="Writes Hello"), False),
    ("no checks", scenario_doc(checks=[]), False),
    ("unknown check type", scenario_doc(checks=[{"type": "vibes"}]), False),
    ("an empty pattern", scenario_doc(checks=[{"type": "file-contains", "path": "a", "pattern": ""}]), False),
    ("an exit code as a string", scenario_doc(checks=[{"type": "command", "run": ["true"], "expectExit": "0"}]), False),
    ("a check without its path", scenario_doc(checks=[{"type": "file-contains", "pattern": "x"}]), False),
    ("unknown task key", scenario_doc(task={"fixture": "f", "prompt": "p", "model": "x"}), False),
    ("empty setup", scenario_doc(task={"fixture": "f", "prompt": "p", "setup": []}), False),
    ("zero timeout", scenario_doc(budget={"timeoutMs": 0}), False),
]


@pytest.mark.parametrize(("doc", "valid"), [(d, v) for _, d, v in SCENARIOS], ids=[i for i, _, _ in SCENARIOS])
@pytest.mark.parametrize("version", ["0.1", "0.2"])
def test_scenario_schema_and_model_agree(doc: dict[str, Any], valid: bool, version: str) -> None:
    """Each version's schema against the model and its version rules (``$schema`` names the version;
    the trajectory check types need 0.2)."""
    from pydantic import ValidationError

    try:
        model_valid = not version_diagnostics(Scenario.model_validate(doc), "s.json")
    except ValidationError:
        model_valid = False
    assert model_valid == valid
    schema = json.loads(schemas.shipped_text(f"eval-scenario-v{version}"))
    expected = valid and doc.get("version") == version
    assert Draft202012Validator(schema).is_valid(doc) == expected, list(Draft202012Validator(schema).iter_errors(doc))


@pytest.mark.parametrize(("doc", "valid"), [(d, v) for _, d, v in SCENARIOS], ids=[i for i, _, _ in SCENARIOS])
def test_atlante_schema_scenario_takes_every_version_as_the_models_do(doc: dict[str, Any], valid: bool) -> None:
    """``atlante schema scenario`` (the README's mapping for every ``*.eval.json``): a valid 0.1
    document (its ``$schema`` the 0.1 URI) is valid, and so is a valid 0.2 one."""
    validator = printed_schema("scenario")
    assert validator.is_valid(doc) == valid, list(validator.iter_errors(doc))
    if doc.get("version") not in (None, *SCENARIO_SCHEMA_URIS):
        assert not validator.is_valid(doc)


def test_an_unknown_or_missing_version_is_refused_by_the_every_version_schemas() -> None:
    for name, doc in (("scenario", scenario_doc()), ("config", {"version": "0.2"})):
        validator = printed_schema(name)
        assert validator.is_valid(doc)
        assert not validator.is_valid(doc | {"version": "0.9"})
        assert not validator.is_valid({k: v for k, v in doc.items() if k != "version"})


def test_the_documented_editor_mapping_uses_the_every_version_schemas() -> None:
    from conftest import REPO_ROOT

    documents = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
    mapping = [line for path in documents for line in path.read_text().splitlines() if '"fileMatch"' in line]
    assert any("*.eval.json" in line and line.rstrip(" ,}").endswith('/eval-scenario.json"') for line in mapping), mapping
    assert any("atlante.jsonc" in line and line.rstrip(" ,}").endswith('/config.json"') for line in mapping), mapping
    assert schemas.shipped_path("scenario").name == "eval-scenario.json"
    assert schemas.shipped_path("config").name == "config.json"


def test_every_document_of_the_example_project_is_valid_against_its_schema() -> None:
    """Real documents (the project's, the pack's and the self-test demo's) under the schema their
    ``$schema`` names, as an editor would check them."""
    from conftest import REPO_ROOT
    from pytest_atlante.suite import jsonc

    by_uri = {entry.uri: json.loads(schemas.shipped_text(entry.name)) for entry in schemas.SCHEMAS.values()}
    example = REPO_ROOT / "example_project"
    documents = [p for p in example.rglob("*") if p.is_file() and ".atlante" not in p.parts
                 and (p.name == "atlante.jsonc" or p.name.endswith((".eval.json", ".eval.jsonc")))]
    assert len(documents) >= 8
    for path in documents:
        doc = jsonc.loads(path.read_text())
        errors = list(Draft202012Validator(by_uri[doc["$schema"]]).iter_errors(doc))
        assert errors == [], (path, errors)
