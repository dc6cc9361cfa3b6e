"""One host session of a trial: the model route (scripted model, metering proxy, relay), the host
process with its stream monitor and token gate, and what the session produced (its transcript,
totals and errors), for ``runner.py`` to turn into a verdict and a record."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from pytest_atlante.checks import SessionView
from pytest_atlante.hosts.base import (
    Host,
    HostInfo,
    IsolationAware,
    PluginLoader,
    ScriptedEndpoint,
    SessionOutcome,
    ShellTools,
    SlashCommand,
    slash_command,
)
from pytest_atlante.hosts.logins import exposed_fields
from pytest_atlante.hosts.prices import estimate_cost, shipped_table
from pytest_atlante.hosts.streams import stream_cost, sum_usage
from pytest_atlante.provider.proxy import STAND_IN_PREFIX, Metering, MeteringProxy, Upstream
from pytest_atlante.provider.served import mark_unverified, unshown_calls
from pytest_atlante.records import (
    TrialRecord,
    Usage,
    tail,
)
from pytest_atlante.sandbox import trialdir as sandboxes
from pytest_atlante.sandbox.isolation import Confinement, ModelRelay
from pytest_atlante.sandbox.process import (
    Bounds,
    RunResult,
    allowlisted_environment,
    run,
)
from pytest_atlante.sandbox.redact import (
    Secrets,
    login_document,
    refreshed_credentials,
    secrets_in_env,
    secrets_in_file,
)
from pytest_atlante.suite.discovery import ScenarioEntry
from pytest_atlante.trial.budget import TokenGate, TrialBudget
from pytest_atlante.trial.transcript import (
    Redactor,
    StreamCapture,
    build_transcript,
    write_trial_files,
)


@dataclass
class HostSession:
    """The host session step's result: the process, what its stream said, and the gate."""

    process: RunResult
    outcome: SessionOutcome
    gate: TokenGate
    env: dict[str, str]
    capture: StreamCapture  # the stream as the transcript sees it (redacted, capped)
    metering: Metering | None = None  # what the metering proxy saw; None when metered from the stream
    # The agent could read a real credential (a login copied into its HOME, a key in its
    # environment the proxy does not stand in for); None for a scripted run, which has none.
    credential_exposed: bool | None = None
    # Tool calls of the served responses the host's transcript did not show, added to it from the
    # proxy's record (``transcript_events``): "name id" each.
    restored_calls: list[str] = field(default_factory=list)
    # The slash command the prompt ran (``/name …``), which a failure before any model turn names.
    command: SlashCommand | None = None

    @cached_property
    def totals(self) -> SessionTotals:
        """What the session used (the session is finished and finalized when this is read): computed
        once for the usage-within checks and the record, which must state the same figures."""
        return session_totals(self)

    @property
    def tripped_at(self) -> int | None:
        """The total that crossed maxTokens: the proxy's when it saw the crossing, else the stream's."""
        if self.metering is not None and self.metering.tripped_at is not None:
            return self.metering.tripped_at
        return self.gate.tripped_at

    @property
    def over_budget(self) -> bool:
        return self.process.aborted or (self.metering is not None and self.metering.tripped_at is not None)

    @property
    def ended_by_signal(self) -> int | None:
        """The signal that ended the host when the runner did not send it (not a timeout's or a budget
        abort's kill): the agent's doing, since its tools run beside the host as the same user and
        can signal it (docs/design.md §10).  Killed by a signal is ``-N`` without isolation and
        ``128 + N`` from bubblewrap (or a shell) with it."""
        process, code = self.process, self.process.returncode
        if code is None or process.timed_out or self.over_budget:
            return None
        if code < 0:
            return -code
        return code - 128 if 128 < code <= 128 + 64 else None

    @property
    def host_failed(self) -> bool:
        """The host failed: its exit status says so, or its stream does and the proxy does not
        contradict it (docs/design.md §10) — a stream the agent can write into cannot turn the agent's
        own failure into an infrastructure error while the model answered every request.  A host
        ended by a signal the runner did not send is not a failure of the host: the agent ended its
        own session (:attr:`ended_by_signal`, a ``fail``)."""
        if self.ended_by_signal is not None:
            return False
        if self.process.returncode != 0:
            return True
        return self.outcome.is_error and not (self.metering is not None and self.metering.vouches_for_the_model)


def host_tmp(sb: sandboxes.Sandbox) -> Path:
    """The host's own temp files (Claude Code keeps a dir per session under $TMPDIR/claude-<uid>/)
    go inside the trial directory, so they are removed with it instead of piling up in /tmp."""
    path = sb.trial_dir / "tmp"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


