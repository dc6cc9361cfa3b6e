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
