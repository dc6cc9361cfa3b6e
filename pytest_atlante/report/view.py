"""``atlante view``: one self-contained HTML page for an eval report (inline CSS and JS, no network).

The page has a run header under a verdict banner, a sortable scenario table (failures first, each
row coloured by verdict with its first failure's reason; pass rate with its interval as a bar, pass@k,
tokens, cost, durations), and per trial its verdict, checks, diff and transcript timeline.  It is
rendered here, in Python, as static HTML: report text is untrusted (scenario names, diffs, model
output), so every string goes through :func:`esc` and element ids are built from indices, never
from report text.  The only script is the constant in ``view_assets``, allowed by hash in the
page's Content-Security-Policy.

Fields added by later report versions (interval, pass@k, isolation, suite, comparison) are read with
``.get`` and rendered when present; older reports simply show less.
"""

from __future__ import annotations

import html
import json
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pytest_atlante.diagnostics import Diagnostic, DiagnosticError
from pytest_atlante.fsutil import UnreadableFile, atomic_write_bytes
from pytest_atlante.hosts.base import SCRIPTED_MODEL_ID
from pytest_atlante.report import reader
from pytest_atlante.report.history import ScenarioHistory, history_beside
from pytest_atlante.report.model import FEW_TRIALS, REPORT_FILE, SCRIPTED_COST_LABEL
from pytest_atlante.report.runs import newest_complete
from pytest_atlante.report.view_assets import CSS, JS, script_hash
from pytest_atlante.report.view_glance import (
    banner,
    failures_first,
    first_reason,
    paired,
    scenario_verdict,
    worst_trial_verdict,
)
from pytest_atlante.report.view_lift import lift_section, row_label
from pytest_atlante.trial.transcript import read_transcript

HTML_FILE = "report.html"
DIFF_SHOWN_CHARS = 10_000  # per trial; a longer diff is cut with a note (the report keeps 20,000)
EVENTS_SHOWN = 300  # transcript events per trial; the rest are counted, not shown
FIELD_SHOWN_CHARS = 2_000  # one tool input or text shown in the timeline

J = dict[str, Any]


