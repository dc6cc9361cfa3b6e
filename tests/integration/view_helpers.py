"""Helpers for the HTML view's browser tests and benchmark: a real headless Chromium, driven by
Playwright for Python with the Debian system browser (never ``playwright install``), and synthetic
reports of any size, written with the report's own builder."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pytest_atlante.records import CheckResult, TrialRecord, Usage
from pytest_atlante.report.model import BudgetRecord, HostIdentity, RunState, build_report, keyed, write_report

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
REPO_ROOT = Path(__file__).resolve().parents[2]
# Screenshots a test run leaves behind for people to look at (gitignored).
ARTIFACTS = Path(os.environ.get("ATLANTE_TEST_ARTIFACTS", REPO_ROOT / "test-artifacts"))


@contextmanager
def browser(profile: Path, width: int = 1280, height: int = 900) -> Iterator[Any]:
    """A browser context on a fresh profile; ``AssertionError`` when Chromium is missing."""
    from playwright.sync_api import sync_playwright

    assert shutil.which(CHROMIUM), f"{CHROMIUM} is missing: run scripts/setup --test (it installs Debian's chromium)"
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(str(profile), executable_path=CHROMIUM, headless=True,
                                                       args=CHROMIUM_ARGS, viewport={"width": width, "height": height})
        try:
            yield context
        finally:
            context.close()


def watch_console(page: Any) -> list[str]:
    """Console errors and uncaught page errors, collected as they happen."""
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    return problems


def synthetic_report(out: Path, *, scenarios: int, trials: int, names: list[str] | None = None,
                     diff: str | None = None, message: str = "check", transcript_turns: int = 0,
                     fails: Callable[[int, int], bool] | None = None) -> Path:
    """A report of ``scenarios`` x ``trials`` trials (every third one failing, or those ``fails(scenario
    index, trial)`` names), with transcripts when ``transcript_turns`` > 0.  ``names`` and
    ``diff``/``message`` let a test inject hostile text."""
    names = names or [f"scenario-{i:03d}" for i in range(scenarios)]
    records: list[TrialRecord] = []
    for si, name in enumerate(names):
        for t in range(1, trials + 1):
            failing = fails(si, t) if fails is not None else (si + t) % 3 == 0
            rel = None
            if transcript_turns:
                rel = f"trials/{name}/{t}/transcript.jsonl" if "<" not in name else f"trials/s{si}/{t}/transcript.jsonl"
                write_transcript(out / rel, transcript_turns)
            records.append(TrialRecord(
                scenario=name, trial=t, nodeId=f"eval/{name}.eval.json::{name}[trial-{t}]", verdict="fail" if failing else "pass",
                durationMs=1000 * (si + 1) + 37 * t, hostDurationMs=900,
                checks=[CheckResult(index=0, type="file-exists", passed=True, message="file-exists a.txt: file exists"),
                        CheckResult(index=1, type="command", passed=not failing, message=f"{message} {si}.{t}",
                                    output="Traceback: assertion failed\n" if failing else None)],
                diff=diff if diff is not None else _diff(si, t), changedPaths=["src/app.py"],
                usage=Usage(inputTokens=1000 + si, outputTokens=100 + t), costUsd=0.001 * (si + 1), transcript=rel,
            ))
    started = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
    state = RunState(
        run_id="20261201T030000Z-abcdef", started_at=started,
        host=HostIdentity(name="claude-code", version="2.1.197", dialect="claude-code"), model=None, scripted=True,
        budget=BudgetRecord(trials=trials, timeoutMs=120000, maxSessions=1000, maxTokens=400000),
        records=keyed(records),
    )
    report = build_report(state, [(n, f"eval/s{i}.eval.json", "local", trials) for i, n in enumerate(names)],
                          finished_at=started + timedelta(minutes=5), complete=True, exit_status=1)
    return write_report(report, out)


def _diff(si: int, t: int) -> str:
    body = "".join(f"+line {n} of scenario {si} trial {t}\n" for n in range(12))
    return f"diff --git a/src/app.py b/src/app.py\n--- a/src/app.py\n+++ b/src/app.py\n@@ -1,1 +1,13 @@\n-old\n{body}"


def write_transcript(path: Path, turns: int) -> None:
    events: list[dict[str, Any]] = [{"schema": "atlante/transcript-v1", "type": "header", "host": "claude-code",
                                     "dialect": "claude-code", "truncated": False}]
    for turn in range(1, turns + 1):
        events += [
            {"type": "usage", "turn": turn, "t": turn * 100, "usage": {"inputTokens": 100, "outputTokens": 10, "cacheReadTokens": 0,
                                                                       "cacheWriteTokens": 0}, "outputExact": True,
             "cumulativeTokens": 110 * turn},
            {"type": "text", "turn": turn, "t": turn * 100, "text": f"Working on step {turn}."},
            {"type": "tool_call", "turn": turn, "t": turn * 100, "id": f"c{turn}", "tool": "bash", "hostTool": "Bash",
             "input": {"command": f"python -m pytest -q tests/test_{turn}.py"}},
            {"type": "tool_result", "turn": turn, "t": turn * 100 + 50, "id": f"c{turn}", "tool": "bash", "isError": False,
             "text": "1 passed in 0.01s", "chars": 17, "truncated": False},
        ]
    for seq, event in enumerate(events[1:], start=1):  # numbered as real transcripts are
        event["seq"] = seq
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
