"""``--atlante-in-flight`` on a real CLI through the scripted model: trials at once in one process,
and a hostile one among them.

Host-neutral runner logic, so ``ONE_HOST``.  The four trials (two scenarios, two trials each) meet at a barrier (a bash command of
their first turn waits until all four have started), so a run that did not keep them in flight at
once fails, without a clock.  One of them is hostile: it leaves a sleeper that escapes its session,
its process group and its environment token (``setsid env -i``, double-forked) and ends first,
while the others still work; its end must not kill the others' hosts or tools (each run's
process tree is swept apart: ``sandbox/process.py``), and the sleeper must not outlive the run.
Isolation is off on purpose: without a PID namespace per trial, that sweep is all that keeps the
trials apart.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import ONE_HOST, Project, config_doc, scenario_doc
from trial_helpers import new_marker, run_scripted_eval

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(900)]

AT_ONCE = 4


def barrier(directory: Path) -> str:
    """Wait until ``AT_ONCE`` trials have come here (exit 1 after 120 s: they did not run at once)."""
    return ("python3 -c \"import os, sys, time, uuid; d = sys.argv[1]; open(os.path.join(d, uuid.uuid4().hex), 'w').close(); "
            "end = time.time() + 120\n"
            f"while len(os.listdir(d)) < {AT_ONCE}:\n"
            "    time.sleep(0.1)\n"
            "    time.time() < end or sys.exit(1)\" " + str(directory))


def escaping_sleeper(marker: str) -> str:
    """A sleeper that leaves its session, group and token (``setsid env -i``) through a double fork."""
    return f"(setsid env -i /bin/sh -c 'sleep 300 # {marker}' >/dev/null 2>&1 &) ; echo left"


def turns(*commands: str) -> list[dict[str, object]]:
    steps: list[dict[str, object]] = [{"text": f"step {n}", "actions": [{"type": "bash", "command": command}]}
                                      for n, command in enumerate(commands)]
    return [*steps, {"text": "done"}]


@pytest.fixture
def real_project(atlante_project: Project, hosts_path: Callable[[], str], monkeypatch: pytest.MonkeyPatch) -> Project:
    monkeypatch.setenv("PATH", hosts_path())
    return atlante_project


def sleeping(marker: str) -> list[int]:
    """Live processes whose command line carries ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_trials_in_flight_on_a_real_cli_keep_apart(pytester: pytest.Pytester, real_project: Project, tmp_path: Path) -> None:
    meet = tmp_path / "barrier"
    meet.mkdir()
    marker = new_marker()
    real_project.config(config_doc(ONE_HOST, budget={"trials": AT_ONCE // 2}))
    workers = scenario_doc("works", checks=[{"type": "file-contains", "path": "out.txt", "pattern": "worked"}])
    hostile = scenario_doc("escapes", checks=[{"type": "file-exists", "path": "README.md"}])
    real_project.scenario(workers, file="eval/scenarios/works.eval.json")
    real_project.scenario(hostile, file="eval/scenarios/escapes.eval.json")
    (real_project.root / "eval/scenarios/main.eval.json").unlink()
    # The workers go on after the barrier (two more tool calls) while the hostile trial ends at once.
    real_project.script("works", turns(barrier(meet), "sleep 3", "echo worked > out.txt"))
    real_project.script("escapes", turns(barrier(meet), escaping_sleeper(marker)))
    real_project.build()

    status, report, text = run_scripted_eval(pytester, real_project, "-p", "no:xdist", "--atlante-in-flight", str(AT_ONCE),
                                             "--atlante-isolation", "off")
    verdicts = sorted((t.scenario, t.trial, t.verdict, t.error) for s in report.scenarios for t in s.trials)
    assert verdicts == [(name, n, "pass", None) for name in ("escapes", "works") for n in (1, 2)], text
    assert status == 0, text
    assert len(list(meet.iterdir())) == AT_ONCE
    assert sleeping(marker) == [], "the escaped sleeper outlived the run"


def test_trials_in_flight_under_namespace_isolation(pytester: pytest.Pytester, real_project: Project) -> None:
    """The default where bubblewrap works: four sandboxes at once, each its own PID namespace whose
    init bubblewrap hands to the runner (``reap_session``); every trial passes as a serial one does."""
    real_project.config(config_doc(ONE_HOST, budget={"trials": AT_ONCE}))
    real_project.script("writes-hello", turns("sleep 2", "echo hello > hello.txt"))
    real_project.build()
    status, report, text = run_scripted_eval(pytester, real_project, "-p", "no:xdist", "--atlante-in-flight", str(AT_ONCE),
                                             "--atlante-isolation", "namespace")
    assert [(t.trial, t.verdict) for s in report.scenarios for t in s.trials] == [(n, "pass") for n in range(1, AT_ONCE + 1)], text
    assert status == 0, text
