"""``atlante.jsonc``: the project configuration models, defaults, limits and version rules."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, Field, model_validator

from pytest_atlante.checks.base import MAX_TIMEOUT_MS
from pytest_atlante.diagnostics import Diagnostic, json_path
from pytest_atlante.hosts.names import HOST_NAMES, HostName, NeutralTool, min_config_version
from pytest_atlante.hosts.registry import host_for
from pytest_atlante.models import StrictModel
from pytest_atlante.projectroot import CONFIG_FILE
from pytest_atlante.sandbox.isolation import IsolationSetting, NetworkSetting
from pytest_atlante.suite.documents import LoadedDocument, load_document, validate_model
from pytest_atlante.suite.scenario import SLUG_PATTERN

CONFIG_SCHEMA_URIS = {
    "0.1": "https://atlante.sh/schema/v0.1/config.json",
    "0.2": "https://atlante.sh/schema/v0.2/config.json",
    "0.3": "https://atlante.sh/schema/v0.3/config.json",
    "0.4": "https://atlante.sh/schema/v0.4/config.json",
}
# The first configuration version that admits ``variants`` (suite/variants.py).
VARIANTS_SINCE = "0.4"
# The first configuration version that admits ``eval.credentials``.
CREDENTIALS_SINCE = "0.4"
MAX_TRIALS = 50
# Run folders kept under .atlante/eval/ (eval.keepRuns): enough for a day's work to be compared
# and viewed, few enough that the folder stays readable (report/runs.py).
DEFAULT_KEEP_RUNS = 30

# Host-neutral tool names of harness agents (hosts/names.py); `atlante build` maps them to each
# host's vocabulary.
NEUTRAL_TOOLS: tuple[str, ...] = get_args(NeutralTool)
# A neutral name, or one host's own tool name (``TodoWrite``, ``mcp__github__create_issue``,
# ``webfetch``): which host knows it is decided at build (docs/design.md §9).
def _known_tool(name: str) -> str:
    if name in NEUTRAL_TOOLS or any(host_for(host).knows_tool(name) for host in HOST_NAMES):
        return name
    raise ValueError(f"{name!r} is neither a host-neutral tool ({', '.join(NEUTRAL_TOOLS)}) nor one host's own")


ToolName = Annotated[str, Field(max_length=200), AfterValidator(_known_tool)]

class Budget(StrictModel):
    trials: Annotated[int, Field(strict=True, ge=1, le=MAX_TRIALS)] = 3
    timeoutMs: Annotated[int, Field(strict=True, ge=1, le=MAX_TIMEOUT_MS)] = 600_000
    maxSessions: Annotated[int, Field(strict=True, ge=0)] = 15
    maxTokens: Annotated[int, Field(strict=True, ge=1)] = 400_000


class EvalSection(StrictModel):
    host: HostName
    scenarios: Annotated[str, Field(min_length=1)] | None = None
    include: list[Annotated[str, Field(min_length=1)]] | None = None
    model: Annotated[str, Field(min_length=1)] | None = None
    budget: Budget = Budget()
    # OS-level isolation of host sessions and command checks (``isolation`` module); the
    # --atlante-isolation option wins.
    isolation: IsolationSetting = "auto"
    # "model-only": each trial's own network namespace, whose only way out is the metering proxy
    # (docs/design.md §11); --atlante-network wins.
    network: NetworkSetting = "shared"
    # How many run folders .atlante/eval/ keeps: at the end of each run the older ones go, never a
    # running one or one named as a baseline (report/runs.py).
    keepRuns: Annotated[int, Field(strict=True, ge=1)] = DEFAULT_KEEP_RUNS
    # "stand-in-only": a real-provider run any of whose trials' agent could read a real credential
    # (a provider mode the metering proxy cannot stand in for, no namespace isolation) is refused
    # before any session (run/credentials.py; docs/integrity.md, "Credentials").  Version 0.4.
    credentials: Literal["stand-in-only"] | None = None

    @model_validator(mode="after")
    def _scenarios_or_include(self) -> EvalSection:
        if self.scenarios is None and not self.include:
            raise ValueError("the eval section needs 'scenarios' (a glob) or 'include' (pack suites)")
        return self


Slug = Annotated[str, Field(pattern=SLUG_PATTERN)]
Text = Annotated[str, Field(min_length=1)]
# One value for every host, or one per host (``{"claude-code": "sonnet", "opencode": "anthropic/…"}``);
# a host the map leaves out gets none.
PerHost = Text | dict[HostName, Text]


class AgentSource(StrictModel):
    """An agent: its prompt file, plain Markdown or a native agent file with frontmatter.

    ``host`` names the native format the file is written in (found from the path otherwise:
    ``.claude/`` or a Claude Code plugin, ``.opencode/``); ``description``, ``model`` and
    ``tools`` may come from its frontmatter instead, and where both say something they must agree.
    """

    description: Text | None = None
    prompt: Text
    host: HostName | None = None
    model: PerHost | None = None
    tools: list[ToolName] | None = None


class SkillSource(StrictModel):
    description: Text | None = None
    dir: Text
    host: HostName | None = None


class CommandSource(StrictModel):
    """A slash command: its Markdown file (frontmatter optional), the prompt template it runs."""

    description: Text | None = None
    file: Text
    host: HostName | None = None
    model: PerHost | None = None


class Harness(StrictModel):
    agents: dict[Slug, AgentSource] = Field(default_factory=dict)
    skills: dict[Slug, SkillSource] = Field(default_factory=dict)
    commands: dict[Slug, CommandSource] = Field(default_factory=dict)
    # The memory file each host loads at the sandbox root (CLAUDE.md, AGENTS.md): one source for
    # both hosts, or one per host.
    instructions: PerHost | None = None


class AtlasSection(StrictModel):
    queryCorpus: Annotated[str, Field(min_length=1)]
    queryResults: Annotated[str, Field(min_length=1)]


class PackSuite(StrictModel):
    """``eval`` suite metadata in a pack's root preset (paths relative to the pack root)."""

    host: HostName | None = None
    scenarios: Annotated[str, Field(min_length=1)]
    fixtures: Annotated[str, Field(min_length=1)] | None = None
    report: Annotated[str, Field(min_length=1)] | None = None
    source: Annotated[str, Field(min_length=1)] | None = None


