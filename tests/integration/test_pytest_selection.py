"""pytest's own selection options on eval trials, proven by the host sessions that actually ran.

Node ids must parse the way pytest prints them: pytest >= 9.2 compares ids as structures, so a
trial id ``file::name[trial-2]`` read back from the cache (``--lf``, ``--ff``, ``--nf``, ``--sw``) or
the command line (``--deselect``, ``file::name[trial-2]``) must match the collected item.  Each test
counts host sessions (the fake host logs one line per session), not pytest's summary.

``scripts/test`` runs this file a second time under the lowest supported pytest 8 and xdist
(``.venv-pytest8``), so both parsers are covered.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import Project, config_doc
from pytest_atlante.report.model import EvalReport
from test_budgets import fake_project, fake_scenario  # noqa: F401 - fixture

FLAKY = "eval/scenarios/a.eval.json"
STEADY = "eval/scenarios/b.eval.json"


@pytest.fixture
def suite(fake_project: Project, tmp_path: Path) -> Project:  # noqa: F811 - the fixture above
    """Two scenarios of three trials; ``flaky`` fails its second trial only."""
    sessions = tmp_path / "sessions.log"
    fake_project.config(config_doc(budget={"trials": 3}))
    write = {"ok.txt": "ok\n"}
    checks = [{"type": "file-exists", "path": "ok.txt"}]
    fake_project.scenario(fake_scenario("flaky", {"usage": [10], "sessions": str(sessions), "write": write, "no_write_in": [2]},
                                        checks=checks), FLAKY)
    fake_project.scenario(fake_scenario("steady", {"usage": [10], "sessions": str(sessions), "write": write},
                                        checks=checks), STEADY)
    (fake_project.root / "eval/scenarios/main.eval.json").unlink()
    fake_project.build()
    fake_project.sessions = sessions  # type: ignore[attr-defined]
    return fake_project


def run_sessions(pytester: pytest.Pytester, project: Project, *args: str) -> tuple[int, list[str], str]:
    """One eval run with pytest's cache enabled; returns (exit, trial dirs whose host ran, output)."""
    log: Path = project.sessions  # type: ignore[attr-defined]
    log.unlink(missing_ok=True)
    # The fake host logs its sessions outside its sandbox, which namespace isolation would hide.
    result = pytester.runpytest_inprocess("--atlante-eval", "--atlante-project", str(project.root),
                                          "--atlante-out", str(pytester.path / "out"), "--rootdir", str(project.root),
                                          "-p", "no:randomly", "--atlante-isolation", "off", *args)
    ran = log.read_text().split() if log.exists() else []
    return int(result.ret), ran, result.stdout.str()


ALL = ["flaky-1", "flaky-2", "flaky-3", "steady-1", "steady-2", "steady-3"]


def test_printed_ids_are_parametrized_trials(pytester: pytest.Pytester, suite: Project) -> None:
    result = pytester.runpytest_inprocess("--atlante-eval", "--atlante-project", str(suite.root), "--rootdir", str(suite.root),
                                          "--collect-only", "-q")
    assert f"{FLAKY}::flaky[trial-2]" in result.stdout.lines
    items = pytester.inline_genitems("--atlante-eval", "--atlante-project", str(suite.root), "--rootdir", str(suite.root))[0]
    trial = items[1]
    assert (trial.name, trial.originalname, trial.nodeid) == ("flaky[trial-2]", "flaky", f"{FLAKY}::flaky[trial-2]")
    # The parametrization shapes the node id only; an IDE adapter would read a lasting callspec
    # as a Python test's (test_vscode_adapter.py).
    assert not hasattr(trial, "callspec")


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_last_failed_reruns_only_the_failed_trial(pytester: pytest.Pytester, suite: Project, workers: list[str]) -> None:
    status, ran, _ = run_sessions(pytester, suite, *workers)
    assert status == 1 and sorted(ran) == ALL
    status, ran, text = run_sessions(pytester, suite, "--lf", *workers)
    assert status == 1 and ran == ["flaky-2"], text
    assert "not in selected tests" not in text
    lastfailed = json.loads((suite.root / ".pytest_cache/v/cache/lastfailed").read_text())
    assert list(lastfailed) == [f"{FLAKY}::flaky[trial-2]"]


def test_failed_first_runs_the_failed_trial_before_the_others(pytester: pytest.Pytester, suite: Project) -> None:
    run_sessions(pytester, suite)
    status, ran, text = run_sessions(pytester, suite, "--ff")
    assert status == 1 and ran[0] == "flaky-2" and sorted(ran) == ALL, text


def test_new_first_runs_a_new_scenario_first(pytester: pytest.Pytester, suite: Project) -> None:
    run_sessions(pytester, suite)
    suite.scenario(fake_scenario("fresh", {"usage": [10], "sessions": str(suite.sessions)}), "eval/scenarios/c.eval.json")  # type: ignore[attr-defined]
    suite.build()
    _status, ran, text = run_sessions(pytester, suite, "--nf")
    assert sorted(ran[:3]) == ["fresh-1", "fresh-2", "fresh-3"] and sorted(ran[3:]) == ALL, text


