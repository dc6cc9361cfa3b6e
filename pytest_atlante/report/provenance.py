"""The pack provenance view: the small, validated slice of a published eval report.

A pack may publish the report of a completed run at its root preset's ``eval.report`` path.  Pack
indexes show only this view: run date, Atlante version, host, model, model version and each
scenario's pass rate, always labelled "self-reported evaluation" — the pack author's claim, not
an Atlante certification, an independent reproduction or a security verdict.

Everything read here is untrusted.  The one rule of this module is that it never raises into its
caller: a missing, malformed, unsafe or inconsistent report becomes ``Ignored(code, reason)``, and
the text that does reach the view is stripped of control and formatting characters and capped.
Checks run cheapest first (path, size, JSON syntax, shape limits, schema, consistency) so a
hostile file is turned away before it can cost much.
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Literal, NoReturn

from pytest_atlante.fsutil import UnreadableFile, read_capped
from pytest_atlante.hosts.names import HOSTS
from pytest_atlante.models import StrictModel
from pytest_atlante.records import TrialRecord
from pytest_atlante.report import reader
from pytest_atlante.report.exitcodes import decide
from pytest_atlante.report.model import (
    REPORT_SCHEMA,
    EvalReport,
    HostIdentity,
    ScenarioRecord,
    mean_duration,
    most_frequent_model,
    p95_duration,
    pass_rate,
    scenario_totals,
    trigger_rates,
    verdict_counts,
)
from pytest_atlante.report.reader import ReportRejected
from pytest_atlante.suite.scenario import SLUG_PATTERN

SuiteNames = Callable[[], frozenset[str]]
ProvenanceLabel = Literal["self-reported evaluation"]
PROVENANCE_LABEL: ProvenanceLabel = "self-reported evaluation"
MAX_PACK_CONFIG_BYTES = 256 * 1024
MAX_LOCATOR_CHARS = 1024
MAX_SCENARIOS = 1000
MAX_TRIALS_PER_SCENARIO = 50  # the budget's own per-scenario limit
MAX_ERRORS = 1000
MAX_NAME_CHARS = 128
MAX_TEXT_CHARS = 200
MAX_REASON_CHARS = 500
# Floats in the report are derived from integers; a published value is "the same" when it agrees
# to well within what JSON round-tripping of a Python float can change.
FLOAT_TOLERANCE = 1e-9
# A pack suite with more documents than a report may list scenarios is not one this view judges.
MAX_SUITE_DOCUMENTS = 1000
# A run cannot finish in the future; a day of slack absorbs clock skew between machines.
FUTURE_SLACK = timedelta(days=1)
# Unicode categories that never belong in displayed text: controls, formatting (bidi overrides,
# zero-width joiners), surrogates, private use, unassigned, and line/paragraph separators.
_DROPPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


class ScenarioPassRate(StrictModel):
    name: str
    passRate: float


class ProvenanceView(StrictModel):
    label: ProvenanceLabel
    runDate: str
    atlanteVersion: str
    host: HostIdentity
    model: str | None
    modelVersion: str | None
    scenarios: list[ScenarioPassRate]


class Ignored(StrictModel):
    """Why a published report is not shown; ``code`` is stable, ``reason`` is for people."""

    code: str
    reason: str


def _reject(code: str, reason: str) -> NoReturn:
    raise ReportRejected(code, reason)


def display_text(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """Untrusted text made safe to display: no control or formatting characters, capped length."""
    kept = "".join(ch for ch in text if unicodedata.category(ch) not in _DROPPED_CATEGORIES)
    return kept if len(kept) <= limit else kept[: limit - 1] + "…"


# --- reading ---------------------------------------------------------------------------------


def _check_shape_limits(document: Any) -> None:
    """Refuse oversized collections before pydantic spends time (and errors) on them."""
    if not isinstance(document, dict):
        _reject("report-invalid", "the report is not a JSON object")
    if document.get("schema") != REPORT_SCHEMA:
        _reject("report-schema", f"the report does not declare schema {REPORT_SCHEMA!r}")
    scenarios = document.get("scenarios")
    if isinstance(scenarios, list):
        if len(scenarios) > MAX_SCENARIOS:
            _reject("report-too-large", f"the report lists more than {MAX_SCENARIOS} scenarios")
        for index, scenario in enumerate(scenarios):
            trials = scenario.get("trials") if isinstance(scenario, dict) else None
            if isinstance(trials, list) and len(trials) > MAX_TRIALS_PER_SCENARIO:
                _reject(
                    "report-too-large",
                    f"$.scenarios[{index}] lists more than {MAX_TRIALS_PER_SCENARIO} trials",
                )
    errors = document.get("errors")
    if isinstance(errors, list) and len(errors) > MAX_ERRORS:
        _reject("report-too-large", f"the report lists more than {MAX_ERRORS} errors")


# --- consistency -----------------------------------------------------------------------------


def _close(published: float, computed: float) -> bool:
    return abs(published - computed) <= FLOAT_TOLERANCE * max(1.0, abs(computed))


def _parse_timestamp(value: str, where: str) -> datetime:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        _reject("report-invalid", f"{where} is not a real date and time")


def _check_trial(trial: TrialRecord, where: str) -> None:
    if trial.durationMs < 0 or trial.hostDurationMs < 0:
        _reject("report-inconsistent", f"{where} has a negative duration")
    if trial.costUsd is not None and trial.costUsd < 0:
        _reject("report-inconsistent", f"{where} has a negative cost")
    if trial.usage is not None and min(trial.usage.model_dump().values()) < 0:
        _reject("report-inconsistent", f"{where} has a negative token count")
    if trial.verdict == "skipped-budget" and (
        trial.durationMs or trial.hostDurationMs or trial.checks or trial.diff is not None
    ):
        _reject("report-inconsistent", f"{where} was skipped but records a duration, checks or diff")
    _check_verdict(trial, where)
    if trial.changedPathsTotal is not None and trial.changedPathsTotal < len(trial.changedPaths):
        _reject("report-inconsistent", f"{where}.changedPathsTotal is below the paths listed")


def _check_verdict(trial: TrialRecord, where: str) -> None:
    """The verdict must follow from the checks the trial records (the engine's own rules).

    ``pass`` needs at least one check (a scenario has one or more) and every check passed; ``fail``
    needs a failed check and none that errored; a check that could not run makes the trial an
    ``infra-error``.  Timeouts and budget aborts keep whatever checks then found.
    """
    checks = trial.checks
    errored = any(c.error for c in checks)
    failed = any(not c.passed for c in checks)
    if any(c.error and c.passed for c in checks):
        _reject("report-inconsistent", f"{where} has a check that both passed and errored")
    if trial.verdict == "pass" and (not checks or failed):
        _reject("report-inconsistent", f"{where} is a pass but not every check passed")
    if trial.verdict == "fail" and (errored or not failed):
        _reject("report-inconsistent", f"{where} is a fail but its checks do not say so")
    if errored and trial.verdict not in ("infra-error", "skipped-budget"):
        _reject("report-inconsistent", f"{where} has a check that could not run but is not an infra-error")


def _check_scenario(scenario: ScenarioRecord, where: str) -> None:
    if not re.fullmatch(SLUG_PATTERN, scenario.name) or len(scenario.name) > MAX_NAME_CHARS:
        _reject("report-inconsistent", f"{where}.name is not a scenario slug")
    trials = scenario.trials
    if len(trials) != scenario.expectedTrials or not trials or scenario.notRun or scenario.passRate is None:
        _reject("report-inconsistent", f"{where} does not list every requested trial")
    numbers = [t.trial for t in trials]
    if len(set(numbers)) != len(numbers):
        _reject("report-inconsistent", f"{where} lists a trial number twice")
    for index, trial in enumerate(trials):
        if trial.scenario != scenario.name:
            _reject("report-inconsistent", f"{where}.trials[{index}] belongs to another scenario")
        _check_trial(trial, f"{where}.trials[{index}]")
    expected = {
        "passRate": pass_rate(trials),
        "meanDurationMs": mean_duration(trials),
        "p95DurationMs": p95_duration(trials),
    }
    for field, computed in expected.items():
        if not _close(getattr(scenario, field), computed):
            _reject("report-inconsistent", f"{where}.{field} does not match the trials listed")
    if scenario.triggerRates != trigger_rates(trials):
        _reject("report-inconsistent", f"{where}.triggerRates does not match the trials listed")
    totals = scenario_totals(trials)
    if scenario.totals.tokens != totals.tokens or (
        (scenario.totals.costUsd is None) != (totals.costUsd is None)
        or (
            scenario.totals.costUsd is not None
            and totals.costUsd is not None
            and not _close(scenario.totals.costUsd, totals.costUsd)
        )
    ):
        _reject("report-inconsistent", f"{where}.totals does not match the trials listed")


def _check_consistency(report: EvalReport, now: datetime, suite: SuiteNames | None) -> None:
    if not report.complete or report.interrupted:
        _reject("report-incomplete", "the report is from an incomplete or interrupted run")
    if report.scripted:
        # A scripted run replays canned model turns: its pass rates say the checks accept a known
        # good run, not how any model did.  Showing it beside real runs would mislead.
        _reject("report-scripted", "the report is from an --atlante-scripted replay, not a model's run")
    if any(t.scriptedTurns is not None for s in report.scenarios for t in s.trials):
        _reject("report-inconsistent", "a trial was served by the scripted model but the report is not marked scripted")
    if report.host is None:
        _reject("report-inconsistent", "the report names no host")
    if report.host.dialect not in HOSTS[report.host.name].dialects:
        _reject("report-inconsistent", "$.host.dialect is not a dialect of $.host.name")
    started = _parse_timestamp(report.startedAt, "$.startedAt")
    finished = _parse_timestamp(report.finishedAt, "$.finishedAt")
    if finished < started:
        _reject("report-inconsistent", "$.finishedAt is before $.startedAt")
    if finished > now + FUTURE_SLACK:
        _reject("report-inconsistent", "$.finishedAt is in the future")
    if not report.scenarios:
        _reject("report-inconsistent", "the report lists no scenarios")
    names = [s.name for s in report.scenarios]
    if len(set(names)) != len(names):
        _reject("report-inconsistent", "the report lists a scenario name twice")
    members = suite() if suite is not None else None
    for index, scenario in enumerate(report.scenarios):
        _check_scenario(scenario, f"$.scenarios[{index}]")
        if members is not None and scenario.name not in members:
            _reject("report-foreign", f"$.scenarios[{index}] is not a scenario of the pack's suite")
    trials = [t for s in report.scenarios for t in s.trials]
    if report.verdicts != verdict_counts(trials):
        _reject("report-inconsistent", "$.verdicts does not match the trials listed")
    if report.modelVersion != most_frequent_model(trials):
        _reject("report-inconsistent", "$.modelVersion is not the model the trials observed")
    if report.requestedModel != most_frequent_model(trials, requested=True):
        _reject("report-inconsistent", "$.requestedModel is not the model the trials' hosts asked for")
    floor = decide(
        validation_failed=False, run_level_error=False, verdicts=[t.verdict for t in trials]
    )
    # A complete run had no run-level error (that would have made it incomplete), so its status
    # is exactly what its verdicts give and it records no errors.
    if report.exitStatus != floor:
        _reject("report-inconsistent", "$.exitStatus does not match the verdicts")
    if report.errors:
        _reject("report-inconsistent", "a complete run recorded errors")


def _view(report: EvalReport) -> ProvenanceView:
    assert report.host is not None  # checked by _check_consistency
    return ProvenanceView(
        label=PROVENANCE_LABEL,
        runDate=report.startedAt[:10],
        atlanteVersion=report.atlanteVersion,
        host=report.host,
        model=None if report.model is None else display_text(report.model),
        modelVersion=None if report.modelVersion is None else display_text(report.modelVersion),
        # every passRate is a number here: _check_scenario rejected scenarios with trials not run
        scenarios=[ScenarioPassRate(name=s.name, passRate=s.passRate or 0.0) for s in report.scenarios],
    )


# --- entry points ----------------------------------------------------------------------------


def _guarded_view(
    path: Path, *, follow_symlinks: bool, now: datetime | None, suite: SuiteNames | None = None
) -> ProvenanceView | Ignored:
    try:
        document = reader.parse_json(reader.read_bytes(path, follow_symlinks=follow_symlinks))
        _check_shape_limits(document)
        report = reader.validate(document, strict=True)
        _check_consistency(report, now or datetime.now(UTC), suite)
        return _view(report)
    except ReportRejected as exc:
        return Ignored(code=exc.code, reason=display_text(exc.reason, MAX_REASON_CHARS))
    except Exception as exc:  # noqa: BLE001 - the contract is "never raises into the caller"
        return Ignored(code="report-unreadable", reason=f"unexpected {type(exc).__name__}")


def provenance_view(path: Path, *, now: datetime | None = None) -> ProvenanceView | Ignored:
    """The provenance view of the report at ``path``, or why it is ignored.  Never raises.

    ``now`` (default: the current UTC time) bounds how far in the future a report may be dated.
    """
    return _guarded_view(path, follow_symlinks=True, now=now)


def _safe_relative(locator: object) -> PurePosixPath:
    if not isinstance(locator, str) or not locator:
        _reject("report-unsafe-path", "eval.report is not a non-empty string")
    if len(locator) > MAX_LOCATOR_CHARS:
        _reject("report-unsafe-path", f"eval.report is longer than {MAX_LOCATOR_CHARS} characters")
    if any(unicodedata.category(ch) in _DROPPED_CATEGORIES for ch in locator):
        _reject("report-unsafe-path", "eval.report contains control characters")
    if "\\" in locator or PureWindowsPath(locator).drive or locator.startswith("/"):
        _reject("report-unsafe-path", "eval.report must be a relative POSIX path")
    relative = PurePosixPath(locator)
    if ".." in relative.parts:
        _reject("report-unsafe-path", "eval.report must not contain '..'")
    return relative


def pack_report_view(
    pack_root: Path,
    report_rel_path: str,
    *,
    now: datetime | None = None,
    suite: SuiteNames | None = None,
) -> ProvenanceView | Ignored:
    """Resolve a pack's declared ``eval.report`` inside ``pack_root`` and view it.  Never raises.

    The path must be relative, free of ``..`` and backslashes, and still inside the pack root
    after every symlink is resolved; the file itself must be a regular file under the size cap.
    ``suite``, when given, yields the scenario names of the pack's suite (read only once the
    report itself has passed every other check): a report listing any other scenario is not this
    pack's report.
    """
    try:
        relative = _safe_relative(report_rel_path)
        try:
            root = pack_root.resolve(strict=True)
        except (OSError, RuntimeError):
            _reject("report-missing", "the pack root does not exist")
        try:
            target = (root / relative).resolve(strict=True)
        except FileNotFoundError:
            _reject("report-missing", "no report at the declared path")
        except (OSError, RuntimeError):
            _reject("report-unsafe-path", "eval.report cannot be resolved (symlink loop?)")
        if not target.is_relative_to(root):
            _reject("report-unsafe-path", "eval.report resolves outside the pack root")
    except ReportRejected as exc:
        return Ignored(code=exc.code, reason=exc.reason)
    except Exception as exc:  # noqa: BLE001 - see _guarded_view
        return Ignored(code="report-unreadable", reason=f"unexpected {type(exc).__name__}")
    # ``target`` is fully resolved; refusing a symlink now catches one swapped in since.
    return _guarded_view(target, follow_symlinks=False, now=now, suite=suite)


def _pack_config(pack_root: Path) -> dict[str, Any]:
    """The ``eval`` section of a pack root's ``atlante.jsonc`` (itself untrusted input)."""
    from pytest_atlante.suite import jsonc

    config = pack_root / "atlante.jsonc"
    try:
        data = read_capped(config, MAX_PACK_CONFIG_BYTES)
    except UnreadableFile as exc:
        _reject("report-not-declared", f"the pack's atlante.jsonc {exc.reason}")
    try:
        document = jsonc.loads(data.decode("utf-8"))
    except ValueError as exc:  # JsoncError and UnicodeDecodeError are ValueErrors
        _reject("report-not-declared", f"atlante.jsonc is not valid JSONC: {exc}")
    suite = document.get("eval") if isinstance(document, dict) else None
    return suite if isinstance(suite, dict) else {}