@dataclass(frozen=True)
class Metered:
    """The trial's metering proxy, and the host's variable to point at it (None when the adapter was
    handed the proxy's address as its scripted endpoint already)."""

    proxy: MeteringProxy
    variable: str | None


@dataclass(frozen=True)
class ModelRoute:
    """How the trial's host reaches its model: the scripted endpoint it is handed (scripted runs)
    and the metering proxy in between (None: metered from the stream)."""

    endpoint: ScriptedEndpoint | None
    metered: Metered | None

    @property
    def proxy_url(self) -> str | None:
        """The proxy's address for a real-provider host that names no variable for it (Codex's
        config file): ``prepare`` writes it there."""
        if self.endpoint is not None or self.metered is None or self.metered.variable is not None:
            return None
        return self.metered.proxy.base_url

    @property
    def stand_in(self) -> Callable[[str], str] | None:
        """The proxy's stand-in maker for a real-provider session it meters (``TrialWiring.stand_in``)."""
        if self.endpoint is not None or self.metered is None:
            return None
        return self.metered.proxy.stand_in_for


@dataclass(frozen=True)
class SessionInputs:
    """What one host session starts from: the trial's scenario, sandbox and budget, the runner's
    environment, the scripted model's endpoint (scripted runs), the confinement and the secrets."""

    entry: ScenarioEntry
    sb: sandboxes.Sandbox
    budget: TrialBudget
    parent_env: dict[str, str]
    endpoint: ScriptedEndpoint | None
    confined: Confinement | None
    secrets: Secrets
    metered: Metered | None = None
    # Harness agent → the name the host selects it by, where the build kept another (its manifest's
    # ``agentNames``: an agent file built for its own host keeps its frontmatter ``name``).
    agent_names: Mapping[str, str] = field(default_factory=dict)


def host_session(host: Host, info: HostInfo, model: str | None, inputs: SessionInputs) -> HostSession:
    """Run the host CLI; its stream feeds the host's monitor, whose running total feeds the gate.

    The session's credentials and the login copied into the trial HOME (as copied) join ``secrets``
    before the session; after it, only tokens the host's refresh wrote into the login's credential
    fields do (``redact.refreshed_credentials``): the agent can rewrite that file, and must not
    choose what the report hides.  Then the login is emptied in place and deleted.
    """
    entry, sb, budget, parent_env = inputs.entry, inputs.sb, inputs.budget, inputs.parent_env
    endpoint, confined, secrets, metered = inputs.endpoint, inputs.confined, inputs.secrets, inputs.metered
    monitor = host.new_monitor()
    gate = TokenGate(budget.maxTokens)

    def on_line(line: str) -> bool:
        monitor.feed(line)
        capture.add(line)
        # With the proxy metering, the stream's gate stays a second stop: the agent can write into
        # the stream, but a forged figure can only end its own session sooner (docs/design.md §10).
        return gate.observe(monitor.cumulative_tokens)

    allowlisted = allowlisted_environment(parent_env, home=sb.home)
    env = host.environment(info, base_env=allowlisted, parent_env=parent_env, home=sb.home, scripted=endpoint)
    env["TMPDIR"] = str(host_tmp(sb))
    if metered is not None and metered.variable is not None:
        env[metered.variable] = metered.proxy.base_url
    if metered is not None and inputs.endpoint is None:
        # The agent never holds the real key: the session gets a per-trial stand-in, which the proxy
        # swaps for the real one on the model routes it forwards (docs/integrity.md "Credentials").
        for name in host.stand_in_env:
            if env.get(name):
                env[name] = metered.proxy.stand_in_for(env[name])
    if metered is not None:  # the host reaches the proxy directly, never through the user's proxy
        for name in ("NO_PROXY", "no_proxy"):
            env[name] = ",".join(filter(None, [env.get(name), "127.0.0.1", "localhost"]))
    logins = host.credential_files(sb.home, {})
    secrets.add(secrets_in_env(env))
    as_copied = {path: login_document(path) for path in logins}
    # Decided on what the session starts with (the host writes its own files into HOME meanwhile).
    exposed = None if endpoint is not None else credential_exposed(host, env, as_copied, confined=confined is not None)
    for path in logins:
        secrets.add(secrets_in_file(path))
    # The transcript's redactor uses the trial's own secrets (the one definition the report uses):
    # the runner's and the session's credential variables, the copied login and the key shapes (a
    # token refreshed mid-session joins only after the session).
    roots = [str(sb.root), str(sb.trial_dir), str(sb.home)]
    capture = StreamCapture(Redactor(secrets, roots, [form for root in roots for form in host.stream_path_forms(root)]))
    agent = entry.scenario.task.agent
    if metered is not None and slash_command(entry.scenario.task.prompt) is not None:
        metered.proxy.watch_for_verbatim(entry.scenario.task.prompt)  # the command's text, or the prompt as typed?
    argv = host.command(info, prompt=entry.scenario.task.prompt, model=model,
                        agent=inputs.agent_names.get(agent, agent) if agent else agent)
    if isinstance(host, PluginLoader):
        argv += host.plugin_args(sb.root)
    if confined is not None and isinstance(host, IsolationAware):
        argv = host.isolated_command(argv)
    if confined is not None and confined.network == "model-only" and metered is not None \
            and metered.proxy.unix_socket is not None:
        # The host's only way out of its network namespace: its model address, relayed to the proxy.
        confined = replace(confined, model_relay=ModelRelay(metered.proxy.unix_socket, metered.proxy.port))
    wrap = confined.wrapper(env) if confined else None
    abort_fd = metered.proxy.abort_fd if metered is not None else None
    with sandboxes.held_logins(logins):  # emptied in place at the end, wherever the agent linked them
        process = run(argv, cwd=sb.root, env=env, timeout_s=budget.timeoutMs / 1000, on_stdout_line=on_line,
                      bounds=Bounds(interrupt_signal=host.interrupt_signal, abort_fd=abort_fd), wrap=wrap)
        outcome = host.finalize(info, monitor, env=env, cwd=sb.root, wrap=wrap)
        for line in outcome.transcript_lines:
            capture.add(line)
        for path in logins:  # a token the host refreshed meanwhile, and nothing else the file now says
            secrets.add(refreshed_credentials(as_copied[path], path, host.refreshed_fields))
    return HostSession(process, outcome, gate, env, capture, metered.proxy.metering() if metered is not None else None,
                       exposed, command=slash_command(entry.scenario.task.prompt))


