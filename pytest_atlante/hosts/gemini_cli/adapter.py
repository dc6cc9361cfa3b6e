"""Gemini CLI (``gemini``): version, credentials, fresh settings and policy, command, environment.

Facts this adapter relies on (``docs/host-facts-gemini.md`` §9–§17, measured on 0.61.0), and what it does
about each default that would break a trial silently:
- ``gemini --version`` prints a bare ``0.61.0`` (2–4 s: the probe cache keeps it to once);
- ``GOOGLE_GEMINI_BASE_URL`` alone makes the auth type ``gateway``, which headless mode refuses
  (rc 41): the settings select ``gemini-api-key`` explicitly;
- an untrusted folder is fatal (rc 55): ``--skip-trust`` trusts the sandbox for the session, and
  does *not* apply the workspace ``.gemini/settings.json`` (the fixture may not bring one anyway);
- without a fixed model it sends a routing side request first: ``model.name`` is always set;
- it retries an HTTP 500 for minutes: ``general.maxAttempts`` is 1;
- it relaunches itself so that the parent ignores SIGINT/SIGTERM: ``GEMINI_CLI_NO_RELAUNCH=1``;
- it loads the working directory's ``.env`` even with ``--skip-trust``: ``advanced.ignoreLocalEnv``
  (and a fixture's ``.gemini/.env``, which a trusted folder loads regardless, is rejected);
- usage statistics, telemetry and auto-update phone home: all off;
- its exit code is 0 on an interrupt and on an empty response: the verdict reads the stream's
  ``result`` event (``gemini_stream.py``), never the exit code;
- the shell tool runs in a session of its own and survives the CLI: the runner's reaper gets it.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import tempfile
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
    copy_private_file,
    probe_version,
    unsupported_version,
)
from pytest_atlante.hosts.gemini_cli.parts import GeminiParts
from pytest_atlante.hosts.gemini_cli.policy import gemini_policy_toml
from pytest_atlante.hosts.gemini_cli.stream import GeminiStreamMonitor, transcript_events
from pytest_atlante.hosts.names import HostName
from pytest_atlante.hosts.transcripts import TranscriptBuilder

#: Measured on 0.61.0; the settings keys and stream events used here are those of the 0.x line.
SUPPORTED = ">=0.61.0 <1.0.0"
MINIMUM = (0, 61, 0)

#: The model a trial's settings fix when the configuration names none (no router request).
DEFAULT_MODEL = "gemini-2.5-flash"
#: The Generative Language API, where API-key sessions go unless GOOGLE_GEMINI_BASE_URL says otherwise.
GEMINI_API_URL = "https://generativelanguage.googleapis.com"
SCRIPTED_API_KEY = "atlante-scripted"

API_KEY_ENV = "GEMINI_API_KEY"
#: Variables that carry Gemini's credentials into the session (never into checks).
CREDENTIAL_ENV: tuple[str, ...] = (API_KEY_ENV,)
#: The stored "Login with Google" (OAuth) files under ``~/.gemini`` (host-facts-gemini §14).
OAUTH_FILES = ("oauth_creds.json", "google_accounts.json")

#: Variables that would change the auth type, the model, trust or the settings layers behind the
#: generated settings' back; never passed on (the allowlisted environment has none of them either).
_OVERRIDE_ENV = (
    "GEMINI_MODEL", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA", "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION", "GOOGLE_API_KEY", "GEMINI_CLI_TRUST_WORKSPACE", "GEMINI_CLI_TRUSTED_FOLDERS_PATH",
    "GEMINI_SYSTEM_MD", "GEMINI_CLI_USE_COMPUTE_ADC", "CLOUD_SHELL", "GOOGLE_APPLICATION_CREDENTIALS",
)

NO_SYSTEM_FILE = "no-system-settings.json"

QUIET_ENV: dict[str, str] = {
    # Without it the CLI relaunches itself and the parent ignores SIGINT/SIGTERM (§17).
    "GEMINI_CLI_NO_RELAUNCH": "1",
    "NO_BROWSER": "1",
}

# Fixture files Gemini CLI would load or merge beside the generated settings, and why each is
# rejected (docs/hosts.md, "Gemini CLI").  A fixture's `.env` is not here: it is the project's
# own file and `advanced.ignoreLocalEnv` keeps Gemini CLI from reading it.
FORBIDDEN_FIXTURE_FILES: dict[str, str] = {
    ".gemini/settings.json": "Gemini CLI would apply it over the generated settings in a trusted folder",
    ".gemini/.env": "Gemini CLI loads it in a trusted folder even with ignoreLocalEnv (it could change the model or key)",
    ".gemini/agents": "Gemini CLI would offer its sub-agents beside the harness's (build renders them)",
    ".gemini/commands": "Gemini CLI would expand its slash commands in the prompt (build renders them)",
    ".gemini/policies": "a policy file beside the generated containment policy (Gemini CLI ignores workspace policies today)",
    ".gemini/extensions": "Gemini CLI would load its extensions (MCP servers, hooks, commands)",
    ".gemini/system.md": "it would replace Gemini CLI's system prompt",
}

_LOGIN_HINT = (
    "export GEMINI_API_KEY (a key from Google AI Studio), or log in once with `gemini` in a terminal "
    "(\"Login with Google\" stores ~/.gemini/oauth_creds.json); a key the CLI saved in the system "
    "keychain cannot be carried into a trial"
)


def gemini_dir(env: Mapping[str, str], user_home: Path) -> Path:
    """``~/.gemini``, or ``$GEMINI_CLI_HOME/.gemini``."""
    base = env.get("GEMINI_CLI_HOME")
    return (Path(base) if base else user_home) / ".gemini"


def _usable_oauth(path: Path) -> bool:
    try:
        document = json.loads(read_capped(path, CREDENTIALS_LIMIT))
    except (UnreadableFile, ValueError):
        return False
    return isinstance(document, dict) and bool(document.get("refresh_token") or document.get("access_token"))


def settings_document(*, model: str, auth: str) -> dict[str, Any]:
    """The trial's ``~/.gemini/settings.json`` (host-facts-gemini, "What a host adapter needs")."""
    return {
        "security": {"auth": {"selectedType": auth}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False, "maxAttempts": 1},
        "model": {"name": model},
        "advanced": {"ignoreLocalEnv": True},
        # The harness's instructions file is AGENTS.md; GEMINI.md too when a project has one.
        "context": {"fileName": ["AGENTS.md", "GEMINI.md"]},
    }


