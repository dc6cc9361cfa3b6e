"""Deselection and distribution on the real CLI: the example project (claude-code, scripted model)
split into two pytest-split groups, one of them under xdist, an empty selection (``-k nomatch``),
and xdist's ``--dist`` modes (``each`` refused before any session, another one trial per session).

Each group's report holds its own trials only (none "not run", ``complete``), the two together hold
the example's four trials once with the verdicts of the whole run (only ``keeps-settings-untouched``
fails, on purpose), and an empty selection writes a report that says nothing was selected, with
pytest's exit status 5.  Four short host sessions in all.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import copy_example
from pytest_atlante.suite.build import build
from trial_helpers import run_eval

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(600)]

VERDICTS = {"documents-usage": "pass", "adds-farewell": "pass", "keeps-settings-untouched": "fail",
            "adds-module-docstring": "pass"}


@pytest.fixture(autouse=True)
def on_path(monkeypatch: pytest.MonkeyPatch, hosts_path: Callable[[], str], private_tmp: Path) -> None:
    monkeypatch.setenv("PATH", hosts_path())


def test_pytest_split_groups_of_the_example_report_only_their_own_trials(pytester: pytest.Pytester,
                                                                          tmp_path: Path) -> None:
    root = copy_example(tmp_path)
    build(root)
    seen: dict[str, str] = {}
    for group, workers in (("1", []), ("2", ["-n", "2"])):
        # pytest-split loaded after atlante (see test_pytest_selection.py): its deselection comes last.
        run = run_eval(pytester, root, tmp_path / f"group{group}", "-p", "no:pytest-split", "-p", "pytest_split.plugin",
                       "--splits", "2", "--group", group, *workers)
        report = run.report
        mine = {t.scenario: t.verdict for s in report.scenarios for t in s.trials}
        assert 0 < len(mine) < len(VERDICTS), run.output()
        assert all(s.notRun == 0 and s.expectedTrials == len(s.trials) == 1 for s in report.scenarios), run.output()
        assert report.complete is True and report.selectedTrials == len(mine), run.output()
        assert run.result.ret == report.exitStatus == (1 if "keeps-settings-untouched" in mine else 0), run.output()
        assert "not run" not in run.output()
        assert not set(mine) & set(seen)
        seen.update(mine)
    assert seen == VERDICTS


def test_an_empty_selection_of_the_example_says_nothing_was_selected(pytester: pytest.Pytester, tmp_path: Path) -> None:
    root = copy_example(tmp_path)
    build(root)
    run = run_eval(pytester, root, tmp_path / "out", "-k", "nomatch")
    report = run.report
    assert run.result.ret == report.exitStatus == pytest.ExitCode.NO_TESTS_COLLECTED, run.output()
    assert report.scenarios == [] and report.selectedTrials == 0 and report.complete is True
    assert report.host is not None and report.host.name == "claude-code"
    assert "atlante: no trial was selected" in run.output() and "verdicts:" not in run.output()


def test_dist_each_is_refused_and_another_mode_runs_each_trial_once(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """``--dist each`` would start every trial once per worker (duplicate host sessions whose
    directories collide); it is refused before any session.  ``worksteal`` runs each trial once."""
    root = copy_example(tmp_path)
    build(root)
    refused = run_eval(pytester, root, tmp_path / "each", "-n", "2", "--dist", "each")
    assert refused.result.ret == 2 and refused.report_text is None, refused.output()
    assert "eval-dist-each-refused" in refused.output()
    assert not list(tmp_path.glob("each/trials/*")), "a host session ran"
    run = run_eval(pytester, root, tmp_path / "worksteal", "-n", "2", "--dist", "worksteal")
    trials = [(t.scenario, t.trial) for s in run.report.scenarios for t in s.trials]
    assert sorted(trials) == sorted((name, 1) for name in VERDICTS), run.output()
    assert {t.scenario: t.verdict for s in run.report.scenarios for t in s.trials} == VERDICTS
    assert run.report.complete is True and run.result.ret == run.report.exitStatus == 1