class Preset(StrictModel):
    harness: Harness | None = None
    eval: PackSuite | None = None


class VariantEval(StrictModel):
    """What a variant may change of the eval section: the host and the model, nothing else (the
    budget, scenarios, isolation and network are the run's, shared by every arm)."""

    host: HostName | None = None
    # ``null`` removes the control's model (the host's default then), as a merge patch does.
    model: Text | None = None


class Variant(StrictModel):
    """One named arm beside the control: a JSON Merge Patch (RFC 7396) of ``harness`` and of
    ``eval`` (host and model only), or a replicate of another arm (an A/A run, its noise floor)."""

    description: Text | None = None
    harness: dict[str, Any] | None = None
    eval: VariantEval | None = None
    replicateOf: Slug | None = None


class ProjectConfig(StrictModel):
    schema_uri: str | None = Field(default=None, alias="$schema")
    version: Literal["0.1", "0.2", "0.3", "0.4"]
    eval: EvalSection | None = None
    harness: Harness = Harness()
    packages: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    atlas: AtlasSection | None = None
    # Named arms beside the control (version 0.4; suite/variants.py resolves and checks them).
    variants: dict[Slug, Variant] | None = None


class PackConfig(StrictModel):
    """A pack's root preset ``atlante.jsonc``: harness, named presets and suite metadata."""

    schema_uri: str | None = Field(default=None, alias="$schema")
    version: Literal["0.1", "0.2", "0.3", "0.4"]
    name: str | None = None
    harness: Harness = Harness()
    presets: dict[Slug, Preset] = Field(default_factory=dict)
    eval: PackSuite | None = None


