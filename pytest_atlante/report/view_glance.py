"""What the HTML view shows before anything is opened: the run's verdict banner, each scenario's
verdict (the row's colour, its place in the table, the first reason it failed) and the timeline's
tool calls paired with their results.

The page is read in five seconds: a failing run says so at the top in the failure colour, failing
scenarios come first with the reason on their row, and a toggle hides the passing ones.  Everything
here reads the report as the view loads it (a dict, every field read with ``.get``: an older report
shows less, never breaks the page) and returns text for ``view.py`` to escape and place.
"""

from __future__ import annotations

from typing import Any

from pytest_atlante.records import VERDICT_PRECEDENCE

J = dict[str, Any]

REASON_SHOWN_CHARS = 240  # the first failing check's message on a scenario row; the trial shows it whole

# What each exit status means (report/exitcodes.py), said in the banner beside the number.
EXIT_MEANINGS = {0: "every requested trial passed", 1: "at least one requested trial did not pass",
                 2: "validation failed", 3: "a run-level error", 5: "no trial was selected"}

# A scenario row's verdict class; the order is the table's initial order (failures first).
ROW_ORDER = ("fail", "not-run", "pass")


def scenario_verdict(scenario: J) -> str:
    """``fail`` when a trial that ran did not pass, ``not-run`` when some requested trials never ran
    (a cost cap's ``skipped-budget`` ones included) and none failed, else ``pass``."""
    verdicts = [t.get("verdict") for t in scenario.get("trials") or [] if isinstance(t, dict)]
    if any(v not in ("pass", "skipped-budget") for v in verdicts):
        return "fail"
    if not_run(scenario) or not verdicts:
        return "not-run"
    return "pass"


def not_run(scenario: J) -> int:
    """Requested trials that never ran: those with no record and those a cost cap skipped."""
    skipped = sum(1 for t in scenario.get("trials") or [] if isinstance(t, dict) and t.get("verdict") == "skipped-budget")
    return _int(scenario.get("notRun")) + skipped


def worst_trial_verdict(scenario: J) -> str | None:
    """The strongest non-pass verdict among the scenario's trials (``records.VERDICT_PRECEDENCE``)."""
    seen = {str(t.get("verdict")) for t in scenario.get("trials") or [] if isinstance(t, dict)}
    return next((v for v in VERDICT_PRECEDENCE if v != "pass" and v in seen), None)


def failures_first(scenarios: list[J]) -> list[tuple[int, J]]:
    """The scenarios with their report index (the page's anchors use it), failing ones first, then
    the incomplete, then the passing; the report's order within each group."""
    indexed = [(i, s) for i, s in enumerate(scenarios) if isinstance(s, dict)]
    return sorted(indexed, key=lambda pair: ROW_ORDER.index(scenario_verdict(pair[1])))


def first_reason(scenario: J) -> str | None:
    """Why the scenario's first failing trial failed: its first failing check (``#index type:
    message``), else the trial's error, else its verdict; ``None`` for a scenario with no failure."""
    for trial in scenario.get("trials") or []:
        if not isinstance(trial, dict) or trial.get("verdict") == "pass":
            continue
        prefix = f"trial {trial.get('trial')}: "
        for check in trial.get("checks") or []:
            if isinstance(check, dict) and not check.get("passed"):
                return _cut(f"{prefix}#{check.get('index')} {check.get('type')}: {check.get('message')}")
        if trial.get("error"):
            return _cut(prefix + str(trial.get("error")))
        return _cut(prefix + str(trial.get("verdict")))
    return None


def banner(report: J) -> tuple[str, str, list[str]]:
    """The run verdict: (css class, headline, facts): ``PASSED``/``FAILED``/``INCOMPLETE`` with the
    scenario and trial counts and the exit status with its meaning."""
    scenarios = [s for s in report.get("scenarios") or [] if isinstance(s, dict)]
    verdicts = {str(v): _int(n) for v, n in (report.get("verdicts") or {}).items()}
    status = report.get("exitStatus")
    failing = sum(1 for s in scenarios if scenario_verdict(s) == "fail")
    missing = sum(_int(s.get("notRun")) for s in scenarios)  # skipped-budget ones are in the counts
    # The colour follows the exit status CI sees: any status but 0 (and 5, nothing selected) fails.
    if status == 0 and report.get("complete", True):
        cls, headline = "pass", "PASSED"
    elif status in (0, 5):
        cls, headline = "incomplete", "INCOMPLETE"
    else:
        cls, headline = "fail", "FAILED"
    trial_counts = ", ".join(f"{n} {'passed' if v == 'pass' else v}" for v, n in verdicts.items() if n)
    facts = [f"{failing} of {len(scenarios)} scenario{'s' if len(scenarios) != 1 else ''} failing",
             f"trials: {trial_counts or 'none'}" + (f", {missing} not run" if missing else ""),
             f"exit status {status}" + (f" ({EXIT_MEANINGS[status]})" if status in EXIT_MEANINGS else "")]
    if not report.get("complete", True):
        facts.append("interrupted" if report.get("interrupted") else "incomplete")
    return cls, headline, facts


def paired(events: list[J]) -> list[tuple[J, J | None]]:
    """The timeline's entries: each tool call with the result that answers it (same call id, after
    it), and every other event alone.  A result with no call before it stays where it is."""
    answered: dict[int, J] = {}
    waiting: dict[tuple[object, object], int] = {}   # (agent, call id) -> the call's position
    for position, event in enumerate(events):
        key = (event.get("agent"), event.get("id"))
        if event.get("type") == "tool_call" and isinstance(event.get("id"), str):
            waiting[key] = position
        elif event.get("type") == "tool_result" and key in waiting:
            answered[waiting.pop(key)] = event
    taken = {id(result) for result in answered.values()}
    return [(event, answered.get(position)) for position, event in enumerate(events) if id(event) not in taken]


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _cut(text: str) -> str:
    return text if len(text) <= REASON_SHOWN_CHARS else text[:REASON_SHOWN_CHARS - 1] + "…"
