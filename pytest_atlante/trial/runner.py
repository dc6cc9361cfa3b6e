"""One trial, end to end: the pipeline of docs/design.md §4, one small function per step.

    assemble → setup → baseline → host session (stream monitor + token gate) → diff → checks → record

Plain code, no pytest: ``items.TrialItem.runtest`` calls :meth:`TrialRunner.run`.  A trial always
ends with a ``TrialRecord`` — every failure inside a trial becomes a verdict (``infra-error`` when
nothing better applies), never an exception into pytest, except a ``KeyboardInterrupt``, which is
recorded and re-raised (as :class:`TrialInterrupted`) so the run stops.  The verdict itself is the
pure :func:`verdict` over the :class:`Facts` the steps gathered.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

from pytest_atlante.checks import NO_SESSION, SessionView, run_checks
from pytest_atlante.hosts import host_for
from pytest_atlante.hosts.base import Host, HostInfo, ScriptedEndpoint, SessionOutcome
from pytest_atlante.hosts.streams import stream_cost
from pytest_atlante.pathnames import escape_surrogates
from pytest_atlante.records import (
    INTERRUPTED_ERROR,
    CheckResult,
    TrialRecord,
    Usage,
    Verdict,
    cap_diff,
    cap_paths,
    strongest,
    tail,
)
from pytest_atlante.sandbox import rundirs
from pytest_atlante.sandbox import trialdir as sandboxes
from pytest_atlante.sandbox.audit import Audit
from pytest_atlante.sandbox.isolation import Confinement, IsolationRecord, ModelRelay, hidden_roots
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
    scrub_paths,
    secrets_in_env,
    secrets_in_file,
)
from pytest_atlante.sandbox.sources import RunSources, changed_in_copy, copy_of
from pytest_atlante.suite.build import tree_dir
from pytest_atlante.suite.discovery import ScenarioEntry, ValidSuite
from pytest_atlante.suite.scenario import SETUP_TIMEOUT_MS
from pytest_atlante.trial.budget import TokenGate, TrialBudget
from pytest_atlante.trial.proxy import Metering, MeteringProxy, Upstream
from pytest_atlante.trial.transcript import (
    Redactor,
    StreamCapture,
    build_transcript,
    write_trial_files,
)

__all__ = ["Facts", "Progress", "TrialInterrupted", "TrialKey", "TrialRunner", "verdict"]

Progress = Callable[[str], None]


class TrialKey(NamedTuple):
    """Which trial a test report belongs to; rides on every report so nobody parses node ids."""

    scenario: str
    trial: int


# --------------------------------------------------------------------------- the verdict


@dataclass(frozen=True)
class Facts:
    """What the steps of one trial established; :func:`verdict` turns them into one verdict."""

    allocated: bool = True       # maxSessions left this trial a host session
    prepared: bool = True        # the sandbox was assembled and setup succeeded
    host_started: bool = True    # the host's process could be started
    timed_out: bool = False      # the host session exceeded timeoutMs
    aborted: bool = False        # the token gate stopped the session (maxTokens)
    host_failed: bool = False    # the host exited non-zero or reported an error result
    check_error: bool = False    # a check could not run
    check_failed: bool = False   # a check ran and failed
    escaped: bool = False        # the trial changed something outside its sandbox (the audit)


def verdict(facts: Facts) -> Verdict:
    """The precedence table: skipped-budget › infra-error › timeout › budget-exceeded › fail › pass.

    A session ends one way only: a timeout or a budget abort kills the host, so its non-zero exit
    is the consequence, not a host failure; the timeout is checked first because the clock, not
    the gate, stopped a session that did both.
    """
    if not facts.allocated:
        return "skipped-budget"
    if not facts.prepared:
        return "infra-error"
    found: list[Verdict] = []
    if not facts.host_started:
        found.append("infra-error")
    elif facts.timed_out:
        found.append("timeout")
    elif facts.aborted:
        found.append("budget-exceeded")
    elif facts.host_failed:
        found.append("infra-error")
    if facts.check_error:
        found.append("infra-error")
    elif facts.check_failed:
        found.append("fail")
    if facts.escaped:
        found.append("fail")
    return strongest(found)


# --------------------------------------------------------------------------- the steps


class TrialInterrupted(KeyboardInterrupt):
    """Ctrl-C during a trial: carries the trial's record (marked interrupted) so the report keeps it."""

    def __init__(self, record: TrialRecord) -> None:
        super().__init__("trial interrupted")
        self.record = record


