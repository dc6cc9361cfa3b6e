"""OpenCode (``opencode``): V1 and V2 dialects, credentials, fresh config, command, environment.

Facts this adapter relies on (``docs/host-facts.md`` §7–§10 and the eval reference):
- ``opencode --version`` prints ``1.18.33``; V1 is ``>=1.18.29 <2.0.0``, V2 ``>=2.0.0 <3.0.0``;
- project configuration is merged from several layers, so a trial writes one fresh file at the
  selected project path (:data:`PROJECT_CONFIG`) and the fixture may not provide any other;
- credentials: ``auth.json`` (V1), plus the credential tables of ``opencode.db`` (V2);
- every run npm-installs ``@opencode-ai/plugin`` into each config directory, the sandbox's
  ``.opencode/`` included, when the registry is reachable — pointing npm's registry at a closed
  loopback port stops it (measured: no ``node_modules`` appears, the run is unaffected);
- the model identity and subagent sessions are not in the stream: the session table of the
  ``opencode.db`` the trial's OpenCode writes in the trial HOME has them (what ``opencode export``
  prints), read without running the CLI again.
"""

from __future__ import annotations

import json
import re
import signal
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_atlante.diagnostics import Diagnostic
from pytest_atlante.hosts.base import (
    HOST_UNAUTHENTICATED,
    AgentSpec,
    HostInfo,
    NativeLayout,
    PartSpec,
    ProviderEndpoint,
    RenderedFields,
    ScriptedEndpoint,
    SessionOutcome,
    StreamMonitor,
    TrialWiring,
    carried_fields,
    copy_private_file,
    model_dropped,
    ordered_fields,
    part_frontmatter,
    prepare_failed,
    probe_version,
    slash_command,
    source_name,
    tool_dropped,
    unsupported_version,
)
from pytest_atlante.hosts.logins import copy_login
from pytest_atlante.hosts.names import HostName
from pytest_atlante.hosts.opencode.policy import OpenCodeDialect, opencode_permission
from pytest_atlante.hosts.opencode.store import (
    copy_credential_database,
    data_dir,
    has_auth_for,
    read_auth,
    read_sessions,
    stored_credential_rows,
)
from pytest_atlante.hosts.opencode.stream import OpenCodeStreamMonitor, opencode_usage
from pytest_atlante.hosts.streams import _dict, _event, stream_cost, sum_usage
from pytest_atlante.hosts.transcripts import (
    RESULT_CAP_CHARS,
    TEXT_CAP_CHARS,
    TranscriptBuilder,
    capped,
    neutral_input,
    result_text,
)
from pytest_atlante.records import Usage

SUPPORTED = ">=1.18.29 <2.0.0 (V1) or >=2.0.0 <3.0.0 (V2)"
# OpenCode agents restrict tools through permission keys; write and edit share the ``edit`` key.
PERMISSION_KEYS = {"read": "read", "write": "edit", "edit": "edit", "bash": "bash", "glob": "glob",
                   "grep": "grep", "skill": "skill", "task": "task"}
V1_MINIMUM = (1, 18, 29)
#: Permission keys of OpenCode's other tools (host-facts §8), denied when an agent lists its tools.
ALLOWLIST_KEYS = frozenset({"list", "lsp", "todowrite", "todoread", "question", "webfetch", "websearch"})
#: OpenCode's own tool names (host-facts §8: its tool list and permission keys).
OWN_TOOLS = frozenset({"read", "write", "edit", "bash", "glob", "grep", "list", "patch", "skill", "task",
                       "todowrite", "todoread", "webfetch", "websearch", "question", "lsp"})
# Fields of each kind of native file in OpenCode (host-facts §8: the agent schema; its skill and
# command docs; `name`, which names the agent when given, host-facts §11). Unknown agent fields
# would land in the agent's ``options``: never carried over.
AGENT_FIELDS = frozenset({"name", "description", "mode", "model", "variant", "temperature", "top_p", "prompt", "tools",
                          "disable", "hidden", "options", "color", "steps", "maxSteps", "permission"})