def _declared_report(suite: dict[str, Any]) -> str:
    declared = suite.get("report")
    if declared is None:
        _reject("report-not-declared", "the pack's root preset declares no eval.report")
    if not isinstance(declared, str):
        _reject("report-unsafe-path", "eval.report is not a string")
    return declared


def _suite_names(pack_root: Path, suite: dict[str, Any]) -> frozenset[str]:
    """The scenario names of the pack's own suite (its ``eval.scenarios`` documents)."""
    from pytest_atlante.suite.discovery import expand_glob
    from pytest_atlante.suite.documents import load_document

    pattern = suite.get("scenarios")
    if not isinstance(pattern, str):
        _reject("report-foreign", "the pack declares no eval.scenarios, so no report can be its own")
    try:
        documents = expand_glob(pack_root, pattern)
    except ValueError as exc:
        _reject("report-foreign", f"eval.scenarios cannot be expanded: {exc}")
    if len(documents) > MAX_SUITE_DOCUMENTS:
        _reject("report-foreign", f"eval.scenarios matches more than {MAX_SUITE_DOCUMENTS} documents")
    names: set[str] = set()
    for document in documents:
        loaded = load_document(document, document.name, "report-foreign")
        data = getattr(loaded, "data", None)
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            names.add(data["name"])
    return frozenset(names)


def view_for_path(path: Path, *, now: datetime | None = None) -> ProvenanceView | Ignored:
    """A pack root directory (its declared ``eval.report``) or a report file.  Never raises."""
    try:
        if path.is_dir():
            suite = _pack_config(path)
            declared = _declared_report(suite)
            return pack_report_view(path, declared, now=now, suite=lambda: _suite_names(path, suite))
    except ReportRejected as exc:
        return Ignored(code=exc.code, reason=display_text(exc.reason, MAX_REASON_CHARS))
    except Exception as exc:  # noqa: BLE001 - see _guarded_view
        return Ignored(code="report-unreadable", reason=f"unexpected {type(exc).__name__}")
    return provenance_view(path, now=now)


def cmd_pack_report(path: Path) -> int:
    """``atlante pack report PATH``: print the view as pretty JSON (exit 0) or why not (exit 1)."""
    result = view_for_path(path)
    if isinstance(result, Ignored):
        payload: dict[str, Any] = {"ignored": True, **result.model_dump()}
        status = 1
    else:
        payload = result.model_dump()
        status = 0
    sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    return status
