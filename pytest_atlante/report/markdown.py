"""``atlante report md``: a report (and its comparison) as GitHub-flavoured Markdown for people.

The same text serves three places: a job's step summary (``GITHUB_STEP_SUMMARY``, written by the
run under GitHub Actions: ``run/github.py``), a sticky pull-request comment (docs/ci.md) and
anything else that renders GFM.  So it is bounded by the smallest of them, a pull-request
comment's 65,536 characters: when the table would pass that, whole rows are dropped from its end
and the last line says how many ("…and N more scenarios"), never a cut row or an unclosed table.

Every string that comes from the report is untrusted (an agent writes check output, and the
model's name comes from the host): free text goes into code spans, so no link, image, HTML tag,
``@mention`` or ``#123`` reference renders from it, and a ``|`` is escaped so it never splits a
table cell.  Numbers and names the report's models constrain are written as they are.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_atlante.fsutil import atomic_write_text
from pytest_atlante.records import TrialRecord
from pytest_atlante.report.model import EvalReport, ScenarioRecord, passed_and_ran
from pytest_atlante.report.reader import load_report
from pytest_atlante.report.statrecords import Comparison, RateInterval, ScenarioComparison, TriggerRate

__all__ = ["MAX_MARKDOWN_CHARS", "MD_INPUT_CODE", "md_command", "render_markdown"]

#: A GitHub pull-request comment's limit (and far below a step summary's 1 MiB).
MAX_MARKDOWN_CHARS = 65_536
MD_INPUT_CODE = "report-md-input"
# A cell's free text is cut here: a row says what failed; the report and the view hold the rest.
_MESSAGE_CHARS = 300
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]+")
_VERDICT_MARK = {True: "✅", False: "❌"}
_COLUMNS = ("Scenario", "Pass rate", "95% interval", "Trigger rates", "First failure")


def code(text: str, limit: int = _MESSAGE_CHARS) -> str:
    """``text`` as one inline code span safe inside a table cell: control and invisible
    characters become spaces, a fence longer than any run of backticks in it, ``|`` escaped."""
    flat = " ".join(_CONTROL.sub(" ", text).split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    if not flat:
        return ""
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat.replace('|', chr(92) + '|')}{pad}{fence}"


def _percent(value: float) -> str:
    return f"{value:.0%}"


def _interval(interval: RateInterval | None) -> str:
    if interval is None:
        return "–"
    return f"{_percent(interval.low)}–{_percent(interval.high)}"


def _pass_rate(scenario: ScenarioRecord) -> str:
    if scenario.passRate is None:
        return "not run"
    passed, ran = passed_and_ran(scenario.trials)
    rate = f"{passed}/{ran} ({_percent(scenario.passRate)})" if ran else _percent(scenario.passRate)
    return rate + (" ⚠ infra-error" if scenario.unreliable else "")


def _trigger(rate: TriggerRate) -> str:
    wanted = {"use": ", wanted", "no-use": ", unwanted"}.get(rate.wanted or "", "")
    return f"{rate.kind} {code(rate.name, 80)} {rate.used}/{rate.trials}{wanted}"


def first_failure(trials: Sequence[TrialRecord]) -> str | None:
    """The message of the first failing check of the first trial that did not pass (or why it
    produced no verdict of its checks: its error), in trial order."""
    for trial in trials:
        if trial.verdict == "pass":
            continue
        failed = next((c for c in trial.checks if not c.passed), None)
        if failed is not None:
            return f"trial {trial.trial}: {trial.verdict}: check {failed.index + 1} ({failed.type}): {failed.message}"
        return f"trial {trial.trial}: {trial.verdict}" + (f": {trial.error}" if trial.error else "")
    return None


def _label_cell(result: ScenarioComparison | None, regressed_triggers: Sequence[str]) -> str:
    if result is None:
        return "new"
    label = result.label
    text = f"**{label}**" if label == "regressed" else label
    if result.difference is not None:
        text += f" ({result.difference * 100:+.0f} pts)"
    if regressed_triggers:
        text += "; trigger **regressed**: " + ", ".join(regressed_triggers)
    return text


def _link(name: str, index: int, html_url: str | None) -> str:
    shown = code(name, 120)
    return f"[{shown}]({html_url}#s{index})" if html_url else shown


def _rank(scenario: ScenarioRecord, comparison: Comparison | None, labels: Mapping[str, str]) -> int:
    """Regressions first, then scenarios with a trial that did not pass, then the rest."""
    if comparison is not None and (labels.get(scenario.name) == "regressed"
                                   or any(t.label == "regressed" and t.scenario == scenario.name
                                          for t in comparison.triggers)):
        return 0
    if scenario.passRate is None or scenario.passRate < 1:
        return 1
    return 2


def _rows(report: EvalReport, html_url: str | None) -> tuple[list[str], list[str]]:
    """The table's header lines and its rows, in the order they are shown."""
    comparison = report.comparison
    columns = list(_COLUMNS) + (["vs baseline"] if comparison is not None else [])
    header = ["| " + " | ".join(columns) + " |", "|" + "|".join(["---"] + [":---:"] * 2 + ["---"] * (len(columns) - 3)) + "|"]
    by_name = {r.name: r for r in comparison.scenarios} if comparison is not None else {}
    labels = {name: r.label for name, r in by_name.items()}
    order = sorted(enumerate(report.scenarios), key=lambda pair: (_rank(pair[1], comparison, labels), pair[0]))
    rows = []
    for index, scenario in order:
        failure = first_failure(scenario.trials)
        cells = [_link(scenario.name, index, html_url), _pass_rate(scenario), _interval(scenario.passInterval),
                 "<br>".join(_trigger(r) for r in scenario.triggerRates) or "–",
                 code(failure) if failure else "–"]
        if comparison is not None:
            regressed = [f"{t.kind} {code(t.name, 80)}" for t in comparison.triggers
                         if t.scenario == scenario.name and t.label == "regressed"]
            cells.append(_label_cell(by_name.get(scenario.name), regressed))
        rows.append("| " + " | ".join(cells) + " |")
    return header, rows


