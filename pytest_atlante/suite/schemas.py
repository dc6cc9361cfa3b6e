"""JSON Schemas of the documents a user writes, generated from their pydantic models (docs/design.md §14).

One schema per version of ``atlante.jsonc`` (``config-v0.1`` to ``config-v0.4``) and of scenario
documents (``eval-scenario-v0.1``, ``eval-scenario-v0.2``), each with the ``$id`` the documents' ``$schema`` names,
and one per kind for every version (``config``, ``eval-scenario``): it checks each document against
the schema of the version it names, so an editor can map every ``*.eval.json`` (or ``atlante.jsonc``)
to one file whatever its version.  The
generated files ship in the package (``pytest_atlante/suite/schema-files/``), so an editor maps
those URIs to them offline; ``atlante schema NAME`` prints one (``config`` and ``scenario``: the
every-version schemas) and ``atlante schema --list`` names each file.  A configuration schema takes a project's ``atlante.jsonc`` or a pack's root preset (the
same file name and ``$schema``: ``name``, ``presets`` and a pack suite are valid there).

What the models check in validators is added where JSON Schema can say it: ``version`` and
``$schema`` are constants of their version, a version lists only the hosts it admits
(``hosts/names.py``: v0.1 knew only OpenCode), and the eval section needs ``scenarios`` or a
non-empty ``include``.  A harness agent's tool names are the one model rule left out: they are
checked against each host's own vocabulary (``hosts/``), which the schema does not list.  Rules
outside the models (paths inside the project, regexes that compile,
duplicate keys, the build) stay with validation, which reports them with their own codes.

``python -m pytest_atlante.suite.schemas`` rewrites the shipped files after a model changed; a
test fails until it has been run.
"""

from __future__ import annotations

import copy
import json
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from pytest_atlante.checks import TRAJECTORY_TYPES
from pytest_atlante.diagnostics import Diagnostic, DiagnosticError
from pytest_atlante.hosts.names import HOST_NAMES, min_config_version
from pytest_atlante.suite.config import CONFIG_SCHEMA_URIS, CREDENTIALS_SINCE, VARIANTS_SINCE, PackConfig, ProjectConfig
from pytest_atlante.suite.scenario import SCENARIO_SCHEMA_URIS, Scenario

DRAFT = "https://json-schema.org/draft/2020-12/schema"
# Data beside this module (a hyphenated directory: never importable, only read as package data).
SCHEMA_DIR = "schema-files"


@dataclass(frozen=True)
class SchemaEntry:
    name: str          # what `atlante schema NAME` takes
    uri: str           # the `$schema` of the documents it describes, and its `$id`
    model: type[BaseModel]
    version: str | None  # None: every version, each document checked by its own ``version``
    title: str

    @property
    def file(self) -> str:
        return f"{self.name}.json"


#: The schemas an editor maps every document of a kind to: each version a document names is checked
#: against that version's schema (``atlante schema config`` / ``scenario``, docs/reference.md's mapping).
EVERY_CONFIG_URI = "https://atlante.sh/schema/config.json"
EVERY_SCENARIO_URI = "https://atlante.sh/schema/eval-scenario.json"

SCHEMAS: dict[str, SchemaEntry] = {
    "config": SchemaEntry("config", EVERY_CONFIG_URI, ProjectConfig, None, "atlante.jsonc, every version"),
    **{f"config-v{v}": SchemaEntry(f"config-v{v}", uri, ProjectConfig, v, f"atlante.jsonc, version {v}")
       for v, uri in sorted(CONFIG_SCHEMA_URIS.items())},
    "eval-scenario": SchemaEntry("eval-scenario", EVERY_SCENARIO_URI, Scenario, None,
                                 "atlante scenario document, every version"),
    **{f"eval-scenario-v{v}": SchemaEntry(f"eval-scenario-v{v}", uri, Scenario, v, f"atlante scenario document, version {v}")
       for v, uri in sorted(SCENARIO_SCHEMA_URIS.items())},
}
#: Short names: a document of any version.
ALIASES = {"scenario": "eval-scenario"}


