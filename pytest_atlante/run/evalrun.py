"""The run's two ends, without pytest: the machine checks before any trial, and the final report.

``prepare_run`` runs once, on the controller: build manifest, git, the host probe, host-specific
configuration rules and credentials.  ``finish_report`` aggregates the records into the report,
decides the exit status and writes ``report.json``; ``summary_lines`` renders the terminal summary
from that same in-memory report.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from pytest_atlante.diagnostics import Diagnostic, DiagnosticError
from pytest_atlante.fsutil import UnreadableFile
from pytest_atlante.hosts import host_for
from pytest_atlante.hosts.base import HostInfo
from pytest_atlante.hosts.names import HostName
from pytest_atlante.projectroot import CONFIG_FILE
from pytest_atlante.records import TrialRecord
from pytest_atlante.report.arms import lift_lines, with_arm_comparison
from pytest_atlante.report.exitcodes import EXIT_NOTHING_SELECTED, decide
from pytest_atlante.report.model import (
    ArmRecord,
    BudgetRecord,
    EvalReport,
    HostIdentity,
    RunState,
    ScenarioRecord,
    ShardRef,
    build_report,
    ensure_gitignore,
    write_report,
)
from pytest_atlante.report.statrecords import RateInterval
from pytest_atlante.run import costcap
from pytest_atlante.run.gate import Gate
from pytest_atlante.run.options import Options
from pytest_atlante.run.shard import environ_run_group, suite_digest
from pytest_atlante.sandbox import isolation as isolations
from pytest_atlante.sandbox import rundirs
from pytest_atlante.sandbox.sources import RunSources, prepare_sources, remove_sources
from pytest_atlante.suite.build import tree_dir, verify
from pytest_atlante.suite.digests import harness_digest
from pytest_atlante.suite.discovery import Suite, ValidSuite, discover, fixture_diagnostics
from pytest_atlante.suite.variants import CONTROL, Arm, arms_named
from pytest_atlante.trial.runner import TrialKey

__all__ = ["finish_report", "host_identity", "prepare_isolation", "prepare_run", "prepare_run_sources", "release_run_dir",
           "requested_scenarios", "summary_lines", "validate"]


def validate(project_root: Path, *, scripted: bool = False, names: list[str] | None = None,
             host_override: HostName | None = None, optional_scripts: bool = False,
             variants: str | None = None) -> tuple[Suite, list[Diagnostic]]:
    """Everything checked before any machine state is looked at: the documents and the build.

    Returns the suite and every problem (sorted, without repeats); a run with problems exits 2
    before any trial.  The build check needs no machine state, so it joins the same report.
    ``variants`` (``--atlante-variants``: ``all`` or names) selects the arms beside the control;
    ``suite.arms`` is then the run's arms, each of whose builds is verified.
    """
    suite = discover(project_root, scripted=scripted, names=names, host_override=host_override,
                     optional_scripts=optional_scripts)
    problems = list(suite.diagnostics)
    if suite.eval is not None:
        problems += verify(suite.project_root, suite.eval.host)
        suite.arms, unknown = arms_named(suite.arms, variants)
        problems += [Diagnostic("", "--atlante-variants", "eval-variant-unknown", f"no variant named {name!r}",
                                "declared: " + (", ".join(a.name for a in suite.arms[1:]) or "none (add variants to atlante.jsonc)"))
                     for name in unknown]
        if not problems:
            problems += variant_build_diagnostics(suite.project_root, suite.arms)
            problems += arm_fixture_diagnostics(suite)
    return suite, sorted(set(problems))


def arm_fixture_diagnostics(suite: Suite) -> list[Diagnostic]:
    """A fixture must suit every host an arm runs under (each host names the configuration files
    its CLI would merge), not only the control's, which discovery checked."""
    found: list[Diagnostic] = []
    control = suite.eval.host if suite.eval is not None else None
    for host in sorted({arm.host for arm in suite.arms} - {control}):
        for entry in suite.scenarios:
            found += fixture_diagnostics(entry.fixture, host, entry.display)
    return found


