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
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple, Protocol, runtime_checkable

from pytest_atlante.checks import NO_SESSION, SessionView, run_checks
from pytest_atlante.hosts import host_for
from pytest_atlante.hosts.base import SCRIPTED_MODEL_ID, HostInfo, TrialWiring
from pytest_atlante.pathnames import escape_surrogates
from pytest_atlante.records import (
    INTERRUPTED_ERROR,
    CheckResult,
    TrialRecord,
    Verdict,
    cap_diff,
    cap_paths,
    strongest,
    tail,
)
from pytest_atlante.sandbox import rundirs
from pytest_atlante.sandbox import trialdir as sandboxes
from pytest_atlante.sandbox.audit import Audit
from pytest_atlante.sandbox.isolation import Confinement, IsolationRecord, hidden_roots
from pytest_atlante.sandbox.process import (
    allowlisted_environment,
    run,
)
from pytest_atlante.sandbox.redact import (
    Secrets,
    scrub_paths,
    secrets_in_env,
    secrets_in_file,
)
from pytest_atlante.sandbox.sources import RunSources, changed_in_copy, copy_of
from pytest_atlante.suite.build import host_agent_names, tree_dir
from pytest_atlante.suite.discovery import ScenarioEntry, ValidSuite
from pytest_atlante.suite.scenario import SETUP_TIMEOUT_MS
from pytest_atlante.suite.variants import Arm
from pytest_atlante.trial.budget import TrialBudget
from pytest_atlante.trial.session import (
    HostSession,
    ModelRoute,
    SessionInputs,
    disagreement,
    host_session,
    host_tmp,
    metering_proxy,
    model_socket,
    scripted_model,
    session_error,
    session_view,
    transcript_events,
    transcript_files,
)

__all__ = ["Facts", "Progress", "SessionWatcher", "TrialInterrupted", "TrialKey", "TrialRunner", "verdict"]

Progress = Callable[[str], None]


@runtime_checkable
class SessionWatcher(Protocol):
    """A ``Progress`` that also follows the host session as it runs (the terminal's live line):
    told when it starts, with the turns served so far when the metering proxy counts them."""

    def session_started(self, turns: Callable[[], int] | None) -> None: ...


class TrialKey(NamedTuple):
    """Which trial a test report belongs to; rides on every report so nobody parses node ids."""

    scenario: str
    trial: int
    variant: str | None = None   # the arm of a variant run


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
    session_killed: bool = False  # a signal the runner did not send ended the host: the agent's doing
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
    elif facts.session_killed:
        found.append("fail")
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




def assemble(run_id: str, entry: ScenarioEntry, trial: int, overlay: Path, sources: RunSources,
             variant: str | None = None) -> sandboxes.Sandbox:
    """The sandbox, from the run's copies of the fixture and the build tree (never the project's own).
    An arm's trial directory carries the arm after a dot, which no scenario name (a slug) holds."""
    name = entry.scenario.name if variant is None else f"{entry.scenario.name}.{variant}"
    try:
        return sandboxes.assemble(run_id, name, trial, copy_of(sources, entry.fixture),
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
                 host_failed=session.host_failed, session_killed=session.ended_by_signal is not None,
                 check_error=any(c.error for c in results), check_failed=any(not c.passed for c in results),
                 escaped=bool(escapes))


def scripted_identity(rec: TrialRecord) -> dict[str, str | None]:
    """A scripted trial's model fields: the scripted model answered whatever name the host asked for
    (its stream names that one), so the record names the scripted model and keeps the asked-for
    name apart; nothing when no host session named a model or was served a turn."""
    if rec.modelIdentity is None and not rec.scriptedTurns:
        return {}
    return {"modelIdentity": SCRIPTED_MODEL_ID, "requestedModel": rec.modelIdentity}


def escape_message(escapes: list[str]) -> str:
    return f"the trial changed {len(escapes)} path(s) outside its sandbox: {_listed(escapes)}"






def record(base: TrialRecord, session: HostSession, budget: TrialBudget, diff: sandboxes.Diff,
           results: list[CheckResult], escapes: list[str], secrets: Secrets) -> TrialRecord:
    diff_text, truncated = cap_diff(secrets(diff.text))  # redacted before the cut: no half secret survives
    changed_paths, changed_total = cap_paths(diff.changed_paths)
    totals = session.totals
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
        "costBasis": totals.cost_basis,
        "modelIdentity": totals.model_identity,
        "budgetUnmonitored": unmonitored,
        "streamNotes": notes,
        "meteredBy": "stream" if session.metering is None else "proxy",
        "meteringDisagreement": disagreement(session),
        **refused_requests(session),
        "credentialExposed": session.credential_exposed,
        "error": session_error(session, budget) or (escape_message([secrets.numbered(e) for e in escapes])
                                                    if escapes else None),
        "escapes": escapes,
    })