def entry_for(name: str) -> SchemaEntry:
    entry = SCHEMAS.get(ALIASES.get(name, name))
    if entry is None:
        choices = ", ".join([*ALIASES, *SCHEMAS])
        raise DiagnosticError([Diagnostic("", "", "schema-unknown", f"no schema named {name!r}",
                                          f"use one of: {choices}")])
    return entry


def _config_schema(entry: SchemaEntry, version: str) -> dict[str, Any]:
    """A project's ``atlante.jsonc`` or a pack's root preset (same file name, same ``$schema``), with
    the validators' rules for one version (``config.version_diagnostics``)."""
    refs, top = models_json_schema([(ProjectConfig, "validation"), (PackConfig, "validation")], by_alias=True)
    defs = top["$defs"]
    admitted = [h for h in HOST_NAMES if min_config_version(h) <= version]
    for model in (ProjectConfig, PackConfig):
        properties = defs[model.__name__]["properties"]
        properties["version"] = {"const": version, "description": "the document format's version"}
        properties["$schema"] = {"anyOf": [{"const": entry.uri}, {"type": "null"}], "description": "this schema's URI"}
    defs["EvalSection"]["properties"]["host"]["enum"] = admitted
    if version < CREDENTIALS_SINCE:   # config.version_diagnostics: eval.credentials needs version 0.4
        del defs["EvalSection"]["properties"]["credentials"]
    if version < VARIANTS_SINCE:   # config.version_diagnostics: variants need version 0.4
        del defs["ProjectConfig"]["properties"]["variants"]
        del defs["Variant"], defs["VariantEval"]
    else:
        defs["VariantEval"]["properties"]["host"] = {"anyOf": [{"enum": admitted}, {"type": "null"}], "default": None}
        # The reserved name of the unmodified configuration (suite/variants.py).
        defs["ProjectConfig"]["properties"]["variants"]["anyOf"][0]["propertyNames"] = {"not": {"const": "control"}}
    # A pack's own suite host (not its presets': the version rule reads only the root preset's eval).
    defs["PackConfig"]["properties"]["eval"] = {"anyOf": [
        {"$ref": "#/$defs/PackSuite", "properties": {"host": {"anyOf": [{"enum": admitted}, {"type": "null"}]}}},
        {"type": "null"}], "default": None}
    # EvalSection._scenarios_or_include
    defs["EvalSection"]["anyOf"] = [
        {"required": ["scenarios"], "properties": {"scenarios": {"type": "string"}}},
        {"required": ["include"], "properties": {"include": {"type": "array", "minItems": 1}}},
    ]
    return {"description": "a project's configuration, or a pack's root preset (docs/packs.md)",
            "anyOf": [refs[(ProjectConfig, "validation")], refs[(PackConfig, "validation")]], "$defs": defs}


def _scenario_rules(schema: dict[str, Any], version: str) -> None:
    """A version 0.1 document admits only the file and command checks (``scenario.version_diagnostics``):
    the trajectory check types are left out of its ``checks`` union; in 0.2 a ``usage-within`` check
    names at least one bound (``UsageWithinCheck._some_bound``)."""
    if version != "0.1":
        usage = schema["$defs"]["UsageWithinCheck"]
        usage["anyOf"] = [{"required": [name]} for name in usage["properties"] if name != "type"]
        return
    items = schema["properties"]["checks"]["items"]
    mapping = items["discriminator"]["mapping"]
    dropped = {mapping.pop(kind) for kind in TRAJECTORY_TYPES}
    items["oneOf"] = [ref for ref in items["oneOf"] if ref["$ref"] not in dropped]
    for ref in dropped:
        schema["$defs"].pop(ref.rsplit("/", 1)[1], None)


def _close_pattern_maps(node: object) -> None:
    """pydantic states a slug-keyed map (``dict[Slug, …]``) as ``patternProperties`` alone, which lets
    any other key through; the model rejects one, so the schema does too."""
    if isinstance(node, dict):
        if "patternProperties" in node and "properties" not in node:
            node.setdefault("additionalProperties", False)
        for value in node.values():
            _close_pattern_maps(value)
    elif isinstance(node, list):
        for value in node:
            _close_pattern_maps(value)