def test_stepwise_stops_at_the_failure_and_resumes_there(pytester: pytest.Pytester, suite: Project) -> None:
    status, ran, _ = run_sessions(pytester, suite, "--sw")
    assert status == 1 and ran == ["flaky-1", "flaky-2"]
    status, ran, text = run_sessions(pytester, suite, "--sw")
    assert status == 1 and ran == ["flaky-2"], text  # resumed at the failed trial, stopped there again


@pytest.mark.parametrize(("args", "expected"), [
    (["--deselect", f"{FLAKY}::flaky[trial-2]"], ["flaky-1", "flaky-3", "steady-1", "steady-2", "steady-3"]),
    (["-k", "trial-2"], ["flaky-2", "steady-2"]),
    ([f"{STEADY}::steady"], ["steady-1", "steady-2", "steady-3"]),
    ([f"{FLAKY}::flaky[trial-3]"], ["flaky-3"]),
], ids=["deselect", "keyword", "file-scenario", "file-trial"])
def test_selection_runs_exactly_the_selected_trials(pytester: pytest.Pytester, suite: Project, args: list[str],
                                                    expected: list[str]) -> None:
    if not args[0].startswith("-"):
        args = [str(suite.root / args[0])]
    status, ran, text = run_sessions(pytester, suite, *args)
    assert sorted(ran) == expected, text
    assert status == (1 if "flaky-2" in expected else 0), text


@pytest.mark.parametrize("stop", ["-x", "--sw"])
def test_trials_a_stop_left_unrun_are_not_run_not_zero_percent(pytester: pytest.Pytester, suite: Project, stop: str) -> None:
    status, ran, text = run_sessions(pytester, suite, stop)
    assert status == 1 and ran == ["flaky-1", "flaky-2"], text
    report = EvalReport.model_validate_json((pytester.path / "out" / "report.json").read_text())
    assert report.complete is False and report.interrupted is False and report.exitStatus == 1
    rates = {s.name: (s.passRate, s.notRun, len(s.trials)) for s in report.scenarios}
    assert rates == {"flaky": (0.5, 1, 2), "steady": (None, 3, 0)}
    assert re.search(r"^steady +0 +not run ", text, re.M) and "(1 of 3 trials not run)" in text, text  # n = 0 ran
    assert "4 not run; exit status 1" in text


def test_ide_adapters_see_plain_items_at_their_scenario_line(pytester: pytest.Pytester, suite: Project) -> None:
    """What VS Code's ``vscode_pytest`` builds its tree from: an item with a ``callspec`` is taken
    for a parametrized Python test and its node id is split at ``.py`` (an ``IndexError`` for a
    scenario document, and an empty tree); any other item goes under its ``pytest.File`` parent at
    ``location[1] + 1``.  The adapter itself is not on PyPI, so it is not installed here."""
    items = pytester.inline_genitems("--atlante-eval", "--atlante-project", str(suite.root), "--rootdir", str(suite.root))[0]
    assert [item.nodeid for item in items] == [f"{doc}::{name}[trial-{n}]" for doc, name in ((FLAKY, "flaky"), (STEADY, "steady"))
                                               for n in (1, 2, 3)]
    for item in items:
        assert not hasattr(item, "callspec") or ".py" in item.nodeid.rsplit("::", 1)[0]
        assert isinstance(item.parent, pytest.File) and item.path == item.parent.path
        # The scenario's "name" key is on line 4 of the documents written here (json.dumps, indent 2).
        lines = item.path.read_text().splitlines()
        assert '"name"' in lines[item.location[1]], (item.location, lines[:6])


# -- deselection by any means, and an empty selection ----------------------------------------------

def report_of(pytester: pytest.Pytester) -> EvalReport:
    return EvalReport.model_validate_json((pytester.path / "out" / "report.json").read_text())


def own_trials(report: EvalReport) -> list[str]:
    return sorted(f"{t.scenario}-{t.trial}" for s in report.scenarios for t in s.trials)


def assert_only_its_own(report: EvalReport, ran: list[str], status: int, text: str) -> None:
    """A narrowed run's report: exactly the trials it ran, none "not run", complete, pytest's status."""
    assert own_trials(report) == sorted(ran), text
    assert [(s.name, s.notRun, s.expectedTrials) for s in report.scenarios] == \
        [(s.name, 0, len(s.trials)) for s in report.scenarios], text
    assert report.complete is True and report.exitStatus == status == (1 if "flaky-2" in ran else 0), text
    assert report.selectedTrials == len(ran) and "not run" not in text, text


def shard_of(node_id: str, count: int) -> int:
    """pytest-shard's assignment of one item (its ``sha256hash(nodeid) % num_shards``)."""
    from pytest_shard.pytest_shard import sha256hash

    return sha256hash(node_id) % count


NODE_IDS = [f"{doc}::{name}[trial-{n}]" for doc, name in ((FLAKY, "flaky"), (STEADY, "steady")) for n in (1, 2, 3)]