def refused_requests(session: HostSession) -> dict[str, object]:
    """The record's count of the requests the metering proxy refused, and the first of them."""
    metered = session.metering
    if metered is None:
        return {}
    named = list(metered.off_route)
    if metered.foreign:
        named.append(f"{metered.foreign} request(s) without this trial's key")
    return {"proxyRefused": metered.off_route_count + metered.foreign, "proxyRefusedRequests": named}


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
        "proxyRefusedRequests": [text(r) for r in rec.proxyRefusedRequests],
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
                 settings: RunnerSettings, arm: Arm | None = None) -> None:
        """``arm``: a variant run's arm other than the control, whose host (``info`` is its probe),
        model and build tree the trials use instead of the eval section's."""
        self.suite = suite
        self.model = suite.eval.model if arm is None else arm.model
        self.run_id = run_id
        self.info = info
        self.host = host_for(info.name)
        self.scripted = settings.scripted
        self.keep = settings.keep
        self.overlay = (tree_dir(suite.project_root, suite.eval.host) if arm is None
                        else tree_dir(suite.project_root, arm.host, arm.harness_of))
        self.agent_names = (host_agent_names(suite.project_root, suite.eval.host) if arm is None
                            else host_agent_names(suite.project_root, arm.host, arm.harness_of))
        self.skill_names = (host_agent_names(suite.project_root, suite.eval.host, key="skillNames") if arm is None
                            else host_agent_names(suite.project_root, arm.host, arm.harness_of, key="skillNames"))
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
            *, with_host: bool = True, variant: str | None = None) -> TrialRecord:
        """One trial; ``with_host=False`` is the self-test's no-op trial: the same sandbox, host
        configuration, setup, baseline, diff and checks, with no host session (zero tokens).
        ``variant``: the trial's arm in a variant run (recorded, and part of its directories)."""
        base = TrialRecord(scenario=entry.scenario.name, trial=trial, nodeId=node_id, verdict="skipped-budget",
                           variant=variant)
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
            sb = assemble(self.run_id, entry, trial, self.overlay, self.sources, base.variant)
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
            with scripted_model(entry, sb, self.scripted and with_host, self.agent_names,
                                self.skill_names, self.host.shell_tools) as (endpoint, turns), \
                    metering_proxy(self.host, parent_env, endpoint, budget.maxTokens, relay_socket, with_host,
                                   model=self.model) as route:
                try:
                    clean_sources(entry, self.overlay, self.sources, self.suite.project_root)
                    rec = self._in_sandbox(entry, sb, base, budget, progress, route, secrets, with_host)
                except StepFailed as exc:
                    rec = base.model_copy(update={"verdict": verdict(Facts(prepared=False)), "error": str(exc)})
                except Exception as exc:  # noqa: BLE001 - the trial "could not produce a normal verdict"
                    rec = base.model_copy(update={"verdict": "infra-error", "error": f"{type(exc).__name__}: {exc}"})
                if turns is not None:
                    rec = rec.model_copy(update={"scriptedTurns": turns(), **scripted_identity(rec)})
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
        self.host.prepare(TrialWiring(self.info, sandbox_root=sb.root, home=sb.home, user_home=Path.home(),
                                      parent_env=parent_env, model=self.model, scripted=endpoint,
                                      proxy_url=route.proxy_url, stand_in=route.stand_in))
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
        if isinstance(progress, SessionWatcher):
            progress.session_started(route.metered.proxy.answered if route.metered is not None else None)
        inputs = SessionInputs(entry, sb, budget, parent_env, endpoint, confined, secrets, route.metered,
                               self.agent_names)
        session = host_session(self.host, self.info, self.model, inputs)
        events = transcript_events(self.host, self.info, base, session, budget, entry.scenario.task.prompt)
        files = transcript_files(self.out_dir, base, session, events)
        progress("checks")
        diff = sandboxes.collect_diff(sb, self.host.owned_dir)
        view = session_view(session, events, self.agent_names,
                            skills_run_as_commands=getattr(self.host, "skills_run_as_commands", False))
        results = checks(entry, sb, diff, parent_env, confined, secrets, view)
        return record(base, session, budget, diff, results, self.audit.escapes(watched), secrets).model_copy(update=files)