SKILL_FIELDS = frozenset({"name", "description", "license", "compatibility", "metadata"})
_HEX_COLOR = re.compile(r"^#[0-9a-fA-F]{6}$")
COMMAND_FIELDS = frozenset({"description", "agent", "model", "subtask"})

#: The selected project config path: the one file a trial's configuration lives in.
PROJECT_CONFIG = ".opencode/opencode.jsonc"
CONFIG_SCHEMA_URL = "https://opencode.ai/config.json"

#: The provider under which the trial's config exposes the scripted model.
SCRIPTED_PROVIDER_ID = "atlante-scripted"
#: The scripted provider's second model, for a harness agent's own ``model`` in a scripted run.
SCRIPTED_AGENT_MODEL_ID = "scripted-agent-model"

#: The variable the generated config's provider ``baseURL`` reads (OpenCode substitutes ``{env:…}``):
#: the trial's metering proxy, set in the session's environment by the runner (docs/design.md §10).
PROXY_BASE_URL_VARIABLE = "ATLANTE_MODEL_BASE_URL"
#: OpenCode's built-in providers the metering proxy stands in front of: the variable their bundled
#: SDK takes a base URL from when the config gives none (a user's gateway), and the endpoint it uses
#: without either (opencode 1.18.33's bundled @ai-sdk/anthropic and @ai-sdk/openai, read from the binary).
PROXIED_PROVIDERS: dict[str, tuple[str, str]] = {
    "anthropic": ("ANTHROPIC_BASE_URL", "https://api.anthropic.com/v1"),
    "openai": ("OPENAI_BASE_URL", "https://api.openai.com/v1"),
}

#: Every port-1..1023 service is off on a test machine; 9 is "discard", never an npm registry.
CLOSED_REGISTRY = "http://127.0.0.1:9/"

QUIET_ENV: dict[str, str] = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    # Without it OpenCode also loads `.claude/skills` from the project (host-facts §8).
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    # Its background `npm install @opencode-ai/plugin` reads npm's config from the environment;
    # a closed loopback registry makes it fail at once instead of filling `.opencode/node_modules`.
    "npm_config_registry": CLOSED_REGISTRY,
}

# Variables that would add configuration layers or permissions behind the generated config's back.
_CONFIG_ENV = ("OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR", "OPENCODE_CONFIG_CONTENT", "OPENCODE_PERMISSION")

# Every project-level path OpenCode merges as a config layer (host-facts §8 "Config files read").
_PROJECT_CONFIG_PATHS = ("opencode.json", "opencode.jsonc", ".opencode/opencode.json", ".opencode/opencode.jsonc")
FORBIDDEN_FIXTURE_FILES: dict[str, str] = {
    rel: f"OpenCode would merge it as an additional layer over the generated {PROJECT_CONFIG}"
    for rel in _PROJECT_CONFIG_PATHS
    if rel != PROJECT_CONFIG
}

_LOGIN_HINT = (
    "log in with `opencode auth login` (it stores the key in ~/.local/share/opencode/auth.json); "
    "shell API-key variables alone are not used by eval"
)


def dialect_for(version: tuple[int, int, int]) -> OpenCodeDialect | None:
    if version[0] == 1 and version >= V1_MINIMUM:
        return "opencode-v1"
    if version[0] == 2:
        return "opencode-v2"
    return None


def _dialect(info: HostInfo) -> OpenCodeDialect:
    return "opencode-v2" if info.dialect == "opencode-v2" else "opencode-v1"


def scripted_provider_config(endpoint: ScriptedEndpoint) -> dict[str, Any]:
    """``provider``, ``model`` and ``small_model`` keys of a V1 ``opencode.json`` for the scripted model.

    Uses the ``@ai-sdk/openai-compatible`` provider bundled in the binary: a versioned spec would
    make OpenCode npm-install it at run time, which hangs offline (host-facts §8). The cost table (USD
    per million tokens, Sonnet-like) makes the reported cost non-zero, so cost budgets are testable.
    """
    model_ref = f"{SCRIPTED_PROVIDER_ID}/{endpoint.model_id}"

    def model(name: str) -> dict[str, Any]:
        return {
            "name": name,
            "tool_call": True,
            "cost": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75},
            "limit": {"context": 200000, "output": 8192},
        }

    return {
        "model": model_ref,
        "small_model": model_ref,
        "provider": {
            SCRIPTED_PROVIDER_ID: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Atlante scripted model",
                "options": {"baseURL": endpoint.openai_base_url, "apiKey": "atlante-scripted"},
                # OpenCode refuses a model its provider does not list, so a harness agent with
                # a model of its own names the second one (docs/scripted-model.md "Sub-agents").
                "models": {
                    endpoint.model_id: model("Atlante scripted model"),
                    SCRIPTED_AGENT_MODEL_ID: model("Atlante scripted agent model"),
                },
            }
        },
    }