def _verdict_line(report: EvalReport) -> str:
    counts = report.verdicts
    ran = sum(n for verdict, n in counts.items() if verdict != "skipped-budget")
    passed = counts.get("pass", 0)
    ok = report.exitStatus == 0 and report.complete
    outcome = "passed" if ok else ("no trial selected" if report.exitStatus == 5 else "failed")
    others = ", ".join(f"{n} {verdict}" for verdict, n in counts.items() if n and verdict != "pass")
    scenarios_ok = sum(1 for s in report.scenarios if s.passRate == 1)
    line = (f"### {_VERDICT_MARK[ok]} atlante eval {outcome} (exit {report.exitStatus}): "
            f"{passed}/{ran} trials passed" + (f" ({others})" if others else "")
            + f", {scenarios_ok} of {len(report.scenarios)} scenarios passed every trial")
    return line + ("" if report.complete else " — **incomplete run**: some requested trials never ran")


def _context(report: EvalReport, html_url: str | None) -> list[str]:
    host = f"{report.host.name} {report.host.version}" if report.host else "host not probed"
    model = code(report.model, 120) if report.model else "the host's default model"
    parts = [f"host {host}", f"model {model}", f"run {code(report.runId, 80)}"]
    suite = report.suite
    if suite is not None and suite.meanPassRate is not None:
        interval = f", 95% interval {_interval(suite.passInterval)}" if suite.passInterval else ""
        parts.append(f"suite mean pass rate {_percent(suite.meanPassRate)}{interval}")
    lines = [" · ".join(parts)]
    if report.scripted:
        # scripted_note's words, without the model name the host asked for (untrusted, and beside the point here)
        lines.append("_Scripted run: answered offline by the scripted model; tokens are the script's and costs a "
                     "price for them: nothing was charged._")
    if html_url:
        lines.append(f"[Open the HTML view]({html_url})")
    return lines


def _comparison_lines(comparison: Comparison) -> list[str]:
    counts = ", ".join(f"{n} {label}" for label, n in comparison.counts.items() if n) or "no scenario compared"
    lines = [f"Compared with the baseline run {code(comparison.baseRunId, 80)}: {counts}."]
    if comparison.changed:
        lines.append("Changed between the runs: " + ", ".join(code(c.component, 40) for c in comparison.changed) + ".")
    if comparison.onlyInBase:
        lines.append(f"Only in the baseline: {len(comparison.onlyInBase)} scenario(s).")
    return lines


def render_markdown(report: EvalReport, *, html_url: str | None = None, limit: int = MAX_MARKDOWN_CHARS) -> str:
    """The report as GFM, at most ``limit`` characters (whole rows, then "…and N more")."""
    head = [_verdict_line(report), "", *_context(report, html_url)]
    if report.comparison is not None:
        head += ["", *_comparison_lines(report.comparison)]
    head.append("")
    errors = [f"- run error {code(str(e.get('code', 'error')), 60)}: {code(str(e.get('message', '')))}"
              for e in report.errors[:5]]
    tail = ["", *errors] if errors else []
    if not report.scenarios:
        return _fit("\n".join([*head, "No scenario ran.", *tail]) + "\n", limit)
    header, rows = _rows(report, html_url)
    fixed = len("\n".join(head + header + tail)) + 2
    shown: list[str] = []
    used = fixed
    for position, row in enumerate(rows):
        remaining = len(rows) - position - 1
        # room for this row and, if rows remain after it, the "…and N more" line
        reserve = len(_more_line(remaining)) + 2 if remaining else 0
        if used + len(row) + 1 + reserve > limit:
            break
        shown.append(row)
        used += len(row) + 1
    lines = head + header + shown
    if len(shown) < len(rows):
        lines += ["", _more_line(len(rows) - len(shown))]
    return _fit("\n".join(lines + tail) + "\n", limit)


def _more_line(count: int) -> str:
    return f"…and {count} more scenario{'s' if count != 1 else ''} (see report.json or the HTML view)"


def _fit(text: str, limit: int) -> str:
    """A last guard for the parts that are not rows (a huge error list, a tiny ``limit``)."""
    return text if len(text) <= limit else text[: max(limit - 2, 0)].rsplit("\n", 1)[0] + "\n…\n"


def md_command(target: Path, out: Path | None, html_url: str | None, baseline: Path | None = None) -> int:
    """``atlante report md``: print the Markdown, or write it atomically to ``out``."""
    from pytest_atlante.report.compare import COMPARE_INPUT_CODE, compare_reports
    from pytest_atlante.report.view import report_path_for

    report = load_report(report_path_for(target), MD_INPUT_CODE)
    if baseline is not None:
        base = load_report(report_path_for(baseline), COMPARE_INPUT_CODE)
        report = report.model_copy(update={"comparison": compare_reports(base, report)})
    text = render_markdown(report, html_url=html_url)
    if out is None:
        print(text, end="")
    else:
        atomic_write_text(out, text)
        print(f"markdown: {out}")
    return 0
