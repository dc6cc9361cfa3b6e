"""The OpenAI Codex CLI (``codex``): version, credentials, a fresh CODEX_HOME, command, environment.

Facts this adapter relies on (measured on 0.171.0; docs/host-facts-codex.md §1–§8, summarised in docs/hosts.md):
- ``codex --version`` prints ``codex-cli 0.171.0``; the npm package's Node launcher runs a native
  binary as its child on node 20 and forwards SIGINT/SIGTERM/SIGHUP to it;
- everything lives in ``CODEX_HOME`` (which must exist): a fresh one per trial in the trial's home,
  with a config that turns analytics, plugins, the update check and web search off, never asks for
  approval and does not retry the scripted model; ``TMPDIR`` must not contain it (Codex then skips
  the helper links its own sandbox needs);
- Codex speaks only the OpenAI Responses API; the scripted model is a custom provider (a catalog
  model name, ``gpt-5.5``, so Codex offers ``apply_patch``); ``OPENAI_BASE_URL`` is ignored, the
  config key ``openai_base_url`` redirects the built-in provider;
- credentials: ``$CODEX_HOME/auth.json`` (``codex login``) or ``CODEX_API_KEY``; without any Codex
  retries for ever, so the run refuses to start;
- with stdin not a TTY it reads stdin to EOF (stdin is /dev/null here);
- its own sandbox cannot nest inside the project's bubblewrap: under namespace isolation it runs
  ``danger-full-access`` inside ours, without it ``workspace-write`` with /tmp and $TMPDIR excluded;
- shell denials are execpolicy rules (``$CODEX_HOME/rules/*.rules``); refused commands appear only
  in the rollout, which ``codex_rollout`` reads for the transcript and the model identity.
"""

from __future__ import annotations

import json
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
    part_frontmatter,
    probe_version,
    source_name,
    unsupported_version,
)
from pytest_atlante.hosts.codex.config import (
    OPENAI_API_URL,
    codex_rules,
    render_config,
    user_base_url,
)
from pytest_atlante.hosts.codex.rollout import (
    CodexStreamMonitor,
    read_rollout,
    rollout_call,
    rollout_file,
    transcript_events,
)
from pytest_atlante.hosts.codex.tools import CODEX_TOOLS
from pytest_atlante.hosts.logins import copy_login
from pytest_atlante.hosts.names import HostName
from pytest_atlante.hosts.prices import estimate_cost, shipped_table
from pytest_atlante.hosts.transcripts import TranscriptBuilder

SUPPORTED = ">=0.171.0 <0.172.0"
MINIMUM = (0, 171, 0)
LIMIT = (0, 172, 0)

#: Codex's tools (host-facts-codex §3, with a catalog model): no Skill, Task, read or write tool.
OWN_TOOLS = frozenset({"exec_command", "write_stdin", "apply_patch", "view_image", "update_plan", "tool_search",
                       "request_user_input", "get_goal", "create_goal", "update_goal", "spawn_agent"})
#: The neutral tools a Codex session can use (shell reads, patches for writes and edits).
NEUTRAL_TOOLS = frozenset({"read", "write", "edit", "bash", "glob", "grep", "skill"})
# The Agent Skills fields Codex reads from a SKILL.md (name, description; the rest is carried).
SKILL_FIELDS = frozenset({"name", "description", "license", "compatibility", "metadata"})

#: Variables that carry Codex's credentials into a real-provider session (never into checks).
CREDENTIAL_ENV: tuple[str, ...] = ("CODEX_API_KEY", "CODEX_ACCESS_TOKEN")
# Variables that would point Codex at another home or layer configuration behind the trial's back.
_CONFIG_ENV = ("CODEX_HOME", "CODEX_SQLITE_HOME", "CODEX_MANAGED_BY_NPM", "CODEX_MANAGED_PACKAGE_ROOT")

#: The fixture may bring no Codex directory: its config and rules apply when the project is
#: trusted, and its skills load regardless of trust beside the harness's.
FORBIDDEN_FIXTURE_FILES: dict[str, str] = {
    ".codex": "Codex would load its skills (and, trusted, its config.toml and rules) beside the generated "
              "CODEX_HOME; the harness's skills are rendered there by `atlante build`",
    ".agents/skills": "Codex loads <cwd>/.agents/skills regardless of trust, beside the harness's own skills",
}

#: Harness parts Codex has no place for (``hosts.base.no_place``): the build warns and skips them.
UNPLACED_PARTS: Mapping[str, str] = {
    "agent": "Codex has no agent files: its roles are config.toml tables and `codex exec` cannot select one",
    "command": "`codex exec` runs no slash commands",
}

_LOGIN_HINT = ("log in with `codex login` (it stores auth.json in ~/.codex, or $CODEX_HOME), or export "
               "CODEX_API_KEY; OPENAI_API_KEY alone is not sent by Codex")


def codex_home(home: Path) -> Path:
    """The trial's CODEX_HOME: inside the trial home, never under the session's TMPDIR."""
    return home / ".codex"