class StepFailed(Exception):
    """A step before the host session could not complete; the trial is ``infra-error``."""


@dataclass
class HostSession:
    """The host session step's result: the process, what its stream said, and the gate."""

    process: RunResult
    outcome: SessionOutcome
    gate: TokenGate
    env: dict[str, str]
    capture: StreamCapture  # the stream as the transcript sees it (redacted, capped)
    metering: Metering | None = None  # what the metering proxy saw; None when metered from the stream

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
    def host_failed(self) -> bool:
        """The host failed: its exit status says so, or its stream does and the proxy does not
        contradict it (docs/design.md §10) — a stream the agent can write into cannot turn the agent's
        own failure into an infrastructure error while the model answered every request."""
        if self.process.returncode != 0:
            return True
        return self.outcome.is_error and not (self.metering is not None and self.metering.vouches_for_the_model)


def assemble(run_id: str, entry: ScenarioEntry, trial: int, overlay: Path, sources: RunSources) -> sandboxes.Sandbox:
    """The sandbox, from the run's copies of the fixture and the build tree (never the project's own)."""
    try:
        return sandboxes.assemble(run_id, entry.scenario.name, trial, copy_of(sources, entry.fixture),
                                  copy_of(sources, overlay))
    except (sandboxes.OverlayCollision, sandboxes.SandboxError, OSError) as exc:
        raise StepFailed(str(exc)) from exc


def clean_sources(entry: ScenarioEntry, overlay: Path, sources: RunSources, project: Path) -> None:
    """The copies this trial was assembled from still match the run's record (else ``StepFailed``)."""
    problems = []
    for what, root in (("fixture", entry.fixture), ("build tree", overlay)):
        changed = changed_in_copy(sources, root)
        if changed:
            shown = root.relative_to(project).as_posix() if root.is_relative_to(project) else str(root)
            problems.append(f"the run's copy of the {what} {shown} changed after the run made it: {_listed(changed)}")
    if problems:
        raise StepFailed("; ".join(problems) + " (a trial wrote into the run's temp directory; see the escapes of earlier trials)")


def _listed(paths: list[str], limit: int = 10) -> str:
    return ", ".join(paths[:limit]) + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def setup(entry: ScenarioEntry, sb: sandboxes.Sandbox, parent_env: dict[str, str]) -> None:
    """The scenario's setup command: the full environment (the reference says so), before the baseline."""
    command = entry.scenario.task.setup
    if not command:
        return
    result = run(command, cwd=sb.root, env=parent_env, timeout_s=SETUP_TIMEOUT_MS / 1000)
    if result.start_error or result.timed_out or result.returncode != 0:
        why = result.start_error or ("timed out after 300 s" if result.timed_out else f"exited {result.returncode}")
        output = tail(result.stdout + result.stderr)
        raise StepFailed(f"setup {' '.join(command)} failed: {why}\n{output}".rstrip())


def baseline(entry: ScenarioEntry, sb: sandboxes.Sandbox) -> None:
    sandboxes.snapshot(sb, [c.path for c in entry.scenario.checks if c.type == "file-unchanged"])


def confinement(sb: sandboxes.Sandbox, isolation: IsolationRecord | None, hidden: tuple[Path, ...],
                project: Path | None = None) -> Confinement | None:
    """The command-wrapping step: namespace isolation's mounts for this trial (``isolation``), used by
    the host session and the checks alike; None without namespace isolation.  The ``project`` stays
    visible read-only even where it lies in a hidden directory (HOME)."""
    if isolation is None or isolation.mode != "namespace":
        return None
    return Confinement(writable=(sb.root, sb.home, host_tmp(sb)), hidden=hidden, trial_dir=sb.trial_dir, cwd=sb.root,
                       network=isolation.network, shown=(project,) if project is not None else ())


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
    if metered is not None:  # the host reaches the proxy directly, never through the user's proxy
        for name in ("NO_PROXY", "no_proxy"):
            env[name] = ",".join(filter(None, [env.get(name), "127.0.0.1", "localhost"]))
    logins = host.credential_files(sb.home, {})
    secrets.add(secrets_in_env(env))
    as_copied = {path: login_document(path) for path in logins}
    for path in logins:
        secrets.add(secrets_in_file(path))
    # The transcript's redactor uses the trial's own secrets (the one definition the report uses):
    # the runner's and the session's credential variables, the copied login and the key shapes (a
    # token refreshed mid-session joins only after the session).
    roots = [str(sb.root), str(sb.trial_dir), str(sb.home)]
    capture = StreamCapture(Redactor(secrets, roots, [form for root in roots for form in host.stream_path_forms(root)]))
    argv = host.command(info, prompt=entry.scenario.task.prompt, agent=entry.scenario.task.agent, model=model)
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
        for path in logins:  # a token the host refreshed meanwhile, and nothing else the file now says
            secrets.add(refreshed_credentials(as_copied[path], path, host.refreshed_fields))
    return HostSession(process, outcome, gate, env, capture, metered.proxy.metering() if metered is not None else None)


