"""The eval engine: run-level preparation, one trial end to end, and the final report.

Plain code, no pytest: ``session.py`` adapts it to hooks.  A trial goes through the steps of
ARCHITECTURE §4 and always ends with a ``TrialRecord`` — every failure inside a trial becomes a
verdict (``infra-error`` when nothing better applies), never an exception into pytest, except a
``KeyboardInterrupt``, which is recorded and re-raised so the run stops.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Mapping

from . import sandbox as sandboxes
from .audit import Audit
from .sources import RunSources, changed_in_copy, copy_of, prepare_sources, remove_sources
from .budget import TokenGate, TrialBudget
from .build import tree_dir, verify
from .checks import run_checks
from .diagnostics import Diagnostic, DiagnosticError
from .discovery import ScenarioEntry, Suite
from .exitcodes import decide
from .hosts import host_for
from .hosts.base import HostInfo, ScriptedEndpoint
from .process import allowlisted_environment, run
from .records import CheckResult, TrialRecord, Verdict, cap_diff, strongest, tail
from .redact import Secrets, secrets_in_env, secrets_in_file
from .report import BudgetRecord, HostIdentity, build_report, ensure_gitignore, new_run_id, scrub_paths, write_report
from .scenario import SETUP_TIMEOUT_MS

__all__ = ["Engine", "finish_report", "new_run_id", "prepare_run", "prepare_run_sources", "summary_lines"]

Progress = Callable[[str], None]


def prepare_run(suite: Suite, *, scripted: bool, probe: bool = True) -> tuple[list[Diagnostic], list[Diagnostic], dict[str, str] | None]:
    """Checks that need the machine: build manifest, host probe, git, credentials.

    Returns (validation problems → exit 2, run-level problems → exit 3, host info).  The probe runs
    here, once, on the controller; workers receive its result.  ``probe=False`` (``--collect-only``,
    e.g. an IDE test explorer) stops after the build check, so collecting never needs the CLI.
    """
    assert suite.eval is not None
    host_name = suite.eval.host
    problems = verify(suite.project_root, host_name)
    if problems or not probe:
        return problems, [], None
    if shutil.which("git") is None:
        return [], [Diagnostic("", "", "eval-git-missing", "git is not on PATH; it records each trial's baseline",
                               "install git (e.g. apt-get install git)")], None
    host = host_for(host_name)
    try:
        info = host.probe(os.environ)
    except DiagnosticError as exc:
        return [], exc.diagnostics, None
    if info.dialect == "opencode-v2" and suite.eval.model is None:
        return [Diagnostic("atlante.jsonc", "$.eval.model", "eval-config-invalid",
                           f"OpenCode {info.version} (V2) has no default model in an isolated sandbox",
                           "set eval.model to a provider/model your stored OpenCode credentials cover")], [], None
    if not scripted:
        missing = host.credential_diagnostics(info, os.environ, Path.home(), suite.eval.model)
        if missing:
            return [], missing, None
    return [], [], {"name": info.name, "version": info.version, "dialect": info.dialect, "executable": info.executable}


def source_roots(suite: Suite) -> list[Path]:
    """What every trial copies: the scenarios' fixtures and the verified build tree."""
    assert suite.eval is not None
    roots = {entry.fixture for entry in suite.scenarios}
    tree = tree_dir(suite.project_root, suite.eval.host)
    if tree.is_dir():
        roots.add(tree)
    return sorted(roots)


def prepare_run_sources(suite: Suite, run_id: str) -> RunSources:
    """The controller's pristine copy of every source, made before any trial runs."""
    return prepare_sources(source_roots(suite), run_id)


class TrialInterrupted(KeyboardInterrupt):
    """Ctrl-C during a trial: carries the trial's record (marked interrupted) so the report keeps it."""

    def __init__(self, record: TrialRecord) -> None:
        super().__init__("trial interrupted")
        self.record = record


