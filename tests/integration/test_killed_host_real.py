"""An agent that kills its own host CLI ends its session: the trial is ``fail``, not ``infra-error``
(issue 38, item 6; docs/design.md §10).

The scripted agent's tool walks up from itself to the host CLI (the outermost of the host's own
processes above it: Codex's and Gemini CLI's wrappers included) and sends it SIGKILL — something a
process of the session can always do, as the same user.  The runner sent no signal (no timeout, no
budget abort), so the host's end is the agent's: the verdict is ``fail`` with the signal named.
Before, the trial was ``infra-error``, which a run reads as the machine's failure, not the agent's.

Each host's process tree is its own, so this runs on ``EVERY_HOST`` under namespace isolation;
with isolation off the host is killed the same way and the runner reads ``-9`` instead of
bubblewrap's 137: once, on ``ONE_HOST``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from conftest import Project, config_doc, per_host_then_once, scenario_doc
from trial_helpers import run_scripted_eval

pytestmark = pytest.mark.hosts

#: The outermost of the host's processes above the tool (stops at the first process that is not
#: one, so nothing above the session, the runner included, is ever signalled).
KILLER = """p=$$; host=
while [ "$p" -gt 1 ]; do
  case "$(cat /proc/$p/comm)" in
    claude*|opencode*|.opencode*|codex*|node*|gemini*) host=$p;;
    *) [ -n "$host" ] && break;;
  esac
  p=$(awk '{print $4}' /proc/$p/stat)
done
echo "killing $host $(cat /proc/$host/comm)" > killed.txt
kill -KILL "$host"
"""


run = run_scripted_eval


@pytest.mark.parametrize(("host", "isolation"), per_host_then_once(["namespace"], once=["off"]))
def test_an_agent_that_kills_its_own_host_fails_its_trial(pytester: pytest.Pytester, atlante_project: Project,
                                                          hosts_path: Callable[[], str], monkeypatch: pytest.MonkeyPatch,
                                                          host: str, isolation: str) -> None:
    monkeypatch.setenv("PATH", hosts_path())
    atlante_project.config(config_doc(host=host, isolation=isolation, budget={"trials": 1}))
    # The checks pass: the session's end alone decides the verdict.
    atlante_project.scenario(scenario_doc(checks=[{"type": "file-contains", "path": "killed.txt", "pattern": "killing"}]))
    atlante_project.script("writes-hello", [
        {"text": "preparing", "actions": [{"type": "write", "path": "kill.sh", "content": KILLER}]},
        {"text": "ending", "actions": [{"type": "bash", "command": "sh kill.sh"}]},
        {"text": "never reached"},
    ])
    atlante_project.build()
    status, report, text = run(pytester, atlante_project, "--atlante-isolation", isolation)
    [trial] = report.scenarios[0].trials
    assert (trial.verdict, status) == ("fail", 1), text
    assert "ended by signal 9, which the runner did not send" in (trial.error or ""), trial.error
    assert [check.passed for check in trial.checks] == [True]