def provider_upstream(parent_env: Mapping[str, str], model: str | None) -> tuple[str, str] | None:
    """``(provider id, URL)`` where a real-provider session of ``model`` goes without the metering
    proxy: the user's base URL variable for that provider, normalised as the SDK does (the bare API
    host gains ``/v1``), else the SDK's default.  None when the proxy cannot stand in between: no
    model to name the provider (OpenCode then picks one itself), a provider other than
    :data:`PROXIED_PROVIDERS`, or a base URL that is no http(s) URL (the host fails on it as it would
    without the proxy)."""
    provider = model.split("/", 1)[0] if model and "/" in model else None
    if provider not in PROXIED_PROVIDERS:
        return None
    variable, default = PROXIED_PROVIDERS[provider]
    url = (parent_env.get(variable) or "").strip().rstrip("/") or default
    if provider == "anthropic" and url == "https://api.anthropic.com":  # @ai-sdk/anthropic's own rule
        url = default
    if not url.startswith(("http://", "https://")):
        return None
    return provider, url


def proxied_provider_config(provider: str) -> dict[str, Any]:
    """The ``provider`` key pointing ``provider``'s base URL at the trial's metering proxy (whose
    address the session's environment carries); everything else of the provider stays built in."""
    return {"provider": {provider: {"options": {"baseURL": "{env:" + PROXY_BASE_URL_VARIABLE + "}"}}}}


def render_config(dialect: OpenCodeDialect, *, model: str | None, scripted: ScriptedEndpoint | None,
                  proxied: str | None = None) -> dict[str, Any]:
    """The trial's fresh configuration: containment policy, model, and nothing from the project.

    No providers (except the scripted one, or the ``proxied`` provider's base URL pointed at the
    metering proxy), MCP servers, plugins, instructions or agents: the native agent files under
    ``.opencode/agents`` are loaded by OpenCode on its own.

    V1: ``continue_loop_on_deny`` keeps the agent loop running after a denied call, as a deny rule
    does anyway (host-facts §8) — belt and braces for the rules that could reject.
    V2: designed from the reference (``permissions``/``shell``/``subagent``) and from 1.18.33's
    V2-compatibility layer, which names ``providers`` (not ``provider``) as a V2 key and knows no
    ``continue_loop_on_deny`` there, so neither is carried over unchanged.
    """
    config: dict[str, Any] = {"$schema": CONFIG_SCHEMA_URL, "autoupdate": False, "share": "disabled"}
    if scripted is not None:
        config.update(scripted_provider_config(scripted))
    elif model:
        config["model"] = model
        if proxied is not None:
            config.update(proxied_provider_config(proxied))
    config.update(opencode_permission(dialect))
    if dialect == "opencode-v1":
        config["experimental"] = {"continue_loop_on_deny": True}
    elif "provider" in config:
        config["providers"] = config.pop("provider")
    return config