def variant_build_diagnostics(project_root: Path, arms: Sequence[Arm]) -> list[Diagnostic]:
    """Each arm's build verified as the control's is; a variant whose built outputs are the
    control's under the same host and model measures nothing (the configuration check compares
    sources; two sources can render the same files)."""
    problems: list[Diagnostic] = []
    control = arms[0]
    checked: set[tuple[HostName, str | None]] = {(control.host, None)}
    for arm in arms[1:]:
        if (arm.host, arm.harness_of) not in checked:
            checked.add((arm.host, arm.harness_of))
            problems += verify(project_root, arm.host, arm.harness_of)
        if (not problems and arm.replicate_of is None and arm.harness_of is not None
                and (arm.host, arm.model) == (control.host, control.model)
                and harness_digest(project_root, arm.host, arm.harness_of) == harness_digest(project_root, control.host)):
            problems.append(Diagnostic(CONFIG_FILE, f"$.variants.{arm.name}", "eval-variant-invalid",
                                       f"variant {arm.name!r} changes nothing: its build's outputs are the control's "
                                       "under the same host and model",
                                       f"change what it builds, or declare \"replicateOf\": \"{CONTROL}\" for an A/A run"))
    return problems


def prepare_run(suite: ValidSuite, *, scripted: bool) -> tuple[list[Diagnostic], list[Diagnostic], HostInfo | None]:
    """Checks that need the machine, after :func:`validate`: git, host probe, configuration, credentials.

    Returns (validation problems → exit 2, run-level problems → exit 3, host info).  The probe runs
    here, once, on the controller; workers receive its result.
    """
    if shutil.which("git") is None:
        return [], [Diagnostic("", "", "eval-git-missing", "git is not on PATH; it shows each trial's changes",
                               "install git (e.g. apt-get install git)")], None
    host = host_for(suite.eval.host)
    try:
        info = host.probe(os.environ)
    except DiagnosticError as exc:
        return [], exc.diagnostics, None
    config_problems = host.config_diagnostics(info, suite.eval.model)
    if config_problems:
        return config_problems, [], None
    if not scripted:
        missing = host.credential_diagnostics(info, os.environ, Path.home(), suite.eval.model)
        if missing:
            # A newcomer without a login can still see the suite run, offline and for free.
            return [], [replace(d, hint=f"{d.hint}; or run the suite offline against the scripted model with "
                                        f"--atlante-scripted (`atlante eval --scripted`)") for d in missing], None
    return [], [], info


def source_roots(suite: ValidSuite) -> list[Path]:
    """What every trial copies: the scenarios' fixtures and the verified build trees (the
    control's, and each arm's in a variant run)."""
    roots = {entry.fixture for entry in suite.scenarios}
    trees = {tree_dir(suite.project_root, suite.eval.host)}
    trees |= {tree_dir(suite.project_root, arm.host, arm.harness_of) for arm in suite.arms[1:]}
    roots |= {tree for tree in trees if tree.is_dir()}
    return sorted(roots)


def prepare_arm_hosts(suite: ValidSuite, control: HostInfo, *, scripted: bool
                      ) -> tuple[list[Diagnostic], list[Diagnostic], dict[str, HostInfo]]:
    """:func:`prepare_run` for the arms of a variant run: each other host probed once, and each
    arm's host configuration (its model) and credentials checked, before any trial.  Returns
    (validation problems, run-level problems, the probed hosts by name, the control's included)."""
    infos: dict[str, HostInfo] = {control.name: control}
    for arm in suite.arms[1:]:
        host = host_for(arm.host)
        if arm.host not in infos:
            try:
                infos[arm.host] = host.probe(os.environ)
            except DiagnosticError as exc:
                return [], exc.diagnostics, infos
        problems = host.config_diagnostics(infos[arm.host], arm.model)
        if problems:
            return [replace(d, location=d.location or f"$.variants.{arm.name}") for d in problems], [], infos
        if not scripted:
            missing = host.credential_diagnostics(infos[arm.host], os.environ, Path.home(), arm.model)
            if missing:
                return [], missing, infos
    return [], [], infos