def session_error(session: HostSession, budget: TrialBudget) -> str | None:
    """The one-line reason a session did not end normally (same order as :func:`verdict`)."""
    process = session.process
    if process.start_error:
        return f"the host could not start: {process.start_error}"
    if process.timed_out:
        return f"host session exceeded timeoutMs={budget.timeoutMs}"
    if session.over_budget:
        return f"cumulative usage {session.tripped_at} exceeded maxTokens={budget.maxTokens}; session aborted"
    if session.host_failed:
        detail = session.outcome.error_message or tail(process.stderr, 500).strip() or "no error text"
        return f"host session failed (exit {process.returncode}): {detail}"
    return None


def transcript_events(info: HostInfo, base: TrialRecord, session: HostSession,
                      budget: TrialBudget) -> list[dict[str, Any]] | None:
    """The session's host-neutral transcript (header first), or None when it cannot be built (a
    stream the host's reader chokes on makes the trajectory checks errors, not the trial a crash)."""
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
        return build_transcript(session.capture, host=info.name, dialect=info.dialect, scenario=base.scenario,
                                trial=base.trial, max_tokens=budget.maxTokens, abort=abort)
    except Exception:  # noqa: BLE001 - the host's stream is untrusted input; its reader must not end the trial
        return None


def transcript_files(out_dir: Path | None, base: TrialRecord, session: HostSession,
                     events: list[dict[str, Any]] | None) -> dict[str, object]:
    """Write the trial's transcript and raw stream beside the report; the record fields naming them."""
    if out_dir is None or events is None:
        return {}
    try:
        rel_transcript, rel_stream = write_trial_files(out_dir, session.capture, events, base.scenario, base.trial)
    except OSError:  # a full disk loses the transcript, not the trial's verdict
        return {}
    return {"transcript": rel_transcript, "hostStream": rel_stream, "transcriptTruncated": session.capture.truncated}


def session_view(session: HostSession, events: list[dict[str, Any]] | None) -> SessionView:
    """What the trajectory checks count on: the events after the header, and the session's totals."""
    totals = session_totals(session)
    return SessionView(had_session=True, events=tuple(events[1:]) if events is not None else None,
                       usage=totals.usage, cost_usd=totals.cost_usd,
                       duration_ms=int(session.process.duration_s * 1000))


def checks(entry: ScenarioEntry, sb: sandboxes.Sandbox, diff: sandboxes.Diff, parent_env: dict[str, str],
           confined: Confinement | None, secrets: Secrets, session: SessionView = NO_SESSION) -> list[CheckResult]:
    """Every check, even after one fails; checks get the allowlist without credentials and an empty
    HOME of their own (the trial HOME held the login and the host's state), under a random name the
    agent cannot have prepared (a planted ``.gitconfig``, a symlink).  Under namespace isolation that
    HOME is writable in place of the trial HOME, which checks do not see at all."""
    home = Path(tempfile.mkdtemp(prefix="check-home-", dir=sb.trial_dir))
    env = allowlisted_environment(parent_env, home=home)
    if confined is not None:
        confined = replace(confined, writable=(sb.root, home, host_tmp(sb)))
    return run_checks(entry.scenario.checks, sandbox=sb, diff=diff, env=env,
                      wrap=confined.wrapper(env) if confined else None, redact=secrets, session=session)


