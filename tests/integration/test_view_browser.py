"""The HTML view in a real headless Chromium (Debian's, driven by Playwright for Python).

The example project's report (scripted run through the real Claude Code CLI) renders without console
errors, and its failing scenario's failing check, diff and transcript are reachable by clicking;
the scenario table sorts; hostile report text stays text; a 200-trial page stays under 5 MB (its
open time is printed, not asserted).  Screenshots at 1280 and 390 px are left in test-artifacts/.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import copy_example
from pytest_atlante.report.view import write_view
from pytest_atlante.suite.build import build
from view_helpers import ARTIFACTS, browser, synthetic_report, watch_console

HOSTILE = "<script>window.__pwned = 1</script>"
HOSTILE_DIFF = '+<img src=x onerror="window.__pwned = 2">\n+</pre><script>window.__pwned = 3</script>\n'


def open_view(context: object, html: Path) -> tuple[object, list[str]]:
    page = context.new_page()  # type: ignore[attr-defined]
    problems = watch_console(page)
    page.goto(html.as_uri())
    return page, problems


@pytest.mark.hosts
def test_example_report_renders_and_its_failing_check_diff_and_transcript_are_a_click_away(
    tmp_path: Path, hosts_path: Callable[[], str]
) -> None:
    root = copy_example(tmp_path)
    build(root)
    out = tmp_path / "out"
    env = {**os.environ, "PATH": hosts_path()}
    run = subprocess.run([sys.executable, "-m", "pytest", "--atlante-eval", "--atlante-scripted", "--atlante-html",
                          "--atlante-out", str(out), "-p", "no:cacheprovider", "-q"],
                         cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False)
    html = out / "report.html"
    assert run.returncode == 1 and html.is_file(), run.stdout + run.stderr  # keeps-settings-untouched fails on purpose
    summary = [line for line in run.stdout.splitlines() if line.strip()]
    assert f"html: {html}" in summary, run.stdout
    assert summary.index(f"html: {html}") > summary.index(f"report: {out / 'report.json'}")

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for width in (1280, 390):
        with browser(tmp_path / f"profile-{width}", width=width) as context:
            page, problems = open_view(context, html)
            assert page.get_by_role("heading", name="atlante eval report").is_visible()  # type: ignore[attr-defined]
            if width == 1280:
                page.get_by_role("link", name="keeps-settings-untouched").click()  # type: ignore[attr-defined]
                trial = page.locator("article.trial", has=page.locator(".chip.fail"))  # type: ignore[attr-defined]
                failing = trial.locator("ul.checks li", has_text="FAIL").first
                assert failing.is_visible() and "file-unchanged settings.ini" in failing.inner_text()
                diff_button = trial.get_by_role("button", name="Diff (2 changed paths)")
                assert diff_button.get_attribute("aria-expanded") == "false"
                assert not trial.locator("pre", has_text="settings.ini").first.is_visible()
                diff_button.click()
                assert diff_button.get_attribute("aria-expanded") == "true"
                assert trial.locator("pre", has_text="settings.ini").first.is_visible()
                trial.get_by_role("button", name="Transcript").click()
                timeline = trial.locator("ol.timeline")
                assert timeline.is_visible() and timeline.locator("li").count() > 3
                timeline.get_by_role("button").first.click()  # a tool call opens in place
                assert timeline.locator("pre").first.is_visible()
            page.screenshot(path=str(ARTIFACTS / f"view-example-{width}.png"), full_page=True)  # type: ignore[attr-defined]
            assert problems == []


def test_the_scenario_table_sorts_by_a_column_both_ways(tmp_path: Path) -> None:
    html = write_view(synthetic_report(tmp_path, scenarios=5, trials=3))
    with browser(tmp_path / "profile") as context:
        page, problems = open_view(context, html)
        header = page.locator("#scenario-table thead th", has_text="Mean s")  # type: ignore[attr-defined]
        names = page.locator("#scenario-table tbody th")  # type: ignore[attr-defined]
        original = names.all_inner_texts()
        header.get_by_role("button").click()
        assert header.get_attribute("aria-sort") == "ascending"
        assert names.all_inner_texts() == original  # durations grow with the scenario index
        header.get_by_role("button").click()
        assert header.get_attribute("aria-sort") == "descending"
        assert names.all_inner_texts() == list(reversed(original))
        name_header = page.locator("#scenario-table thead th", has_text="Scenario")  # type: ignore[attr-defined]
        name_header.get_by_role("button").click()
        assert header.get_attribute("aria-sort") is None and names.all_inner_texts() == sorted(original)
        assert problems == []


def test_hostile_report_text_renders_as_text_and_never_runs(tmp_path: Path) -> None:
    html = write_view(synthetic_report(tmp_path, scenarios=2, trials=1, names=[HOSTILE, "plain"], diff=HOSTILE_DIFF,
                                       message='<b onmouseover="window.__pwned = 4">bold</b>', transcript_turns=1))
    source = html.read_text()
    assert HOSTILE not in source and "<img src=x" not in source
    with browser(tmp_path / "profile") as context:
        page, problems = open_view(context, html)
        for button in page.get_by_role("button", name="Diff").all():  # type: ignore[attr-defined]
            button.click()
        assert page.evaluate("typeof window.__pwned") == "undefined"  # type: ignore[attr-defined]
        assert page.get_by_role("heading", name=HOSTILE).is_visible()  # type: ignore[attr-defined]
        assert page.locator("pre", has_text='<img src=x onerror="window.__pwned = 2">').first.is_visible()  # type: ignore[attr-defined]
        assert page.locator("script").count() == 1  # type: ignore[attr-defined]
        assert problems == []


def test_a_200_trial_report_stays_under_5_mb(tmp_path: Path) -> None:
    """A benchmark, not a timing assertion: the size is asserted, the open time printed."""
    html = write_view(synthetic_report(tmp_path, scenarios=20, trials=10, transcript_turns=8))
    size = html.stat().st_size
    assert size < 5_000_000
    with browser(tmp_path / "profile") as context:
        page = context.new_page()
        problems = watch_console(page)
        started = time.monotonic()
        page.goto(html.as_uri(), wait_until="load")
        opened = time.monotonic() - started
        assert page.locator("article.trial").count() == 200
        assert problems == []
    print(f"\nview benchmark: 200 trials, {size / 1e6:.2f} MB, opened in {opened:.2f} s")


def test_a_trajectory_checks_event_link_opens_the_transcript_at_that_event(tmp_path: Path) -> None:
    import json

    report_path = synthetic_report(tmp_path, scenarios=1, trials=1, transcript_turns=3)
    data = json.loads(report_path.read_text())
    trial = data["scenarios"][0]["trials"][0]
    events = [json.loads(line) for line in (tmp_path / trial["transcript"]).read_text().splitlines()]
    last_call = [e for e in events if e.get("type") == "tool_call"][-1]
    trial["checks"].append({"index": 2, "type": "tool-used", "passed": True, "message": "tool-used bash: 3 times",
                            "events": [last_call["seq"]]})
    report_path.write_text(json.dumps(data))
    html = write_view(report_path)
    with browser(tmp_path / "profile") as context:
        page, problems = open_view(context, html)
        target = page.locator(f"#s0t0xq{last_call['seq']}")  # type: ignore[attr-defined]
        assert not target.is_visible()  # the transcript starts folded
        page.get_by_role("link", name=f"#{last_call['seq']}").click()  # type: ignore[attr-defined]
        assert target.is_visible() and "tests/test_3.py" in target.inner_text()
        assert page.get_by_role("button", name="Transcript (12 events)").get_attribute("aria-expanded") == "true"  # type: ignore[attr-defined]
        assert problems == []


def test_the_view_reads_in_five_seconds_banner_failures_first_reason_on_the_row_and_bars_that_differ(
        tmp_path: Path) -> None:
    """The run's verdict is the first thing on the page; failing scenarios come first with their first
    failing check on the row; "failures only" hides the rest; a 0% bar is drawn unlike a 100% one."""
    names = ["always-passes", "always-fails", "sometimes"]
    failing = {1: {1, 2, 3}, 2: {2}}
    html = write_view(synthetic_report(tmp_path, scenarios=3, trials=3, names=names,
                                       fails=lambda si, t: t in failing.get(si, set())))
    with browser(tmp_path / "profile") as context:
        page, problems = open_view(context, html)
        banner = page.locator("#verdict")  # type: ignore[attr-defined]
        text = banner.inner_text()
        assert banner.is_visible() and "FAILED" in text and "exit status 1" in text, text
        assert "2 of 3 scenarios failing" in text and "5 passed" in text and "4 fail" in text, text
        assert "fail" in (banner.get_attribute("class") or "").split()
        table = page.locator("#scenario-table")  # type: ignore[attr-defined]
        assert banner.bounding_box()["y"] < table.bounding_box()["y"]
        assert banner.bounding_box()["y"] + banner.bounding_box()["height"] < 900  # in the first screen

        rows = table.locator("tbody tr")
        assert [rows.nth(i).locator("th a").inner_text() for i in range(3)] == ["always-fails", "sometimes", "always-passes"]
        assert [rows.nth(i).get_attribute("class") for i in range(3)] == ["v-fail", "v-fail", "v-pass"]
        assert "trial 1: #1 command: check 1.1" in rows.nth(0).locator("th").inner_text()
        assert "trial 2: #1 command: check 2.2" in rows.nth(1).locator("th").inner_text()
        assert rows.nth(0).locator("th").evaluate("e => getComputedStyle(e).borderLeftColor") != \
            rows.nth(2).locator("th").evaluate("e => getComputedStyle(e).borderLeftColor")

        zero, full = rows.nth(0).locator(".bar"), rows.nth(2).locator(".bar")
        assert zero.locator(".fill").bounding_box()["width"] == 0
        assert full.locator(".fill").bounding_box()["width"] >= full.bounding_box()["width"] - 2
        fill_colour = full.locator(".fill").evaluate("e => getComputedStyle(e).backgroundColor")
        assert zero.evaluate("e => getComputedStyle(e).backgroundColor") not in (fill_colour, "rgba(0, 0, 0, 0)")

        page.get_by_label("Failures only").check()  # type: ignore[attr-defined]
        assert not rows.nth(2).is_visible() and rows.nth(0).is_visible() and rows.nth(1).is_visible()
        page.get_by_label("Failures only").uncheck()  # type: ignore[attr-defined]
        assert rows.nth(2).is_visible()
        page.screenshot(path=str(ARTIFACTS / "view-glance-1280.png"))  # type: ignore[attr-defined]
        assert problems == []


def test_a_passing_run_says_passed_in_the_pass_colour(tmp_path: Path) -> None:
    import json

    report_path = synthetic_report(tmp_path, scenarios=2, trials=2, fails=lambda si, t: False)
    data = json.loads(report_path.read_text())
    data["exitStatus"] = 0
    report_path.write_text(json.dumps(data))
    with browser(tmp_path / "profile") as context:
        page, problems = open_view(context, write_view(report_path))
        banner = page.locator("#verdict")  # type: ignore[attr-defined]
        assert banner.inner_text().startswith("PASSED") and "exit status 0" in banner.inner_text()
        assert "pass" in (banner.get_attribute("class") or "").split()
        assert page.locator("#scenario-table tr.v-fail").count() == 0  # type: ignore[attr-defined]
        assert problems == []


def test_a_tool_call_and_its_result_read_together_in_the_timeline(tmp_path: Path) -> None:
    html = write_view(synthetic_report(tmp_path, scenarios=1, trials=1, transcript_turns=2))
    with browser(tmp_path / "profile") as context:
        page, problems = open_view(context, html)
        page.get_by_role("button", name="Transcript (8 events)").click()  # type: ignore[attr-defined]
        timeline = page.locator("ol.timeline").first  # type: ignore[attr-defined]
        calls = timeline.locator(":scope > li.call")
        assert calls.count() == 2
        assert timeline.locator(":scope > li.result").count() == 0  # no result left apart from its call
        for turn in (1, 2):
            call = calls.nth(turn - 1)
            assert f"tests/test_{turn}.py" in call.get_by_role("button").first.inner_text()
            result = call.locator("ol.paired > li.result")
            assert result.count() == 1 and result.is_visible()
            result.get_by_role("button").click()
            assert "1 passed in 0.01s" in result.locator("pre").inner_text()
        assert problems == []