def prepare_run_sources(suite: ValidSuite, run_id: str) -> tuple[rundirs.RunClaim, RunSources]:
    """The controller's pristine copy of every source, made before any trial runs (OSError if it cannot).

    The controller holds the run directory (the claim returned) from here to ``release_run_dir``:
    while the run lives, another run's ``rundirs.remove_dead`` never takes it for a dead run's."""
    held = rundirs.claim(run_id)
    try:
        return held, prepare_sources(source_roots(suite), run_id)
    except BaseException:
        held.release()
        raise


def prepare_isolation(setting: isolations.IsolationSetting, network: isolations.NetworkSetting = "shared",
                      probe: Callable[[], str | None] = isolations.probe
                      ) -> tuple[isolations.IsolationRecord, Diagnostic | None]:
    """The run's isolation (bubblewrap probed once, on the controller, by ``probe``; the
    controller's is started beside validation, ``run/startup.py``), before any trial."""
    return isolations.decide(setting, probe() if setting != "off" else None, network)


def unselected_agent_warnings(suite: ValidSuite) -> list[str]:
    """A scenario's ``task.agent`` on a host that cannot start a session as a harness agent (Codex,
    Gemini CLI): the session runs as the host's main agent, which the run says before any trial
    (the build said it too, but a build is often made once and run on several hosts)."""
    host = suite.eval.host
    if host_for(host).selects_agent:
        return []
    return [f"atlante: warning: {entry.display}: {entry.scenario.name}: task.agent {entry.scenario.task.agent!r} is not "
            f"selected on {host}, which cannot start a session as a harness agent; the session runs as its main agent "
            "(docs/hosts.md)"
            for entry in suite.scenarios if entry.scenario.task.agent is not None]


def model_only_problem(host: HostName, parent_env: dict[str, str], model: str | None) -> Diagnostic | None:
    """A real-provider run with ``model-only`` network whose provider mode cannot go through the
    metering proxy (its only way out, docs/design.md §11): refused before any trial (exit 3)."""
    if host_for(host).provider_endpoint(parent_env, model) is not None:
        return None
    return Diagnostic(
        "", "", "eval-network-unavailable",
        f"eval.network \"model-only\" leaves a trial only the metering proxy, and {host}'s provider mode here "
        "cannot go through it (a cloud mode, an OpenCode provider other than anthropic and openai, no "
        "eval.model for OpenCode to name its provider, or a Codex ChatGPT login)",
        "set eval.network (--atlante-network) to \"shared\", use a provider mode docs/hosts.md lists as "
        "metered by the proxy, or run with --atlante-scripted",
    )