class Engine:
    """Runs trials for one process; built lazily on the first trial a process runs."""

    def __init__(self, suite: Suite, run_id: str, host_info: Mapping[str, str], *, scripted: bool, keep: bool,
                 sources: RunSources, report_dir: Path) -> None:
        assert suite.eval is not None
        self.suite = suite
        self.eval = suite.eval
        self.run_id = run_id
        self.info = HostInfo(name=host_info["name"], version=host_info["version"],  # type: ignore[arg-type]
                             dialect=host_info["dialect"], executable=host_info["executable"])
        self.host = host_for(self.info.name)
        self.scripted = scripted
        self.keep = keep
        self.overlay = tree_dir(suite.project_root, self.eval.host)
        self.sources = sources
        packs = [pack.root for pack in suite.packs]
        self.audit = Audit.for_run(suite.project_root, home=Path.home(), report_dir=report_dir,
                                   run_temp=sandboxes.run_dir(run_id), extra_roots=packs)

    def run(self, entry: ScenarioEntry, trial: int, node_id: str, budget: TrialBudget, progress: Progress) -> TrialRecord:
        base = TrialRecord(scenario=entry.scenario.name, trial=trial, nodeId=node_id, verdict="skipped-budget")
        if not budget.allocated:
            return base
        started = time.monotonic()
        try:
            record = self._run_allocated(entry, trial, base, budget, progress)
        except KeyboardInterrupt as exc:
            record = base.model_copy(update={"verdict": "infra-error", "interrupted": True,
                                             "error": "interrupted (Ctrl-C) while the trial ran",
                                             "durationMs": int((time.monotonic() - started) * 1000)})
            raise TrialInterrupted(record) from exc
        return record.model_copy(update={"durationMs": int((time.monotonic() - started) * 1000)})

    def _run_allocated(self, entry: ScenarioEntry, trial: int, base: TrialRecord, budget: TrialBudget, progress: Progress) -> TrialRecord:
        scenario = entry.scenario
        progress("sandbox")
        try:
            sb = sandboxes.assemble(self.run_id, scenario.name, trial, copy_of(self.sources, entry.fixture),
                                    copy_of(self.sources, self.overlay))
        except (sandboxes.OverlayCollision, sandboxes.SandboxError, OSError) as exc:
            return base.model_copy(update={"verdict": "infra-error", "error": str(exc)})
        roots = [str(sb.root), str(sb.trial_dir), str(sb.home)]
        # Known credentials: the runner's own secret variables and the user's stored login,
        # whatever this trial does with them (the agent can read both through absolute paths).
        parent_env = dict(os.environ)
        secrets = Secrets(secrets_in_env(parent_env))
        for path in self.host.credential_files(Path.home(), parent_env):
            secrets.add(secrets_in_file(path))
        server = None
        try:
            dirty = self._changed_sources(entry)
            if dirty:
                return base.model_copy(update={"verdict": "infra-error", "error": dirty})
            if self.scripted:
                from .scripted import ScriptedModelServer, claude_env, load_script, opencode_provider_config

                assert entry.script is not None
                server = ScriptedModelServer(load_script(entry.script), sandbox_root=sb.root)
                server.start()
                endpoint: ScriptedEndpoint | None = ScriptedEndpoint(server.anthropic_base_url, server.openai_base_url,
                                                                     claude_env(server), opencode_provider_config(server))
            else:
                endpoint = None
            try:
                record = self._in_sandbox(entry, sb, base, budget, progress, endpoint, secrets)
            except Exception as exc:  # noqa: BLE001 - the trial "could not produce a normal verdict"
                record = base.model_copy(update={"verdict": "infra-error", "error": f"{type(exc).__name__}: {exc}"})
            if server is not None:
                record = record.model_copy(update={"scriptedTurns": server.turns_served})
            return _clean(record, roots, secrets)
        finally:
            if server is not None:
                server.stop()
            if not self.keep:
                sandboxes.remove(sb)

    def _changed_sources(self, entry: ScenarioEntry) -> str | None:
        """Why this trial must not run on what it copied (a source changed since the run began)."""
        project = self.suite.project_root
        problems = []
        for what, root in (("fixture", entry.fixture), ("build tree", self.overlay)):
            changed = changed_in_copy(self.sources, root)
            if changed:
                shown = root.relative_to(project).as_posix() if root.is_relative_to(project) else str(root)
                listed = ", ".join(changed[:10]) + (f" and {len(changed) - 10} more" if len(changed) > 10 else "")
                problems.append(f"the run's copy of the {what} {shown} changed after the run made it: {listed}")
        if not problems:
            return None
        return "; ".join(problems) + " (a trial wrote into the run's temp directory; see the escapes of earlier trials)"

    def _in_sandbox(self, entry: ScenarioEntry, sb: sandboxes.Sandbox, base: TrialRecord, budget: TrialBudget,
                    progress: Progress, endpoint: ScriptedEndpoint | None, secrets: Secrets) -> TrialRecord:
        scenario = entry.scenario
        parent_env = dict(os.environ)
        self.host.prepare(self.info, sandbox_root=sb.root, home=sb.home, user_home=Path.home(),
                          parent_env=parent_env, model=self.eval.model, scripted=endpoint)
        if scenario.task.setup:
            progress("setup")
            # setup inherits the full environment (the reference says so) and runs before the baseline
            result = run(scenario.task.setup, cwd=sb.root, env=parent_env, timeout_s=SETUP_TIMEOUT_MS / 1000)
            if result.start_error or result.timed_out or result.returncode != 0:
                why = result.start_error or ("timed out after 300 s" if result.timed_out else f"exited {result.returncode}")
                output = tail(result.stdout + result.stderr)
                return base.model_copy(update={"verdict": "infra-error",
                                               "error": f"setup {' '.join(scenario.task.setup)} failed: {why}\n{output}".rstrip()})
        unchanged = [c.path for c in scenario.checks if c.type == "file-unchanged"]
        sandboxes.snapshot(sb, unchanged)

        audit_start = self.audit.start()
        progress("host session")
        monitor = self.host.new_monitor()
        gate = TokenGate(budget.maxTokens)

        def on_line(line: str) -> bool:
            monitor.feed(line)
            return gate.observe(monitor.cumulative_tokens)

        allowlisted = allowlisted_environment(parent_env, home=sb.home)
        host_env = self.host.environment(self.info, base_env=allowlisted, parent_env=parent_env, home=sb.home, scripted=endpoint)
        # The host's own temp files (Claude Code keeps a dir per session under $TMPDIR/claude-<uid>/)
        # go inside the trial directory, so they are removed with it instead of piling up in /tmp.
        host_tmp = sb.trial_dir / "tmp"
        host_tmp.mkdir(mode=0o700, exist_ok=True)
        host_env["TMPDIR"] = str(host_tmp)
        trial_logins = self.host.credential_files(sb.home, {})
        secrets.add(secrets_in_env(host_env))
        for path in trial_logins:
            secrets.add(secrets_in_file(path))
        argv = self.host.command(self.info, prompt=scenario.task.prompt, agent=scenario.task.agent, model=self.eval.model)
        session = run(argv, cwd=sb.root, env=host_env, timeout_s=budget.timeoutMs / 1000, on_stdout_line=on_line,
                      interrupt_signal=self.host.interrupt_signal)
        outcome = self.host.finalize(self.info, monitor, env=host_env, cwd=sb.root)
        for path in trial_logins:  # the copied login has done its job; no check may read it
            secrets.add(secrets_in_file(path))  # the host may have refreshed a token in it
            path.unlink(missing_ok=True)
        verdicts: list[Verdict] = []
        error: str | None = None
        if session.start_error:
            verdicts.append("infra-error")
            error = f"the host could not start: {session.start_error}"
        elif session.timed_out:
            verdicts.append("timeout")
            error = f"host session exceeded timeoutMs={budget.timeoutMs}"
        elif session.aborted:
            verdicts.append("budget-exceeded")
            error = f"cumulative usage {gate.tripped_at} exceeded maxTokens={budget.maxTokens}; session aborted"
        elif outcome.is_error or session.returncode != 0:
            verdicts.append("infra-error")
            detail = outcome.error_message or tail(session.stderr, 500).strip() or "no error text"
            error = f"host session failed (exit {session.returncode}): {detail}"

        progress("checks")
        diff = sandboxes.collect_diff(sb, self.host.owned_dir)
        # Checks get an empty HOME of their own: the trial HOME held the login and the host's state.
        # A random name: the agent cannot have prepared it (a planted .gitconfig, a symlink).
        check_home = Path(tempfile.mkdtemp(prefix="check-home-", dir=sb.trial_dir))
        checks_env = allowlisted_environment(parent_env, home=check_home)
        checks = run_checks(scenario.checks, sandbox=sb, diff=diff, env=checks_env, redact=secrets)
        if any(c.error for c in checks):
            verdicts.append("infra-error")
        elif any(not c.passed for c in checks):
            verdicts.append("fail")
        escapes = self.audit.escapes(audit_start)
        if escapes:
            verdicts.append("fail")
            error = error or escape_message(escapes)
        diff_text, truncated = cap_diff(secrets(diff.text))
        return base.model_copy(update={
            "verdict": strongest(verdicts),
            "hostDurationMs": int(session.duration_s * 1000),
            "checks": checks,
            "diff": diff_text,
            "diffTruncated": truncated,
            "changedPaths": diff.changed_paths,
            "usage": outcome.usage,
            "costUsd": outcome.cost_usd,
            "modelIdentity": outcome.model_identity,
            "budgetUnmonitored": outcome.budget_unmonitored,
            "error": error,
            "escapes": escapes,
        })