def _contain(fields: dict[str, Any], where: str, *, from_file: bool) -> list[str]:
    """Keep an agent's permissions inside the containment policy, in place; a line per change.

    OpenCode lets an agent's ``permission`` override the configuration's (measured: an agent with
    ``bash: allow`` ran ``rm -rf`` and was offered ``webfetch``, host-facts §11), so every agent
    file gets the policy's denials back: keys the policy denies stay denied, and an allowed shell
    gets the policy's denied commands appended (the last matching rule wins, host-facts §8).
    """
    policy = opencode_permission("opencode-v1")["permission"]
    denied = {key for key, rule in policy.items() if rule == "deny"}
    shell_rules: dict[str, str] = policy["bash"]
    changed: list[str] = []
    permission = fields.get("permission")
    if isinstance(permission, str):
        permission = {key: permission for key in (*PERMISSION_KEYS.values(), *ALLOWLIST_KEYS)}
    if not isinstance(permission, dict):
        permission = {}
    for key in sorted(denied):
        if key in permission and permission[key] != "deny":
            changed.append(f"{where}: permission {key!r} denied for opencode (the containment policy denies it)")
        if key in permission:
            permission[key] = "deny"
    bash = permission.get("bash", "allow")
    if bash != "deny":
        rules = dict(bash) if isinstance(bash, dict) else {"*": str(bash)}
        rules = {k: v for k, v in rules.items() if k not in shell_rules or shell_rules[k] != "deny"}
        contained = rules | {k: v for k, v in shell_rules.items() if v == "deny"}
        if "bash" in permission:
            if from_file and bash != contained:
                changed.append(f"{where}: permission 'bash' gets the containment policy's denied commands for opencode")
            permission["bash"] = contained
    tools = fields.get("tools")
    if isinstance(tools, dict):
        for key in sorted(denied & {str(k) for k in tools}):
            if tools[key] is not False:
                tools[key] = False
                changed.append(f"{where}: tool {key!r} turned off for opencode (the containment policy denies it)")
    if permission:
        fields["permission"] = permission
    return changed