def credential_exposed(host: Host, env: Mapping[str, str], logins: Mapping[Path, object], *, confined: bool) -> bool:
    """Whether a real-provider session's agent could read a real credential: without namespace
    isolation it runs as the runner's user beside the runner (whose environment and the user's
    logins it can read); else a credential variable of its session that holds no stand-in, a
    credential of a login copied into its HOME (``logins``: each as parsed before the session) that
    is none, or a copied login that is no JSON document (OpenCode V2's credential tables), whose
    credentials cannot be stood in (docs/integrity.md, "Credentials")."""
    def is_stand_in(value: str) -> bool:
        return value.startswith(STAND_IN_PREFIX)

    return (not confined
            or any(env.get(name) and not is_stand_in(env[name]) for name in host.credential_env)
            or any(exposed_fields(login, host.login_fields, is_stand_in) if login is not None else os.path.lexists(path)
                   for path, login in logins.items()))


def session_error(session: HostSession, budget: TrialBudget) -> str | None:
    """The one-line reason a session did not end normally (same order as :func:`verdict`)."""
    process = session.process
    if process.start_error:
        return f"the host could not start: {process.start_error}"
    if process.timed_out:
        return f"host session exceeded timeoutMs={budget.timeoutMs}"
    if session.over_budget:
        return f"cumulative usage {session.tripped_at} exceeded maxTokens={budget.maxTokens}; session aborted"
    if session.ended_by_signal is not None:
        return (f"the host CLI was ended by signal {session.ended_by_signal}, which the runner did not send: "
                "a process of the session (the agent's tools) ended it, so the trial fails")
    if session.host_failed:
        detail = session.outcome.error_message or tail(process.stderr, 500).strip() or "no error text"
        empty = session.metering.empty_answers() if session.metering is not None else None
        unknown = (f"; the prompt runs /{session.command.name} and the host failed before asking the model: "
                   "it may not have that command") if session.command is not None and not session.outcome.usage_events \
            and "/" + session.command.name not in detail else ""
        return f"host session failed (exit {process.returncode}): {detail}" + (f"; {empty}" if empty else "") + unknown
    return None