def finish_report(state: RunState, suite: ValidSuite, options: Options, *, out_dir: Path, gate: Gate | None = None,
                  other_failures: bool = False, no_tests: bool = False) -> tuple[EvalReport, Path]:
    """Aggregate, compare with the baseline (if any), decide the exit status, write ``report.json`` atomically.

    ``state.records`` and ``state.expected`` are keyed by node id; ``expected`` is in collection
    order.  A failure to update ``.atlante/.gitignore`` is appended to ``state.errors`` (so the
    summary shows it) before the status is decided, and ``other_failures`` (an ordinary item of the
    same run failed, e.g. an Atlas query case) makes it at least 1: the report states the exit
    status the process will really have; so does ``no_tests`` (pytest exits 5, "no tests collected":
    nothing was selected), unless a worse status is decided.  A shard's report covers its share only and is marked with
    the shard, the suite digest and the run group, for ``atlante report merge``.
    """
    finished = state.finished()
    if options.out is None:
        # Before the report, so a failure here is in the report's exit status, not only the process's.
        try:
            ensure_gitignore(suite.project_root / ".atlante")
        except (OSError, UnreadableFile) as exc:
            why = f"it {exc.reason}" if isinstance(exc, UnreadableFile) else exc.strerror or str(exc)
            state.errors.append(Diagnostic(".atlante/.gitignore", "", "eval-report-write-failed",
                                           f"cannot add eval/ to .atlante/.gitignore: {why}",
                                           "make .atlante/.gitignore a regular, writable file (or pass --atlante-out)"))
    run_level = bool(state.errors) or state.interrupted
    status = decide(validation_failed=False, run_level_error=run_level, verdicts=[r.verdict for r in finished])
    if other_failures:
        status = max(status, 1)
    elif no_tests and status == 0:
        status = EXIT_NOTHING_SELECTED
    budget = suite.eval.budget
    state.scripted = options.scripted
    state.model = suite.eval.model
    state.budget = BudgetRecord(trials=budget.trials, timeoutMs=budget.timeoutMs, maxSessions=budget.maxSessions,
                                maxTokens=budget.maxTokens)
    if options.shard is not None:
        state.shard = ShardRef(index=options.shard.index, count=options.shard.count)
        state.suite_digest = suite_digest(suite, scripted=options.scripted, digests=state.digests)
        state.run_group = environ_run_group(options.run_group, state.suite_digest)
    report = build_report(
        state, requested_scenarios(suite, list(state.expected.values()), finished, collected=state.collected),
        finished_at=datetime.now(UTC), complete=not run_level and len(finished) >= len(state.expected),
        exit_status=status, cost_cap=None if options.max_cost is None else costcap.summary(options.max_cost, finished),
    )
    report = with_arm_comparison(report)
    if gate is not None:
        report = gate.apply(report)
    return report, write_report(report, out_dir)


def release_run_dir(run_id: str, *, keep: bool, held: rundirs.RunClaim | None) -> None:
    """The end of a run's use of ``$TMPDIR``, after every trial (the controller finishes after all
    workers): the run's copies of fixtures and build tree go, kept or not, and the run directory
    too unless --atlante-keep filled it.  Not per trial: under xdist another worker may be about to
    create its trial directory in it."""
    remove_sources(run_id)
    rundirs.finish(run_id, keep=keep, held=held)


def host_identity(info: HostInfo | None) -> HostIdentity | None:
    """The probed host as the report states it (validated, not cast: the dialect is the adapter's
    string, the report admits known dialects only)."""
    if info is None:
        return None
    return HostIdentity.model_validate({"name": info.name, "version": info.version, "dialect": info.dialect})


def arm_records(suite: ValidSuite, control: HostInfo | None, infos: dict[str, HostInfo]) -> list[ArmRecord] | None:
    """The report's ``arms`` of a variant run (None without variants): what each arm ran."""
    if len(suite.arms) < 2:
        return None
    known = dict(infos)
    if control is not None:
        known[control.name] = control
    return [ArmRecord(name=arm.name, host=arm.host, hostVersion=known[arm.host].version if arm.host in known else None,
                      model=arm.model, harnessDigest=harness_digest(suite.project_root, arm.host, arm.harness_of),
                      replicateOf=arm.replicate_of)
            for arm in suite.arms]


def requested_scenarios(suite: ValidSuite, expected: Sequence[TrialKey], finished: list[TrialRecord], *,
                        collected: bool = False) -> list[tuple[str, str, str, int]]:
    """(name, file, source, requested trials) of the scenarios this run asked for.

    ``-k``, ``-m``, ``--deselect``, ``--lf``, splitters (pytest-split, pytest-shard),
    ``--atlante-shard`` and ``--atlante-scenario`` narrow a run: a scenario none of whose trials was
    selected is not part of its report, and a ``collected`` run that selected nothing has none.
    Before collection (a run that could not start) every discovered scenario counts with its full
    number of trials.
    """
    if not expected and not collected:
        return [(e.scenario.name, e.display, e.source, suite.eval.budget.trials) for e in suite.scenarios]
    requested: dict[str, int] = {}
    for key in expected:
        requested[key.scenario] = requested.get(key.scenario, 0) + 1
    for rec in finished:  # a record always belongs to a requested trial
        requested.setdefault(rec.scenario, 1)
    return [(e.scenario.name, e.display, e.source, requested[e.scenario.name]) for e in suite.scenarios if e.scenario.name in requested]


