"""The regression gate of an eval run: ``--atlante-baseline`` and ``--atlante-fail-on-regression``.

The baseline is read and validated when the run starts (a bad baseline is a validation problem,
exit 2, before any host session); when the run finishes, the new report is compared with it
exactly as ``atlante compare BASE NEW`` would, the comparison is recorded in the report, and a
significant regression fails the run if asked to.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pytest_atlante.diagnostics import Diagnostic, DiagnosticError
from pytest_atlante.report.compare import compare_reports, failed_gate
from pytest_atlante.report.exitcodes import EXIT_TRIAL_NOT_PASSED
from pytest_atlante.report.model import EvalReport
from pytest_atlante.report.reader import ReportRejected, load_report, read_report

BASELINE_CODE = "eval-baseline-invalid"


@dataclass(frozen=True)
class Gate:
    baseline: EvalReport
    fail_on_regression: bool

    def apply(self, report: EvalReport) -> EvalReport:
        """``report`` with its ``comparison``; exit status 1 if a regression must fail the run.

        A regression always comes with a trial that did not pass, so the reference's own rule
        usually made the status 1 already; the gate never lowers a status, only names the cause.
        """
        comparison = compare_reports(self.baseline, report)
        status = report.exitStatus
        if self.fail_on_regression and failed_gate(comparison) and status == 0:
            status = EXIT_TRIAL_NOT_PASSED
        return report.model_copy(update={"comparison": comparison, "exitStatus": status})


def load_gate(baseline: Path | None, fail_on_regression: bool,
              project_root: Path | None = None) -> tuple[Gate | None, list[Diagnostic]]:
    """The gate for a run's options, or the diagnostics that stop the run before any trial.

    A baseline inside the project's ``.atlante/eval/`` (where runs write their reports, and a trial
    with isolation off could plant one) must carry a run's seal (``report/seal.py``); one elsewhere
    (a CI artifact, a copy the user made) is the user's own choice and is taken as it is."""
    if baseline is None:
        if fail_on_regression:
            return None, [Diagnostic("", "--atlante-fail-on-regression", BASELINE_CODE,
                                     "--atlante-fail-on-regression needs a baseline to compare with",
                                     "add --atlante-baseline PATH/TO/report.json")]
        return None, []
    try:
        gate = Gate(load_report(baseline, BASELINE_CODE), fail_on_regression)
    except DiagnosticError as exc:
        return None, exc.diagnostics
    runs = Path(os.path.realpath(project_root / ".atlante" / "eval")) if project_root is not None else None
    if runs is not None and Path(os.path.realpath(baseline)).is_relative_to(runs):
        try:
            read_report(baseline, sealed=True)
        except ReportRejected as exc:
            return None, [Diagnostic(str(baseline), "", BASELINE_CODE, f"the baseline is not usable: {exc.reason}",
                                     "name a report a run of yours wrote, or copy the baseline out of .atlante/eval/")]
    return gate, []