def transcript_events(host: Host, info: HostInfo, base: TrialRecord, session: HostSession,
                      budget: TrialBudget, prompt: str | None = None) -> list[dict[str, Any]] | None:
    """The session's host-neutral transcript (header first), or None when it cannot be built (a
    stream the host's reader chokes on makes the trajectory checks errors, not the trial a crash);
    ``prompt``, the scenario's, makes the ``command`` event of a ``/name`` prompt."""
    process = session.process
    abort: dict[str, object] | None = None
    if process.timed_out:
        abort = {"reason": "timeout", "message": session_error(session, budget)}
    elif session.over_budget:
        abort = {"reason": "budget", "message": session_error(session, budget)}
        if session.metering is not None and session.metering.tripped_at is not None:
            # The proxy saw the crossing: the stream may hold no usage event past it (the session
            # ended right after the crossing response).
            abort |= {"meteredBy": "proxy", "cumulativeTokens": session.metering.tripped_at}
    try:
        events = build_transcript(session.capture, host=info.name, dialect=info.dialect, scenario=base.scenario,
                                  trial=base.trial, max_tokens=budget.maxTokens, abort=abort,
                                  # a host that sent the /name prompt as typed expanded no command
                                  prompt=None if session.metering is not None and session.metering.verbatim_prompt
                                  else prompt)
    except Exception:  # noqa: BLE001 - the host's stream is untrusted input; its reader must not end the trial
        return None
    file_call = session.outcome.file_call
    if session.metering is not None:
        # The proxy saw every model response: an event none of them vouches for is not the host's own
        # (the agent can write into the stream), shown as such and not counted by the checks.  A host
        # whose stream numbers its calls itself (Gemini CLI) has them matched by tool and order.
        by_order = not host.stream_call_ids and file_call is None
        events[0]["unverifiedEvents"] = mark_unverified(events[1:], session.metering.model_answers, file_call,
                                                        by_order=by_order)
        if file_call is not None:  # a file the agent can rewrite: what it left out is restored too
            session.restored_calls = restore_calls(events, session.metering, file_call, session.capture.redact)
    return events


def restore_calls(events: list[dict[str, Any]], metered: Metering,
                  file_call: Callable[[str, Mapping[str, Any]], tuple[str, dict[str, Any]]],
                  redact: Callable[[str], str]) -> list[str]:
    """Add to ``events`` (before its closing ``result`` and ``abort``) every tool call of the served
    responses the transcript does not show, from the proxy's record and redacted like the stream;
    "name id" each.  The trajectory checks count them: a rewritten rollout cannot hide a command the
    model ran.  The crossing response's calls are left out: the session ended on that response, so
    the host never ran them and may not have written them down."""
    restored = []
    at = len(events)
    while at > 1 and events[at - 1].get("type") in ("result", "abort"):
        at -= 1
    last_t = events[at - 1].get("t", 0) if at > 0 else 0
    unshown = unshown_calls(events[1:], metered.model_answers)
    for call in (call for call in unshown if call.id not in metered.crossing_calls):
        tool, arguments = file_call(call.name, call.arguments or {})
        event = {"type": "tool_call", "t": last_t, "turn": events[at - 1].get("turn", 0) if at > 0 else 0,
                 "id": call.id, "tool": tool, "hostTool": call.name, "input": arguments, "agent": None,
                 "restored": True, "restoredReason": "the model made this call; the host's file does not show it"}
        events.insert(at, json.loads(redact(json.dumps(event, ensure_ascii=False))))
        at += 1
        restored.append(f"{call.name} {call.id}"[:200])
    for seq, event in enumerate(events[1:], start=1):
        event["seq"] = seq
    return restored


def transcript_files(out_dir: Path | None, base: TrialRecord, session: HostSession,
                     events: list[dict[str, Any]] | None) -> dict[str, object]:
    """Write the trial's transcript and raw stream beside the report; the record fields naming them."""
    if out_dir is None or events is None:
        return {}
    try:
        rel_transcript, rel_stream = write_trial_files(out_dir, session.capture, events, base.scenario, base.trial, base.variant)
    except OSError:  # a full disk loses the transcript, not the trial's verdict
        return {}
    return {"transcript": rel_transcript, "hostStream": rel_stream, "transcriptTruncated": session.capture.truncated}


def session_view(session: HostSession, events: list[dict[str, Any]] | None,
                 agent_names: Mapping[str, str] | None = None, *, skills_run_as_commands: bool = False) -> SessionView:
    """What the trajectory checks count on: the events after the header, the session's totals, the
    names the host knows harness agents by (where the build kept another), and whether the host
    runs a skill as ``/name`` (``skill-used`` then counts that ``command`` event)."""
    totals = session.totals
    return SessionView(had_session=True, events=tuple(events[1:]) if events is not None else None,
                       usage=totals.usage, cost_usd=totals.cost_usd,
                       duration_ms=int(session.process.duration_s * 1000), agent_names=dict(agent_names or {}),
                       skills_run_as_commands=skills_run_as_commands)


