"""``atlante view`` without a browser: where the page goes, bad input, escaping, optional fields."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from pytest_atlante.cli import main
from pytest_atlante.report.view import HTML_FILE, load_report, render
from pytest_atlante.trial.transcript import MAX_TRANSCRIPT_BYTES

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from view_helpers import synthetic_report


def test_view_writes_beside_the_report_and_prints_the_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    synthetic_report(tmp_path, scenarios=2, trials=2, transcript_turns=2)
    assert main(["view", str(tmp_path)]) == 0
    assert capsys.readouterr().out == f"html: {tmp_path / HTML_FILE}\n"
    page = (tmp_path / HTML_FILE).read_text()
    assert page.startswith("<!DOCTYPE html>") and "http://" not in page and "https://" not in page  # nothing to fetch
    assert page.count('class="timeline"') == 4
    assert 'href="trials/scenario-000/1/transcript.jsonl"' in page
    other = tmp_path / "elsewhere" / "page.html"
    assert main(["view", str(tmp_path / "report.json"), "-o", str(other)]) == 0 and other.is_file()
    assert 'href="../trials/scenario-000/1/transcript.jsonl"' in other.read_text()  # links still reach the files


def test_view_without_an_argument_takes_the_newest_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / ".atlante" / "eval"
    synthetic_report(runs / "20261201T010000Z-aaaaaa", scenarios=1, trials=1)
    synthetic_report(runs / "20261201T020000Z-bbbbbb", scenarios=1, trials=1)
    monkeypatch.chdir(tmp_path)
    assert main(["view"]) == 0
    assert "20261201T020000Z-bbbbbb" in capsys.readouterr().out


@pytest.mark.parametrize(("content", "code"), [(None, "view-report-missing"), ("{}", "view-report-invalid"),
                                               ("not json", "view-report-invalid")])
def test_bad_input_is_a_diagnostic_not_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   content: str | None, code: str) -> None:
    if content is not None:
        (tmp_path / "report.json").write_text(content)
    assert main(["view", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert code in err and "Traceback" not in err


def test_a_transcript_path_outside_the_report_dir_is_not_read(tmp_path: Path) -> None:
    path = synthetic_report(tmp_path / "run", scenarios=1, trials=1)
    (tmp_path / "secret.jsonl").write_text(json.dumps({"type": "text", "text": "SECRET-OUTSIDE"}) + "\n")
    report = json.loads(path.read_text())
    report["scenarios"][0]["trials"][0]["transcript"] = "../secret.jsonl"
    path.write_text(json.dumps(report))
    page = render(load_report(path), path.parent)
    assert "SECRET-OUTSIDE" not in page and "outside the report" in page


def test_interval_pass_at_k_isolation_and_comparison_render_when_present(tmp_path: Path) -> None:
    path = synthetic_report(tmp_path, scenarios=1, trials=3)
    report = load_report(path)
    for scenario in report["scenarios"]:  # as a report written before the statistics existed
        scenario.pop("passInterval", None), scenario.pop("passAtK", None)
    report.pop("suite", None)
    plain = render(report, tmp_path)
    assert 'class="iv"' not in plain and "Comparison" not in plain  # an older report shows less, without errors
    report["isolation"] = {"mode": "namespace", "reason": None}
    report["suite"] = {"scenarios": 1, "trials": 3, "meanPassRate": 0.67,
                       "passInterval": {"low": 0.1, "high": 0.95, "method": "cluster-robust", "confidence": 0.95}}
    report["comparison"] = {
        "baseRunId": "<base>", "newRunId": "20261201T030000Z-abcdef", "counts": {"regressed": 1, "unchanged": 0},
        "changed": [{"component": "harness", "base": "aaa", "new": "bbb"}], "onlyInBase": ["gone"], "onlyInNew": [],
        "scenarios": [{"name": "scenario-000", "label": "regressed", "base": {"passed": 10, "trials": 10},
                       "new": {"passed": 2, "trials": 10}, "difference": -0.8,
                       "interval": {"low": -0.95, "high": -0.45}, "pValueHolm": 0.0007, "notes": []}],
    }
    report["scenarios"][0].update(passInterval={"low": 0.2, "high": 0.9, "method": "wilson", "confidence": 0.95},
                                  passAtK=[{"k": 1, "passAtK": 0.67, "passHatK": 0.67}, {"k": 3, "passAtK": 0.96, "passHatK": 0.3}],
                                  unreliable=True)
    page = render(report, tmp_path)
    assert 'style="left:20.0%;width:70.0%"' in page and "95% interval 20% to 90%" in page
    assert "@3 96% / ^30%" in page and "unreliable" in page and "namespace" in page
    assert "&lt;base&gt;" in page and "<base>" not in page
    assert "mean pass rate 67%, interval 10% to 95% over 1 scenarios, 3 trials" in page
    assert "10/10" in page and "2/10" in page and "-80 pts" in page and "0.001" in page and "only in the baseline: gone" in page
    assert "harness: aaa → bbb" in page and 'class="chip fail">regressed' in page


def test_every_report_string_is_escaped(tmp_path: Path) -> None:
    hostile = '"><script>alert(1)</script>'
    path = synthetic_report(tmp_path, scenarios=1, trials=1, names=[hostile], diff=hostile, message=hostile)
    page = render(load_report(path), tmp_path)
    assert page.count("<script>") == 1  # the page's own
    assert not re.search(r'id="[^"]*[<>]', page)  # ids come from indices, never from report text


def test_the_budget_crossing_turn_and_the_abort_are_marked(tmp_path: Path) -> None:
    path = synthetic_report(tmp_path, scenarios=1, trials=1, transcript_turns=2)
    transcript = tmp_path / "trials" / "scenario-000" / "1" / "transcript.jsonl"
    lines = transcript.read_text().splitlines()
    crossing = json.loads(lines[5])
    assert crossing["type"] == "usage" and crossing["turn"] == 2
    lines[5] = json.dumps({**crossing, "budgetCrossed": True})
    lines.append(json.dumps({"type": "abort", "turn": 2, "t": 900, "reason": "budget", "message": "exceeded maxTokens=150"}))
    transcript.write_text("\n".join(lines) + "\n")
    page = render(load_report(path), tmp_path)
    assert page.count('class="usage crossed"') == 1 and "token budget crossed in this turn" in page
    assert 'class="abort">' in page and "exceeded maxTokens=150" in page


def test_a_slash_command_event_shows_the_command_and_its_arguments(tmp_path: Path) -> None:
    path = synthetic_report(tmp_path, scenarios=1, trials=1, transcript_turns=2)
    transcript = tmp_path / "trials" / "scenario-000" / "1" / "transcript.jsonl"
    lines = transcript.read_text().splitlines()
    lines.insert(1, json.dumps({"seq": 1, "t": 10, "type": "command", "turn": 1, "name": "review",
                                "arguments": "<src/app.py>", "agent": None}))
    transcript.write_text("\n".join(lines) + "\n")
    page = render(load_report(path), tmp_path)
    assert '<strong>slash command</strong> /review &lt;src/app.py&gt;</li>' in page


def test_compare_shows_atlante_compare_against_the_baseline_side_by_side(tmp_path: Path) -> None:
    base = synthetic_report(tmp_path / "base", scenarios=2, trials=3)
    new = synthetic_report(tmp_path / "new", scenarios=2, trials=3)
    assert main(["view", str(new.parent), "--compare", str(base.parent)]) == 0
    page = (new.parent / HTML_FILE).read_text()
    assert "Comparison with the baseline" in page and "Baseline run <strong>20261201T030000Z-abcdef" in page
    assert page.count("<td>2/3</td>") + page.count("<td>1/3</td>") + page.count("<td>3/3</td>") == 4  # base and new per scenario
    assert main(["view", str(new.parent), "--compare", str(tmp_path / "missing")]) == 2


def test_a_scripted_report_shows_the_scripted_model_and_host_priced_costs(tmp_path: Path) -> None:
    path = synthetic_report(tmp_path, scenarios=1, trials=1)
    report = load_report(path)
    report.update(scripted=True, scriptedModel="scripted-model", modelVersion="scripted-model",
                  requestedModel="claude-sonnet-5")
    report["scenarios"][0].update(passInterval={"low": 0.21, "high": 1.0, "method": "wilson", "confidence": 0.95})
    page = render(report, tmp_path)
    assert "scripted-model (scripted; the host asked for &quot;claude-sonnet-5&quot;)" in page
    # A report from before requestedModel named the asked-for model in modelVersion.
    older = {key: value for key, value in report.items() if key != "requestedModel"} | {"modelVersion": "claude-sonnet-5"}
    assert "scripted-model (scripted; the host asked for &quot;claude-sonnet-5&quot;)" in render(older, tmp_path)
    assert "Priced $ (scripted)" in page and ">Cost $<" not in page
    assert "priced, not charged: scripted model" in page
    assert "n=1: few trials" in page
    report.update(scripted=False, scriptedModel=None, requestedModel=None, modelVersion="claude-sonnet-5")
    plain = render(report, tmp_path)
    assert "<dd>claude-sonnet-5</dd>" in plain and "Cost $" in plain and "not charged" not in plain


def test_a_trajectory_check_links_to_the_transcript_events_it_matched(tmp_path: Path) -> None:
    path = synthetic_report(tmp_path, scenarios=1, trials=1, transcript_turns=2)
    report = load_report(path)
    scenario = report["scenarios"][0]
    trial = scenario["trials"][0]
    events = [json.loads(line) for line in (tmp_path / trial["transcript"]).read_text().splitlines()]
    call = next(e for e in events if e.get("type") == "tool_call")
    trial["checks"].append({"index": 2, "type": "tool-used", "passed": True, "message": "tool-used write: 1 time",
                            "events": [call["seq"], "<b>not a number</b>"]})
    scenario["triggerRates"] = [{"kind": "skill", "name": "tidy", "used": 1, "trials": 1, "rate": 1.0,
                                 "interval": {"low": 0.2, "high": 1.0, "method": "wilson"}, "wanted": "use"}]
    page = render(report, tmp_path)
    anchor = f"s0t0xq{call['seq']}"
    assert f'<a class="event-link" href="#{anchor}">#{call["seq"]}</a>' in page
    assert page.count(f'id="{anchor}"') == 1  # the timeline entry the link opens
    assert "not a number" not in page.split("events:")[1].split("</span>")[0]
    assert "skill tidy: used in 1/1 trials (100%, interval 20% to 100%); should use it" in page


JUNK_EVENTS = ["[1, 2]", '"text"', "null", '{"no": "type"}', '{"type": 7}',
               '{"type": "usage", "t": 1e999, "usage": [1], "costUsd": "free", "cumulativeTokens": {}}',
               '{"type": "result", "usage": "all", "t": ' + "9" * 400 + "}",
               '{"type": "usage", "usage": {"inputTokens": 1}, "costUsd": ' + "9" * 400 + "}",
               '{"type": "tool_call", "input": [1], "tool": {}}', "\xff\xfe not utf-8", "{" * 5000]


def test_a_transcript_a_trial_rewrote_renders_what_it_can_and_never_crashes(tmp_path: Path) -> None:
    """Issue 26: a malformed transcript crashed ``atlante view`` (AttributeError) and the run's
    --atlante-html; each junk line is skipped or shown as far as it makes sense."""
    path = synthetic_report(tmp_path, scenarios=1, trials=1, transcript_turns=1)
    transcript = tmp_path / "trials" / "scenario-000" / "1" / "transcript.jsonl"
    transcript.write_bytes(("\n".join(JUNK_EVENTS) + "\n").encode("utf-8", "surrogateescape"))
    page = render(load_report(path), tmp_path)
    assert "Transcript (4 events)" in page and "session totals</strong>: 0 tokens" in page


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory", "huge"])
def test_a_transcript_that_is_no_regular_file_is_named_not_read(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                 kind: str) -> None:
    """Issue 26: a FIFO in place of a transcript hung --atlante-html for ever."""
    synthetic_report(tmp_path, scenarios=1, trials=1, transcript_turns=1)
    transcript = tmp_path / "trials" / "scenario-000" / "1" / "transcript.jsonl"
    transcript.unlink()
    if kind == "fifo":
        os.mkfifo(transcript)
    elif kind == "symlink":
        (tmp_path / "elsewhere.jsonl").write_text(json.dumps({"type": "text", "text": "PLANTED"}) + "\n")
        transcript.symlink_to(tmp_path / "elsewhere.jsonl")
    elif kind == "directory":
        transcript.mkdir()
    else:
        with transcript.open("wb") as handle:
            handle.truncate(MAX_TRANSCRIPT_BYTES + 1)
    assert main(["view", str(tmp_path)]) == 0
    page = (tmp_path / HTML_FILE).read_text()
    assert "transcript trials/scenario-000/1/transcript.jsonl " in page and "; not read" in page
    assert "PLANTED" not in page and "Traceback" not in capsys.readouterr().err