def escape_message(escapes: list[str]) -> str:
    listed = ", ".join(escapes[:10]) + (f" and {len(escapes) - 10} more" if len(escapes) > 10 else "")
    return f"the trial changed {len(escapes)} path(s) outside its sandbox: {listed}"


def _clean(record: TrialRecord, roots: list[str], secrets: Secrets) -> TrialRecord:
    """The record as it may leave the trial: no sandbox path, no known credential value."""

    def text(value: str) -> str:
        return secrets(scrub_paths(value, roots))

    def check(c: CheckResult) -> CheckResult:
        return c.model_copy(update={"message": text(c.message), "output": text(c.output) if c.output else c.output})

    return record.model_copy(update={
        "error": text(record.error) if record.error else None,
        "diff": text(record.diff) if record.diff else record.diff,
        "checks": [check(c) for c in record.checks],
        "changedPaths": [secrets(p) for p in record.changedPaths],
        "escapes": [secrets(p) for p in record.escapes],
    })


def finish_report(suite: Suite, run_id: str, started_at: datetime, host_info: Mapping[str, str] | None,
                  records: Mapping[str, TrialRecord], expected: list[str], run_errors: list[Diagnostic],
                  out_dir: Path, *, interrupted: bool, scripted: bool, default_out: bool) -> tuple[int, Path]:
    """Aggregate, decide the exit status, write ``report.json`` atomically."""
    assert suite.eval is not None
    finished = [records[n] for n in expected if n in records] + [r for n, r in records.items() if n not in expected]
    run_level = bool(run_errors) or interrupted
    status = decide(validation_failed=False, run_level_error=run_level, verdicts=[r.verdict for r in finished])
    budget = suite.eval.budget
    host = None
    if host_info:
        host = HostIdentity(name=host_info["name"], version=host_info["version"], dialect=host_info["dialect"])  # type: ignore[arg-type]
    report = build_report(
        run_id=run_id, started_at=started_at, finished_at=datetime.now(timezone.utc), host=host,
        model=suite.eval.model, scripted=scripted,
        budget=BudgetRecord(trials=budget.trials, timeoutMs=budget.timeoutMs, maxSessions=budget.maxSessions, maxTokens=budget.maxTokens),
        scenarios=requested_scenarios(suite, expected, finished),
        trials=finished, complete=not run_level and len(finished) >= len(expected), interrupted=interrupted,
        exit_status=status, errors=[d.to_json() for d in run_errors],  # type: ignore[misc]
    )
    path = write_report(report, out_dir)
    if default_out:
        ensure_gitignore(suite.project_root / ".atlante")
    # Every trial has removed its own directory by now (the controller finishes after all workers);
    # the run directory left in $TMPDIR goes too, unless --atlante-keep filled it.  Not per trial:
    # under xdist another worker may be about to create its trial directory in it.
    remove_sources(run_id)
    sandboxes.remove_run_dir(run_id)
    return status, path


