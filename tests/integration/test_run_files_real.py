"""Nothing a trial writes outside its sandbox is trusted later (issue 26), on the real CLIs.

Each test is a scripted hostile agent with isolation off (under namespace isolation the places it
writes here are private mounts or read-only): it forges the run's cost-cap ledger, tampers with an
earlier trial's transcript and host stream, or plants a report in ``.atlante/eval/``; the run, and
the runs after it, must not use what it wrote.

The run directory, its ledger, the audit of what changed outside the sandbox and the readers of the
run's files are the runner's, the same for every host: each test runs once, on ``ONE_HOST``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ONE_HOST
from trial_helpers import (
    DONE,
    TrialCase,
    bash_turn,
    run_eval,
    write_project,
    write_turn,
)

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(600), pytest.mark.usefixtures("on_path")]

# Rewrites the run's ledger (its run directory is two levels above the sandbox) every 5 ms until
# the last victim has started (at most a minute), so the controller's own publications last only
# until the next rewrite: a spend of $1000 in the ledger's old form and a MAC'd form with a guessed
# key, in one document.
FORGER = ("import json, pathlib, time; run = pathlib.Path.cwd().parent.parent; "
          "rid = run.name.removeprefix(chr(97) + 'tlante-eval-'); "
          "body = json.dumps(dict(run=rid, sequence=10**6, costs=dict(forged=1000.0))); "
          "[((run / 'spent.json').write_text(json.dumps(dict(forged=1000.0, mac='0' * 64, body=body))), time.sleep(0.005)) "
          "for i in range(12000) if not (run / 'victims-started').exists()]")


# A victim waits (up to 90 s) until the forged ledger is in place, so the next trial its worker
# starts is decided while the forgery stands, however slowly the forger's host started.
WAIT_FOR_FORGERY = ("import pathlib, time; ledger = pathlib.Path.cwd().parent.parent / 'spent.json'; "
                    "[time.sleep(0.2) for i in range(450) if not (ledger.exists() and 'forged' in ledger.read_text())]")


# The last victim, once its own trial has started under the forgery, lets the forger stop.
VICTIMS_STARTED = "import pathlib; (pathlib.Path.cwd().parent.parent / 'victims-started').touch()"


def victim(name: str, last: bool = False) -> TrialCase:
    done = f" && python3 -c \"{VICTIMS_STARTED}\"" if last else ""
    return TrialCase(name=name, turns=[bash_turn(f"python3 -c \"{WAIT_FOR_FORGERY}\"{done} && echo waited"),
                                       write_turn("hello.txt", "hello\n"), DONE],
                     checks=[{"type": "file-exists", "path": "hello.txt"}], verdict="pass", outcomes=("pass",))


def honest(name: str) -> TrialCase:
    """A victim that waits for no forgery: it writes its file at once."""
    waiting = victim(name)
    return TrialCase(name=name, turns=waiting.turns[1:], checks=waiting.checks, verdict=waiting.verdict,
                     outcomes=waiting.outcomes)


def test_a_forged_cost_cap_ledger_skips_no_trial(pytester: pytest.Pytester, tmp_path: Path) -> None:
    forger = TrialCase(name="a-forges-the-ledger", turns=[bash_turn(f"python3 -c \"{FORGER}\" && echo forged"), DONE],
                       checks=[{"type": "file-absent", "path": "hello.txt"}], verdict="pass", outcomes=("pass",))
    victims = [victim(f"victim-{n}", last=n == 4) for n in range(1, 5)]
    project = write_project(tmp_path / "project", ONE_HOST, [forger, *victims])
    # One scenario file per worker at a time: the forger runs beside the victims, which start one
    # after the other on the other worker while the forged ledger is in place.
    run = run_eval(pytester, project, tmp_path / "out", "--atlante-isolation", "off", "-n", "2", "--dist", "loadfile",
                   "--atlante-max-cost", "5")
    verdicts = {s.name: [t.verdict for t in s.trials] for s in run.report.scenarios}
    assert verdicts == {case.name: ["pass"] for case in [forger, *victims]}, run.output()
    assert run.result.ret == 0 and run.report.costCap is not None and not run.report.costCap.reached, run.output()
    assert run.report.costCap.spentUsd < 1, run.report.costCap
    assert json.loads((tmp_path / "out" / "report.json").read_text())["exitStatus"] == 0


def tamper_case(out: Path) -> TrialCase:
    """Runs after the honest trials: rewrites one's transcript with junk (it crashed the view),
    puts a FIFO in place of the other's (it hung --atlante-html) and appends to a host stream."""
    trials = out / "trials"
    script = (f"import json, os, pathlib; t = pathlib.Path({str(trials)!r}); "
              "junk = [json.dumps([1]), json.dumps(dict(type='usage', usage=[1])), json.dumps(dict(type=7))]; "
              "(t / 'a-honest/1/transcript.jsonl').write_text(chr(10).join(junk) + chr(10)); "
              "f = t / 'b-honest/1/transcript.jsonl'; f.unlink(); os.mkfifo(f); "
              "open(t / 'a-honest/1/host-stream.jsonl', 'a').write('appended' + chr(10))")
    return TrialCase(name="c-tampers", turns=[bash_turn(f"python3 -c \"{script}\" && echo tampered"), DONE],
                     checks=[{"type": "file-absent", "path": "hello.txt"}], verdict="fail", outcomes=("pass",))


