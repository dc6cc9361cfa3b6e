"""The terminal talks like pytest (issue 40): atlante's lines in pytest's colours through its terminal
writer (plain with ``--color=no`` and off a tty), trial lines on lines of their own under xdist,
a live status line during a long host session on a terminal only, unpriced costs as ``-``, and a
scenario whose trials a budget skipped showing them as not run.  Through the fake host (fast); the
real hosts' output goes through the same reporter."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import Project, config_doc
from test_budgets import fake_project, fake_scenario, run  # noqa: F401 - fake_project is a fixture

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def two_scenarios(project: Project, trials: int, **budget: int) -> None:
    project.config(config_doc(budget={"trials": trials, **budget}))
    project.scenario(fake_scenario("priced", {"usage": [10]}), "eval/scenarios/a.eval.json")
    # No usage: the fake host reports no cost, so the scenario is unpriced; its trial 2 fails.
    project.scenario(fake_scenario("unpriced", {"write": {"out.txt": "x"}, "no_write_in": [2]},
                                   checks=[{"type": "file-exists", "path": "out.txt"}]), "eval/scenarios/b.eval.json")
    (project.root / "eval/scenarios/main.eval.json").unlink()
    project.build()


def test_trial_lines_stand_on_lines_of_their_own_under_xdist(pytester: pytest.Pytester, fake_project: Project) -> None:  # noqa: F811
    two_scenarios(fake_project, trials=4)
    _, report, text = run(pytester, fake_project, "-n", "2")
    assert report is not None and len([t for s in report.scenarios for t in s.trials]) == 8, text
    mentions = [line for line in text.splitlines() if "atlante: eval/" in line]
    assert len(mentions) == 8, text
    assert all(line.startswith("atlante: eval/") for line in mentions), "\n".join(mentions)  # no `.atlante: …`


def test_atlante_lines_take_pytest_colours_and_none_with_color_no(pytester: pytest.Pytester, fake_project: Project) -> None:  # noqa: F811
    two_scenarios(fake_project, trials=2)
    _, _, coloured = run(pytester, fake_project, "--color=yes")
    pass_line = next(line for line in coloured.splitlines() if "atlante: eval/scenarios/a.eval.json::priced[trial-1]" in line)
    assert re.search(r"\x1b\[32m(\x1b\[1m)?pass\x1b\[0m in ", pass_line), repr(pass_line)
    fail_line = next(line for line in coloured.splitlines() if "unpriced[trial-2]: " in line)
    assert re.search(r"\x1b\[31m(\x1b\[1m)?fail", fail_line), repr(fail_line)
    rows = {ANSI.sub("", line).split()[0]: line for line in coloured.splitlines() if re.match(r"(\x1b\[[0-9;]*m)*(priced|unpriced) ", line)}
    assert rows["priced"].startswith("\x1b[32m") and rows["unpriced"].startswith("\x1b[31m"), rows
    verdicts = next(line for line in coloured.splitlines() if "verdicts: " in line)
    assert verdicts.startswith(("\x1b[31m", "\x1b[1m\x1b[31m")), repr(verdicts)

    _, _, plain = run(pytester, fake_project, "--color=no")
    assert "\x1b[" not in plain and "\b" not in plain
    assert "atlante: eval/scenarios/a.eval.json::priced[trial-1]: pass in " in plain


def test_unpriced_costs_print_as_a_dash_and_skipped_trials_as_not_run(pytester: pytest.Pytester, fake_project: Project) -> None:  # noqa: F811
    two_scenarios(fake_project, trials=3, maxSessions=4)
    _, report, text = run(pytester, fake_project, "--color=no")
    assert report is not None
    assert [t.verdict for t in report.scenarios[1].trials].count("skipped-budget") == 2, text
    rows = {line.split()[0]: line for line in text.splitlines() if re.match(r"(priced|unpriced) ", line)}
    assert rows["priced"].split()[9] == "0.0030", rows            # 3 trials at $0.001
    assert rows["unpriced"].split()[9] == "-", rows               # no trial reported a cost: not 0.0000
    assert "(2 of 3 trials not run)" in rows["unpriced"], rows     # capped by maxSessions
    assert "unpriced[trial-1]: pass in " in text and "tokens, $-" in text


def on_a_pty(argv: list[str], cwd: Path) -> tuple[int, str]:
    """Run ``argv`` with a pty as its terminal: its exit status and everything it drew."""
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=terminal, stderr=terminal)
    os.close(terminal)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        ready, _, _ = select.select([controller], [], [], 1)
        if ready:
            try:
                data = os.read(controller, 65536)
            except OSError:  # the other end closed: the run is over
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    proc.wait(timeout=60)
    os.close(controller)
    shown = b"".join(chunks).decode("utf-8", "replace")
    return proc.returncode, shown


def test_trials_in_flight_show_how_many_run_on_the_live_line(fake_project: Project, tmp_path: Path) -> None:  # noqa: F811
    """--atlante-in-flight: while an item waits for its trial, the live line says how the others fare."""
    fake_project.config(config_doc(budget={"trials": 2}))
    fake_project.scenario(fake_scenario("slow", {"sleep": 4.5, "write": {"README.md": "x"}}), "eval/scenarios/main.eval.json")
    fake_project.build()
    argv = [sys.executable, "-m", "pytest", "--atlante-eval", "--atlante-project", str(fake_project.root),
            "--atlante-out", str(tmp_path / "out"), "-p", "no:cacheprovider", "-p", "no:xdist",
            "--rootdir", str(fake_project.root), "--atlante-in-flight", "2"]
    returncode, shown = on_a_pty(argv, fake_project.root)
    assert returncode == 0, shown
    assert re.search(r" \d+s; [0-2] in flight, [0-2] of 2 done", shown), repr(shown)


def test_a_long_host_session_shows_a_live_line_on_a_terminal_only(fake_project: Project, tmp_path: Path) -> None:  # noqa: F811
    """A pty as the terminal: the status (elapsed seconds) is drawn at most once a second after the
    first two, and erased with backspaces before pytest writes the outcome; a pipe gets none of it."""
    fake_project.config(config_doc(budget={"trials": 1}))
    fake_project.scenario(fake_scenario("slow", {"sleep": 4.5, "write": {"README.md": "x"}}), "eval/scenarios/main.eval.json")
    fake_project.build()
    argv = [sys.executable, "-m", "pytest", "--atlante-eval", "--atlante-project", str(fake_project.root),
            "--atlante-out", str(tmp_path / "out"), "-p", "no:cacheprovider", "--rootdir", str(fake_project.root)]
    returncode, shown = on_a_pty(argv, fake_project.root)
    assert returncode == 0, shown
    statuses = re.findall(r"\x08* (\d+)s", shown)
    assert statuses and all(int(s) >= 2 for s in statuses), repr(shown)
    assert len(statuses) <= 4, repr(shown)                         # at most one a second over ~4.5 s
    line = next(ln for ln in shown.splitlines() if "main.eval.json" in ln and "atlante:" not in ln)
    erased = line
    while "\b" in erased:  # what a terminal shows once the backspaces moved the cursor back
        erased = re.sub(r"[^\x08]\x08", "", erased, count=1) if re.search(r"[^\x08]\x08", erased) else erased.replace("\b", "")
    assert re.sub(r"\s+", " ", ANSI.sub("", erased)).strip().startswith("eval/scenarios/main.eval.json ."), repr(line)

    piped = subprocess.run(argv, cwd=fake_project.root, capture_output=True, text=True, timeout=240, check=False)
    assert piped.returncode == 0 and "\b" not in piped.stdout and not re.search(r" \d+s\b", piped.stdout.split("atlante:")[0])