def acknowledged_agents(sandbox_root: Path) -> dict[str, dict[str, str]]:
    """``acknowledgments/agents.json`` for the agents build rendered into ``.gemini/agents``:
    Gemini CLI leaves project agents out silently unless each is acknowledged by its hash (§15)."""
    agents_dir = sandbox_root / ".gemini" / "agents"
    entries: dict[str, str] = {}
    if agents_dir.is_dir() and not agents_dir.is_symlink():
        for path in sorted(agents_dir.glob("*.md")):
            if path.is_file() and not path.is_symlink():
                entries[path.stem] = hashlib.sha256(path.read_bytes()).hexdigest()
    return {os.path.realpath(sandbox_root): entries} if entries else {}


class GeminiCliHost(GeminiParts):
    name: HostName = "gemini-cli"
    stream_call_ids = False
    selects_agent = False  # no flag starts a session as a sub-agent
    shell_tools = None
    owned_dir = ".gemini"
    command_folder_separator = ":"  # a command in a folder of commands/: folders joined by it (host-facts §11, §13)
    skill_roots = (".gemini/skills", ".agents/skills")  # not .claude/skills (host-facts-gemini §15)
    #: host-facts-gemini §15: .gemini's agents, skills and TOML commands, GEMINI.md; an extension
    #: (gemini-extension.json beside its commands/ and skills/).
    native_layouts = (
        NativeLayout(".gemini", {"agent": ("agents",), "skill": ("skills",), "command": ("commands",)},
                     command_glob="**/*.toml", instructions="GEMINI.md", settings=(".gemini/settings.json",)),
        NativeLayout("", {"skill": ("skills",), "command": ("commands",)}, command_glob="**/*.toml",
                     manifest="gemini-extension.json"),
    )
    # With no relaunch, SIGINT reaches the CLI and it exits at once (no result event, rc 0, §17).
    interrupt_signal = int(signal.SIGINT)
    credential_env = CREDENTIAL_ENV
    stand_in_env = (API_KEY_ENV,)
    # oauth_creds.json: {"access_token", "refresh_token", "id_token", "expiry_date", ...}
    refreshed_fields = (("access_token",), ("refresh_token",), ("id_token",))
    login_fields = refreshed_fields  # Login with Google is not metered by the proxy: copied as it is
    forbidden_fixture_files = FORBIDDEN_FIXTURE_FILES
    instructions_file = "AGENTS.md"

    def config_diagnostics(self, info: HostInfo, model: str | None) -> list[Diagnostic]:
        return []

    def probe(self, env: Mapping[str, str]) -> HostInfo:
        # Even `--version` writes `projects.json` files under its config dir and, relaunching,
        # starts node twice: the probe runs without relaunch against a throwaway config dir, so
        # it neither touches the user's ~/.gemini nor waits on its lock beside another run.
        with tempfile.TemporaryDirectory(prefix="atlante-gemini-probe-") as scratch:
            probe_env = {**env, "GEMINI_CLI_HOME": scratch, **QUIET_ENV}
            executable, version = probe_version(
                "gemini", probe_env,
                install_hint="install Gemini CLI (`npm install -g @google/gemini-cli`) and put `gemini` on PATH",
            )
        if not (MINIMUM <= version < (1, 0, 0)):
            raise unsupported_version(executable, version, SUPPORTED, "install @google/gemini-cli 0.61.x")
        return HostInfo(self.name, ".".join(map(str, version)), "gemini-cli", executable)

    def credential_diagnostics(
        self, info: HostInfo, parent_env: Mapping[str, str], user_home: Path, model: str | None
    ) -> list[Diagnostic]:
        if parent_env.get(API_KEY_ENV):
            return []
        oauth = gemini_dir(parent_env, user_home) / OAUTH_FILES[0]
        if _usable_oauth(oauth):
            return []
        return [Diagnostic("", "", HOST_UNAUTHENTICATED,
                           f"Gemini CLI {info.version} has no usable credentials: no {API_KEY_ENV} and no "
                           f"login at {oauth}", _LOGIN_HINT)]

    def prepare(self, wiring: TrialWiring) -> None:
        """Write the fresh settings, the policy, the agents' acknowledgments and (real runs) the
        login.  The proxy's address reaches this host by its environment, never a file."""
        sandbox_root, home, scripted, model = wiring.sandbox_root, wiring.home, wiring.scripted, wiring.model
        parent_env, user_home = wiring.parent_env, wiring.user_home
        config = home / ".gemini"
        (config / "policies").mkdir(parents=True, exist_ok=True)
        if scripted is not None:
            auth, chosen = "gemini-api-key", model or scripted.model_id
        else:
            auth = "gemini-api-key" if parent_env.get(API_KEY_ENV) else "oauth-personal"
            chosen = model or DEFAULT_MODEL
        document = settings_document(model=chosen, auth=auth)
        (config / "settings.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        (config / "policies" / "atlante.toml").write_text(gemini_policy_toml(), encoding="utf-8")
        agents = acknowledged_agents(sandbox_root)
        if agents:
            (config / "acknowledgments").mkdir(exist_ok=True)
            (config / "acknowledgments" / "agents.json").write_text(json.dumps(agents, indent=2) + "\n", encoding="utf-8")
        if scripted is None and auth == "oauth-personal":
            source = gemini_dir(parent_env, user_home)
            for name in OAUTH_FILES:
                copy_private_file(source / name, config / name)

    def command(self, info: HostInfo, *, prompt: str, agent: str | None, model: str | None) -> list[str]:
        # `agent`: Gemini CLI has no flag that starts the session as a sub-agent; the session runs
        # as the main agent with the harness's sub-agents available (docs/hosts.md).
        argv = [info.executable, "-p", prompt, "--output-format", "stream-json", "--skip-trust",
                "--approval-mode", "yolo"]
        if model:
            argv += ["--model", model]
        return argv

    def provider_endpoint(self, parent_env: Mapping[str, str], model: str | None) -> ProviderEndpoint | None:
        # "Login with Google" talks to the Code Assist API, not the base URL: metered from the stream.
        if not parent_env.get(API_KEY_ENV):
            return None
        return ProviderEndpoint("GOOGLE_GEMINI_BASE_URL", parent_env.get("GOOGLE_GEMINI_BASE_URL") or GEMINI_API_URL)

    def environment(
        self,
        info: HostInfo,
        *,
        base_env: Mapping[str, str],
        parent_env: Mapping[str, str],
        home: Path,
        scripted: ScriptedEndpoint | None,
    ) -> dict[str, str]:
        env = {name: value for name, value in base_env.items() if name not in _OVERRIDE_ENV}
        env["HOME"] = str(home)
        env["GEMINI_CLI_HOME"] = str(home)
        # System settings override the user's: pointed at a file that does not exist, so a
        # machine's /etc/gemini-cli/settings.json cannot change a trial.  (A file of our own would
        # be skipped anyway, with a warning: Gemini CLI refuses system files under a world-writable
        # directory such as /tmp.)
        env["GEMINI_CLI_SYSTEM_SETTINGS_PATH"] = str(home / ".gemini" / NO_SYSTEM_FILE)
        env["GEMINI_CLI_SYSTEM_DEFAULTS_PATH"] = str(home / ".gemini" / NO_SYSTEM_FILE)
        env.update(QUIET_ENV)
        if scripted is not None:
            # The scripted server's root: the client appends /v1beta/models/… itself.
            env["GOOGLE_GEMINI_BASE_URL"] = scripted.anthropic_base_url
            env[API_KEY_ENV] = SCRIPTED_API_KEY
            return env
        if parent_env.get(API_KEY_ENV):
            env[API_KEY_ENV] = parent_env[API_KEY_ENV]
            if parent_env.get("GOOGLE_GEMINI_BASE_URL"):
                env["GOOGLE_GEMINI_BASE_URL"] = parent_env["GOOGLE_GEMINI_BASE_URL"]
        return env

    def credential_files(self, home: Path, env: Mapping[str, str]) -> list[Path]:
        return [home / ".gemini" / name for name in OAUTH_FILES]

    def new_monitor(self) -> StreamMonitor:
        return GeminiStreamMonitor()

    def stream_path_forms(self, path: str) -> tuple[str, ...]:
        return ()

    def transcript_events(self, lines: Iterable[tuple[int, str]], builder: TranscriptBuilder) -> None:
        transcript_events(lines, builder)

    def finalize(self, info: HostInfo, monitor: StreamMonitor, *, env: Mapping[str, str], cwd: Path,
                 wrap: Callable[[list[str]], list[str]] | None = None) -> SessionOutcome:
        """Everything Gemini CLI reports is in its stream's final ``result``."""
        return monitor.outcome()


__all__ = ["AgentSpec", "GeminiCliHost", "PartSpec", "RenderedFields"]
