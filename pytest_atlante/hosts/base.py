"""What every host adapter provides, and the version probe they share.

A host adapter knows everything host-specific about running one trial session through a real CLI:
its version range and dialect, where its stored credentials live, the fresh configuration that
carries the containment policy, the command line, the environment, and how to read its event
stream. The trial engine codes against :class:`Host` and never branches on the host's name.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pytest_atlante.diagnostics import Diagnostic, DiagnosticError
from pytest_atlante.fsutil import UnreadableFile, read_capped
from pytest_atlante.hosts.names import HOST_NAMES, HostName
from pytest_atlante.hosts.probecache import cached_version, file_identity, remember_version

if TYPE_CHECKING:
    from pytest_atlante.hosts.transcripts import TranscriptBuilder
    from pytest_atlante.records import Usage

HOST_MISSING = "eval-host-missing"
HOST_VERSION_UNSUPPORTED = "eval-host-version-unsupported"
HOST_PROBE_FAILED = "eval-host-probe-failed"
HOST_UNAUTHENTICATED = "eval-host-unauthenticated"
HOST_PREPARE_FAILED = "eval-host-prepare-failed"

# `--version` prints instantly; a CLI that hangs here is broken, not slow.
PROBE_TIMEOUT_S = 30.0

Version = tuple[int, int, int]
# A program name may come first: Codex prints ``codex-cli 0.171.0``.
_VERSION = re.compile(r"^\s*(?:codex-cli\s+)?v?(\d+)\.(\d+)\.(\d+)\b")

# Credentials and auth files are small JSON documents; anything larger is not one.
CREDENTIALS_LIMIT = 1024 * 1024


@dataclass(frozen=True)
class HostInfo:
    """The probed host: fixed once per run on the controller and handed to every worker."""

    name: HostName
    version: str
    dialect: str  # "claude-code" | "opencode-v1" | "opencode-v2" | "codex-responses"
    executable: str  # absolute path of the probed binary


#: The model id the scripted model serves unless told otherwise (its ``/v1/models`` listing).
SCRIPTED_MODEL_ID = "scripted-model"


@dataclass(frozen=True)
class ScriptedEndpoint:
    """Where the scripted model listens, host-neutral (built by the trial engine from its server).

    Each adapter derives its own wiring from it (Claude Code's environment, OpenCode's provider
    block) in ``prepare`` and ``environment``.
    """

    anthropic_base_url: str  # Anthropic Messages (the client appends ``/v1/messages``)
    openai_base_url: str  # OpenAI chat completions (``.../v1``)
    model_id: str = SCRIPTED_MODEL_ID


@dataclass(frozen=True)
class ShellTools:
    """The tools of a host whose model gets no file tools, only a shell and a patch tool (Codex,
    host-facts-codex §3): the scripted model plays the host-neutral file actions through them.

    The host hands them over (``Host.shell_tools``) and the trial engine gives them to the scripted
    model, so the wire format that speaks them (``provider/wire/openai_responses.py``) knows no host.
    """

    shell: str  # the shell tool's name (its argument: ``{cmd}``)
    patch: str  # the freeform patch tool's name (its input: the patch text)
    skill_file: Callable[[Path, str], Path]  # (sandbox root, skill name) → the SKILL.md a ``skill`` action reads
    skill_read: Callable[[str], str | None]  # a shell command → the skill whose SKILL.md it reads, if any


@dataclass(frozen=True)
class NativeLayout:
    """Where a host loads a project's harness from, in its own layout (``atlante init`` adopts it in
    place, ``atlante build`` reads a file found there in the host's format).

    ``base``: the folder under the project root (``""``: the root, for a plugin or extension);
    ``dirs``: kind (``agent``, ``skill``, ``command``) → folder names under ``base``;
    ``command_glob``: the command files in a commands folder; ``instructions``: the memory file the
    host loads from the root; ``settings``: files of the host's own configuration, named as not
    evaluated; ``manifest``: a file that must exist at ``base`` for the layout to count (a plugin's
    or an extension's manifest); ``code_plugins``: folders (under the project root) of plugins that
    are code the host runs (OpenCode's JavaScript plugins), which eval cannot adopt: named by init."""

    base: str
    dirs: Mapping[str, tuple[str, ...]]
    command_glob: str = "**/*.md"
    instructions: str | None = None
    settings: tuple[str, ...] = ()
    manifest: str | None = None
    code_plugins: tuple[str, ...] = ()


@dataclass(frozen=True)
class TrialWiring:
    """One trial's wiring, the one value ``Host.prepare`` takes: where the session runs and what
    model it talks to.

    ``scripted``: the scripted model's endpoint (None for a real provider); ``proxy_url``: the
    metering proxy's base URL of a real-provider session whose ``provider_endpoint`` names no
    variable (the host takes its endpoint from a config file only), None otherwise;
    ``user_home``/``parent_env``: where the user's stored login is found (real runs only);
    ``stand_in``: the trial's metering proxy's stand-in maker when the session's model traffic goes
    through it (a real provider): the login copied into the trial HOME then holds stand-ins, never the
    real credential (``hosts/logins.py``)."""

    info: HostInfo
    sandbox_root: Path
    home: Path
    user_home: Path
    parent_env: Mapping[str, str]
    model: str | None
    scripted: ScriptedEndpoint | None = None
    proxy_url: str | None = None
    stand_in: Callable[[str], str] | None = None


@dataclass(frozen=True)
class NativeSource:
    """A native harness file's frontmatter as parsed, and the host whose format it is written in
    (None: no host's in particular, as a skill in the shared Agent Skills format)."""

    host: str | None
    fields: Mapping[str, object]
    path: str  # as the diagnostics and warnings name it


@dataclass(frozen=True)
class ProviderEndpoint:
    """How a real-provider session reaches its model, so the metering proxy can stand in between
    (docs/design.md §10): the environment variable holding the provider's base URL (None for a host
    that reads it only from its own config file: ``prepare`` is handed the proxy's address as
    ``proxy_url`` and writes it there), and the URL it points at without the proxy (the user's own
    setting, or the provider's default)."""

    variable: str | None
    upstream: str


@dataclass(frozen=True)
class AgentSpec:
    """A harness agent to render as a native agent file: what ``agent_frontmatter`` reads.

    Host-neutral and free of the configuration's models: ``atlante build`` converts each
    configured agent into one.  ``tools`` are host-neutral tool names (``read``, ``write``, ``edit``,
    ``bash``, ``glob``, ``grep``, ``skill``, ``task``) or one host's own names (``TodoWrite``,
    ``mcp__…``); None leaves the host's default tools.  ``model`` is the one meant for the host
    being rendered; ``dropped_model`` a model given only for another host.  ``native``: the
    frontmatter of a native source file, carried whole for its own host (docs/design.md §9).
    """

    description: str | None  # None: a native file that has none (its host loads it so)
    model: str | None = None
    tools: tuple[str, ...] | None = None
    native: NativeSource | None = None
    dropped_model: str | None = None


@dataclass(frozen=True)
class PartSpec:
    """A skill or slash command to render: its description, model and native frontmatter."""

    description: str | None  # None: a command file that has none
    model: str | None = None
    native: NativeSource | None = None
    dropped_model: str | None = None


@dataclass(frozen=True)
class RenderedFields:
    """The frontmatter fields a host gets, and one line per field, tool or value left out."""

    fields: dict[str, object]
    dropped: tuple[str, ...] = ()


def tool_names(value: object) -> tuple[str, ...] | None:
    """A frontmatter tool list as names: ``Read, Grep`` or a YAML list (None: no usable list)."""
    if isinstance(value, str):
        return tuple(name.strip() for name in value.split(",") if name.strip())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(v.strip() for v in value if v.strip())
    return None


def listed_tools(fields: Mapping[str, object], neutral_of: Mapping[str, str]) -> tuple[tuple[str, ...] | None, list[str]]:
    """``Host.frontmatter_tools`` for a format whose agent files list tools by name in ``tools``
    (Claude Code, Gemini CLI): each name as its neutral one where ``neutral_of`` has it."""
    if "tools" not in fields:
        return None, []
    names = tool_names(fields["tools"])
    if names is None:
        return None, [f"its 'tools' field is not a list of names: {fields['tools']!r}"]
    return tuple(neutral_of.get(n, n) for n in names), []


def part_frontmatter(host: str, known: frozenset[str], name: str, part: PartSpec, *, command: bool) -> RenderedFields:
    """A skill's or a command's frontmatter for ``host``: the two hosts differ only in the fields
    they know.  A skill is named in its frontmatter; a command by its file name, and its model
    is chosen per host like an agent's."""
    fields, dropped = carried_fields(host, known, part.native, frozenset({"model"}) if command else frozenset())
    own = part.native is not None and part.native.host == host
    if not command:
        fields.setdefault("name", name)
    if part.description is not None:
        fields.setdefault("description", part.description)
    if command and part.model is not None:
        fields.setdefault("model", part.model)
    elif command and part.dropped_model is not None and not own:
        dropped.append(model_dropped(host, part.native, name, part.dropped_model))
    return RenderedFields(ordered_fields(fields, ("description",) if command else ("name", "description")), tuple(dropped))


def source_name(native: NativeSource | None, name: str) -> str:
    """How a warning names the part: its native file, or the harness entry."""
    return native.path if native is not None else f"harness entry {name!r}"


def tool_dropped(host: str, native: NativeSource | None, name: str, tool: str) -> str:
    return f"{source_name(native, name)}: tool {tool!r} dropped for {host} (not one of its tools)"


def model_dropped(host: str, native: NativeSource | None, name: str, model: str) -> str:
    per_host = ", ".join(f'"{each}": …' for each in HOST_NAMES)  # every host's key, as the table lists them
    return (f"{source_name(native, name)}: model {model!r} dropped for {host} (not one of its models; "
            f"give one per host: {{{per_host}}})")


def ordered_fields(fields: dict[str, object], first: tuple[str, ...]) -> dict[str, object]:
    """The fields with ``first`` leading (as the hosts' docs write them); the rest in source order."""
    return {k: fields[k] for k in first if k in fields} | {k: v for k, v in fields.items() if k not in first}


#: Frontmatter that would run the project's commands or servers inside a trial: the eval reference
#: has the runner author the configuration and omit the project's hooks and MCP servers, so a
#: harness file cannot bring them back in (docs/design.md §9).
UNEVALUATED_FIELDS = {
    "hooks": "eval runs no project hooks",
    "mcpServers": "eval omits project MCP servers",
}


def carried_fields(host: str, known: frozenset[str], native: NativeSource | None,
                   translated: frozenset[str]) -> tuple[dict[str, object], list[str]]:
    """The native fields ``host`` keeps as they are, and a line for each one it drops.

    Its own files keep everything (the lossless build) but :data:`UNEVALUATED_FIELDS`; another
    host's (or a host-neutral) file keeps the fields ``host`` knows by the same name;
    ``translated`` fields are the caller's job.
    """
    if native is None:
        return {}, []
    kept: dict[str, object] = {}
    dropped: list[str] = []
    for key, value in native.fields.items():
        if key in UNEVALUATED_FIELDS:
            dropped.append(f"{native.path}: field {key!r} dropped for {host} ({UNEVALUATED_FIELDS[key]})")
        elif native.host == host:
            kept[key] = copy.deepcopy(value)  # a renderer may tighten it; the source stays as read
        elif key in translated:
            continue
        elif key in known:
            kept[key] = copy.deepcopy(value)
        else:
            dropped.append(f"{native.path}: field {key!r} dropped for {host} (it has no such field)")
    return kept, dropped


def skill_roots(host: Host) -> tuple[str, ...]:
    """The project folders ``host`` loads skills from (``<root>/<name>/SKILL.md``), its own first.

    An adapter lists them in ``skill_roots`` (measured: docs/host-facts*.md); without the list, its
    own ``<owned_dir>/skills``.  The build leaves a skill kept in one of them where it is, so the
    paths its text names keep working (docs/reference.md, "Where a skill lands")."""
    roots = getattr(host, "skill_roots", None)
    if isinstance(roots, tuple) and roots:
        return tuple(str(root) for root in roots)
    return (f"{host.owned_dir}/skills",)


#: A prompt that runs a slash command: ``/name`` first, then nothing or whitespace and the
#: arguments.  ``/tmp/x is broken`` is no command (a ``/`` follows the name), as for the hosts.
_SLASH_COMMAND = re.compile(r"/([A-Za-z0-9][A-Za-z0-9_.:-]*)(?:\s+(.*))?", re.DOTALL)


@dataclass(frozen=True)
class SlashCommand:
    """The command a prompt runs (``/name arguments``), as every host that expands commands reads it."""

    name: str
    arguments: str


def slash_command(prompt: str) -> SlashCommand | None:
    """The command ``prompt`` runs, or None when it is no ``/name`` prompt."""
    found = _SLASH_COMMAND.fullmatch(prompt)
    return SlashCommand(found.group(1), (found.group(2) or "").strip()) if found else None


def command_names(host: object, name: str, file: str) -> set[str]:
    """The names a ``/name`` prompt runs the harness command ``name`` (source ``file``) by on
    ``host``.  A file kept in a folder of a ``commands/`` tree keeps its place in the build, and the
    host names it by its folders joined with its ``command_folder_separator`` (Claude Code and
    Gemini CLI ``:``, OpenCode ``/``: docs/host-facts.md §11, §13): ``.claude/commands/frontend/
    component.md`` is ``frontend:component`` there, never ``component``; any other file runs by its
    harness name.  None on a host without commands."""
    if no_place(host, "command") is not None:
        return set()
    parts = file.split("/")
    for index in range(len(parts) - 2, -1, -1):
        if parts[index] in ("commands", "command") and len(parts) - index > 2:
            separator = getattr(host, "command_folder_separator", ":")
            nested = [*parts[index + 1:-1], parts[-1].removesuffix(".md").removesuffix(".toml")]
            return {separator.join(nested)}
    return {name}


def no_place(host: object, kind: str) -> str | None:
    """Why ``host`` has nowhere to load a harness part of ``kind`` (``agent``, ``command``), or None.

    An adapter lists such parts in an ``unplaced_parts`` mapping (kind → why); the build warns and
    writes nothing for them."""
    unplaced = getattr(host, "unplaced_parts", None)
    return unplaced.get(kind) if isinstance(unplaced, Mapping) else None


@dataclass
class SessionOutcome:
    """What a host session's event stream said about itself."""

    usage: Usage | None  # None when no usage event was seen
    cost_usd: float | None
    model_identity: str | None
    is_error: bool
    error_message: str | None
    usage_events: int  # how many usage-bearing events were seen
    budget_unmonitored: bool  # True when the host emitted no usage events
    # Stream values the monitor ignored (invalid counts or costs, a second result): the stream is
    # untrusted input (docs/design.md §10).
    notes: list[str] = field(default_factory=list)
    # ``cost_usd`` is an estimate from this price table (``PriceTable.label``), not the host's figure.
    cost_basis: str | None = None
    # Lines the session appends to the captured stream after the host exited (redacted like it):
    # what the host wrote elsewhere that its transcript needs (Codex's rollout digest).
    transcript_lines: list[str] = field(default_factory=list)
    # Set when the transcript comes from a file the host wrote with the model's own call ids, which
    # the agent can rewrite (Codex's rollout): a model's call (tool name, parsed arguments) as the
    # transcript's neutral (tool, input).  The session then checks the file against the metering
    # proxy both ways — what it adds is marked unverified, a call it lacks is restored from the
    # proxy's record (docs/integrity.md, "What is read back").
    file_call: Callable[[str, Mapping[str, Any]], tuple[str, dict[str, Any]]] | None = None


@runtime_checkable
class PluginLoader(Protocol):
    """A host that loads a harness's plugins under their namespaces (Claude Code: ``plugin:skill``).

    ``plugin_dir``: the build-tree folder each plugin is written to (``<plugin_dir>/<plugin>/``);
    ``plugin_args``: the command-line arguments that load the plugins found there in a sandbox."""

    plugin_dir: str

    def plugin_args(self, sandbox_root: Path) -> list[str]: ...


@runtime_checkable
class IsolationAware(Protocol):
    """A host whose command line changes under the project's namespace isolation (Codex: its own
    sandbox cannot nest inside bubblewrap)."""

    def isolated_command(self, argv: list[str]) -> list[str]: ...


class StreamMonitor(Protocol):
    def feed(self, line: str) -> None:
        """One stdout line: a JSON event or junk. Never raises."""

    @property
    def cumulative_tokens(self) -> int | None:
        """Best running total so far; None before the first usage event."""

    def outcome(self) -> SessionOutcome: ...


@runtime_checkable
class CommandReader(Protocol):
    """A host whose commands are files of a format other than Markdown (Gemini CLI: TOML): the build
    reads a harness command of that suffix with ``read_command`` — (its fields as frontmatter, its
    prompt as a Markdown command's body, what other hosts would not run of it) — or names what is
    wrong (``ValueError``)."""

    name: HostName
    command_suffix: str

    def read_command(self, text: str) -> tuple[dict[str, object], str, list[str]]: ...


class Host(Protocol):
    name: str
    owned_dir: str  # ".claude" / ".opencode": ignored by the diff allowlist, owns the native outputs
    interrupt_signal: int
    credential_env: tuple[str, ...]  # variables that carry credentials into the session, never checks
    # Of those, the API keys the host sends only to its model endpoint (a header or ``?key=``): when
    # the trial's model traffic goes through the metering proxy the session gets a per-trial
    # stand-in instead, and the proxy swaps the real value in on the way out (docs/integrity.md).
    stand_in_env: tuple[str, ...]
    # JSON paths ("*" = any key) of the credential fields the host itself rewrites in its login file
    # (a token refresh): the only values a login read after the session may add to the secrets.
    refreshed_fields: tuple[tuple[str, ...], ...]
    # JSON paths of every credential of its login file: what the copy's stand-ins replace where the
    # session goes through the metering proxy, and what ``credentialExposed`` reads in the copy.
    login_fields: tuple[tuple[str, ...], ...]
    forbidden_fixture_files: Mapping[str, str]  # fixture path → why the CLI would merge it
    # The stream's tool-call ids are the model's own (Claude Code, OpenCode echo the API's ids), so
    # the metering proxy can vouch for each call and mark a forged one (provider/served.py).  Codex and
    # Gemini CLI number the calls themselves: their transcripts are not marked (docs/design.md §10).
    stream_call_ids: bool
    # A session can start as a harness agent (Claude Code's and OpenCode's --agent); Codex and
    # Gemini CLI have no such flag, so a scenario's task.agent is not selected there (a warning).
    selects_agent: bool
    # The shell and patch tools the scripted model plays file actions with, for a host whose model
    # has no file tools (Codex); None: the wire format matches the offered tools by neutral name.
    shell_tools: ShellTools | None

    def probe(self, env: Mapping[str, str]) -> HostInfo: ...

    def config_diagnostics(self, info: HostInfo, model: str | None) -> list[Diagnostic]:
        """Configuration the probed version cannot run (validation problems, exit 2)."""

    def credential_diagnostics(
        self, info: HostInfo, parent_env: Mapping[str, str], user_home: Path, model: str | None
    ) -> list[Diagnostic]: ...

    instructions_file: str  # the memory file it loads from the project root: CLAUDE.md, AGENTS.md

    def knows_tool(self, name: str) -> bool:
        """Whether ``name`` is one of this host's own tool names (beside the neutral ones)."""

    def model_fits(self, model: str) -> bool:
        """Whether one plain ``model`` string names a model this host can select."""

    def frontmatter_tools(self, fields: Mapping[str, object]) -> tuple[tuple[str, ...] | None, list[str]]:
        """The tools a native agent file of this host's format allows, as neutral names where one
        exists and this host's names otherwise (None: the host's defaults), and what cannot be read."""

    def agent_frontmatter(self, name: str, agent: AgentSpec) -> RenderedFields:
        """The frontmatter of the native agent file ``atlante build`` writes for this host."""

    def skill_frontmatter(self, name: str, skill: PartSpec) -> RenderedFields:
        """The frontmatter of a skill's ``SKILL.md`` for this host."""

    def command_frontmatter(self, name: str, command: PartSpec) -> RenderedFields:
        """The frontmatter of a slash command file for this host."""

    def prepare(self, wiring: TrialWiring) -> None:
        """Write the trial HOME's host configuration for the trial ``wiring`` describes."""
        ...

    def command(self, info: HostInfo, *, prompt: str, agent: str | None, model: str | None) -> list[str]: ...

    def provider_endpoint(self, parent_env: Mapping[str, str], model: str | None) -> ProviderEndpoint | None:
        """Where a real-provider session of ``model`` (the configured one, None for the host's
        default) sends its model traffic, for the metering proxy; None when the provider mode cannot
        go through it (a cloud mode signing its requests): the trial is then metered from the stream."""
        ...

    def environment(
        self,
        info: HostInfo,
        *,
        base_env: Mapping[str, str],
        parent_env: Mapping[str, str],
        home: Path,
        scripted: ScriptedEndpoint | None,
    ) -> dict[str, str]: ...

    def credential_files(self, home: Path, env: Mapping[str, str]) -> list[Path]:
        """Where the host keeps its stored login under ``home`` (``env`` may relocate it): the
        trial's copies are deleted after the session, and their secrets are redacted."""
        ...

    def new_monitor(self) -> StreamMonitor: ...

    def stream_path_forms(self, path: str) -> tuple[str, ...]:
        """Other spellings of the trial's ``path`` that this host writes into its stream (a store
        named after it, a path relative to "/"): redacted like the path itself."""
        ...

    def transcript_events(self, lines: Iterable[tuple[int, str]], builder: TranscriptBuilder) -> None:
        """Read the session's captured stdout (``(ms, line)`` pairs, redacted, in order) into
        host-neutral transcript events through ``builder`` (``hosts.transcripts``), ending with
        one ``result`` event.  Junk lines are skipped; never raises."""

    def finalize(
        self,
        info: HostInfo,
        monitor: StreamMonitor,
        *,
        env: Mapping[str, str],
        cwd: Path,
        wrap: Callable[[list[str]], list[str]] | None = None,
    ) -> SessionOutcome:
        """The session's outcome; any command it runs goes through ``wrap`` (namespace isolation),
        because it runs the host again in the sandbox the agent could write (plugins, config)."""
        ...


# --------------------------------------------------------------------------- version probe


def parse_version(text: str) -> Version | None:
    """``2.1.197 (Claude Code)`` → (2, 1, 197); ``1.18.33`` → (1, 18, 33); anything else → None.

    Only the first non-empty line counts: a CLI may print an update notice after it.
    """
    for line in text.splitlines():
        if line.strip():
            match = _VERSION.match(line)
            if match is None:
                return None
            return (int(match.group(1)), int(match.group(2)), int(match.group(3)))
    return None


def format_version(version: Version) -> str:
    return ".".join(str(part) for part in version)


def _probe_error(code: str, message: str, hint: str) -> DiagnosticError:
    return DiagnosticError(diagnostics=[Diagnostic("", "", code, message, hint)])


def probe_version(executable_name: str, env: Mapping[str, str], *, install_hint: str) -> tuple[str, Version]:
    """Find ``executable_name`` on ``env``'s PATH and run ``--version`` once — or not at all when
    the probe cache (``hosts.probecache``) knows this very file.

    Returns the absolute executable path and the parsed version; raises ``eval-host-missing`` or
    ``eval-host-probe-failed``. The range check belongs to the caller, which knows the dialects.
    """
    found = shutil.which(executable_name, path=env.get("PATH", os.defpath))
    if found is None:
        raise _probe_error(
            HOST_MISSING,
            f"the {executable_name!r} executable is not on PATH",
            install_hint,
        )
    executable = os.path.abspath(found)
    identity = file_identity(executable)
    if identity is not None and (known := cached_version(env, executable, identity)) is not None:
        return executable, known
    try:
        completed = subprocess.run(
            [executable, "--version"],
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise _probe_error(
            HOST_PROBE_FAILED,
            f"`{executable} --version` did not finish within {PROBE_TIMEOUT_S:.0f} s",
            "run it by hand to see what it waits for",
        ) from None
    except OSError as exc:
        raise _probe_error(
            HOST_PROBE_FAILED,
            f"`{executable} --version` could not be started: {exc.strerror or exc}",
            "check that the file is an executable for this machine",
        ) from None
    version = parse_version(completed.stdout)
    if completed.returncode != 0 or version is None:
        said = (completed.stdout.strip() or completed.stderr.strip() or "<no output>").splitlines()[0][:200]
        raise _probe_error(
            HOST_PROBE_FAILED,
            f"`{executable} --version` exited {completed.returncode} and printed {said!r}, not a version",
            "run it by hand; reinstall the CLI if it does not print a version",
        )
    if identity is not None and file_identity(executable) == identity:  # not swapped meanwhile
        remember_version(env, executable, identity, version)
    return executable, version


def unsupported_version(executable: str, version: Version, supported: str, hint: str) -> DiagnosticError:
    return _probe_error(
        HOST_VERSION_UNSUPPORTED,
        f"{executable} is version {format_version(version)}; supported: {supported}",
        hint,
    )


# --------------------------------------------------------------------------- small shared helpers


def copy_private_file(source: Path, target: Path) -> bool:
    """Copy a credentials file readable by its owner only; False when there is none to copy."""
    try:  # never blocks on a FIFO planted at the path, never reads a giant file
        data = read_capped(source, CREDENTIALS_LIMIT)
    except UnreadableFile as exc:
        if exc.missing or "regular file" in exc.reason:
            return False
        raise OSError(f"{source} {exc.reason}") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return True


def prepare_failed(message: str, hint: str) -> DiagnosticError:
    return DiagnosticError(diagnostics=[Diagnostic("", "", HOST_PREPARE_FAILED, message, hint)])