class OpenCodeHost:
    name: HostName = "opencode"
    stream_call_ids = True
    selects_agent = True
    shell_tools = None
    owned_dir = ".opencode"
    command_folder_separator = "/"  # a command in a folder of commands/: folders joined by it (host-facts §11, §13)
    skills_run_as_commands = True  # a /name prompt may name a skill (host-facts §13)
    # .claude/skills only without OPENCODE_DISABLE_CLAUDE_CODE, which the trial sets (host-facts §8).
    skill_roots = (".opencode/skills", ".opencode/skill", ".agents/skills")
    #: host-facts §8, §11: singular and plural folder names both load.
    native_layouts = (
        NativeLayout(".opencode", {"agent": ("agent", "agents"), "skill": ("skill", "skills"),
                                   "command": ("command", "commands")}, instructions="AGENTS.md",
                     # JavaScript/TypeScript plugins it runs as hooks (host-facts §8, load order 5).
                     code_plugins=(".opencode/plugin", ".opencode/plugins")),
    )
    interrupt_signal = int(signal.SIGINT)  # host-facts §10: it dies at once either way; the reaper cleans up
    credential_env: tuple[str, ...] = ()  # eval uses OpenCode's stored authentication only
    stand_in_env: tuple[str, ...] = ()
    # auth.json: {provider: {"type": "api", "key"} | {"type": "oauth", "access", "refresh", ...}} (host-facts §8)
    refreshed_fields = (("*", "key"), ("*", "access"), ("*", "refresh"))
    login_fields = refreshed_fields
    forbidden_fixture_files = FORBIDDEN_FIXTURE_FILES

    def config_diagnostics(self, info: HostInfo, model: str | None) -> list[Diagnostic]:
        if _dialect(info) == "opencode-v2" and model is None:
            return [Diagnostic("atlante.jsonc", "$.eval.model", "eval-config-invalid",
                               f"OpenCode {info.version} (V2) has no default model in an isolated sandbox",
                               "set eval.model to a provider/model your stored OpenCode credentials cover")]
        return []

    instructions_file = "AGENTS.md"

    def knows_tool(self, name: str) -> bool:
        return name in OWN_TOOLS

    def model_fits(self, model: str) -> bool:
        return "/" in model  # OpenCode selects `provider/model`; a bare alias is Claude Code's

    def frontmatter_tools(self, fields: Mapping[str, object]) -> tuple[tuple[str, ...] | None, list[str]]:
        """Allowed tools from ``permission`` (key → action, or patterns) and the older ``tools`` map."""
        denied: set[str] = set()
        notes: list[str] = []
        permission = fields.get("permission")
        if isinstance(permission, str):
            denied = set(PERMISSION_KEYS.values()) if permission == "deny" else set()
        elif isinstance(permission, dict):
            for key, rule in permission.items():
                if rule == "deny":
                    denied.add(str(key))
                elif isinstance(rule, dict):
                    notes.append(f"its {key!r} permission patterns are not translated (the tool is kept whole)")
        tools = fields.get("tools")
        if isinstance(tools, dict):
            denied |= {str(k) for k, v in tools.items() if v is False}
        if permission is None and not isinstance(tools, dict):
            return None, notes
        return tuple(t for t, key in PERMISSION_KEYS.items() if key not in denied), notes

    def agent_frontmatter(self, name: str, agent: AgentSpec) -> RenderedFields:
        fields, dropped = carried_fields(self.name, AGENT_FIELDS, agent.native,
                                         frozenset({"name", "description", "model", "tools"}))
        own = agent.native is not None and agent.native.host == self.name
        if agent.description is not None:
            fields.setdefault("description", agent.description)
        if not own:
            fields.setdefault("mode", "all")  # selectable with --agent and as a subagent
            # Claude Code's colours are names (`red`); OpenCode's schema takes `#rrggbb`.
            if "color" in fields and not _HEX_COLOR.match(str(fields["color"])):
                dropped.append(f"{source_name(agent.native, name)}: field 'color' dropped for {self.name} "
                               f"({fields.pop('color')!r} is not a #rrggbb colour)")
        if agent.model is not None:
            fields.setdefault("model", agent.model)
        elif agent.dropped_model is not None and not own:
            dropped.append(model_dropped(self.name, agent.native, name, agent.dropped_model))
        if agent.tools is not None and not (own and ("permission" in fields or "tools" in fields)):
            allowed = {PERMISSION_KEYS.get(t, t) for t in agent.tools if t in PERMISSION_KEYS or self.knows_tool(t)}
            dropped += [tool_dropped(self.name, agent.native, name, t)
                        for t in agent.tools if t not in PERMISSION_KEYS and not self.knows_tool(t)]
            # A tool list is an allowlist: every tool OpenCode has that it leaves out is denied
            # (its todowrite, list, lsp, … too), as Claude Code offers only the listed ones.
            keys = sorted(set(PERMISSION_KEYS.values()) | ALLOWLIST_KEYS | allowed)
            fields["permission"] = {key: "allow" if key in allowed else "deny" for key in keys}
        dropped += _contain(fields, source_name(agent.native, name), from_file=own)
        return RenderedFields(ordered_fields(fields, ("description", "mode", "model")), tuple(dropped))

    def skill_frontmatter(self, name: str, skill: PartSpec) -> RenderedFields:
        return part_frontmatter(self.name, SKILL_FIELDS, name, skill, command=False)

    def command_frontmatter(self, name: str, command: PartSpec) -> RenderedFields:
        return part_frontmatter(self.name, COMMAND_FIELDS, name, command, command=True)

    def probe(self, env: Mapping[str, str]) -> HostInfo:
        executable, version = probe_version(
            "opencode", env, install_hint="install OpenCode (`npm install -g opencode-ai`) and put `opencode` on PATH"
        )
        dialect = dialect_for(version)
        if dialect is None:
            raise unsupported_version(executable, version, SUPPORTED, "install a supported OpenCode release")
        return HostInfo(self.name, ".".join(map(str, version)), dialect, executable)

    def credential_diagnostics(
        self, info: HostInfo, parent_env: Mapping[str, str], user_home: Path, model: str | None
    ) -> list[Diagnostic]:
        store = data_dir(user_home, parent_env)
        auth = read_auth(store / "auth.json") or {}
        if has_auth_for(auth, model):
            return []
        if _dialect(info) == "opencode-v2" and stored_credential_rows(store / "opencode.db") > 0:
            return []
        wanted = f"for provider {model.split('/', 1)[0]!r} " if model else ""
        return [
            Diagnostic(
                "",
                "",
                HOST_UNAUTHENTICATED,
                f"OpenCode {info.version} has no stored credentials {wanted}in {store / 'auth.json'}"
                + (" or in the credential tables of opencode.db" if _dialect(info) == "opencode-v2" else ""),
                _LOGIN_HINT,
            )
        ]

    def prepare(self, wiring: TrialWiring) -> None:
        """Write the fresh config (overwriting a fixture file there) and copy the stored login.  The
        proxy's address reaches this host by its environment (``environment``), never a file."""
        info, sandbox_root, home, scripted = wiring.info, wiring.sandbox_root, wiring.home, wiring.scripted
        parent_env, user_home, model = wiring.parent_env, wiring.user_home, wiring.model
        config_path = sandbox_root / PROJECT_CONFIG
        config_path.parent.mkdir(parents=True, exist_ok=True)
        upstream = provider_upstream(parent_env, model) if scripted is None else None
        config = render_config(_dialect(info), model=model, scripted=scripted,
                               proxied=upstream[0] if upstream is not None else None)
        config_path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        home.mkdir(parents=True, exist_ok=True)
        if scripted is not None:
            return  # the scripted provider needs no login; the user's never reaches the trial
        source = data_dir(user_home, parent_env)
        target = data_dir(home)  # the trial's environment carries no XDG_DATA_HOME
        # Through the proxy, only the model's provider's login, holding stand-ins (the proxy serves
        # that provider alone; the user's other providers' keys have no business in the trial).
        if upstream is not None and wiring.stand_in is not None:
            provider = upstream[0]
            copy_login(source / "auth.json", target / "auth.json", wiring.stand_in, keep=(provider,),
                       fields=[(provider, name) for name in ("key", "access", "refresh")])
        else:
            copy_private_file(source / "auth.json", target / "auth.json")
        if _dialect(info) == "opencode-v2" and (source / "opencode.db").is_file():
            try:
                copy_credential_database(source / "opencode.db", target / "opencode.db")
            except (sqlite3.Error, OSError) as exc:
                raise prepare_failed(
                    f"could not copy OpenCode's stored credentials from {source / 'opencode.db'}: {exc}",
                    "close other OpenCode processes and check that the database is readable",
                ) from None

    def command(self, info: HostInfo, *, prompt: str, agent: str | None, model: str | None) -> list[str]:
        argv = [info.executable, "run"]
        if _dialect(info) == "opencode-v2":
            argv.append("--standalone")  # V2: no shared server; runs from the sandbox cwd
        argv += ["--format", "json"]
        if agent:
            argv += ["--agent", agent]
        if model:
            argv += ["--model", model]
        command = slash_command(prompt)
        if command is not None:
            # `opencode run "/name"` sends the text as it is; only --command expands a command
            # (docs/host-facts.md §13).  Its arguments go one word each: OpenCode quotes a message
            # argument that holds a space ("a b" reaches $ARGUMENTS with its quotes).
            return [*argv, "--command", command.name, *command.arguments.split()]
        argv.append(prompt)
        return argv

    def environment(
        self,
        info: HostInfo,
        *,
        base_env: Mapping[str, str],
        parent_env: Mapping[str, str],
        home: Path,
        scripted: ScriptedEndpoint | None,
    ) -> dict[str, str]:
        env = {name: value for name, value in base_env.items() if name not in _CONFIG_ENV}
        env["HOME"] = str(home)
        env.update(QUIET_ENV)
        return env

    def credential_files(self, home: Path, env: Mapping[str, str]) -> list[Path]:
        store = data_dir(home, env)
        return [store / "auth.json", store / "opencode.db"]

    def provider_endpoint(self, parent_env: Mapping[str, str], model: str | None) -> ProviderEndpoint | None:
        # The model's provider's baseURL in the generated config reads the proxy's address from
        # PROXY_BASE_URL_VARIABLE (``prepare`` writes it for the same provider_upstream).
        upstream = provider_upstream(parent_env, model)
        return ProviderEndpoint(PROXY_BASE_URL_VARIABLE, upstream[1]) if upstream is not None else None

    def new_monitor(self) -> StreamMonitor:
        return OpenCodeStreamMonitor()

    def stream_path_forms(self, path: str) -> tuple[str, ...]:
        # OpenCode titles a tool call with the path relative to its worktree, which is "/" when the
        # sandbox is no git checkout: "tmp/atlante-eval-.../sandbox/notes.txt" (seen under bwrap).
        return (path.strip("/"),) if path.strip("/") else ()

    def transcript_events(self, lines: Iterable[tuple[int, str]], builder: TranscriptBuilder) -> None:
        transcript_events(lines, builder)

    def finalize(self, info: HostInfo, monitor: StreamMonitor, *, env: Mapping[str, str], cwd: Path,
                 wrap: Callable[[list[str]], list[str]] | None = None) -> SessionOutcome:
        """The stream's outcome plus what the stream lacks: the model identity, and the cost and
        tokens of subagent sessions (which are not streamed).  Both are read from the sessions the
        trial's OpenCode stored in the trial HOME (what ``opencode export`` prints, host-facts §8),
        so no second CLI runs and ``wrap`` is not needed."""
        outcome = monitor.outcome()
        if not isinstance(monitor, OpenCodeStreamMonitor) or monitor.session_id is None or "HOME" not in env:
            return outcome
        stored = read_sessions(Path(env["HOME"]), env, [monitor.session_id, *monitor.subagent_session_ids])
        main = stored.get(monitor.session_id)
        if main is not None:
            outcome.model_identity = main.model
        found = [stored[child] for child in monitor.subagent_session_ids if child in stored]
        if found:
            outcome.cost_usd = (outcome.cost_usd or 0.0) + sum(child.cost for child in found)
            parts = [outcome.usage] if outcome.usage is not None else []
            parts += [child.usage for child in found if child.usage is not None]
            outcome.usage = sum_usage(parts) if parts else None
        return outcome