@dataclass(frozen=True)
class SessionTotals:
    """What the session used, as the record states it and the usage-within check bounds it."""

    usage: Usage | None
    cost_usd: float | None
    unmonitored: bool
    notes: list[str]
    cost_basis: str | None = None  # the price table's label when ``cost_usd`` is its estimate
    model_identity: str | None = None  # the provider's word (the proxy's) where it named one, else the host's


def _priced(model: str | None, usage: Usage) -> float | None:
    return estimate_cost(model, usage.inputTokens + usage.cacheReadTokens, usage.cacheReadTokens, usage.outputTokens,
                         shipped_table())


def proxy_estimate(metered: Metering, usage: Usage | None) -> float | None:
    """The record's usage priced at the models the provider says answered: each response at its own
    model when the record's usage is the proxy's (a response naming none at the dearest of them),
    else the whole at the dearest; None when no response named a model or one is not in the table."""
    if usage is None or not metered.models:
        return None
    dearest = [_priced(model, usage) for model in metered.models]
    if any(cost is None for cost in dearest):
        return None
    if usage != metered.usage or len(metered.responses) != len(metered.response_models):
        return max(cost for cost in dearest if cost is not None)
    worst = max(metered.models, key=lambda model: _priced(model, usage) or 0.0)
    costs = [_priced(model or worst, response) for model, response in zip(metered.response_models, metered.responses,
                                                                        strict=True)]
    # The responses that reported usage may not be all the proxy counted (a cut one): the rest at the dearest.
    counted = sum_usage(list(metered.responses))
    rest = Usage(**{name: max(getattr(usage, name) - getattr(counted, name), 0) for name in Usage.model_fields})
    return sum(cost or 0.0 for cost in costs) + (_priced(worst, rest) or 0.0)


def session_totals(session: HostSession) -> SessionTotals:
    outcome = session.outcome
    notes = list(outcome.notes)
    cost = stream_cost(outcome.cost_usd)  # what finalize added (an export) is bounded like the stream
    if cost is None and outcome.cost_usd is not None:
        notes.append(f"ignored cost {outcome.cost_usd!r}")
    usage, unmonitored, metered = outcome.usage, outcome.budget_unmonitored, session.metering
    if metered is not None:
        # The larger count: the proxy's, unless the host's stream reported more than the proxy saw
        # (traffic that bypassed it); counts only go up (docs/design.md §10).
        if metered.answered and (usage is None or metered.usage.total >= usage.total):
            usage = metered.usage
        # Unmonitored when neither the provider's responses nor the stream reported any usage.
        unmonitored = not metered.answered and outcome.budget_unmonitored
        cost = metered.cost_usd if metered.cost_usd is not None else cost
    identity = outcome.model_identity
    basis = outcome.cost_basis if metered is None or metered.cost_usd is None else None
    if metered is not None and metered.models:
        # The provider named the model that answered: that is the identity, and what a host that
        # reports no cost of its own (an estimate, or none) is priced at — never a name the agent can
        # write (Codex's rollout, a forged Gemini result).
        if not metered.names_model(identity):
            identity = metered.main_model
        if metered.cost_usd is None and (basis is not None or cost is None):
            cost = proxy_estimate(metered, usage)
            basis = shipped_table().label if cost is not None else None
    elif basis is not None:  # the host reports no cost: the estimate is priced from the counts the record keeps
        cost = None if usage is None else estimate_cost(identity, usage.inputTokens + usage.cacheReadTokens,
                                                        usage.cacheReadTokens, usage.outputTokens)
        basis = basis if cost is not None else None
    return SessionTotals(usage, cost, unmonitored, notes, basis, identity)


