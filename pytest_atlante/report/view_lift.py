"""The HTML view's section of a variant run: each arm against the control over the suite (the
report's ``lift``), the A/A noise floor, and each arm's per-scenario labels.  Report text is
untrusted: everything goes through ``esc``, as in the rest of the view."""

from __future__ import annotations

import html
from typing import Any

J = dict[str, Any]
_CHIPS = {"better": "pass", "worse": "fail"}


def esc(value: object) -> str:
    """``view.esc`` (which imports this module): every value HTML-escaped, quotes included."""
    return html.escape("" if value is None else str(value), quote=True)


def row_label(scenario: J) -> str:
    """A scenario's name, with its arm in a variant run (``name [arm]``)."""
    variant = scenario.get("variant")
    return f"{scenario.get('name')} [{variant}]" if variant else str(scenario.get("name"))


def _number(value: object, fmt: str) -> str:
    return format(value, fmt) if isinstance(value, (int, float)) and not isinstance(value, bool) else "–"


def lift_section(report: J) -> str:
    lifts = [entry for entry in report.get("lift") or [] if isinstance(entry, dict)]
    if not lifts:
        return ""
    rows = []
    for lift in lifts:
        label = str(lift.get("label"))
        interval = lift.get("interval") if isinstance(lift.get("interval"), dict) else None
        ratio = _number(lift.get("estimate"), ".2f")
        if interval:
            ratio += f" ({_number(interval.get('low'), '.2f')} to {_number(interval.get('high'), '.2f')})"
        diff = lift.get("difference")
        counts = (lift.get("comparison") or {}).get("counts") or {}
        per_scenario = ", ".join(f"{n} {label_}" for label_, n in counts.items() if n) if isinstance(counts, dict) else ""
        note = (f"A/A replicate of {lift.get('replicateOf')}" if lift.get("replicateOf")
                else f"~{lift['trialsNeeded']} trials per arm and scenario for 80% power" if lift.get("trialsNeeded") else "")
        rows.append(f'<tr><th scope="row">{esc(lift.get("variant"))}</th>'
                    f'<td><span class="chip {_CHIPS.get(label, "")}">{esc(label)}</span></td>'
                    f'<td>{esc(_number(diff * 100, "+.0f") + " pts" if isinstance(diff, (int, float)) else "–")}</td>'
                    f'<td>{esc(ratio)}</td><td>{esc(_number(lift.get("p"), ".3g"))}</td>'
                    f'<td>{esc(_number(lift.get("pHolm"), ".3g"))}</td><td>{esc(per_scenario)}</td>'
                    f'<td style="text-align:left">{esc(note)}</td></tr>')
    noise = report.get("noiseFloor") if isinstance(report.get("noiseFloor"), dict) else None
    noise_text = ""
    if noise:
        differing = ", ".join(f"{s.get('name')} {_number((s.get('difference') or 0) * 100, '+.0f')} pts"
                              for s in noise.get("scenarios") or [] if isinstance(s, dict)) or "no scenario"
        suite = noise.get("difference")
        noise_text = (f"<p>Noise floor, from {esc(noise.get('variant'))} (an A/A run of the control): "
                      f"{esc(_number(suite * 100, '+.0f') if isinstance(suite, (int, float)) else '–')} pts over the suite; "
                      f"differing: {esc(differing)}. An arm whose difference is no larger is within the noise.</p>")
    head = "".join(f'<th scope="col">{h}</th>' for h in ("Arm", "Label", "Difference", "Odds ratio (95% CI)", "p",
                                                         "p (Holm)", "Per scenario", "Note"))
    return ('<h2 id="lift">Arms against the control</h2>'
            '<div class="table-wrap"><table><caption>Over the suite, stratified by scenario: the mean difference in pass '
            'rate, the Cochran–Mantel–Haenszel common odds ratio, its exact conditional test and Holm across the arms'
            f'</caption><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>{noise_text}')