def session_facts(session: HostSession, results: list[CheckResult], escapes: list[str]) -> Facts:
    process = session.process
    return Facts(host_started=not process.start_error, timed_out=process.timed_out, aborted=session.over_budget,
                 host_failed=session.host_failed,
                 check_error=any(c.error for c in results), check_failed=any(not c.passed for c in results),
                 escaped=bool(escapes))


def escape_message(escapes: list[str]) -> str:
    return f"the trial changed {len(escapes)} path(s) outside its sandbox: {_listed(escapes)}"


@dataclass(frozen=True)
class SessionTotals:
    """What the session used, as the record states it and the usage-within check bounds it."""

    usage: Usage | None
    cost_usd: float | None
    unmonitored: bool
    notes: list[str]


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
    return SessionTotals(usage, cost, unmonitored, notes)


def record(base: TrialRecord, session: HostSession, budget: TrialBudget, diff: sandboxes.Diff,
           results: list[CheckResult], escapes: list[str], secrets: Secrets) -> TrialRecord:
    diff_text, truncated = cap_diff(secrets(diff.text))  # redacted before the cut: no half secret survives
    changed_paths, changed_total = cap_paths(diff.changed_paths)
    outcome = session.outcome
    totals = session_totals(session)
    usage, cost, unmonitored, notes = totals.usage, totals.cost_usd, totals.unmonitored, totals.notes
    return base.model_copy(update={
        "verdict": verdict(session_facts(session, results, escapes)),
        "hostDurationMs": int(session.process.duration_s * 1000),
        "checks": results,
        "diff": diff_text,
        "diffTruncated": truncated,
        "changedPaths": changed_paths,
        "changedPathsTotal": changed_total,
        "usage": usage,
        "costUsd": cost,
        "modelIdentity": outcome.model_identity,
        "budgetUnmonitored": unmonitored,
        "streamNotes": notes,
        "meteredBy": "stream" if session.metering is None else "proxy",
        "meteringDisagreement": disagreement(session),
        "error": session_error(session, budget) or (escape_message([secrets.numbered(e) for e in escapes])
                                                    if escapes else None),
        "escapes": escapes,
    })


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
        found.append(f"the host's stream reported an error ({(outcome.error_message or '')[:200]}) but the model "
                     f"answered all {metered.answered} request(s) and the host exited 0")
    return "; ".join(found) or None


def untouched_record(base: TrialRecord, diff: sandboxes.Diff, results: list[CheckResult]) -> TrialRecord:
    """The record of a no-op trial (the self-test): the checks against the untouched fixture."""
    diff_text, truncated = cap_diff(diff.text)
    return base.model_copy(update={
        "verdict": verdict(Facts(check_error=any(c.error for c in results), check_failed=any(not c.passed for c in results))),
        "checks": results,
        "diff": diff_text,
        "diffTruncated": truncated,
        "changedPaths": diff.changed_paths,
    })


def scrubbed(rec: TrialRecord, sb: sandboxes.Sandbox, secrets: Secrets) -> TrialRecord:
    """The record as it may leave the trial: no path of the trial's own directories (the report adds
    a pattern backstop), no known credential value, and nothing that cannot be encoded (paths come
    in their shown form already; a name's surrogate escapes in free text, such as an exception's
    message, become ``\\xNN`` here)."""
    roots = [str(sb.root), str(sb.trial_dir), str(sb.home)]

    def text(value: str) -> str:
        return escape_surrogates(secrets(scrub_paths(value, roots)))

    return rec.model_copy(update={
        "error": text(rec.error) if rec.error else None,
        "diff": text(rec.diff) if rec.diff else rec.diff,
        "checks": [c.model_copy(update={"message": text(c.message), "output": text(c.output) if c.output else c.output})
                   for c in rec.checks],
        # A name holding a secret still shows, numbered, and keeps failing what it failed.
        "changedPaths": [secrets.numbered(p) for p in rec.changedPaths],
        "escapes": [secrets.numbered(p) for p in rec.escapes],
    })


# --------------------------------------------------------------------------- the runner


@dataclass(frozen=True)
class RunnerSettings:
    """The run's choices every trial of it follows: the scripted model, ``--atlante-keep``, the
    isolation decided once, whether transcripts are written beside the report, and what other
    writers of the run are configured to write (``Audit.for_run``'s ``outputs``: pytest's and its
    plugins' files, other runs' report directories), which the audit never blames a trial for."""

    scripted: bool = False
    keep: bool = False
    isolation: IsolationRecord | None = None
    transcripts: bool = True
    outputs: tuple[Path, ...] = ()