def user_codex_home(parent_env: Mapping[str, str], user_home: Path) -> Path:
    configured = parent_env.get("CODEX_HOME")
    return Path(configured) if configured else user_home / ".codex"


def _login(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(read_capped(path, CREDENTIALS_LIMIT))
    except (UnreadableFile, ValueError):
        return {}
    return document if isinstance(document, dict) else {}


def _usable_auth(path: Path) -> bool:
    document = _login(path)
    tokens = document.get("tokens")
    return bool(document.get("OPENAI_API_KEY")) or (isinstance(tokens, dict) and bool(tokens))


def _api_key_login(path: Path) -> bool:
    return bool(_login(path).get("OPENAI_API_KEY"))


def parse_codex_version(text: str) -> str:
    """``codex-cli 0.171.0`` → ``0.171.0`` (the version is the second word)."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first.split()[-1] if first.startswith("codex-cli ") else first


class CodexHost:
    name: HostName = "codex"
    stream_call_ids = False  # Codex numbers its stream items itself (item_N): not the model's call ids
    selects_agent = False  # no --agent: the build warns, and so does a run (evalrun.unselected_agent_warnings)
    shell_tools = CODEX_TOOLS  # no file tools: the scripted model writes with apply_patch, reads with exec_command
    owned_dir = ".codex"
    skill_roots = (".codex/skills", ".agents/skills")  # both load regardless of trust (host-facts-codex §6)
    #: host-facts-codex §6: AGENTS.md from the root, skills from .agents/skills and .codex/skills.
    native_layouts = (
        NativeLayout(".agents", {"skill": ("skills",)}, instructions="AGENTS.md"),
        NativeLayout(".codex", {"skill": ("skills",)}, settings=(".codex/config.toml",)),
    )
    # SIGINT: rc 1 within 0.1 s, its tool process gone (host-facts-codex §8); the launcher forwards it.
    interrupt_signal = int(signal.SIGINT)
    credential_env = CREDENTIAL_ENV
    stand_in_env = ("CODEX_API_KEY",)
    # auth.json: {"auth_mode", "OPENAI_API_KEY"} or, logged in with ChatGPT, {"tokens": {...}}.
    refreshed_fields = (("tokens", "access_token"), ("tokens", "refresh_token"), ("tokens", "id_token"))
    login_fields = (("OPENAI_API_KEY",), *refreshed_fields)
    forbidden_fixture_files = FORBIDDEN_FIXTURE_FILES
    instructions_file = "AGENTS.md"  # loaded from the cwd without trust; CLAUDE.md is not read
    unplaced_parts = UNPLACED_PARTS

    def config_diagnostics(self, info: HostInfo, model: str | None) -> list[Diagnostic]:
        return []

    def knows_tool(self, name: str) -> bool:
        return name in OWN_TOOLS

    def model_fits(self, model: str) -> bool:
        return "/" not in model  # a model slug (`gpt-5.5`); `provider/model` is OpenCode's

    def frontmatter_tools(self, fields: Mapping[str, object]) -> tuple[tuple[str, ...] | None, list[str]]:
        return None, []  # Codex has no agent files: nothing of its own format to read

    def agent_frontmatter(self, name: str, agent: AgentSpec) -> RenderedFields:
        # Never asked by the build (``unplaced_parts``); named for a caller that asks anyway.
        return RenderedFields({}, (f"{source_name(agent.native, name)}: agent dropped for codex "
                                   f"({self.unplaced_parts['agent']})",))

    def skill_frontmatter(self, name: str, skill: PartSpec) -> RenderedFields:
        return part_frontmatter(self.name, SKILL_FIELDS, name, skill, command=False)

    def command_frontmatter(self, name: str, command: PartSpec) -> RenderedFields:
        return RenderedFields({}, (f"{source_name(command.native, name)}: command dropped for codex "
                                   f"({self.unplaced_parts['command']})",))

    def probe(self, env: Mapping[str, str]) -> HostInfo:
        executable, version = probe_version(
            "codex", env, install_hint="install the Codex CLI (`npm install -g @openai/codex`) and put `codex` on PATH")
        if not MINIMUM <= version < LIMIT:
            raise unsupported_version(executable, version, SUPPORTED,
                                      "install @openai/codex 0.171.x, the release this adapter was measured on")
        return HostInfo(self.name, ".".join(map(str, version)), "codex-responses", executable)

    def credential_diagnostics(self, info: HostInfo, parent_env: Mapping[str, str], user_home: Path,
                               model: str | None) -> list[Diagnostic]:
        if any(parent_env.get(name) for name in CREDENTIAL_ENV):
            return []
        auth = user_codex_home(parent_env, user_home) / "auth.json"
        if _usable_auth(auth):
            return []
        return [Diagnostic("", "", HOST_UNAUTHENTICATED,
                           f"Codex {info.version} has no credentials: no CODEX_API_KEY and no login in {auth} "
                           "(without them Codex retries its provider for ever)", _LOGIN_HINT)]

    def prepare(self, wiring: TrialWiring) -> None:
        """A fresh CODEX_HOME: config (with the proxy's address: this host reads it from a file),
        the policy's rules and (real runs) the copied login."""
        home, scripted, model, proxy_url = wiring.home, wiring.scripted, wiring.model, wiring.proxy_url
        parent_env, user_home = wiring.parent_env, wiring.user_home
        target = codex_home(home)
        (target / "rules").mkdir(parents=True, exist_ok=True)
        base_url = None if scripted is not None else user_base_url(parent_env, user_home)
        config = render_config(model=model, scripted=scripted, openai_base_url=base_url, proxy_url=proxy_url)
        (target / "config.toml").write_text(config, encoding="utf-8")
        (target / "rules" / "atlante.rules").write_text(codex_rules(), encoding="utf-8")
        if scripted is None:
            # Through the proxy, an API-key login only (with a stand-in); a ChatGPT login beside
            # CODEX_API_KEY is not copied: the session uses the key.
            copy_login(user_codex_home(parent_env, user_home) / "auth.json", target / "auth.json", wiring.stand_in,
                       keep=("auth_mode", "OPENAI_API_KEY"), fields=(("OPENAI_API_KEY",),))

    def command(self, info: HostInfo, *, prompt: str, agent: str | None, model: str | None) -> list[str]:
        # --skip-git-repo-check: a sandbox is no git checkout; never --ephemeral (the rollout is read).
        # Codex has no --agent: a harness agent cannot be selected (the build warns).
        argv = [info.executable, "exec", "--json", "--skip-git-repo-check"]
        if model:
            argv += ["--model", model]
        return [*argv, "--", prompt]

    def isolated_command(self, argv: list[str]) -> list[str]:
        """Under the project's namespace isolation Codex's own sandbox cannot start (bubblewrap does
        not nest, host-facts-codex §4): commands run unsandboxed by Codex, inside ours."""
        separator = argv.index("--") if "--" in argv else len(argv)
        return [*argv[:separator], "--sandbox", "danger-full-access", *argv[separator:]]

    def provider_endpoint(self, parent_env: Mapping[str, str], model: str | None) -> ProviderEndpoint | None:
        """An API-key session (CODEX_API_KEY, or an API-key login) goes through the proxy: Codex reads
        its base URL only from config.toml, so no variable is named and ``prepare`` writes the proxy's
        address there.  A ChatGPT login reaches a different service, whose route through a custom
        provider was not measured: it is metered from the stream."""
        user_home = Path(parent_env.get("HOME") or Path.home())
        if not any(parent_env.get(name) for name in CREDENTIAL_ENV) and \
                not _api_key_login(user_codex_home(parent_env, user_home) / "auth.json"):
            return None
        return ProviderEndpoint(None, user_base_url(parent_env, user_home) or OPENAI_API_URL)

    def environment(self, info: HostInfo, *, base_env: Mapping[str, str], parent_env: Mapping[str, str],
                    home: Path, scripted: ScriptedEndpoint | None) -> dict[str, str]:
        env = {name: value for name, value in base_env.items() if name not in _CONFIG_ENV}
        env["HOME"] = str(home)
        env["CODEX_HOME"] = str(codex_home(home))
        if scripted is None:
            env.update({name: parent_env[name] for name in CREDENTIAL_ENV if parent_env.get(name)})
        return env

    def credential_files(self, home: Path, env: Mapping[str, str]) -> list[Path]:
        return [user_codex_home(env, home) / "auth.json"]

    def new_monitor(self) -> StreamMonitor:
        return CodexStreamMonitor()

    def stream_path_forms(self, path: str) -> tuple[str, ...]:
        return ()

    def transcript_events(self, lines: Iterable[tuple[int, str]], builder: TranscriptBuilder) -> None:
        transcript_events(lines, builder)

    def finalize(self, info: HostInfo, monitor: StreamMonitor, *, env: Mapping[str, str], cwd: Path,
                 wrap: Callable[[list[str]], list[str]] | None = None) -> SessionOutcome:
        """The stream's outcome, plus what only the rollout has: the model, the refused commands and
        the turn of every item (a digest line for the transcript), and the cost from the price table."""
        outcome = monitor.outcome()
        if not isinstance(monitor, CodexStreamMonitor) or "CODEX_HOME" not in env:
            return outcome
        path = rollout_file(Path(env["CODEX_HOME"]), monitor.thread_id)
        digest = read_rollout(path) if path is not None else None
        if digest is not None:
            outcome.model_identity = digest.get("model")
            outcome.transcript_lines.append(json.dumps(digest, ensure_ascii=False))
            # The rollout's calls carry the model's own call ids: the session checks the file
            # against the metering proxy's record both ways (the agent can rewrite it).
            outcome.file_call = rollout_call
        table = shipped_table()
        if table.price_for(outcome.model_identity) is not None:
            # The session's cost_basis also lets the trial price the proxy's counts when they are
            # the record's (a session ended at maxTokens has no turn.completed).
            outcome.cost_basis = table.label
            usage = outcome.usage
            if usage is not None:
                outcome.cost_usd = estimate_cost(outcome.model_identity, usage.inputTokens + usage.cacheReadTokens,
                                                 usage.cacheReadTokens, usage.outputTokens, table)
        return outcome