def disagreement(session: HostSession) -> str | None:
    """Where the host's stream and the metering proxy disagree, in words (None when they agree)."""
    metered, outcome = session.metering, session.outcome
    if metered is None:
        return None
    found = []
    streamed = outcome.usage.total if outcome.usage is not None else 0
    if streamed != metered.usage.total:
        found.append(f"the host's stream reported {streamed} tokens, the proxy metered {metered.usage.total}")
    if outcome.is_error and session.process.returncode == 0 and metered.vouches_for_the_model:
        answered = (f"answered all {metered.answered} request(s)" if not metered.requester_errors else
                    f"answered {metered.answered} request(s) and the provider failed none (it refused "
                    f"{metered.requester_errors} as the requester's own error: malformed, or without the trial's "
                    "credential)")
        found.append(f"the host's stream reported an error ({(outcome.error_message or '')[:200]}) but the model "
                     f"{answered} and the host exited 0")
    named = outcome.model_identity
    if metered.models and named is not None and not metered.names_model(named):
        found.append(f"the host named the model {named[:200]!r}, the provider's responses name "
                     f"{', '.join(repr(m) for m in metered.models[:3])}")
    if session.restored_calls:
        found.append(f"the host's transcript lacks {len(session.restored_calls)} tool call(s) the model made, "
                     f"restored from the proxy's record: {', '.join(session.restored_calls[:5])}")
    return "; ".join(found) or None


@contextmanager
def scripted_model(entry: ScenarioEntry, sb: sandboxes.Sandbox, enabled: bool,
                   agent_names: Mapping[str, str] | None = None, skill_names: Mapping[str, str] | None = None,
                   shell_tools: ShellTools | None = None,
                   ) -> Iterator[tuple[ScriptedEndpoint | None, Callable[[], int] | None]]:
    """The scripted model server for one trial (scripted runs only); ``shell_tools``: the host's
    (``Host.shell_tools``), which the scripted model plays file actions with.

    Yields the endpoint the host is pointed at (the adapter derives its own wiring from it) and a
    callable counting the turns served; for a real-provider run both are ``None``.  The script is
    the one discovery read and validated (``entry.parsed_script``): a trial never parses it again.
    """
    if not enabled:
        yield None, None
        return
    from pytest_atlante.provider.loopback import new_trial_key
    from pytest_atlante.provider.scripted import ScriptedModelServer

    assert entry.parsed_script is not None, "scripted runs validate every scenario's script first"
    # Its own key in its path: another trial's agent cannot play this trial's script (provider/loopback.py).
    server = ScriptedModelServer(entry.parsed_script, sandbox_root=sb.root, trial_key=new_trial_key(),
                                 agent_names=agent_names, skill_names=skill_names, shell_tools=shell_tools)
    server.start()
    try:
        yield server.endpoint, lambda: server.turns_served
    finally:
        server.stop()


@contextmanager
def metering_proxy(host: Host, parent_env: dict[str, str], scripted: ScriptedEndpoint | None, max_tokens: int,
                   unix_socket: Path | None, with_host: bool = True, *, model: str | None = None
                   ) -> Iterator[ModelRoute]:
    """The trial's metering proxy (docs/design.md §10), in front of the scripted model or the real
    provider: the scripted endpoint the adapter is handed becomes the proxy's address, a real
    provider's base URL variable is pointed at it; with ``unix_socket`` (a ``model-only`` trial,
    §10) it listens there too.  No proxy when the provider mode cannot go through it (metered from
    the stream), nor for a trial without a host session."""
    upstream, variable = _upstream(host, parent_env, scripted, model) if with_host else (None, None)
    if upstream is None:
        yield ModelRoute(scripted, None)
        return
    with MeteringProxy(upstream, max_tokens, unix_socket=unix_socket) as proxy:
        if scripted is not None:
            scripted = replace(scripted, anthropic_base_url=proxy.base_url, openai_base_url=f"{proxy.base_url}/v1")
        yield ModelRoute(scripted, Metered(proxy, variable))


def _upstream(host: Host, parent_env: dict[str, str], scripted: ScriptedEndpoint | None, model: str | None
              ) -> tuple[Upstream | None, str | None]:
    """Where the proxy forwards, and the host's variable to point at it (None for the scripted
    endpoint, which the adapter is handed rewritten)."""
    if scripted is not None:
        return Upstream(scripted.anthropic_base_url), None
    provider = host.provider_endpoint(parent_env, model)
    if provider is None:
        return None, None
    try:
        return Upstream(provider.upstream), provider.variable
    except ValueError:  # no http(s) URL: the host fails on it as it would without the proxy
        return None, None


def model_socket(sb: sandboxes.Sandbox) -> Path:
    """Where a ``model-only`` trial's proxy listens on a unix socket: in the trial directory (removed
    with it), or — when that path is too long for a socket address (108 bytes) — in a private
    directory of the system's temp dir."""
    path = sb.trial_dir / "model.sock"
    if len(os.fsencode(path)) < 100:
        return path
    return Path(tempfile.mkdtemp(prefix="atlante-model-", dir="/tmp")) / "model.sock"
