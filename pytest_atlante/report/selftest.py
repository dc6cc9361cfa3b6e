"""The zero-token self-test of a scenario: does its fixture fail its checks, does its reference pass them?

Two trials per scenario, both through the ordinary trial engine:

- the **no-op trial** assembles the sandbox, writes the host configuration and runs setup exactly as
  a real trial does, skips the host session, then runs the checks.  At least one check must fail,
  otherwise the scenario is ``vacuous``: the untouched fixture already passes it.
- the **reference trial** is the scenario's scripted trial through the real CLI, exactly as
  ``--atlante-scripted`` runs it.  Every check must pass, otherwise the scenario is ``unsolvable``
  and the failing checks are named.  A scenario without a script is ``no-reference``: a warning.

A check that errors (command not found, timeout) in either trial is named as ``check-error``; a
trial that could not run at all (setup failed, the host failed) is ``infra-error``.  A reference run
in which the host refused or errored one of the script's tool calls (Claude Code's "File has not
been read yet" before an edit, a denied command) is ``reference-tool-error``, with the call and the
host's message: its checks may still pass, but the reference is not the solution it seems to be.  Plain code, no
pytest: the pytest adaptation is ``run/plan.py``'s ``SelftestPlan``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, JsonValue

from pytest_atlante import __version__
from pytest_atlante.diagnostics import Diagnostic
from pytest_atlante.fsutil import atomic_write_text
from pytest_atlante.records import CheckResult, Record, TrialRecord, Verdict, iso_utc
from pytest_atlante.report.model import HostIdentity, Timestamp
from pytest_atlante.report.seal import write_seal
from pytest_atlante.sandbox.redact import redact_sandbox_paths

SelftestSchema = Literal["atlante/selftest-v1"]
SELFTEST_SCHEMA: SelftestSchema = "atlante/selftest-v1"
SELFTEST_FILE = "selftest.json"
Status = Literal["infra-error", "check-error", "unsolvable", "reference-tool-error", "vacuous", "no-reference", "sound"]
# Strongest first: a scenario's status is the strongest of its problems' (``sound`` without any).
STATUSES: tuple[Status, ...] = ("infra-error", "check-error", "unsolvable", "reference-tool-error", "vacuous",
                                "no-reference", "sound")
# Statuses that do not fail the self-test: ``no-reference`` is a warning.
ACCEPTABLE: frozenset[Status] = frozenset({"sound", "no-reference"})
TrialKind = Literal["no-op", "reference"]

_HINTS: dict[Status, str] = {
    "infra-error": "fix the scenario's setup (or the host installation) so the trial can run",
    "check-error": "make the check runnable in a trial: install the command, or raise its timeoutMs",
    "unsolvable": "fix the checks or the scripted/<name>.json reference so the reference solution passes",
    "reference-tool-error": "fix the scripted/<name>.json reference so the host accepts each of its tool calls "
                            "(e.g. a read action before Claude Code edits or overwrites a file)",
    "vacuous": "add a check the untouched fixture fails (e.g. file-contains on the file the task must change)",
    "no-reference": "add scripted/<name>.json beside the scenario document to prove the checks can pass",
}


class SelftestProblem(Record):
    status: Status
    trial: TrialKind | None
    checks: list[int] = Field(default_factory=list, description="indices of the checks concerned")
    message: str


class SelftestTrial(Record):
    """What one of the two trials produced (the evidence behind the status)."""

    verdict: Verdict
    durationMs: int = 0
    checks: list[CheckResult] = Field(default_factory=list)
    scriptedTurns: int | None = None
    error: str | None = None


class SelftestScenario(Record):
    name: str
    file: str
    source: str
    nodeId: str
    status: Status
    problems: list[SelftestProblem] = Field(default_factory=list)
    noop: SelftestTrial
    reference: SelftestTrial | None = None
    inputsDigest: str | None = Field(default=None, description="what the reference trial's result depends on "
                                     "(report/selftest_reuse.py); a later self-test reuses it while this is unchanged")
    reusedFrom: str | None = Field(default=None, description="the run id of the earlier sealed self-test whose "
                                   "reference trial this is (not run again: its inputs were unchanged)")


class SelftestReport(Record):
    model_config = ConfigDict(extra="forbid", serialize_by_alias=True)

    schema_: SelftestSchema = Field(alias="schema")
    runId: str
    startedAt: Timestamp
    finishedAt: Timestamp
    atlanteVersion: str
    host: HostIdentity | None
    ok: bool
    exitStatus: Annotated[int, Field(ge=0, le=3)]
    counts: dict[Status, int]
    scenarios: list[SelftestScenario]
    errors: list[dict[str, JsonValue]] = Field(default_factory=list)

    def to_json(self) -> str:
        return self.model_dump_json(indent=2) + "\n"


def _trial(record: TrialRecord) -> SelftestTrial:
    clean = [c.model_copy(update={"message": redact_sandbox_paths(c.message),
                                  "output": redact_sandbox_paths(c.output) if c.output else c.output})
             for c in record.checks]
    return SelftestTrial(verdict=record.verdict, durationMs=record.durationMs, checks=clean,
                         scriptedTurns=record.scriptedTurns,
                         error=redact_sandbox_paths(record.error) if record.error else None)


def _named(checks: Sequence[CheckResult]) -> str:
    return "; ".join(f"#{c.index} {c.type}: {c.message}" for c in checks)


def _errored(record: TrialRecord, kind: TrialKind) -> list[SelftestProblem]:
    erroring = [c for c in record.checks if c.error or c.timedOut]
    if not erroring:
        return []
    return [SelftestProblem(status="check-error", trial=kind, checks=[c.index for c in erroring],
                            message=f"check errored in the {kind} trial: {_named(erroring)}")]


_SHOWN_INPUT_CHARS = 200
_SHOWN_MESSAGE_CHARS = 300


def refused_calls(events: Sequence[Mapping[str, Any]]) -> list[str]:
    """The tool calls of a transcript the host answered with an error, each as ``Tool {input}:
    message`` (the host's own words, cut short)."""
    calls = {event.get("id"): event for event in events if event.get("type") == "tool_call"}
    found = []
    for event in events:
        if event.get("type") != "tool_result" or event.get("isError") is not True:
            continue
        call = calls.get(event.get("id"), {})
        tool = call.get("hostTool") or call.get("tool") or event.get("tool") or "a tool"
        given = json.dumps(call.get("input"), sort_keys=True, ensure_ascii=False) if call.get("input") is not None else ""
        message = " ".join(str(event.get("text") or "(no message)").split())
        found.append(redact_sandbox_paths(f"{tool} {given[:_SHOWN_INPUT_CHARS]}: {message[:_SHOWN_MESSAGE_CHARS]}"))
    return found


def classify(name: str, file: str, source: str, node_id: str, noop: TrialRecord,
             reference: TrialRecord | SelftestTrial | None, refused: Sequence[str] = ()) -> SelftestScenario:
    """The status of one scenario from its no-op trial and its reference trial (``None``: no script);
    ``refused``: the reference's tool calls the host refused or errored (:func:`refused_calls`).
    A :class:`SelftestTrial` reference is the clean result of an earlier sealed self-test, reused
    (``report/selftest_reuse.py`` takes only results without any problem): nothing to add for it."""
    problems: list[SelftestProblem] = []
    if not noop.checks:
        # The trial ended before its checks (sandbox or setup failure): nothing is known about them.
        problems.append(SelftestProblem(status="infra-error", trial="no-op",
                                        message=f"the no-op trial could not run: {noop.error or noop.verdict}"))
    else:
        problems += _errored(noop, "no-op")
        if all(c.passed for c in noop.checks):
            problems.append(SelftestProblem(status="vacuous", trial="no-op", checks=[c.index for c in noop.checks],
                                            message="every check passes on the untouched fixture (no host session ran)"))
    if isinstance(reference, SelftestTrial):
        pass   # a clean pass of unchanged inputs, reused: nothing to add on the reference side
    elif reference is None:
        problems.append(SelftestProblem(status="no-reference", trial=None,
                                        message="no scripted-model script: the checks were never shown to pass"))
    elif reference.error or not reference.checks:
        # The host session itself failed (or the trial never reached its checks): the checks'
        # results say nothing about the reference solution.
        problems.append(SelftestProblem(status="infra-error", trial="reference",
                                        message=f"the reference trial could not run: {reference.error or reference.verdict}"))
    else:
        problems += _errored(reference, "reference")
        failing = [c for c in reference.checks if not c.passed and not (c.error or c.timedOut)]
        if failing:
            problems.append(SelftestProblem(status="unsolvable", trial="reference", checks=[c.index for c in failing],
                                            message=f"the reference solution fails its own checks: {_named(failing)}"))
        if refused:
            problems.append(SelftestProblem(status="reference-tool-error", trial="reference",
                                            message=f"the host refused or errored {len(refused)} of the script's tool "
                                                    f"call(s): " + "; ".join(refused)))
    status: Status = next((s for s in STATUSES if any(p.status == s for p in problems)), "sound")
    shown = reference if isinstance(reference, SelftestTrial) else _trial(reference) if reference is not None else None
    return SelftestScenario(name=name, file=file, source=source, nodeId=node_id, status=status,
                            problems=problems, noop=_trial(noop), reference=shown)


def diagnostics(result: SelftestScenario) -> list[Diagnostic]:
    """One diagnostics-style line per problem (``eval-selftest-<status>``)."""
    found = []
    for problem in result.problems:
        location = f"$.checks[{problem.checks[0]}]" if len(problem.checks) == 1 else "$.checks" if problem.checks else "$.name"
        found.append(Diagnostic(result.file, location, f"eval-selftest-{problem.status}",
                                f"{result.name}: {problem.message}", _HINTS[problem.status]))
    return found


def failure_text(result: SelftestScenario) -> str:
    head = f"{result.name}: {result.status}"
    return "\n".join([head, ""] + [d.render() for d in diagnostics(result)])


def build(run_id: str, started_at: datetime, host: HostIdentity | None, results: Sequence[SelftestScenario],
          expected: Sequence[str], errors: Sequence[Diagnostic]) -> SelftestReport:
    """The ``selftest.json`` document; scenarios in collection order, exit status 0, 1 or 3."""
    order = {node_id: index for index, node_id in enumerate(expected)}
    ordered = sorted(results, key=lambda r: (order.get(r.nodeId, len(order)), r.nodeId))
    ok = all(r.status in ACCEPTABLE for r in ordered) and len(ordered) >= len(expected)
    status = 3 if errors else (0 if ok else 1)
    seen = Counter(r.status for r in ordered)
    return SelftestReport(schema=SELFTEST_SCHEMA, runId=run_id, startedAt=iso_utc(started_at),
                          finishedAt=iso_utc(datetime.now(UTC)), atlanteVersion=__version__, host=host,
                          ok=ok and not errors, exitStatus=status, counts={s: seen.get(s, 0) for s in STATUSES},
                          scenarios=ordered, errors=[d.to_json() for d in errors])  # type: ignore[misc]


def write(report: SelftestReport, out_dir: Path) -> Path:
    """Written atomically and sealed: a later self-test reuses only what a sealed file recorded."""
    path = out_dir / SELFTEST_FILE
    text = report.to_json()
    atomic_write_text(path, text)
    write_seal(path, text.encode("utf-8", "surrogateescape"))
    return path


def summary_lines(report: SelftestReport, path: Path | None) -> list[str]:
    lines = [f"{'scenario':<32} {'status':<13} {'no-op checks':>13} {'reference':>13}"]
    for result in report.scenarios:
        noop = f"{sum(c.passed for c in result.noop.checks)}/{len(result.noop.checks)} pass"
        ref = "-" if result.reference is None else f"{sum(c.passed for c in result.reference.checks)}/{len(result.reference.checks)} pass"
        ref += " (reused)" if result.reusedFrom else ""
        lines.append(f"{result.name[:32]:<32} {result.status:<13} {noop:>13} {ref:>13}")
    counts = ", ".join(f"{n} {s}" for s, n in report.counts.items() if n)
    lines.append(f"self-test: {counts or 'no scenario'}; exit status {report.exitStatus}")
    reused = [r for r in report.scenarios if r.reusedFrom]
    if reused:
        runs = ", ".join(sorted({r.reusedFrom for r in reused if r.reusedFrom}))
        lines.append(f"self-test: reused the reference run of {len(reused)} of {len(report.scenarios)} scenario(s) "
                     f"from the sealed self-test {runs} (inputs unchanged): {', '.join(r.name for r in reused)}; "
                     f"`atlante selftest --full` runs every reference again")
    if path is not None:
        lines.append(f"self-test report: {path}")
    return lines