def esc(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


# --------------------------------------------------------------------------- loading


def report_path_for(target: Path) -> Path:
    """A report file, or a run directory holding ``report.json``."""
    path = target / REPORT_FILE if target.is_dir() else target
    # Only "is there anything": what is there (a FIFO, a device, a huge file) is the reader's to refuse.
    if not os.path.lexists(path):
        raise DiagnosticError([Diagnostic(str(target), "", "view-report-missing", f"no eval report at {path}",
                                          "give a report.json or the run directory that holds it (<project>/.atlante/eval/<run-id>/)")])
    return path


def latest_run(project_root: Path) -> tuple[Path, bool]:
    """The newest complete run directory under ``<project>/.atlante/eval/`` (``report/runs.py``: a
    sealed report of the whole suite, every trial run; a ``-k`` run or an interrupted one is passed
    over, and so is an unsealed report, such as one a trial planted: ``report/seal.py``), and True;
    when there is none, the newest partial run and False."""
    entry = newest_complete(project_root, or_partial=True)
    if entry is not None:
        return entry.directory, entry.status == "complete"
    raise DiagnosticError([Diagnostic(str(project_root), "", "view-report-missing",
                                      "no eval run with a report written by a run of yours under .atlante/eval/",
                                      "run `atlante eval` first, or name a report.json or run directory "
                                      "(`atlante runs` lists them)")])


def load_report(path: Path) -> J:
    report = reader.load_report(path, "view-report-invalid", unreadable_code="view-report-missing",
                         hint="point atlante view at a report.json written by pytest --atlante-eval")
    dumped: J = report.model_dump(mode="json", by_alias=True)
    return dumped


def _inside(report_dir: Path, rel: object) -> Path | None:
    """``rel`` resolved under the report's directory; None for anything that would leave it."""
    if not isinstance(rel, str) or not rel:
        return None
    try:
        base = report_dir.resolve()
        joined = base / rel
        # The last component stays as it is: a symlink there is refused by the reader, not followed.
        path = joined.parent.resolve() / joined.name
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL in the name
        return None
    return path if base in path.parents and joined.name not in ("", ".", "..") else None


def _transcript_events(report_dir: Path, rel: object) -> tuple[list[J] | None, str | None]:
    """The trial's transcript events, or why there are none.  Paths stay inside the report's directory."""
    if not isinstance(rel, str) or not rel:
        return None, None
    path = _inside(report_dir, rel)
    if path is None:
        return None, "the transcript path points outside the report's directory; not read"
    try:
        return read_transcript(path), None
    except UnreadableFile as exc:
        if exc.missing:
            return None, f"transcript {rel} not found beside the report"
        return None, f"transcript {rel} {exc.reason}; not read"


# --------------------------------------------------------------------------- small renderers


def _pct(value: object) -> str:
    return f"{float(value) * 100:.0f}%" if isinstance(value, (int, float)) else "–"


def _num(value: object) -> str:
    return "" if not isinstance(value, (int, float)) else repr(float(value))


def _chip(verdict: str) -> str:
    return f'<span class="chip {esc(verdict)}">{esc(verdict)}</span>'


def _toggle(ident: str, label: str, body: str, *, open_: bool = False) -> str:
    hidden = "" if open_ else " hidden"
    return (f'<button type="button" class="toggle" aria-expanded="{str(open_).lower()}" aria-controls="{ident}">{label}</button>'
            f'<div id="{ident}"{hidden}>{body}</div>')


def _meta(items: Iterable[tuple[str, object]]) -> str:
    cells = "".join(f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>" for k, v in items if v not in (None, ""))
    return f'<dl class="meta">{cells}</dl>'


def _bar(scenario: J) -> str:
    rate = float(scenario.get("passRate") or 0.0)
    interval = scenario.get("passInterval") or None
    # The passing share filled in the pass colour over a failure-coloured track: a 0% bar is all
    # failure, a 100% bar all pass, whatever the interval drawn over them.
    parts = [f'<span class="fill" style="width:{rate * 100:.1f}%"></span>']
    label = f"pass rate {_pct(rate)}"
    if isinstance(interval, dict) and isinstance(interval.get("low"), (int, float)) and isinstance(interval.get("high"), (int, float)):
        low, high = float(interval["low"]), float(interval["high"])
        conf = interval.get("confidence")
        label += f", {_pct(conf) if conf else ''} interval {_pct(low)} to {_pct(high)}"
        parts.append(f'<span class="iv" style="left:{low * 100:.1f}%;width:{max(high - low, 0) * 100:.1f}%"></span>')
    parts.append(f'<span class="pt" style="left:calc({rate * 100:.1f}% - 1px)"></span>')
    ran = " ran" if scenario.get("passRate") is not None else ""
    return f'<span class="bar{ran}" role="img" aria-label="{esc(label)}">{"".join(parts)}</span>'


def _pass_at_k(scenario: J) -> tuple[str, str]:
    rows = [r for r in scenario.get("passAtK") or [] if isinstance(r, dict)]
    if not rows:
        return "–", ""
    text = ", ".join(f"@{esc(r.get('k'))} {_pct(r.get('passAtK'))} / ^{_pct(r.get('passHatK'))}" for r in rows)
    return text, _num(rows[-1].get("passAtK"))


def _finite(value: object) -> float | None:
    """A number as a float, or None (not a number, a bool, NaN, or an integer too big for a float)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _seconds(ms: object) -> str:
    number = _finite(ms)
    return f"{number / 1000:.1f}" if number is not None else "–"


# --------------------------------------------------------------------------- sections


def _header(report: J) -> str:
    host = report.get("host") or {}
    budget = report.get("budget") or {}
    isolation = report.get("isolation")
    iso = None
    if isinstance(isolation, dict):
        iso = str(isolation.get("mode")) + (f" ({isolation['reason']})" if isolation.get("reason") else "")
    counts = ", ".join(f"{n} {v}" for v, n in (report.get("verdicts") or {}).items() if n)
    items: list[tuple[str, object]] = [
        ("run", report.get("runId")),
        ("host", f"{host.get('name')} {host.get('version')} ({host.get('dialect')})" if host else "unknown"),
        ("model", report.get("model") or "host default"),
        # A scripted run was answered by the scripted model, whatever name the host asked for (design.md §12).
        ("model seen", _model_seen(report)),
        ("scripted", f"yes (offline scripted model; costs {SCRIPTED_COST_LABEL})" if report.get("scripted") else "no"),
        ("isolation", iso),
        ("budget", f"{budget.get('trials')} trials, timeout {_seconds(budget.get('timeoutMs'))} s, "
                   f"{budget.get('maxSessions')} sessions, {budget.get('maxTokens')} tokens"),
        ("started", report.get("startedAt")),
        ("finished", report.get("finishedAt")),
        ("exit status", report.get("exitStatus")),
        ("verdicts", counts or "none"),
        ("complete", "yes" if report.get("complete") else ("no (interrupted)" if report.get("interrupted") else "no")),
    ]
    suite = report.get("suite")
    if isinstance(suite, dict) and suite.get("meanPassRate") is not None:
        interval = suite.get("passInterval") if isinstance(suite.get("passInterval"), dict) else {}
        spread = f", interval {_pct(interval.get('low'))} to {_pct(interval.get('high'))}" if interval else ""
        items.append(("suite", f"mean pass rate {_pct(suite.get('meanPassRate'))}{spread} over "
                               f"{suite.get('scenarios')} scenarios, {suite.get('trials')} trials"))
    errors = "".join(f"<li class=\"error\">{esc(e.get('code'))}: {esc(e.get('message'))}</li>" for e in report.get("errors") or [])
    return (f"<header><h1>atlante eval report</h1>{_banner(report)}{_meta(items)}"
            + (f"<h2>Run errors</h2><ul>{errors}</ul>" if errors else "") + "</header>")


def _banner(report: J) -> str:
    cls, headline, facts = banner(report)
    return (f'<p id="verdict" class="banner {cls}" role="status"><strong>{esc(headline)}</strong> '
            + " · ".join(esc(f) for f in facts) + "</p>")


def _model_seen(report: J) -> object:
    if not report.get("scripted"):
        return report.get("modelVersion")
    # ``requestedModel``: reports before it named the asked-for model in ``modelVersion``.
    requested = report.get("requestedModel") if "requestedModel" in report else report.get("modelVersion")
    asked = f'; the host asked for "{requested}"' if requested else ""
    return f"{report.get('scriptedModel') or SCRIPTED_MODEL_ID} (scripted{asked})"


def _few_trials(scenario: J) -> str:
    """Beside an interval over too few trials to mean much: how many (docs/statistics.md)."""
    n = len(scenario.get("passAtK") or [])
    if not scenario.get("passInterval") or n >= FEW_TRIALS:
        return ""
    return f' <span class="note" title="a 95% interval over fewer than {FEW_TRIALS} trials is too wide to tell rates apart">n={n}: few trials</span>'


# (heading, sort kind, hidden on narrow screens: the scenario name and pass rate must stay readable)
_COLUMNS = [("Scenario", "text", False), ("Pass rate", "number", False), ("pass@k / pass^k", "number", True),
            ("Trials", "number", True), ("Tokens", "number", True), ("Cost $", "number", False), ("Mean s", "number", True),
            ("p95 s", "number", False)]
_NARROW = [' class="hide-narrow"' if narrow else "" for _, _, narrow in _COLUMNS]


def _scenario_table(report: J) -> str:
    priced = "Priced $ (scripted)" if report.get("scripted") else "Cost $"
    head = "".join(f'<th scope="col" data-sort="{kind}"{cls}><button type="button">'
                   f'{esc(priced if name == "Cost $" else name)}</button></th>'
                   for (name, kind, _), cls in zip(_COLUMNS, _NARROW, strict=True))
    rows = []
    for index, s in failures_first(report.get("scenarios") or []):
        totals = s.get("totals") or {}
        pak_text, pak_value = _pass_at_k(s)
        flag = ' <span class="chip fail">unreliable</span>' if s.get("unreliable") else ""
        counts = s.get("verdictCounts") or {}
        count_text = ", ".join(f"{n} {v}" for v, n in counts.items() if n) if isinstance(counts, dict) else ""
        trials = s.get("trials") or []
        cost = totals.get("costUsd")
        row_verdict = scenario_verdict(s)
        reason = first_reason(s)
        why = f'<div class="why">{esc(reason)}</div>' if reason else ""
        chip = _chip(worst_trial_verdict(s) or row_verdict) if row_verdict != "pass" else ""
        rows.append(
            f'<tr class="v-{row_verdict}">'
            f'<th scope="row" data-v="{esc(row_label(s))}"><a href="#s{index}">{esc(row_label(s))}</a>{flag} {chip}{why}</th>'
            f'<td data-v="{_num(s.get("passRate"))}">{_pct(s.get("passRate"))}{_bar(s)}{_few_trials(s)}</td>'
            f'<td{_NARROW[2]} data-v="{pak_value}">{pak_text}</td>'
            f'<td{_NARROW[3]} data-v="{len(trials)}" title="{esc(count_text)}">{len(trials)}/{esc(s.get("expectedTrials"))}</td>'
            f'<td{_NARROW[4]} data-v="{_num(totals.get("tokens"))}">{esc(totals.get("tokens"))}</td>'
            f'<td data-v="{_num(cost)}">{f"{cost:.4f}" if isinstance(cost, (int, float)) else "–"}</td>'
            f'<td{_NARROW[6]} data-v="{_num(s.get("meanDurationMs"))}">{_seconds(s.get("meanDurationMs"))}</td>'
            f'<td data-v="{_num(s.get("p95DurationMs"))}">{_seconds(s.get("p95DurationMs"))}</td>'
            "</tr>"
        )
    return ('<h2 id="scenarios">Scenarios</h2><p><label><input type="checkbox" id="failures-only"> Failures only</label></p>'
            '<div class="table-wrap"><table id="scenario-table">'
            "<caption>Failures first. Select a column heading to sort. Pass-rate bars show the passing share and "
            "the interval when the report has one.</caption>"
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")


def event_anchor(transcript_ident: str, seq: object) -> str:
    """The id of a transcript event's timeline entry: what a trajectory check's links point at."""
    return f"{transcript_ident}q{seq}"


def _event_links(check: J, transcript_ident: str | None) -> str:
    """A trajectory check's matched events as links into the trial's timeline (``events``: seq numbers)."""
    seqs = [s for s in check.get("events") or [] if type(s) is int]
    if not seqs or transcript_ident is None:
        return ""
    links = " ".join(f'<a class="event-link" href="#{event_anchor(transcript_ident, s)}">#{s}</a>' for s in seqs)
    return f' <span class="note">events: {links}</span>'


def _checks(trial: J, transcript_ident: str | None = None) -> str:
    items = []
    for c in trial.get("checks") or []:
        mark = '<span class="ok">PASS</span>' if c.get("passed") else ('<span class="bad">ERROR</span>' if c.get("error") else '<span class="bad">FAIL</span>')
        extra = " (timed out)" if c.get("timedOut") else ""
        output = f"<pre>{esc(c.get('output'))}</pre>" if c.get("output") and not c.get("passed") else ""
        links = _event_links(c, transcript_ident)
        items.append(f"<li>{mark} #{esc(c.get('index'))} {esc(c.get('type'))}: {esc(c.get('message'))}{extra}{links}{output}</li>")
    return f'<ul class="checks" aria-label="checks">{"".join(items)}</ul>' if items else '<p class="note">No checks ran.</p>'


def _diff(trial: J, ident: str) -> str:
    diff = trial.get("diff")
    if not diff:
        return '<p class="note">No changes.</p>' if diff == "" else ""
    text = str(diff)
    cut = len(text) > DIFF_SHOWN_CHARS
    shown = text[:DIFF_SHOWN_CHARS]
    lines = []
    for line in shown.splitlines():
        cls = "diff-add" if line.startswith("+") and not line.startswith("+++") else (
            "diff-del" if line.startswith("-") and not line.startswith("---") else "")
        lines.append(f'<span class="{cls}">{esc(line)}</span>' if cls else esc(line))
    note = ""
    if cut or trial.get("diffTruncated"):
        note = (f'<p class="note">Diff truncated: showing {len(shown):,} of {len(text):,} characters'
                + (" (the report itself kept only the first 20,000)" if trial.get("diffTruncated") else "") + ".</p>")
    paths = trial.get("changedPaths") or []
    label = f"Diff ({len(paths)} changed path{'s' if len(paths) != 1 else ''})"
    return _toggle(ident, esc(label), note + "<pre>" + "\n".join(lines) + "</pre>")


def _object(value: object) -> J:
    """A transcript field that should be an object: the file may be anything (a trial can write it
    with isolation off), and the page shows what it can rather than fail."""
    return value if isinstance(value, dict) else {}


def _event(event: J, ident: str) -> str:
    shown = _event_body(event, ident)
    if event.get("unverified") is not True:
        return shown
    # Written into the host's stream by someone else (the agent): said before the event's own text.
    mark = (f'<strong class="bad" title="{esc(event.get("unverifiedReason"))}">not the host\'s own '
            f'({esc(event.get("unverifiedReason"))})</strong> ')
    head, _, rest = shown.partition(">")
    return f'{head.replace("<li", "<li data-unverified", 1)}>{mark}{rest}'


def _event_body(event: J, ident: str) -> str:
    kind = str(event.get("type"))
    sub = " sub" if event.get("agent") else ""
    stamp = f'<span class="kind">{_seconds(event.get("t"))} s · turn {esc(event.get("turn"))}</span>'
    if kind == "text":
        body = esc(str(event.get("text"))[:FIELD_SHOWN_CHARS])
        return f'<li class="text{sub}">{stamp}<strong>assistant</strong> {body}</li>'
    if kind == "tool_call":
        args = json.dumps(event.get("input"), indent=1, ensure_ascii=False)[:FIELD_SHOWN_CHARS]
        raw = event.get("input")
        inputs: J = raw if isinstance(raw, dict) else {}
        gist = next((str(inputs[k]) for k in ("path", "command", "pattern", "name", "description") if inputs.get(k)), "")
        gist = gist.splitlines()[0][:80] if gist else ""  # the call at a glance: which file, which command
        title = f"{esc(event.get('tool'))} {esc(gist)}" if gist else esc(event.get("tool"))
        return f'<li class="call{sub}">{stamp}' + _toggle(ident, f"tool call: {title}", f"<pre>{esc(args)}</pre>") + "</li>"
    if kind == "tool_result":
        size = f"{esc(event.get('chars'))} chars" + (", truncated" if event.get("truncated") else "")
        status = '<span class="bad">error</span>' if event.get("isError") else "result"
        return (f'<li class="result{sub}">{stamp}' + _toggle(ident, f"{status}: {esc(event.get('tool'))} ({size})",
                                                              f"<pre>{esc(event.get('text'))}</pre>") + "</li>")
    if kind == "usage":
        u = _object(event.get("usage"))
        cost = event.get("costUsd")
        crossed = bool(event.get("budgetCrossed"))
        text = (f"usage: in {esc(u.get('inputTokens'))}, out {esc(u.get('outputTokens'))}"
                + ("" if event.get("outputExact", True) else " (output counted at the end)")
                + f", cache r/w {esc(u.get('cacheReadTokens'))}/{esc(u.get('cacheWriteTokens'))}"
                + (f", ${_finite(cost):.4f}" if _finite(cost) is not None else "")
                + f"; cumulative {esc(event.get('cumulativeTokens'))}")
        mark = ' <strong class="bad">token budget crossed in this turn</strong>' if crossed else ""
        return f'<li class="usage{sub}{" crossed" if crossed else ""}">{stamp}{text}{mark}</li>'
    if kind == "command":
        arguments = f' {esc(str(event.get("arguments"))[:FIELD_SHOWN_CHARS])}' if event.get("arguments") else ""
        return f'<li class="command">{stamp}<strong>slash command</strong> /{esc(event.get("name"))}{arguments}</li>'
    if kind == "subagent":
        return f'<li class="subagent">{stamp}<strong>subagent</strong> {esc(event.get("agent"))}: {esc(event.get("description"))} ({esc(event.get("status"))})</li>'
    if kind == "result":
        u = _object(event.get("usage"))
        total = sum(v for v in u.values() if isinstance(v, int) and not isinstance(v, bool))
        return f'<li class="final">{stamp}<strong>session totals</strong>: {total} tokens ({esc(event.get("stopReason") or "ended")})</li>'
    if kind == "abort":
        return f'<li class="abort">{stamp}<strong class="bad">{esc(event.get("reason"))}</strong>: {esc(event.get("message"))}</li>'
    if kind == "error":
        return f'<li class="error">{stamp}error: {esc(event.get("message"))}</li>'
    if kind == "truncated":
        return f'<li class="note">{stamp}{esc(event.get("droppedLines"))} stream lines past the size cap were dropped</li>'
    return f'<li>{stamp}{esc(kind)}</li>'


def _links(report_dir: Path, page_dir: Path, trial: J) -> str:
    """Links to the trial's files, relative to where the page is written (so ``-o`` keeps them working)."""
    links = []
    for key, label in (("transcript", "transcript.jsonl"), ("hostStream", "raw host stream")):
        path = _inside(report_dir, trial.get(key))
        if path is not None and path.is_file():
            href = quote(os.path.relpath(path, page_dir.resolve()).replace(os.sep, "/"))
            links.append(f'<a href="{esc(href)}">{esc(label)}</a>')
    return f'<p class="note">Files: {" · ".join(links)}</p>' if links else ""


def _transcript(report_dir: Path, page_dir: Path, trial: J, ident: str) -> str:
    events, problem = _transcript_events(report_dir, trial.get("transcript"))
    if events is None:
        return f'<p class="note">{esc(problem)}</p>' if problem else ""
    body = [e for e in events if e.get("type") != "header"]
    shown = body[:EVENTS_SHOWN]
    # Every entry with a numbered event carries its anchor (``<li`` starts each), so a check can
    # link to it; only an integer seq makes an id, never text from the file.
    items = "".join(_timeline_entry(call, result, ident, i) for i, (call, result) in enumerate(paired(shown)))
    more = f'<p class="note">{len(body) - len(shown)} more events in {esc(trial.get("transcript"))}.</p>' if len(body) > len(shown) else ""
    header = events[0] if events and events[0].get("type") == "header" else {}
    cap = '<p class="note">The host stream passed the size cap; the transcript is incomplete.</p>' if header.get("truncated") else ""
    label = f"Transcript ({len(body)} events)"
    return _toggle(ident, esc(label), f'{cap}<ol class="timeline">{items}</ol>{more}{_links(report_dir, page_dir, trial)}')


def _anchored(event: J, ident: str, ident_event: str) -> str:
    entry = _event(event, ident_event)
    return entry.replace("<li", f'<li id="{event_anchor(ident, event["seq"])}"', 1) if type(event.get("seq")) is int else entry


def _timeline_entry(event: J, result: J | None, ident: str, index: int) -> str:
    """One timeline entry; a tool call carries its result inside it, so the two read together."""
    entry = _anchored(event, ident, f"{ident}e{index}")
    if result is None:
        return entry
    answer = _anchored(result, ident, f"{ident}e{index}r")
    return f'{entry.removesuffix("</li>")}<ol class="paired">{answer}</ol></li>'


_WANTED = {"use": "should use it", "no-use": "should not use it"}


def _trigger_rates(scenario: J) -> str:
    """The scenario's trigger rates: per skill or agent a counting check names, the trials that used it."""
    rows = []
    for r in scenario.get("triggerRates") or []:
        if not isinstance(r, dict):
            continue
        interval = r.get("interval") if isinstance(r.get("interval"), dict) else {}
        spread = f", interval {_pct(interval.get('low'))} to {_pct(interval.get('high'))}" if interval else ""
        wanted = _WANTED.get(str(r.get("wanted")), "a min/max band")
        rows.append(f"<li>{esc(r.get('kind'))} {esc(r.get('name'))}: used in {esc(r.get('used'))}/{esc(r.get('trials'))} "
                    f"trials ({_pct(r.get('rate'))}{spread}); {esc(wanted)}</li>")
    return f'<ul class="triggers" aria-label="trigger rates">{"".join(rows)}</ul>' if rows else ""


def _history(found: ScenarioHistory | None) -> str:
    """The scenario across the project's recent runs (``atlante history``), when there are some."""
    if found is None:
        return ""
    interval = "" if found.passInterval is None else f" (95% CI {_pct(found.passInterval.low)}–{_pct(found.passInterval.high)})"
    flips = "-" if found.flipRate is None else f"{found.flips}/{found.comparablePairs} ({_pct(found.flipRate)})"
    changes = "".join(f"<li>at run {esc(point.runId)}: "
                      + ", ".join(f"{esc(c.component)} {esc(c.before or '-')} → {esc(c.after or '-')}" for c in point.changed)
                      + "</li>" for point in found.changePoints)
    return (f'<div class="history"><p><strong>History</strong> (last {len(found.runs)} runs, oldest first): '
            f'<code>{esc(found.verdicts)}</code> · status <strong>{esc(found.status)}</strong> · pass rate '
            f'{_pct(found.passRate)}{interval} · flips {flips}</p>' + (f"<ul>{changes}</ul>" if changes else "") + "</div>")


def _trials(report: J, report_dir: Path, page_dir: Path, history: Mapping[str, ScenarioHistory] | None = None) -> str:
    parts = ['<h2 id="trials">Trials</h2>']
    for si, s in enumerate(report.get("scenarios") or []):
        parts.append(f'<section aria-labelledby="s{si}"><h3 id="s{si}">{esc(s.get("name"))}</h3>'
                     f'<p class="note">{esc(s.get("file"))} · {esc(s.get("source"))}</p>{_trigger_rates(s)}'
                     f'{_history((history or {}).get(str(s.get("name"))))}')
        for ti, t in enumerate(s.get("trials") or []):
            ident = f"s{si}t{ti}"
            usage = t.get("usage") or {}
            tokens = sum(v for v in usage.values() if isinstance(v, int))
            cost = t.get("costUsd")
            priced = f" ({SCRIPTED_COST_LABEL})" if report.get("scripted") else ""
            facts = (f"{_seconds(t.get('durationMs'))} s, {tokens} tokens"
                     + (f", ${cost:.4f}{priced}" if isinstance(cost, (int, float)) else ""))
            error = f'<p class="error">{esc(t.get("error"))}</p>' if t.get("error") else ""
            parts.append(f'<article class="trial" aria-labelledby="{ident}h"><h4 id="{ident}h">trial {esc(t.get("trial"))} '
                         f'{_chip(str(t.get("verdict")))} <span class="note">{facts}</span></h4>{error}'
                         f'{_checks(t, ident + "x" if t.get("transcript") else None)}'
                         f'{_diff(t, ident + "d")}{_transcript(report_dir, page_dir, t, ident + "x")}</article>')
        parts.append("</section>")
    return "".join(parts)


def _sides(side: object) -> str:
    side = side if isinstance(side, dict) else {}
    return f"{esc(side.get('passed'))}/{esc(side.get('trials'))}"


def _comparison(comparison: object) -> str:
    """``atlante compare``'s result (a report's ``comparison``, or ``--compare``): base and new side by side."""
    if not isinstance(comparison, dict):
        return ""
    counts = ", ".join(f"{n} {esc(label)}" for label, n in (comparison.get("counts") or {}).items() if n)
    head = (f'<p>Baseline run <strong>{esc(comparison.get("baseRunId"))}</strong> against this run '
            f'<strong>{esc(comparison.get("newRunId"))}</strong>{": " + counts if counts else ""}.</p>')
    changed = "".join(f"<li>{esc(c.get('component'))}: {esc(c.get('base'))} → {esc(c.get('new'))}</li>"
                      for c in comparison.get("changed") or [] if isinstance(c, dict))
    notes = "".join(f"<li>{esc(n)}</li>" for n in [*(comparison.get("notes") or []),
                                                  *(f"only in the baseline: {n}" for n in comparison.get("onlyInBase") or []),
                                                  *(f"only in this run: {n}" for n in comparison.get("onlyInNew") or [])])
    rows = []
    for r in comparison.get("scenarios") or []:
        if not isinstance(r, dict):
            continue
        label = str(r.get("label"))
        chip = {"regressed": "fail", "improved": "pass"}.get(label, "")
        interval = r.get("interval") if isinstance(r.get("interval"), dict) else {}
        diff = r.get("difference")
        diff_text = "–" if not isinstance(diff, (int, float)) else f"{diff * 100:+.0f} pts"
        if interval:
            diff_text += f" ({_pct(interval.get('low'))} to {_pct(interval.get('high'))})"
        p_holm = r.get("pValueHolm")
        needed = r.get("trialsNeeded") or (f"> {r['trialsNeededExceeds']}" if r.get("trialsNeededExceeds") else "")
        extra = "; ".join(str(x) for x in [*(r.get("changed") or []), *(r.get("notes") or [])])
        rows.append(f'<tr><th scope="row">{esc(r.get("name"))}</th><td><span class="chip {chip}">{esc(label)}</span></td>'
                    f'<td>{_sides(r.get("base"))}</td><td>{_sides(r.get("new"))}</td><td>{esc(diff_text)}</td>'
                    f'<td>{f"{p_holm:.3f}" if isinstance(p_holm, (int, float)) else "–"}</td><td>{esc(needed)}</td>'
                    f'<td style="text-align:left">{esc(extra)}</td></tr>')
    table = ('<div class="table-wrap"><table><caption>Per scenario: passed/trials in the baseline and in this run, the '
             'difference in pass rate with its interval, and the Holm-adjusted p-value</caption><thead><tr>'
             + "".join(f'<th scope="col">{h}</th>' for h in ("Scenario", "Label", "Baseline", "This run", "Difference",
                                                            "p (Holm)", "Trials needed", "Notes"))
             + f"</tr></thead><tbody>{''.join(rows)}</tbody></table></div>") if rows else ""
    return (f'<h2 id="comparison">Comparison with the baseline</h2>{head}'
            + (f"<p>Changed between the runs:</p><ul>{changed}</ul>" if changed else "")
            + (f"<ul>{notes}</ul>" if notes else "") + table)


def render(report: J, report_dir: Path, page_dir: Path | None = None,
           history: Mapping[str, ScenarioHistory] | None = None) -> str:
    """The whole page, as one string; ``page_dir`` is where it will be written (default: the report's);
    ``history``: per scenario, its history over the project's recent runs (a panel in its section)."""
    csp = f"default-src 'none'; style-src 'unsafe-inline'; script-src {script_hash()}; img-src data:"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>atlante eval {esc(report.get('runId'))}</title><style>{CSS}</style></head><body><main>"
            f"{_header(report)}{_comparison(report.get('comparison'))}{lift_section(report)}{_scenario_table(report)}{_trials(report, report_dir, page_dir or report_dir, history)}"
            f"</main><script>{JS}</script></body></html>\n")


def compared(baseline: Path, report_path: Path) -> J:
    """``atlante compare BASELINE REPORT``'s result, as the page renders it."""
    from pytest_atlante.report.compare import COMPARE_INPUT_CODE, compare_reports

    comparison = compare_reports(reader.load_report(report_path_for(baseline), COMPARE_INPUT_CODE),
                                 reader.load_report(report_path, COMPARE_INPUT_CODE))
    dumped: J = comparison.model_dump(mode="json")
    return dumped


def write_view(report_path: Path, out: Path | None = None, baseline: Path | None = None) -> Path:
    """Render ``report_path`` to ``out`` (default: ``report.html`` beside the report); returns the path.

    With ``baseline``, the page shows the comparison against it (instead of any the report carries).
    """
    report = load_report(report_path)
    if baseline is not None:
        report["comparison"] = compared(baseline, report_path)
    target = out if out is not None else report_path.parent / HTML_FILE
    history = history_beside(report_path)
    atomic_write_bytes(target, render(report, report_path.parent, target.parent, history).encode("utf-8"))
    return target


def view_command(target: Path, out: Path | None, baseline: Path | None = None) -> int:
    path = write_view(report_path_for(target), out, baseline)
    print(f"html: {path}")
    return 0