def version_diagnostics(doc: LoadedDocument, config: ProjectConfig | PackConfig) -> list[Diagnostic]:
    """The version rules: ``$schema`` must match ``version``; each host needs the version that admits it
    (``hosts/names.py``: v0.1 knew only OpenCode, v0.2 added Claude Code, v0.3 the hosts after it)."""
    found = []
    expected = CONFIG_SCHEMA_URIS[config.version]
    if config.schema_uri is not None and config.schema_uri != expected:
        found.append(
            Diagnostic(doc.display, json_path(["$schema"]), "eval-config-invalid",
                       f"$schema {config.schema_uri!r} does not match version {config.version!r}",
                       f"use {expected!r} or remove $schema")
        )
    hosts: list[tuple[str, str | None]] = []
    if isinstance(config, ProjectConfig) and config.eval is not None:
        hosts.append(("$.eval.host", config.eval.host))
    if isinstance(config, PackConfig) and config.eval is not None:
        hosts.append(("$.eval.host", config.eval.host))
    if isinstance(config, ProjectConfig) and config.variants is not None and config.version < VARIANTS_SINCE:
        found.append(
            Diagnostic(doc.display, "$.variants", "eval-config-invalid",
                       f"version {config.version} documents do not admit variants",
                       f"set \"version\": \"{VARIANTS_SINCE}\" to compare harness variants in one run")
        )
    if isinstance(config, ProjectConfig) and config.eval is not None and config.eval.credentials is not None \
            and config.version < CREDENTIALS_SINCE:
        found.append(
            Diagnostic(doc.display, "$.eval.credentials", "eval-config-invalid",
                       f"version {config.version} documents do not admit eval.credentials",
                       f"set \"version\": \"{CREDENTIALS_SINCE}\" to require stand-in credentials")
        )
    for location, host in hosts:
        needed = min_config_version(host) if host else "0.1"
        if config.version < needed:
            found.append(
                Diagnostic(doc.display, location, "eval-config-invalid",
                           f"version {config.version} documents do not admit host {host!r}",
                           f"set \"version\": \"{needed}\" to use host {host!r}")
            )
    return found


def load_project_config(root: Path) -> tuple[ProjectConfig | None, LoadedDocument | None, list[Diagnostic]]:
    path = root / CONFIG_FILE
    # Anything at the path that is not a regular file (a directory, a FIFO, a dangling link) is
    # reported by load_document as what it is; only a path with nothing there is "missing".
    if not os.path.lexists(path):
        return None, None, [
            Diagnostic(CONFIG_FILE, "", "eval-config-missing", f"no {CONFIG_FILE} in {root} or any directory above it",
                       "run `atlante init` to start a project here, or run from inside one (atlante.jsonc is "
                       "looked for in the working directory and each directory above it)")
        ]
    loaded = load_document(path, CONFIG_FILE, "eval-config-invalid")
    if isinstance(loaded, Diagnostic):
        return None, None, [loaded]
    config, problems = validate_model(
        ProjectConfig, loaded, "eval-config-invalid", "see the Configuration section of docs/reference.md"
    )
    if config is None:
        return None, loaded, [_arm_shared_key(problem) for problem in problems]
    return config, loaded, version_diagnostics(loaded, config)


def _arm_shared_key(problem: Diagnostic) -> Diagnostic:
    """An unknown key in a variant's ``eval`` is most likely a setting every arm shares: say so."""
    parts = problem.location.split(".")
    if len(parts) == 5 and parts[1] == "variants" and parts[3] == "eval" and problem.message.startswith("unknown key"):
        return Diagnostic(problem.file, problem.location, problem.code,
                          f"a variant cannot set eval.{parts[4]}: only the harness, the host and the model differ between arms",
                          "the budget, scenarios, isolation and network are the run's; set them in the eval section")
    return problem
