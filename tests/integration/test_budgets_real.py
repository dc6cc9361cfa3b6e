"""Budget rules on both real CLIs through the scripted model.

The script's usage figures choose the turn on which cumulative usage crosses ``maxTokens``; the
scripted server's turn count (``scriptedTurns`` in the report) proves the next turn was never
served: the metering proxy between host and model stops at the crossing response.

Both tests run on ``EVERY_HOST``: how a host's session is aborted at the crossing response or its
deadline (and what it has done by then) is each host's own.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import EVERY_HOST, LOOSENING_CONFTEST, Project, claude_path, config_doc, scenario_doc
from trial_helpers import run_scripted_eval

pytestmark = pytest.mark.hosts


def bash_turn(n: int, tokens: int) -> dict[str, object]:
    return {"text": f"step {n}", "actions": [{"type": "bash", "command": f"echo step-{n} >> steps.txt"}],
            "usage": {"input": tokens, "output": 10}}


run = run_scripted_eval


@pytest.mark.parametrize("host", [*EVERY_HOST, "claude-code@newest"])
def test_max_tokens_stops_the_session_before_the_next_turn(pytester: pytest.Pytester, real_project: Project, host: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    host, _, release = host.partition("@")
    if release:  # the newest Claude Code release first on PATH (a smoke test beside the pinned one)
        monkeypatch.setenv("PATH", claude_path(release, os.environ["PATH"])[0])
    real_project.config(config_doc(host=host, budget={"trials": 1, "maxTokens": 3000}))
    real_project.scenario(scenario_doc(checks=[{"type": "file-exists", "path": "steps.txt"}]))
    # cumulative input: 100, 200, 5200 (crosses 3000 on the third turn), then two turns that must never be asked for
    real_project.script("writes-hello", [bash_turn(1, 100), bash_turn(2, 100), bash_turn(3, 5000),
                                         *[bash_turn(n, 100) for n in range(4, 9)],
                                         {"text": "done", "usage": {"input": 100, "output": 1}}])
    # A conftest override cannot loosen the budget: the configured 3000 still holds and is reported.
    real_project.write("conftest.py", LOOSENING_CONFTEST)
    real_project.build()
    status, report, text = run(pytester, real_project)
    [trial] = report.scenarios[0].trials
    assert trial.verdict == "budget-exceeded", text
    assert report.budget.maxTokens == 3000 and "exceeded maxTokens=3000" in (trial.error or "")
    assert status == 1
    diff = trial.diff or ""
    # Metered at the model API boundary (docs/design.md §10): the crossing response (turn 3) is the
    # last one served, on both hosts.
    assert trial.meteredBy == "proxy"
    assert trial.scriptedTurns == 3  # turn 4 was never requested
    # The crossing response is served whole, so its own bash may run before the stop lands (a race
    # the host's tool start usually loses on Claude Code, seen won once in CI); no later turn's can.
    assert "step-2" in diff and "step-4" not in diff
    assert trial.usage is not None and trial.usage.total > 3000
    assert trial.budgetUnmonitored is False


@pytest.mark.parametrize("host", EVERY_HOST)
def test_max_sessions_and_session_timeout(pytester: pytest.Pytester, real_project: Project, host: str, tmp_path: Path) -> None:
    marker = f"atlante-budget-real-{host}-{tmp_path.name}"
    real_project.config(config_doc(host=host, budget={"trials": 2, "maxSessions": 1, "timeoutMs": 8000}))
    real_project.scenario(scenario_doc(checks=[{"type": "file-exists", "path": "README.md"}]))
    real_project.script("writes-hello", [
        {"text": "waiting", "actions": [{"type": "bash", "command": f"sleep 300 # {marker}"}], "usage": {"input": 10, "output": 1}},
        {"text": "done"},
    ])
    real_project.build()
    status, report, text = run(pytester, real_project, "-rs")
    first, second = report.scenarios[0].trials
    assert (first.verdict, second.verdict) == ("timeout", "skipped-budget"), text
    assert first.hostDurationMs < 60000
    assert "skipped-budget: maxSessions=1" in text
    assert status == 1
    leftovers = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline_has(p, marker)]
    assert leftovers == []


def _cmdline_has(proc: Path, marker: str) -> bool:
    try:
        return marker.encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False