def _prefixed_refs(node: object, prefix: str) -> object:
    """``node`` with every local reference ``#/$defs/X`` (``$ref``s and discriminator mappings)
    pointing at ``#/$defs/<prefix>X`` instead."""
    if isinstance(node, dict):
        return {key: _prefixed_refs(value, prefix) for key, value in node.items()}
    if isinstance(node, list):
        return [_prefixed_refs(value, prefix) for value in node]
    if isinstance(node, str) and node.startswith("#/$defs/"):
        return "#/$defs/" + prefix + node.removeprefix("#/$defs/")
    return node


def _every_version(entry: SchemaEntry) -> dict[str, Any]:
    """One schema for the documents of every version: each version's schema (its definitions
    renamed ``v<version>-…``) checks the documents whose ``version`` names it, so a 0.1 document
    is judged as 0.1 (its ``$schema`` must then be the 0.1 URI) and an unknown version is refused."""
    versions = [e for e in SCHEMAS.values() if e.model is entry.model and e.version is not None]
    defs: dict[str, Any] = {}
    branches = []
    for one in versions:
        prefix = f"v{one.version}-"
        schema = cast(dict[str, Any], _prefixed_refs(generate(one.name), prefix))
        defs |= {prefix + name: value for name, value in schema.pop("$defs", {}).items()}
        for key in ("$schema", "$id"):
            schema.pop(key)
        defs[f"v{one.version}"] = schema
        branches.append({"if": {"properties": {"version": {"const": one.version}}, "required": ["version"]},
                         "then": {"$ref": f"#/$defs/v{one.version}"}})
    return {"type": "object", "required": ["version"],
            "properties": {"version": {"enum": [one.version for one in versions],
                                       "description": "the document format's version: it selects the schema"}},
            "allOf": branches, "$defs": defs}


def generate(name: str) -> dict[str, Any]:
    """The schema ``name`` as the models define it today (the shipped file must equal it)."""
    entry = entry_for(name)
    if entry.version is None:
        schema = _every_version(entry)
    elif entry.model is ProjectConfig:
        schema = _config_schema(entry, entry.version)
    else:
        schema = copy.deepcopy(entry.model.model_json_schema(by_alias=True, mode="validation"))
        schema["properties"]["version"] = {"const": entry.version, "description": "the document format's version"}
        schema["properties"]["$schema"] = {"const": entry.uri, "description": "this schema's URI"}
        _scenario_rules(schema, entry.version)
    _close_pattern_maps(schema)
    return {"$schema": DRAFT, "$id": entry.uri, "title": entry.title, **schema}


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def shipped_text(name: str) -> str:
    """The schema file shipped in the package (what ``atlante schema NAME`` prints)."""
    entry = entry_for(name)
    return resources.files("pytest_atlante.suite").joinpath(SCHEMA_DIR, entry.file).read_text(encoding="utf-8")


def shipped_path(name: str) -> Path:
    """Where the shipped file is on disk, for an editor's schema mapping."""
    return Path(str(resources.files("pytest_atlante.suite").joinpath(SCHEMA_DIR, entry_for(name).file)))


def catalogue_lines() -> list[str]:
    """``atlante schema --list``: each schema's name, the URI documents name, and its file."""
    return [f"{entry.name}  {entry.uri}  {shipped_path(entry.name)}" for entry in SCHEMAS.values()]


def write_shipped(directory: Path) -> list[Path]:
    """Regenerate every shipped schema file into ``directory`` (``schema-files/`` beside this module)."""
    written = []
    for entry in SCHEMAS.values():
        path = directory / entry.file
        path.write_text(render(generate(entry.name)), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":  # pragma: no cover - the maintainer's regeneration step
    for written_path in write_shipped(Path(__file__).resolve().parent / SCHEMA_DIR):
        print(f"wrote {written_path}", file=sys.stderr)