def _percent_interval(interval: RateInterval | None, trials: int | None = None) -> str:
    """``21-100%``; over fewer than ``FEW_TRIALS`` trials marked ``*`` (the footnote says why)."""
    from pytest_atlante.report.model import FEW_TRIALS

    if interval is None:
        return "-"
    few = "*" if trials is not None and trials < FEW_TRIALS else ""
    return f"{interval.low * 100:.0f}-{interval.high * 100:.0f}%{few}"


_WANTED = {"use": "should use it", "no-use": "should not use it", None: "a min/max band"}


def _row_name(scenario: ScenarioRecord) -> str:
    """A scenario's row; in a variant run, with its arm (``name [arm]``)."""
    return scenario.name if scenario.variant is None else f"{scenario.name} [{scenario.variant}]"


def trigger_lines(report: EvalReport) -> list[str]:
    """One line per trigger rate (a skill or agent a counting check names): how many trials used it."""
    lines = []
    for scenario in report.scenarios:
        for rate in scenario.triggerRates:
            lines.append(f"trigger rate: {_row_name(scenario)}: {rate.kind} {rate.name} used in {rate.used}/{rate.trials} "
                         f"trials ({rate.rate:.0%}, 95% CI {_percent_interval(rate.interval)}; {_WANTED[rate.wanted]})")
    return lines


def not_run_trials(scenario: ScenarioRecord) -> int:
    """Requested trials that never ran: those with no record and those a cost cap skipped."""
    return scenario.notRun + sum(1 for t in scenario.trials if t.verdict == "skipped-budget")


def summary_markup(report: EvalReport, lines: list[str]) -> list[dict[str, bool]]:
    """pytest's colours for ``summary_lines``' lines: a scenario row green when every requested
    trial passed, red when one that ran did not, yellow when some never ran; the verdicts line
    green or red by the exit status.  The terminal writer drops them with ``--color=no`` or off a tty."""
    marks: list[dict[str, bool]] = [{} for _ in lines]
    if lines and lines[0].startswith("scenario "):
        for row, scenario in enumerate(report.scenarios, start=1):
            if any(t.verdict not in ("pass", "skipped-budget") for t in scenario.trials):
                marks[row] = {"red": True}
            elif not_run_trials(scenario):
                marks[row] = {"yellow": True}
            else:
                marks[row] = {"green": True}
    for index, line in enumerate(lines):
        if line.startswith("verdicts: "):
            marks[index] = {"green": True, "bold": True} if report.exitStatus == 0 else {"red": True, "bold": True}
    return marks


