"""Claude Code (``claude``): version, credentials, fresh settings, command line, environment.

Facts this adapter relies on (``docs/host-facts.md`` §1–§6):
- ``claude --version`` prints ``2.1.197 (Claude Code)``;
- project ``permissions.allow`` rules are ignored unless ``<HOME>/.claude.json`` trusts the exact
  realpath of the cwd; ``deny`` rules apply regardless;
- the stored login is ``~/.claude/.credentials.json`` (or ``$CLAUDE_CONFIG_DIR/.credentials.json``);
- without the non-essential-traffic switches it phones home (telemetry DNS lookups);
- SIGINT makes it abort gracefully, kill its tool tree and still print a ``result`` event.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_atlante.diagnostics import Diagnostic
from pytest_atlante.fsutil import UnreadableFile, read_capped
from pytest_atlante.hosts.base import (
    CREDENTIALS_LIMIT,
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
    listed_tools,
    model_dropped,
    ordered_fields,
    part_frontmatter,
    probe_version,
    tool_dropped,
    unsupported_version,
)
from pytest_atlante.hosts.claude_code.policy import claude_settings
from pytest_atlante.hosts.claude_code.stream import (
    SYNTHETIC_MODEL,
    ClaudeStreamMonitor,
    claude_model_usage,
    claude_usage,
    unknown_command,
)
from pytest_atlante.hosts.logins import copy_login
from pytest_atlante.hosts.names import HostName
from pytest_atlante.hosts.streams import _dict, _event, stream_cost
from pytest_atlante.hosts.transcripts import (
    RESULT_CAP_CHARS,
    TEXT_CAP_CHARS,
    TranscriptBuilder,
    capped,
    neutral_input,
    result_text,
)

SUPPORTED = ">=2.0.0 <3.0.0"
# Harness tool names → Claude Code's tool names in an agent's ``tools`` list.
TOOL_NAMES = {"read": "Read", "write": "Write", "edit": "Edit", "bash": "Bash", "glob": "Glob",
              "grep": "Grep", "skill": "Skill", "task": "Task"}
#: Claude Code's own tool names (host-facts §3: 2.1.197's request ``tools`` and init event, plus
#: the names its documentation gives agents); ``mcp__<server>__<tool>`` names are its too.
OWN_TOOLS = frozenset({
    "Agent", "Bash", "BashOutput", "CronCreate", "CronDelete", "CronList", "Edit", "EnterWorktree",
    "ExitPlanMode", "ExitWorktree", "Glob", "Grep", "KillBash", "KillShell", "LS", "MultiEdit",
    "NotebookEdit", "NotebookRead", "Read", "ReportFindings", "ScheduleWakeup", "SendMessage", "Skill",
    "SlashCommand", "Task", "TaskCreate", "TaskGet", "TaskList", "TaskOutput", "TaskStop", "TaskUpdate",
    "TodoWrite", "WebFetch", "WebSearch", "Workflow", "Write",
})
_NEUTRAL_OF = {"Read": "read", "Write": "write", "Edit": "edit", "MultiEdit": "edit", "Bash": "bash",
               "Glob": "glob", "Grep": "grep", "Skill": "skill", "Task": "task", "Agent": "task"}
# Fields each kind of native file has in Claude Code (its sub-agent, skill and command docs; the
# Agent Skills fields ``license``, ``compatibility``, ``metadata``, ``allowed-tools`` included).
AGENT_FIELDS = frozenset({"name", "description", "tools", "disallowedTools", "model", "permissionMode",
                          "color", "skills", "maxTurns", "memory"})
SKILL_FIELDS = frozenset({"name", "description", "license", "compatibility", "metadata", "allowed-tools",
                          "argument-hint", "disable-model-invocation", "user-invocable", "model", "context",
                          "agent", "version"})
COMMAND_FIELDS = frozenset({"description", "allowed-tools", "argument-hint", "model", "disable-model-invocation"})

#: Variables that carry Claude Code's own credentials: they reach the host session (never the checks).
API_CREDENTIAL_ENV: tuple[str, ...] = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "ANTHROPIC_CUSTOM_HEADERS",
)

#: Cloud-provider modes: the switch variable, and what that provider's SDK reads.  A provider's
#: variables reach the host session only when its switch is on (a user's AWS keys have no
#: business in a trial that talks to the Anthropic API).
CLOUD_MODES: dict[str, tuple[str, ...]] = {
    # Amazon Bedrock
    "CLAUDE_CODE_USE_BEDROCK": (
        "CLAUDE_CODE_SKIP_BEDROCK_AUTH",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_BEARER_TOKEN_BEDROCK",
        "AWS_CONFIG_FILE",
        "AWS_SHARED_CREDENTIALS_FILE",
    ),
    # Google Vertex AI
    "CLAUDE_CODE_USE_VERTEX": (
        "CLAUDE_CODE_SKIP_VERTEX_AUTH",
        "ANTHROPIC_VERTEX_PROJECT_ID",
        "CLOUD_ML_REGION",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "GOOGLE_CLOUD_PROJECT",
        "GCLOUD_PROJECT",
    ),
    # Microsoft Foundry
    "CLAUDE_CODE_USE_FOUNDRY": (
        "ANTHROPIC_FOUNDRY_API_KEY",
        "ANTHROPIC_FOUNDRY_RESOURCE",
        "AZURE_CLIENT_ID",
        "AZURE_CLIENT_SECRET",
        "AZURE_TENANT_ID",
    ),
}

#: Every variable that may carry credentials or select a cloud mode into the host session.
CREDENTIAL_ENV: tuple[str, ...] = API_CREDENTIAL_ENV + tuple(
    name for switch, names in CLOUD_MODES.items() for name in (switch, *names)
)


def credential_variables(parent_env: Mapping[str, str]) -> dict[str, str]:
    """The parent's credential variables for the host: the API ones, plus each selected cloud mode's."""
    names = list(API_CREDENTIAL_ENV)
    for switch, mode_names in CLOUD_MODES.items():
        if _truthy(parent_env.get(switch)):
            names += [switch, *mode_names]
    return {name: parent_env[name] for name in names if parent_env.get(name)}


#: Keep the session off the network except for model traffic (host-facts §3 "Network check").
QUIET_ENV: dict[str, str] = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
}

# Fixture files Claude Code would load or merge beside the generated settings (eval reference,
# "Path containment").
#: Where ``atlante build`` writes a Claude Code plugin's parts, one folder per plugin, loaded with
#: ``--plugin-dir`` so they keep their ``plugin:name`` names.
PLUGIN_DIR = ".claude/plugins"

FORBIDDEN_FIXTURE_FILES: dict[str, str] = {
    ".mcp.json": "Claude Code would start its MCP servers in the trial",
    PLUGIN_DIR: "Claude Code would load it as a plugin beside the harness's (atlante build writes that folder)",
    ".claude/settings.json": "Claude Code would merge it with the generated containment settings",
    ".claude/settings.local.json": "Claude Code would merge it with the generated containment settings",
}

_LOGIN_HINT = (
    "log in with `claude auth login`, or create a long-lived token with `claude setup-token` and "
    "export CLAUDE_CODE_OAUTH_TOKEN, or export ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN, or select a "
    "cloud provider (CLAUDE_CODE_USE_BEDROCK=1 / CLAUDE_CODE_USE_VERTEX=1 / CLAUDE_CODE_USE_FOUNDRY=1 "
    "with that provider's credentials)"
)


#: The Anthropic API, where Claude Code sends model requests unless ANTHROPIC_BASE_URL says otherwise.
ANTHROPIC_API_URL = "https://api.anthropic.com"


def scripted_env(endpoint: ScriptedEndpoint) -> dict[str, str]:
    """Environment that points Claude Code at the scripted model and keeps it off the network.

    ``CLAUDE_CODE_MAX_RETRIES=1``: against a custom base URL Claude retries even a 401 ten times
    with backoff (host-facts §3); a scripted error turn should fail fast.
    """
    return {
        "ANTHROPIC_BASE_URL": endpoint.anthropic_base_url,
        "ANTHROPIC_API_KEY": "atlante-scripted",
        **QUIET_ENV,
        "CLAUDE_CODE_MAX_RETRIES": "1",
    }


def _truthy(value: str | None) -> bool:
    return value is not None and value.strip().lower() in {"1", "true", "yes", "on"}


def _credentials_file(parent_env: Mapping[str, str], user_home: Path) -> Path:
    config_dir = parent_env.get("CLAUDE_CONFIG_DIR")
    base = Path(config_dir) if config_dir else user_home / ".claude"
    return base / ".credentials.json"


def _usable_credentials_file(path: Path) -> bool:
    try:
        document = json.loads(read_capped(path, CREDENTIALS_LIMIT))
    except (UnreadableFile, ValueError):  # UnicodeDecodeError is a ValueError
        return False
    return isinstance(document, dict) and bool(document)


def _cloud_mode_ready(env: Mapping[str, str], user_home: Path) -> bool:
    def has(*names: str) -> bool:
        return any(env.get(name) for name in names)

    if _truthy(env.get("CLAUDE_CODE_USE_BEDROCK")):
        return (
            has("AWS_BEARER_TOKEN_BEDROCK", "AWS_PROFILE")
            or (has("AWS_ACCESS_KEY_ID") and has("AWS_SECRET_ACCESS_KEY"))
            or (user_home / ".aws" / "credentials").is_file()
            or _truthy(env.get("CLAUDE_CODE_SKIP_BEDROCK_AUTH"))
        )
    if _truthy(env.get("CLAUDE_CODE_USE_VERTEX")):
        return (
            has("GOOGLE_APPLICATION_CREDENTIALS", "ANTHROPIC_VERTEX_PROJECT_ID")
            or _gcloud_adc(user_home).is_file()
            or _truthy(env.get("CLAUDE_CODE_SKIP_VERTEX_AUTH"))
        )
    if _truthy(env.get("CLAUDE_CODE_USE_FOUNDRY")):
        return has("ANTHROPIC_FOUNDRY_API_KEY", "ANTHROPIC_FOUNDRY_RESOURCE", "AZURE_CLIENT_ID")
    return False


def _gcloud_adc(user_home: Path) -> Path:
    return user_home / ".config" / "gcloud" / "application_default_credentials.json"


class ClaudeCodeHost:
    name: HostName = "claude-code"
    stream_call_ids = True
    selects_agent = True
    shell_tools = None
    owned_dir = ".claude"
    plugin_dir = PLUGIN_DIR
    command_folder_separator = ":"  # a command in a folder of commands/: folders joined by it (host-facts §11, §13)
    skills_run_as_commands = True  # a /name prompt may name a skill (host-facts §13)
    skill_roots = (".claude/skills",)  # not .agents/skills: the binary names no such folder
    #: host-facts §5, §11: the project's .claude folder, and a plugin (its manifest beside the folders).
    native_layouts = (
        NativeLayout(".claude", {"agent": ("agents",), "skill": ("skills",), "command": ("commands",)},
                     instructions="CLAUDE.md", settings=(".claude/settings.json", ".claude/settings.local.json")),
        NativeLayout("", {"agent": ("agents",), "skill": ("skills",), "command": ("commands",)},
                     manifest=".claude-plugin/plugin.json"),
    )
    interrupt_signal = int(signal.SIGINT)  # graceful: kills the tool tree, prints `result` (host-facts §6)
    credential_env = CREDENTIAL_ENV
    # The OAuth token too: Claude Code sends it as the bearer of its model requests, to the base URL.
    stand_in_env = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
    # .credentials.json: {"claudeAiOauth": {"accessToken", "refreshToken", ...}} (host-facts §4)
    refreshed_fields = (("claudeAiOauth", "accessToken"), ("claudeAiOauth", "refreshToken"))
    login_fields = refreshed_fields
    forbidden_fixture_files = FORBIDDEN_FIXTURE_FILES

    def config_diagnostics(self, info: HostInfo, model: str | None) -> list[Diagnostic]:
        return []

    instructions_file = "CLAUDE.md"

    def knows_tool(self, name: str) -> bool:
        return name in OWN_TOOLS or name.startswith("mcp__")

    def model_fits(self, model: str) -> bool:
        return "/" not in model  # an alias (`sonnet`) or a model id; `provider/model` is OpenCode's

    def frontmatter_tools(self, fields: Mapping[str, object]) -> tuple[tuple[str, ...] | None, list[str]]:
        return listed_tools(fields, _NEUTRAL_OF)

    def agent_frontmatter(self, name: str, agent: AgentSpec) -> RenderedFields:
        fields, dropped = carried_fields(self.name, AGENT_FIELDS, agent.native,
                                         frozenset({"name", "description", "model", "tools", "permission"}))
        own = agent.native is not None and agent.native.host == self.name
        fields.setdefault("name", name)
        if agent.description is not None:
            fields.setdefault("description", agent.description)
        if agent.tools is not None and not (own and "tools" in fields):
            tools, unknown = self._tools(agent.tools)
            fields["tools"] = ", ".join(tools)
            dropped += [tool_dropped(self.name, agent.native, name, t) for t in unknown]
        if agent.model is not None:
            fields.setdefault("model", agent.model)
        elif agent.dropped_model is not None and not own:
            dropped.append(model_dropped(self.name, agent.native, name, agent.dropped_model))
        return RenderedFields(ordered_fields(fields, ("name", "description", "tools", "model")), tuple(dropped))

    def skill_frontmatter(self, name: str, skill: PartSpec) -> RenderedFields:
        return part_frontmatter(self.name, SKILL_FIELDS, name, skill, command=False)

    def command_frontmatter(self, name: str, command: PartSpec) -> RenderedFields:
        return part_frontmatter(self.name, COMMAND_FIELDS, name, command, command=True)

    def _tools(self, tools: tuple[str, ...]) -> tuple[list[str], list[str]]:
        kept = [TOOL_NAMES.get(t, t) for t in tools if t in TOOL_NAMES or self.knows_tool(t)]
        return list(dict.fromkeys(kept)), [t for t in tools if t not in TOOL_NAMES and not self.knows_tool(t)]

    def probe(self, env: Mapping[str, str]) -> HostInfo:
        executable, version = probe_version(
            "claude", env, install_hint="install Claude Code (`npm install -g @anthropic-ai/claude-code`) and put `claude` on PATH"
        )
        if version[0] != 2:
            raise unsupported_version(executable, version, SUPPORTED, "install a Claude Code 2.x release")
        return HostInfo(self.name, ".".join(map(str, version)), "claude-code", executable)

    def credential_diagnostics(
        self, info: HostInfo, parent_env: Mapping[str, str], user_home: Path, model: str | None
    ) -> list[Diagnostic]:
        if any(parent_env.get(name) for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")):
            return []
        if _cloud_mode_ready(parent_env, user_home):
            return []
        credentials = _credentials_file(parent_env, user_home)
        if _usable_credentials_file(credentials):
            return []
        return [
            Diagnostic(
                "",
                "",
                HOST_UNAUTHENTICATED,
                f"Claude Code {info.version} has no usable credentials: no ANTHROPIC_API_KEY, "
                f"ANTHROPIC_AUTH_TOKEN or CLAUDE_CODE_OAUTH_TOKEN, no cloud-provider mode, and no login "
                f"session at {credentials}",
                _LOGIN_HINT,
            )
        ]

    def prepare(self, wiring: TrialWiring) -> None:
        """Write the fresh settings, the trust entry and (real runs) the copied login.  The proxy's
        address reaches this host by its environment (``environment``), never a file."""
        sandbox_root, home, scripted = wiring.sandbox_root, wiring.home, wiring.scripted
        parent_env, user_home = wiring.parent_env, wiring.user_home
        settings = sandbox_root / ".claude" / "settings.json"
        settings.parent.mkdir(parents=True, exist_ok=True)
        settings.write_text(json.dumps(claude_settings(), indent=2) + "\n", encoding="utf-8")
        # Trust must name the exact realpath of the cwd (host-facts §4); nothing else goes in.
        trusted = os.path.realpath(sandbox_root)
        home.mkdir(parents=True, exist_ok=True)
        (home / ".claude.json").write_text(
            json.dumps({"projects": {trusted: {"hasTrustDialogAccepted": True}}}, indent=2) + "\n", encoding="utf-8"
        )
        if scripted is None:
            # Through the proxy, only the Claude login (not an MCP server's tokens), holding stand-ins.
            copy_login(_credentials_file(parent_env, user_home), home / ".claude" / ".credentials.json",
                       wiring.stand_in, keep=("claudeAiOauth",), fields=self.login_fields)

    def plugin_args(self, sandbox_root: Path) -> list[str]:
        """``--plugin-dir`` for each plugin the build wrote (a fixture may bring none, so every one
        found is the harness's): its skills, agents and commands load as ``plugin:name``
        (host-facts §14)."""
        found = sorted(p.parent.parent for p in (sandbox_root / PLUGIN_DIR).glob("*/.claude-plugin/plugin.json"))
        return [arg for plugin in found for arg in ("--plugin-dir", str(plugin))]

    def command(self, info: HostInfo, *, prompt: str, agent: str | None, model: str | None) -> list[str]:
        argv = [info.executable, "-p", prompt, "--output-format", "stream-json", "--verbose", "--setting-sources", "project"]
        if agent:
            argv += ["--agent", agent]
        if model:
            argv += ["--model", model]
        return argv

    def provider_endpoint(self, parent_env: Mapping[str, str], model: str | None) -> ProviderEndpoint | None:
        # Bedrock, Vertex and Foundry sign requests for their own endpoints (SigV4, Google and
        # Azure credentials) and are not selected by ANTHROPIC_BASE_URL: metered from the stream.
        if any(_truthy(parent_env.get(switch)) for switch in CLOUD_MODES):
            return None
        return ProviderEndpoint("ANTHROPIC_BASE_URL", parent_env.get("ANTHROPIC_BASE_URL") or ANTHROPIC_API_URL)

    def environment(
        self,
        info: HostInfo,
        *,
        base_env: Mapping[str, str],
        parent_env: Mapping[str, str],
        home: Path,
        scripted: ScriptedEndpoint | None,
    ) -> dict[str, str]:
        env = dict(base_env)
        env["HOME"] = str(home)
        env.pop("CLAUDE_CONFIG_DIR", None)  # the private HOME holds the copied login and trust entry
        if scripted is not None:
            env.update(QUIET_ENV)
            env.update(scripted_env(scripted))
            return env
        env.update(credential_variables(parent_env))
        env.update(_cloud_file_pointers(parent_env, env))
        env.update(QUIET_ENV)
        return env

    def credential_files(self, home: Path, env: Mapping[str, str]) -> list[Path]:
        return [_credentials_file(env, home)]

    def new_monitor(self) -> StreamMonitor:
        return ClaudeStreamMonitor()

    def stream_path_forms(self, path: str) -> tuple[str, ...]:
        # Claude Code names its per-project store after the cwd with every character but a letter
        # or digit made "-" (host-facts §4): "/", and also "_", ".", " ", "+" of a TMPDIR.
        return (re.sub(r"[^A-Za-z0-9]", "-", path.rstrip("/")),) if path.strip("/") else ()

    def transcript_events(self, lines: Iterable[tuple[int, str]], builder: TranscriptBuilder) -> None:
        transcript_events(lines, builder)

    def finalize(self, info: HostInfo, monitor: StreamMonitor, *, env: Mapping[str, str], cwd: Path,
                 wrap: Callable[[list[str]], list[str]] | None = None) -> SessionOutcome:
        """Everything Claude Code reports is in its stream."""
        return monitor.outcome()


def _cloud_file_pointers(parent_env: Mapping[str, str], env: Mapping[str, str]) -> dict[str, str]:
    """Point cloud SDKs at the user's own credential files: the private HOME does not have them.

    The files are read in place, not copied, so nothing of the user's cloud config lands in the
    trial's home.
    """
    user_home = parent_env.get("HOME")
    if not user_home:
        return {}
    out: dict[str, str] = {}
    if _truthy(parent_env.get("CLAUDE_CODE_USE_BEDROCK")):
        for name, rel in (("AWS_CONFIG_FILE", ".aws/config"), ("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials")):
            path = Path(user_home) / rel
            if name not in env and path.is_file():
                out[name] = str(path)
    if _truthy(parent_env.get("CLAUDE_CODE_USE_VERTEX")) and "GOOGLE_APPLICATION_CREDENTIALS" not in env:
        adc = _gcloud_adc(Path(user_home))
        if adc.is_file():
            out["GOOGLE_APPLICATION_CREDENTIALS"] = str(adc)
    return out


# --------------------------------------------------------------------------- transcript

# Claude Code's tool name → host-neutral name (unknown tools are lower-cased).
NEUTRAL_TOOLS = {"Write": "write", "Edit": "edit", "MultiEdit": "edit", "Read": "read", "Bash": "bash",
                 "Glob": "glob", "Grep": "grep", "Task": "task", "Agent": "task", "Skill": "skill",
                 "TodoWrite": "todowrite", "WebFetch": "webfetch", "WebSearch": "websearch",
                 "NotebookEdit": "notebookedit"}


def transcript_events(lines: Iterable[tuple[int, str]], b: TranscriptBuilder) -> None:
    """``claude -p --output-format stream-json`` lines → host-neutral transcript events."""
    seen_messages: set[str] = set()
    tools: dict[str, str] = {}
    for t, line in lines:
        event = _event(line)
        if event is None:
            continue
        kind = event.get("type")
        agent = event.get("parent_tool_use_id") if isinstance(event.get("parent_tool_use_id"), str) else None
        if kind == "assistant":
            message = _dict(event.get("message"))
            message_id = message.get("id")
            if isinstance(message_id, str) and message_id not in seen_messages:
                seen_messages.add(message_id)
                if agent is None:
                    b.turn += 1
                usage = message.get("usage")
                if isinstance(usage, dict) and message.get("model") != SYNTHETIC_MODEL:
                    # message_start usage: input and cache exact, output_tokens only 1 (host-facts §3)
                    b.usage(t, claude_usage(usage), None, exact=False, agent=agent)
            for raw_block in message.get("content") or []:
                block = _dict(raw_block)
                if block.get("type") == "text" and message.get("model") == SYNTHETIC_MODEL \
                        and (command := unknown_command(block.get("text"))) is not None:
                    b.emit(t, "error", message=str(block["text"]).strip()[:200], unknownCommand=command.removeprefix("/"))
                elif block.get("type") == "text" and block.get("text"):
                    b.emit(t, "text", agent=agent, **capped(str(block["text"]), TEXT_CAP_CHARS))
                elif block.get("type") == "tool_use":
                    host_tool = str(block.get("name", ""))
                    tools[str(block.get("id"))] = host_tool
                    b.emit(t, "tool_call", id=block.get("id"), tool=NEUTRAL_TOOLS.get(host_tool, host_tool.lower()),
                           hostTool=host_tool, input=neutral_input(block.get("input")), agent=agent)
        elif kind == "user":
            for raw_block in _dict(event.get("message")).get("content") or []:
                block = _dict(raw_block)
                if block.get("type") == "tool_result":
                    host_tool = tools.get(str(block.get("tool_use_id")), "")
                    b.emit(t, "tool_result", id=block.get("tool_use_id"), tool=NEUTRAL_TOOLS.get(host_tool, host_tool.lower()),
                           isError=block.get("is_error") is True, agent=agent,
                           **capped(result_text(block.get("content")), RESULT_CAP_CHARS))
        elif kind == "system" and event.get("subtype") in ("task_started", "task_notification"):
            b.emit(t, "subagent", id=event.get("tool_use_id"), agent=event.get("subagent_type"),
                   description=event.get("description") or event.get("summary"),
                   status="started" if event.get("subtype") == "task_started" else event.get("status"))
        elif kind == "system" and event.get("subtype") == "api_retry":
            b.emit(t, "error", message=f"API retry {event.get('attempt')}: {event.get('error')} (HTTP {event.get('error_status')})")
        elif kind == "result":
            _result(t, event, b)


def _result(t: int, event: dict[str, Any], b: TranscriptBuilder) -> None:
    # the same reading as the budget monitor's, so the totals equal the trial record's usage
    usage = claude_model_usage(_dict(event.get("modelUsage")))
    if usage is None and isinstance(event.get("usage"), dict):
        usage = claude_usage(event["usage"])
    cost = stream_cost(event.get("total_cost_usd"))  # the stream is untrusted (docs/design.md §10)
    if event.get("is_error") is True:
        b.emit(t, "error", message=str(event.get("result") or event.get("subtype") or "error"))
    b.emit(t, "result", usage=usage.model_dump() if usage else None,
           costUsd=cost, turns=event.get("num_turns"),
           stopReason=event.get("terminal_reason") or event.get("stop_reason"), isError=event.get("is_error") is True)