def requested_scenarios(suite: Suite, expected: list[str], finished: list[TrialRecord]) -> list[tuple[str, str, str, int]]:
    """(name, file, source, requested trials) of the scenarios this run asked for.

    ``-k``, ``-m``, ``--lf`` and ``--atlante-scenario`` narrow a run: a scenario none of whose
    trials was requested is not part of its report.  Before collection (a run that could not
    start) every discovered scenario counts with its full number of trials.
    """
    assert suite.eval is not None
    if not expected:
        return [(e.scenario.name, e.display, e.source, suite.eval.budget.trials) for e in suite.scenarios]
    requested: dict[str, int] = {}
    for node_id in expected:
        name = node_id.rsplit("::", 1)[-1].rsplit("[trial-", 1)[0]
        requested[name] = requested.get(name, 0) + 1
    for record in finished:  # a record always belongs to a requested trial
        requested.setdefault(record.scenario, 1)
    return [(e.scenario.name, e.display, e.source, requested[e.scenario.name]) for e in suite.scenarios if e.scenario.name in requested]


def summary_lines(report_path: Path) -> list[str]:
    from .report import EvalReport

    report = EvalReport.model_validate_json(report_path.read_text(encoding="utf-8"))
    lines = [f"{'scenario':<32} {'pass':>6} {'mean s':>8} {'p95 s':>8} {'tokens':>9} {'cost $':>9}"]
    for scenario in report.scenarios:
        tokens = sum(t.usage.total for t in scenario.trials if t.usage)
        cost = sum(t.costUsd or 0.0 for t in scenario.trials)
        lines.append(f"{scenario.name[:32]:<32} {scenario.passRate:>6.0%} {scenario.meanDurationMs / 1000:>8.1f} "
                     f"{scenario.p95DurationMs / 1000:>8.1f} {tokens:>9} {cost:>9.4f}")
    counts = ", ".join(f"{n} {v}" for v, n in report.verdicts.items() if n)
    lines.append(f"verdicts: {counts or 'none'}; exit status {report.exitStatus}")
    lines.append(f"report: {report_path}")
    return lines