# --------------------------------------------------------------------------- transcript


def transcript_events(lines: Iterable[tuple[int, str]], b: TranscriptBuilder) -> None:
    """``opencode run --format json`` lines → host-neutral transcript events (its tool names
    already are the neutral ones)."""
    total: Usage | None = None
    cost_total: float | None = None
    for t, line in lines:
        event = _event(line)
        if event is None:
            continue
        kind = event.get("type")
        part = _dict(event.get("part"))
        if kind == "step_start":
            b.turn += 1
        elif kind == "text" and part.get("text"):
            b.emit(t, "text", agent=None, **capped(str(part["text"]), TEXT_CAP_CHARS))
        elif kind == "tool_use":
            state = _dict(part.get("state"))
            tool = str(part.get("tool", ""))
            b.emit(t, "tool_call", id=part.get("callID"), tool=tool, hostTool=tool, input=neutral_input(state.get("input")), agent=None)
            failed = state.get("status") == "error"
            output = state.get("error") if failed else state.get("output")
            b.emit(t, "tool_result", id=part.get("callID"), tool=tool, isError=failed, agent=None,
                   **capped(result_text(output), RESULT_CAP_CHARS))
            child = _dict(state.get("metadata")).get("sessionId")
            if tool == "task":
                arguments = _dict(state.get("input"))
                b.emit(t, "subagent", id=child if isinstance(child, str) else part.get("callID"),
                       agent=arguments.get("subagent_type"), description=arguments.get("description"), status=state.get("status"))
        elif kind == "step_finish":
            tokens = part.get("tokens")
            step_cost = stream_cost(part.get("cost"))  # the stream is untrusted (docs/design.md §10)
            if isinstance(tokens, dict):
                step = opencode_usage(tokens)
                total = step if total is None else sum_usage([total, step])
                b.usage(t, step, step_cost, exact=True)
            if step_cost is not None:
                cost_total = (cost_total or 0.0) + step_cost
        elif kind == "error":
            error = _dict(event.get("error"))
            message = _dict(error.get("data")).get("message")
            b.emit(t, "error", message=": ".join(str(p) for p in (error.get("name"), message) if p) or "error")
    last_t = b.events[-1]["t"] if b.events else 0
    # OpenCode has no summary event (host-facts §8): the totals are the sum of the steps.
    b.emit(last_t, "result", usage=total.model_dump() if total else None, costUsd=cost_total, turns=b.turn,
           stopReason=None, isError=any(e["type"] == "error" for e in b.events))