class TrialRunner:
    """Runs trials for one process; the role object builds it once and stores it in ``config.stash``."""

    def __init__(self, suite: ValidSuite, run_id: str, info: HostInfo, *, sources: RunSources, report_dir: Path,
                 settings: RunnerSettings) -> None:
        self.suite = suite
        self.model = suite.eval.model
        self.run_id = run_id
        self.info = info
        self.host = host_for(info.name)
        self.scripted = settings.scripted
        self.keep = settings.keep
        self.overlay = tree_dir(suite.project_root, suite.eval.host)
        self.sources = sources
        self.audit = Audit.for_run(suite.project_root, home=Path.home(), report_dir=report_dir,
                                   run_temp=sandboxes.run_dir(run_id), extra_roots=[pack.root for pack in suite.packs],
                                   outputs=settings.outputs)
        self.isolation = settings.isolation
        self.hidden = hidden_roots(user_home=Path.home(), project_root=suite.project_root, report_dir=report_dir)
        # Held for this process's life: a later run removes the run directory only once no process
        # of this run is alive (rundirs).
        self.claim = rundirs.claim(run_id)
        # Where this process writes each trial's transcript: beside the report.
        self.out_dir = report_dir if settings.transcripts else None

    def close(self) -> None:
        self.claim.release()

    def run(self, entry: ScenarioEntry, trial: int, node_id: str, budget: TrialBudget, progress: Progress,
            *, with_host: bool = True) -> TrialRecord:
        """One trial; ``with_host=False`` is the self-test's no-op trial: the same sandbox, host
        configuration, setup, baseline, diff and checks, with no host session (zero tokens)."""
        base = TrialRecord(scenario=entry.scenario.name, trial=trial, nodeId=node_id, verdict="skipped-budget")
        if not budget.allocated:
            return base
        started = time.monotonic()
        try:
            rec = self._allocated(entry, trial, base, budget, progress, with_host)
        except KeyboardInterrupt as exc:
            rec = base.model_copy(update={"verdict": "infra-error", "interrupted": True,
                                          "error": INTERRUPTED_ERROR,
                                          "durationMs": int((time.monotonic() - started) * 1000)})
            raise TrialInterrupted(rec) from exc
        return rec.model_copy(update={"durationMs": int((time.monotonic() - started) * 1000)})

    def _allocated(self, entry: ScenarioEntry, trial: int, base: TrialRecord, budget: TrialBudget,
                   progress: Progress, with_host: bool) -> TrialRecord:
        progress("sandbox")
        try:
            sb = assemble(self.run_id, entry, trial, self.overlay, self.sources)
        except StepFailed as exc:
            return base.model_copy(update={"verdict": "infra-error", "error": str(exc)})
        # Known credentials: the runner's secret variables and the user's stored login, whatever
        # the trial does with them (the agent can read both through absolute paths).
        parent_env = dict(os.environ)
        secrets = Secrets(secrets_in_env(parent_env))
        for path in self.host.credential_files(Path.home(), parent_env):
            secrets.add(secrets_in_file(path))
        try:
            model_only = self.isolation is not None and self.isolation.network == "model-only"
            relay_socket = model_socket(sb) if model_only and with_host else None
            with scripted_model(entry, sb, self.scripted and with_host) as (endpoint, turns), \
                    metering_proxy(self.host, parent_env, endpoint, budget.maxTokens, relay_socket, with_host) as route:
                try:
                    clean_sources(entry, self.overlay, self.sources, self.suite.project_root)
                    rec = self._in_sandbox(entry, sb, base, budget, progress, route, secrets, with_host)
                except StepFailed as exc:
                    rec = base.model_copy(update={"verdict": verdict(Facts(prepared=False)), "error": str(exc)})
                except Exception as exc:  # noqa: BLE001 - the trial "could not produce a normal verdict"
                    rec = base.model_copy(update={"verdict": "infra-error", "error": f"{type(exc).__name__}: {exc}"})
                if turns is not None:
                    rec = rec.model_copy(update={"scriptedTurns": turns()})
            return scrubbed(rec, sb, secrets)
        finally:
            if self.keep:
                sandboxes.strip_kept(sb)
            else:
                sandboxes.remove(sb)

    def _in_sandbox(self, entry: ScenarioEntry, sb: sandboxes.Sandbox, base: TrialRecord, budget: TrialBudget,
                    progress: Progress, route: ModelRoute, secrets: Secrets, with_host: bool) -> TrialRecord:
        endpoint = route.endpoint
        parent_env = dict(os.environ)
        self.host.prepare(self.info, sandbox_root=sb.root, home=sb.home, user_home=Path.home(),
                          parent_env=parent_env, model=self.model, scripted=endpoint)
        if entry.scenario.task.setup:
            progress("setup")
            setup(entry, sb, parent_env)
        baseline(entry, sb)
        # The checks run confined as in a real trial, with or without a host session before them.
        confined = confinement(sb, self.isolation, self.hidden, self.suite.project_root)
        if not with_host:
            progress("checks")
            diff = sandboxes.collect_diff(sb, self.host.owned_dir)
            return untouched_record(base, diff, checks(entry, sb, diff, parent_env, confined, secrets))
        # The hermeticity audit's window: the session and the checks.  Under namespace isolation
        # the places the confinement keeps read-only (the project, HOME, the report) are not the trial's.
        watched = self.audit.start(confined)
        progress("host session")
        inputs = SessionInputs(entry, sb, budget, parent_env, endpoint, confined, secrets, route.metered)
        session = host_session(self.host, self.info, self.model, inputs)
        events = transcript_events(self.info, base, session, budget)
        files = transcript_files(self.out_dir, base, session, events)
        progress("checks")
        diff = sandboxes.collect_diff(sb, self.host.owned_dir)
        results = checks(entry, sb, diff, parent_env, confined, secrets, session_view(session, events))
        return record(base, session, budget, diff, results, self.audit.escapes(watched), secrets).model_copy(update=files)


