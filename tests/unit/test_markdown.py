"""``atlante report md``: the Markdown is read back with markdown-it-py (GFM tables), not by us."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_atlante.cli import main
from pytest_atlante.records import CheckResult, TrialRecord, Verdict
from pytest_atlante.report.compare import compare_reports
from pytest_atlante.report.markdown import MAX_MARKDOWN_CHARS, render_markdown
from pytest_atlante.report.model import EvalReport
from test_report import report_of, trial
from test_trigger_rates import trigger_trial

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from markdown_helpers import paragraphs, parser, tables

SIX = (1, 2, 3, 4, 5, 6)
DIGESTS = {name: (f"sha256:{name}", "sha256:h") for name in ("alpha", "beta", "gamma", "trig")}


def failing(scenario: str, n: int, message: str, verdict: Verdict = "fail") -> TrialRecord:
    checks = [CheckResult(index=0, type="file-exists", passed=True, message="ok"),
              CheckResult(index=1, type="command", passed=False, message=message)]
    return trial(scenario, n, verdict, checks=checks)


def passing(scenario: str, n: int) -> TrialRecord:
    return trial(scenario, n, "pass", checks=[CheckResult(index=0, type="file-exists", passed=True, message="ok")])


def run(trials: list[TrialRecord], **overrides: object) -> EvalReport:
    return report_of(trials, digests=DIGESTS, **overrides)


def rows_by_name(text: str) -> dict[str, list[str]]:
    (table,) = tables(text)
    return {row[0].text: [cell.text for cell in row] for row in table[1:]}


def test_the_table_has_the_columns_and_one_row_per_scenario() -> None:
    report = run([passing("alpha", 1), passing("alpha", 2), failing("beta", 1, "exit 3 (expected 0)"), passing("beta", 2),
                  *(trigger_trial("trig", i, {"pdf": uses}) for i, uses in ((1, 1), (2, 0)))])
    text = render_markdown(report)
    (table,) = tables(text)
    assert [cell.text for cell in table[0]] == ["Scenario", "Pass rate", "95% interval", "Trigger rates", "First failure"]
    rows = rows_by_name(text)
    assert set(rows) == {"alpha", "beta", "trig"}
    assert rows["alpha"][1:3] == ["2/2 (100%)", "34%–100%"] and rows["alpha"][4] == "–"
    assert rows["beta"][1] == "1/2 (50%)"
    assert rows["beta"][4] == "trial 1: fail: check 2 (command): exit 3 (expected 0)"
    assert rows["trig"][3] == "skill pdf 1/2, wanted"
    # scenarios with a trial that did not pass come before those that passed every trial
    assert [row[0].text for row in table[1:]] == ["beta", "alpha", "trig"]
    assert paragraphs(text)[0].startswith("❌ atlante eval failed (exit 1): 5/6 trials passed (1 fail), 2 of 3 scenarios passed every trial")


def test_regressions_come_first_and_each_row_carries_its_label() -> None:
    base = run([passing(n, i) for n in ("alpha", "beta", "gamma") for i in SIX], run_id="20250601T000000Z-aaaaaa")
    new = run([passing("alpha", i) for i in SIX] + [failing("gamma", i, "broke") for i in SIX]
              + [failing("beta", 1, "once")] + [passing("beta", i) for i in SIX[1:]])
    report = new.model_copy(update={"comparison": compare_reports(base, new)})
    text = render_markdown(report)
    (table,) = tables(text)
    assert table[0][-1].text == "vs baseline"
    assert [row[0].text for row in table[1:]] == ["gamma", "beta", "alpha"]
    assert table[1][-1].text.startswith("regressed (-100 pts)")
    assert any("Compared with the baseline run 20250601T000000Z-aaaaaa" in p for p in paragraphs(text))


def test_untrusted_text_renders_as_code_never_as_links_html_or_mentions() -> None:
    hostile = "| a | <img src=x onerror=alert(1)> [click](https://evil.example) @octocat #12 ``tick`` \n| new row"
    text = render_markdown(run([failing("alpha", 1, hostile)]))
    (table,) = tables(text)
    assert len(table) == 2 and len(table[1]) == 5      # the pipes and the newline did not add a row or cell
    cell = table[1][4]
    assert [c.type for c in cell.tokens] == ["code_inline"]
    assert "<img" in cell.text and "@octocat" in cell.text
    html = parser().render(text)
    assert "<img" not in html and 'href="https://evil.example"' not in html


def test_links_to_the_html_view_when_a_url_is_given() -> None:
    report = run([passing("alpha", 1), failing("beta", 1, "no")])
    url = "https://ci.example/run/7/report.html"
    text = render_markdown(report, html_url=url)
    links = [t.attrGet("href") for token in parser().parse(text) if token.type == "inline"
             for t in token.children or [] if t.type == "link_open"]
    assert links == [url, f"{url}#s1", f"{url}#s0"]     # the page, then beta (failing, first) and alpha
    assert "](" not in render_markdown(report)


def test_a_large_report_keeps_whole_rows_within_the_limit_then_says_how_many_more() -> None:
    trials = [failing(f"scenario-{i:04d}", 1, "x" * 280) for i in range(600)]
    text = render_markdown(report_of(trials))
    assert len(text) <= MAX_MARKDOWN_CHARS
    (table,) = tables(text)
    shown = len(table) - 1
    assert 100 < shown < 600 and all(len(row) == 5 and row[4].text.endswith("…") for row in table[1:])
    assert paragraphs(text)[-1].startswith(f"…and {600 - shown} more scenarios")
    small = render_markdown(report_of(trials[:3]))
    assert "more scenario" not in small and len(tables(small)[0]) == 4


def test_a_tiny_limit_still_gives_whole_rows() -> None:
    report = run([failing("alpha", 1, "a"), failing("beta", 1, "b"), failing("gamma", 1, "c")])
    full = render_markdown(report)
    text = render_markdown(report, limit=len(full) - 5)
    assert len(text) <= len(full) - 5
    (table,) = tables(text)
    assert len(table) == 3 and "…and 1 more scenario " in text


def test_cli_prints_or_writes_and_refuses_a_bad_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "run" / "report.json"
    path.parent.mkdir()
    path.write_text(run([passing("alpha", 1)], exit_status=0).to_json())
    assert main(["report", "md", str(path.parent)]) == 0
    printed = capsys.readouterr().out
    assert paragraphs(printed)[0].startswith("✅ atlante eval passed (exit 0): 1/1 trials passed")
    out = tmp_path / "summary.md"
    assert main(["report", "md", str(path), "-o", str(out), "--compare", str(path)]) == 0
    assert capsys.readouterr().out == f"markdown: {out}\n"
    assert tables(out.read_text())[0][1][-1].text == "inconclusive" or "unchanged" in out.read_text()
    (tmp_path / "bad.json").write_text("{}")
    assert main(["report", "md", str(tmp_path / "bad.json")]) == 2
    err = capsys.readouterr().err
    assert "report-md-input" in err and "Traceback" not in err
