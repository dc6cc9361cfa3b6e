"""``--atlante-control-from REPORT``: a variant run that reuses the control's trials of an earlier run.

Paying for the control every iteration is what makes variant runs expensive; an earlier sealed
report (a run of this user's: under ``.atlante/eval/`` or an ``--atlante-out`` directory) can stand
in for it when everything but the variants is what this run would measure: each scenario's
``scenarioDigest`` (document, fixture tree, script), the control's harness digest, the host and
its version, the model, the budget, scripted or not, and the atlante version.  Any difference is a
validation problem naming it (exit 2), before any session.
"""

from __future__ import annotations

from pathlib import Path

from pytest_atlante import __version__
from pytest_atlante.diagnostics import Diagnostic
from pytest_atlante.hosts.base import HostInfo
from pytest_atlante.records import TrialRecord
from pytest_atlante.report.model import EvalReport
from pytest_atlante.report.reader import ReportRejected, read_report
from pytest_atlante.suite.discovery import ValidSuite
from pytest_atlante.suite.variants import CONTROL

CODE = "eval-control-from-refused"
HINT = "run the control again (drop --atlante-control-from), or name a report of the same suite, host, model and budget"


def _report_file(path: Path) -> Path:
    return path / "report.json" if path.is_dir() else path


def load(path: Path) -> tuple[EvalReport | None, list[Diagnostic]]:
    """The earlier report, which must carry a run's seal and be complete."""
    try:
        report = read_report(_report_file(path), sealed=True)
    except ReportRejected as exc:
        return None, [Diagnostic(str(path), "", CODE, f"the control report is not usable: {exc.reason}", HINT)]
    if not report.complete or report.interrupted:
        return None, [Diagnostic(str(path), "$.complete", CODE, "the control report is of a run that did not complete",
                                 "name a complete run's report")]
    return report, []


def _control_records(report: EvalReport) -> dict[str, list[TrialRecord]]:
    found: dict[str, list[TrialRecord]] = {}
    for record in report.scenarios:
        if record.variant in (None, CONTROL):
            found.setdefault(record.name, []).extend(record.trials)
    return found


def differences(path: Path, report: EvalReport, suite: ValidSuite, digests: dict[str, tuple[str, str | None]],
                control: HostInfo, scripted: bool) -> list[Diagnostic]:
    """One diagnostic per component that differs between the earlier control and this run's."""
    budget = suite.eval.budget
    now = {"trials": budget.trials, "timeoutMs": budget.timeoutMs, "maxSessions": budget.maxSessions,
           "maxTokens": budget.maxTokens}
    then_host = report.host
    pairs: list[tuple[str, object, object]] = [
        ("atlanteVersion", report.atlanteVersion, __version__),
        ("host", then_host.name if then_host else None, control.name),
        ("hostVersion", then_host.version if then_host else None, control.version),
        ("model", report.model, suite.eval.model),
        ("budget", report.budget.model_dump(), now),
        ("scripted", report.scripted, scripted),
    ]
    found = [Diagnostic(str(path), f"$.{name}", CODE, f"{name} differs: {then!r} in the control report, {current!r} in this run",
                        HINT) for name, then, current in pairs if then != current]
    records = {r.name: r for r in report.scenarios if r.variant in (None, CONTROL)}
    for name, (scenario_digest, harness_digest) in digests.items():
        earlier = records.get(name)
        if earlier is None:
            found.append(Diagnostic(str(path), "$.scenarios", CODE, f"scenario {name} is not in the control report", HINT))
            continue
        if earlier.scenarioDigest != scenario_digest:
            found.append(Diagnostic(str(path), f"$.scenarios[{name!r}].scenarioDigest", CODE,
                                    f"scenario {name} changed since the control report (its document, fixture or script)",
                                    HINT))
        if earlier.harnessDigest != harness_digest:
            found.append(Diagnostic(str(path), f"$.scenarios[{name!r}].harnessDigest", CODE,
                                    f"the control's harness changed since the control report (scenario {name})", HINT))
    return found


def reused(report: EvalReport, names: set[str]) -> list[TrialRecord]:
    """The earlier control trials of this run's scenarios, filed under the arm ``control``."""
    return [trial.model_copy(update={"variant": CONTROL})
            for name, trials in _control_records(report).items() if name in names for trial in trials]