# pytest-split's trylast ``pytest_collection_modifyitems`` runs before or after atlante's (also
# trylast) depending on which plugin pytest configured first: the order entry points are found in,
# which differs between machines.  Loading pytest-split's module with -p puts it after atlante's.
SPLIT_AFTER_ATLANTE = ["-p", "no:pytest-split", "-p", "pytest_split.plugin"]


@pytest.mark.parametrize("load", [[], SPLIT_AFTER_ATLANTE], ids=["entry-points", "split-after-atlante"])
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_splitter_groups_report_only_their_own_trials(pytester: pytest.Pytester, suite: Project, workers: list[str],
                                                      load: list[str]) -> None:
    """pytest-split deselects in its own trylast ``pytest_collection_modifyitems``: each group's
    report holds its own trials only, complete, and the groups together hold every trial once."""
    seen: list[str] = []
    for group in ("1", "2"):
        status, ran, text = run_sessions(pytester, suite, *load, "--splits", "2", "--group", group, *workers)
        assert ran and len(ran) < len(ALL), text
        assert_only_its_own(report_of(pytester), ran, status, text)
        seen += ran
    assert sorted(seen) == ALL


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_pytest_shard_shards_report_only_their_own_trials(pytester: pytest.Pytester, suite: Project, workers: list[str]) -> None:
    """pytest-shard filters ``items`` without ``pytest_deselected``: the same holds."""
    seen: list[str] = []
    for shard in range(2):
        status, ran, text = run_sessions(pytester, suite, "--num-shards", "2", "--shard-id", str(shard), *workers)
        if not ran:
            continue  # the hash put every trial on the other shard (the empty shard has its own test)
        assert_only_its_own(report_of(pytester), ran, status, text)
        seen += ran
    assert sorted(seen) == ALL


def empty_shard(count: int = 7) -> list[str]:
    """pytest-shard's options for a shard that holds none of the six trials (7 shards: one is empty)."""
    used = {shard_of(i, count) for i in NODE_IDS}
    return ["--num-shards", str(count), "--shard-id", str(min(set(range(count)) - used))]


NOTHING = {
    "keyword": ["-k", "nomatch"],
    "mark": ["-m", "nomatch"],
    "deselect": ["--deselect", FLAKY, "--deselect", STEADY],
    "pytest-shard": ["pytest-shard"],
}


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
@pytest.mark.parametrize("how", list(NOTHING))
def test_an_empty_selection_reports_that_nothing_was_selected(pytester: pytest.Pytester, suite: Project, how: str,
                                                               workers: list[str]) -> None:
    args = empty_shard() if how == "pytest-shard" else NOTHING[how]
    status, ran, text = run_sessions(pytester, suite, *args, *workers)
    assert status == pytest.ExitCode.NO_TESTS_COLLECTED and ran == [], text
    report = report_of(pytester)
    assert report.scenarios == [] and report.selectedTrials == 0 and sum(report.verdicts.values()) == 0, text
    assert report.complete is True and report.exitStatus == status, text
    assert "atlante: no trial was selected" in text and "not run" not in text, text
    assert "verdicts: ," not in text and f"exit status {status}" in text, text


@pytest.mark.parametrize("args", [["--deselect", f"{FLAKY}::flaky[trial-2]"], ["-k", "trial-2"], ["-m", "not nomatch"]],
                         ids=["deselect", "keyword", "mark"])
def test_a_partial_deselection_is_not_run_nowhere(pytester: pytest.Pytester, suite: Project, args: list[str]) -> None:
    status, ran, text = run_sessions(pytester, suite, *args)
    assert_only_its_own(report_of(pytester), ran, status, text)


def test_dist_each_is_refused_before_any_session(pytester: pytest.Pytester, suite: Project) -> None:
    """``--dist each`` runs every item on every worker: each trial would be a session per worker."""
    status, ran, text = run_sessions(pytester, suite, "-n", "2", "--dist", "each")
    assert status == 2 and ran == [], text
    assert "eval-dist-each-refused" in text and "--dist each is refused in eval runs" in text, text
    assert "--dist load" in text  # the hint names what to use instead
    assert not (pytester.path / "out" / "report.json").exists()


@pytest.mark.parametrize("mode", ["load", "loadscope", "loadfile", "loadgroup", "worksteal"])
def test_every_other_dist_mode_runs_each_trial_once(pytester: pytest.Pytester, suite: Project, mode: str) -> None:
    status, ran, text = run_sessions(pytester, suite, "-n", "2", "--dist", mode)
    assert status == 1 and sorted(ran) == ALL, text  # one host session per trial, no duplicate
    report = EvalReport.model_validate_json((pytester.path / "out" / "report.json").read_text())
    assert report.complete is True and report.exitStatus == 1
    trials = sorted((t.scenario, t.trial, t.verdict) for s in report.scenarios for t in s.trials)
    assert trials == [("flaky", 1, "pass"), ("flaky", 2, "fail"), ("flaky", 3, "pass"),
                      ("steady", 1, "pass"), ("steady", 2, "pass"), ("steady", 3, "pass")]