def test_another_trials_files_rewritten_are_an_escape_and_break_no_reader(pytester: pytest.Pytester, tmp_path: Path) -> None:
    out = tmp_path / "out"
    cases = [honest("a-honest"), honest("b-honest"), tamper_case(out)]
    project = write_project(tmp_path / "project", ONE_HOST, cases)
    run = run_eval(pytester, project, out, "--atlante-isolation", "off", "--atlante-html", timeout_s=240)
    assert run.result.ret == 1 and run.report.exitStatus == 1, run.output()
    verdicts = {s.name: [t.verdict for t in s.trials] for s in run.report.scenarios}
    assert verdicts == {"a-honest": ["pass"], "b-honest": ["pass"], "c-tampers": ["fail"]}, run.output()
    tamperer = run.trial("c-tampers")
    shown = out.as_posix() + "/trials"
    assert tamperer.escapes == [f"{shown}/a-honest/1/host-stream.jsonl", f"{shown}/a-honest/1/transcript.jsonl",
                                f"{shown}/b-honest/1/transcript.jsonl"], tamperer
    page = (out / "report.html").read_text()
    assert "transcript trials/b-honest/1/transcript.jsonl is a FIFO" in page or "; not read" in page
    viewed = pytester.run(sys.executable, "-m", "pytest_atlante.cli", "view", str(out), timeout=60)
    assert viewed.ret == 0 and "Traceback" not in viewed.stderr.str(), viewed.stderr.str()


PLANTED_RUN = "29991231T000000Z-ffffff"  # a run id that sorts after every real one


def planting_case(project: Path) -> TrialCase:
    """Copies the project's earlier report into a new run directory with a cost of $20 a trial."""
    runs = project / ".atlante" / "eval"
    script = (f"import json, pathlib; runs = pathlib.Path({str(runs)!r}); "
              "doc = json.loads(sorted(runs.glob('*/report.json'))[0].read_text()); "
              f"doc['runId'] = {PLANTED_RUN!r}; "
              "[t.update(costUsd=20.0) for s in doc['scenarios'] for t in s['trials']]; "
              f"target = runs / {PLANTED_RUN!r} / 'report.json'; target.parent.mkdir(); "
              "target.write_text(json.dumps(doc))")
    return TrialCase(name="plants-a-report", turns=[bash_turn(f"python3 -c \"{script}\" && echo planted"), DONE],
                     checks=[{"type": "file-absent", "path": "hello.txt"}], verdict="pass", outcomes=("pass",))


def test_a_report_a_trial_planted_drives_no_forecast_and_no_view(pytester: pytest.Pytester, tmp_path: Path) -> None:
    project = tmp_path / "project"
    # "priced" waits for nothing: no ledger is forged here, so a waiting victim would sit out its 90 s.
    write_project(project, ONE_HOST, [honest("priced"), planting_case(project)])
    args = ["--atlante-eval", "--atlante-scripted", "--atlante-project", str(project), "-p", "no:cacheprovider",
            "--atlante-isolation", "off"]
    first = pytester.runpytest_subprocess(*args, "--atlante-scenario", "priced", timeout=300)
    assert first.ret == 0, first.outlines
    second = pytester.runpytest_subprocess(*args, "--atlante-scenario", "plants-a-report", timeout=300)
    planted = project / ".atlante" / "eval" / PLANTED_RUN / "report.json"
    assert planted.is_file(), second.outlines  # the agent did plant it (with isolation off nothing stops the write)
    runs = sorted(p.parent.name for p in (project / ".atlante" / "eval").glob("*/report.json"))
    assert len(runs) == 3 and runs[-1] == PLANTED_RUN

    printed = pytester.runpytest_subprocess(*args, "--atlante-scenario", "priced", "--atlante-forecast", timeout=300)
    text = "\n".join(printed.outlines)
    assert printed.ret == 0 and PLANTED_RUN not in text, text
    assert "skipped 1 report(s) no run of yours wrote" in text, text
    row = next(line for line in printed.outlines if line.startswith("priced"))
    assert "20.0" not in row and "40.0" not in row, row  # the forecast is the real run's few tenths of a cent

    viewed = subprocess.run([sys.executable, "-m", "pytest_atlante.cli", "view"], cwd=project, capture_output=True,
                            text=True, timeout=60, check=False)
    assert viewed.returncode == 0 and PLANTED_RUN not in viewed.stdout and runs[-2] in viewed.stdout, viewed
