"""Nothing a trial writes outside its sandbox is trusted later (issue 26), on the real CLIs.

Each test is a scripted hostile agent with isolation off (under namespace isolation the places it
writes here are private mounts or read-only): it forges the run's cost-cap ledger, tampers with an
earlier trial's transcript and host stream, or plants a report in ``.atlante/eval/``; the run, and
the runs after it, must not use what it wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trial_helpers import (
    DONE,
    HostName,
    TrialCase,
    bash_turn,
    run_eval,
    write_project,
    write_turn,
)

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(600), pytest.mark.usefixtures("on_path")]

HOSTS: list[HostName] = ["claude-code", "opencode"]

# Rewrites the run's ledger (its run directory is two levels above the sandbox) every 5 ms for a
# minute, so the controller's own publications last only until the next rewrite: a spend of $1000
# in the ledger's old form and a MAC'd form with a guessed key, in one document.
FORGER = ("import json, pathlib, time; run = pathlib.Path.cwd().parent.parent; "
          "rid = run.name.removeprefix(chr(97) + 'tlante-eval-'); "
          "body = json.dumps(dict(run=rid, sequence=10**6, costs=dict(forged=1000.0))); "
          "[((run / 'spent.json').write_text(json.dumps(dict(forged=1000.0, mac='0' * 64, body=body))), time.sleep(0.005)) "
          "for i in range(12000)]")


# A victim waits (up to 90 s) until the forged ledger is in place, so the next trial its worker
# starts is decided while the forgery stands, however slowly the forger's host started.
WAIT_FOR_FORGERY = ("import pathlib, time; ledger = pathlib.Path.cwd().parent.parent / 'spent.json'; "
                    "[time.sleep(0.2) for i in range(450) if not (ledger.exists() and 'forged' in ledger.read_text())]")


def victim(name: str) -> TrialCase:
    return TrialCase(name=name, turns=[bash_turn(f"python3 -c \"{WAIT_FOR_FORGERY}\" && echo waited"),
                                       write_turn("hello.txt", "hello\n"), DONE],
                     checks=[{"type": "file-exists", "path": "hello.txt"}], verdict="pass", outcomes=("pass",))


@pytest.mark.parametrize("host", HOSTS)
def test_a_forged_cost_cap_ledger_skips_no_trial(pytester: pytest.Pytester, tmp_path: Path, host: HostName) -> None:
    forger = TrialCase(name="a-forges-the-ledger", turns=[bash_turn(f"python3 -c \"{FORGER}\" && echo forged"), DONE],
                       checks=[{"type": "file-absent", "path": "hello.txt"}], verdict="pass", outcomes=("pass",))
    victims = [victim(f"victim-{n}") for n in range(1, 5)]
    project = write_project(tmp_path / "project", host, [forger, *victims])
    # One scenario file per worker at a time: the forger runs beside the victims, which start one
    # after the other on the other worker while the forged ledger is in place.
    run = run_eval(pytester, project, tmp_path / "out", "--atlante-isolation", "off", "-n", "2", "--dist", "loadfile",
                   "--atlante-max-cost", "5")
    verdicts = {s.name: [t.verdict for t in s.trials] for s in run.report.scenarios}
    assert verdicts == {case.name: ["pass"] for case in [forger, *victims]}, run.output()
    assert run.result.ret == 0 and run.report.costCap is not None and not run.report.costCap.reached, run.output()
    assert run.report.costCap.spentUsd < 1, run.report.costCap
    assert json.loads((tmp_path / "out" / "report.json").read_text())["exitStatus"] == 0