def summary_lines(report: EvalReport, report_path: Path, html_path: Path | None = None) -> list[str]:
    """The terminal summary: one row per scenario, the suite line, and the baseline comparison.

    ``pass@n``/``pass^n`` are the k = n estimates (did any / every trial pass); the report holds
    every k.  ``!`` after the pass rate marks a scenario with infra-error trials (unreliable);
    "not run" is a scenario none of whose requested trials ran (``notRun`` counts them).
    """
    from pytest_atlante.report.compare import render
    from pytest_atlante.report.model import FEW_TRIALS, scripted_note

    if report.selectedTrials == 0 and not report.scenarios:
        # Not "every trial not run": the selection (-k, -m, --deselect, a splitter, a shard) was empty.
        lines = [f"atlante: no trial was selected (-k, -m, --deselect, a splitter or a shard deselected every trial); "
                 f"exit status {report.exitStatus}", f"report: {report_path}"]
        return lines + ([f"html: {html_path}"] if html_path is not None else [])
    lines = [f"{'scenario':<28} {'n':>3} {'pass':>7}  {'95% CI':>9} {'pass@n':>6} {'pass^n':>6} "
             f"{'mean s':>7} {'p95 s':>7} {'tokens':>8} {'priced $' if report.scripted else 'cost $':>8}"]
    for scenario in report.scenarios:
        tokens = sum(t.usage.total for t in scenario.trials if t.usage)
        # Unpriced (no trial reported a cost) is "-", as on each trial's line: not a run that cost nothing.
        cost = "-" if scenario.totals.costUsd is None else f"{scenario.totals.costUsd:.4f}"
        last = scenario.passAtK[-1] if scenario.passAtK else None
        at_n = "-" if last is None else f"{last.passAtK:.0%}"
        hat_n = "-" if last is None else f"{last.passHatK:.0%}"
        flag = "!" if scenario.unreliable else " "
        unrun = not_run_trials(scenario)
        # A cost cap's skipped-budget trials did not run either: a rate over the others alone would
        # read 100% for a scenario most of whose trials never ran.
        rate = "not run" if scenario.passRate is None or unrun == len(scenario.trials) + scenario.notRun else f"{scenario.passRate:.0%}"
        not_run = f"  ({unrun} of {scenario.expectedTrials} trials not run)" if unrun and rate != "not run" else ""
        lines.append(f"{_row_name(scenario)[:28]:<28} {len(scenario.passAtK):>3} {rate:>7}{flag} "
                     f"{_percent_interval(scenario.passInterval, len(scenario.passAtK)):>9} {at_n:>6} {hat_n:>6} "
                     f"{scenario.meanDurationMs / 1000:>7.1f} {scenario.p95DurationMs / 1000:>7.1f} {tokens:>8} {cost:>8}"
                     f"{not_run}")
    lines.extend(trigger_lines(report))
    suite = report.suite
    if suite is not None and suite.meanPassRate is not None:
        interval = ("95% CI " + _percent_interval(suite.passInterval, suite.trials) + " (trials clustered by scenario)"
                    if suite.passInterval else "no interval below two scenarios")
        if suite.passInterval is not None and suite.passInterval.low == suite.passInterval.high:
            # docs/statistics.md: equal scenario rates collapse the cluster-robust interval to a point
            interval += "; a point only because every scenario had the same rate, not a certainty"
        lines.append(f"suite: mean pass rate {suite.meanPassRate:.0%} over {suite.scenarios} scenarios, "
                     f"{suite.trials} trials; {interval}")
    lines.extend(lift_lines(report))
    few = [s for s in report.scenarios if s.passInterval is not None and len(s.passAtK) < FEW_TRIALS]
    if few or (suite is not None and suite.passInterval is not None and suite.trials < FEW_TRIALS):
        lines.append(f"*: a 95% interval over fewer than {FEW_TRIALS} trials (n above) is too wide to tell "
                     f"pass rates apart; raise budget.trials for one that can")
    note = scripted_note(report)
    if note is not None:
        lines.append(note)
    if any(s.unreliable for s in report.scenarios):
        lines.append("!: the scenario had infra-error trials; its pass rate undercounts the harness")
    not_run_total = sum(s.notRun for s in report.scenarios)
    counts = ", ".join([f"{n} {v}" for v, n in report.verdicts.items() if n]
                       + ([f"{not_run_total} not run"] if not_run_total else []))
    lines.append(f"verdicts: {counts or 'none'}; exit status {report.exitStatus}")
    if report.costCap is not None:
        cap = report.costCap
        lines.append(f"cost cap: ${cap.spentUsd:.4f} recorded of ${cap.capUsd:g}"
                     + (f"; {cap.skippedTrials} trial(s) skipped-budget" if cap.skippedTrials else "")
                     + (f"; {cap.unpricedTrials} trial(s) unpriced (no cost from the host or the price table), "
                        "not counted" if cap.unpricedTrials else ""))
    if report.comparison is not None:
        lines.append("compared with the baseline (--atlante-baseline):")
        lines.extend("  " + line for line in render(report.comparison, "baseline", "this run"))
    lines.append(f"report: {report_path}")
    if html_path is not None:
        lines.append(f"html: {html_path}")  # last, so a terminal can open it with one click
    return lines