@contextmanager
def scripted_model(entry: ScenarioEntry, sb: sandboxes.Sandbox, enabled: bool
                   ) -> Iterator[tuple[ScriptedEndpoint | None, Callable[[], int] | None]]:
    """The scripted model server for one trial (scripted runs only).

    Yields the endpoint the host is pointed at (the adapter derives its own wiring from it) and a
    callable counting the turns served; for a real-provider run both are ``None``.  The script is
    the one discovery read and validated (``entry.parsed_script``): a trial never parses it again.
    """
    if not enabled:
        yield None, None
        return
    from pytest_atlante.trial.scripted import ScriptedModelServer

    assert entry.parsed_script is not None, "scripted runs validate every scenario's script first"
    server = ScriptedModelServer(entry.parsed_script, sandbox_root=sb.root)
    server.start()
    try:
        yield server.endpoint, lambda: server.turns_served
    finally:
        server.stop()


@contextmanager
def metering_proxy(host: Host, parent_env: dict[str, str], scripted: ScriptedEndpoint | None, max_tokens: int,
                   unix_socket: Path | None, with_host: bool = True) -> Iterator[ModelRoute]:
    """The trial's metering proxy (docs/design.md §10), in front of the scripted model or the real
    provider: the scripted endpoint the adapter is handed becomes the proxy's address, a real
    provider's base URL variable is pointed at it; with ``unix_socket`` (a ``model-only`` trial,
    §10) it listens there too.  No proxy when the provider mode cannot go through it (metered from
    the stream), nor for a trial without a host session."""
    upstream, variable = _upstream(host, parent_env, scripted) if with_host else (None, None)
    if upstream is None:
        yield ModelRoute(scripted, None)
        return
    with MeteringProxy(upstream, max_tokens, unix_socket=unix_socket) as proxy:
        if scripted is not None:
            scripted = replace(scripted, anthropic_base_url=proxy.base_url, openai_base_url=f"{proxy.base_url}/v1")
        yield ModelRoute(scripted, Metered(proxy, variable))


def _upstream(host: Host, parent_env: dict[str, str], scripted: ScriptedEndpoint | None
              ) -> tuple[Upstream | None, str | None]:
    """Where the proxy forwards, and the host's variable to point at it (None for the scripted
    endpoint, which the adapter is handed rewritten)."""
    if scripted is not None:
        return Upstream(scripted.anthropic_base_url), None
    provider = host.provider_endpoint(parent_env)
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
