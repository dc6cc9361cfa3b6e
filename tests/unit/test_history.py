"""``atlante history`` over generated sealed reports whose verdicts, digests and versions are known."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from pytest_atlante.cli import main
from pytest_atlante.records import Verdict
from pytest_atlante.report.history import FLAKY_FLIP_RATE, build_history, sealed_complete_reports
from pytest_atlante.report.model import EvalReport, HostIdentity, ShardRef, write_report
from test_report import START, report_of, trial


@pytest.fixture(autouse=True)
def own_seal_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def make_run(index: int, outcomes: dict[str, list[Verdict]], *, harness: str = "h1", scenario_digest: str = "s1",
             host_version: str = "2.1.197", model: str | None = None, **overrides: Any) -> EvalReport:
    """Run number ``index`` (its id and start time sort by it) with these verdicts per scenario."""
    trials = [trial(name, n + 1, verdict) for name, verdicts in outcomes.items() for n, verdict in enumerate(verdicts)]
    digests = {name: (f"sha256:{name}-{scenario_digest}", f"sha256:{harness}") for name in outcomes}
    return report_of(trials, run_id=f"20260101T{index:06d}Z-abcdef", started_at=START + timedelta(minutes=index),
                     digests=digests, model=model, exit_status=0 if all(t.verdict == "pass" for t in trials) else 1,
                     host=HostIdentity(name="claude-code", version=host_version, dialect="claude-code"), **overrides)


def save(project: Path, report: EvalReport, *, seal: bool = True) -> Path:
    out = project / ".atlante" / "eval" / report.runId
    out.mkdir(parents=True)
    path = write_report(report, out)
    if not seal:
        (out / "report.json.seal").unlink()
    return path


PASS: list[Verdict] = ["pass", "pass"]
FAIL: list[Verdict] = ["pass", "fail"]


def test_flip_rate_change_points_and_statuses_as_constructed(tmp_path: Path) -> None:
    plan = [  # (steady, flaky, breaks, harness, host version)
        (PASS, PASS, PASS, "h1", "2.1.197"),
        (PASS, FAIL, PASS, "h1", "2.1.197"),
        (PASS, PASS, PASS, "h1", "2.1.197"),
        (PASS, FAIL, PASS, "h2", "2.1.197"),   # harness changed: the pair 3-4 is not comparable
        (PASS, PASS, PASS, "h2", "2.1.197"),
        (PASS, FAIL, PASS, "h2", "2.1.198"),   # host version changed: 5-6 not comparable
        (PASS, PASS, PASS, "h2", "2.1.198"),
        (PASS, FAIL, FAIL, "h2", "2.1.198"),
    ]
    for index, (steady, flaky, breaks, harness, version) in enumerate(plan, 1):
        save(tmp_path, make_run(index, {"steady": steady, "flaky": flaky, "breaks": breaks}, harness=harness,
                                host_version=version))
    history = build_history(sealed_complete_reports(tmp_path, 20), 20)
    by_name = {h.name: h for h in history.scenarios}
    assert [h.name for h in history.scenarios] == ["breaks", "flaky", "steady"]   # newly-failing, flaky, the rest
    flaky = by_name["flaky"]
    assert flaky.verdicts == "PFPFPFPF" and flaky.status == "flaky"
    # 7 consecutive pairs, 2 across a change: 5 comparable, every one a flip
    assert (flaky.flips, flaky.comparablePairs, flaky.flipRate) == (5, 5, 1.0)
    assert [(p.previousRunId[-14:-8], p.runId[-14:-8], [c.component for c in p.changed]) for p in flaky.changePoints] == [
        ("000003", "000004", ["harness"]), ("000005", "000006", ["hostVersion"])]
    change = flaky.changePoints[1].changed[0]
    assert (change.before, change.after) == ("claude-code 2.1.197", "claude-code 2.1.198")
    breaks = by_name["breaks"]
    assert (breaks.verdicts, breaks.status, breaks.flips, breaks.comparablePairs) == ("PPPPPPPF", "newly-failing", 1, 5)
    assert (breaks.passed, breaks.trials) == (15, 16) and breaks.passInterval is not None
    steady = by_name["steady"]
    assert (steady.status, steady.flipRate, steady.passRate) == ("passing", 0.0, 1.0)
    # --last 3: runs 6-8 only; their pairs are 6-7, 7-8 (comparable): too few for flaky
    short = build_history(sealed_complete_reports(tmp_path, 3), 3)
    assert {h.name: (h.verdicts, h.status) for h in short.scenarios} == {
        "breaks": ("PPF", "newly-failing"), "flaky": ("FPF", "failing"), "steady": ("PPP", "passing")}


def test_a_failure_right_after_a_change_is_tied_to_it_not_newly_failing_among_comparable_runs(tmp_path: Path) -> None:
    for index, (verdicts, digest) in enumerate([(PASS, "s1"), (PASS, "s1"), (FAIL, "s2")], 1):
        save(tmp_path, make_run(index, {"edited": verdicts}, scenario_digest=digest))
    (history,) = build_history(sealed_complete_reports(tmp_path), 20).scenarios
    assert history.status == "failing" and history.comparablePairs == 1
    assert [c.component for c in history.changePoints[0].changed] == ["scenario"]


def test_unsealed_partial_interrupted_and_shard_reports_are_ignored(tmp_path: Path) -> None:
    save(tmp_path, make_run(1, {"alpha": PASS}))
    save(tmp_path, make_run(2, {"alpha": FAIL}), seal=False)                      # written by someone else
    save(tmp_path, make_run(3, {"alpha": FAIL}, complete=False))                  # -x, a crash
    save(tmp_path, make_run(4, {"alpha": FAIL}, interrupted=True, complete=False))
    save(tmp_path, make_run(5, {"alpha": FAIL}, shard=ShardRef(index=1, count=2)))
    junk = tmp_path / ".atlante" / "eval" / "20260101T000006Z-abcdef"
    junk.mkdir()
    (junk / "report.json").write_text("{not json")
    os.symlink(tmp_path / ".atlante" / "eval" / "20260101T000001Z-abcdef", tmp_path / ".atlante" / "eval" / "20260101T000007Z-link")
    save(tmp_path, make_run(8, {"alpha": PASS}))
    reports = sealed_complete_reports(tmp_path)
    assert [r.runId[-14:-8] for r in reports] == ["000008", "000001"]
    (history,) = build_history(reports, 20).scenarios
    assert history.verdicts == "PP"


def test_cli_table_json_selection_and_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for index in range(1, 6):
        save(tmp_path, make_run(index, {"alpha": PASS if index % 2 else FAIL, "beta": PASS}))
    assert main(["history", "--project", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split()[:3] == ["alpha", "flaky", "PFPFP"] and out[2].split()[:3] == ["beta", "passing", "PPPPP"]
    assert f"flip rate above {FLAKY_FLIP_RATE:.0%}" in out[-1]
    assert main(["history", "beta", "--last", "2", "--json", "--project", str(tmp_path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == "atlante/history-v1" and data["runs"] == 2
    assert [s["name"] for s in data["scenarios"]] == ["beta"] and data["scenarios"][0]["verdicts"] == "PP"
    assert main(["history", "gamma", "--project", str(tmp_path)]) == 2
    assert "history-input" in capsys.readouterr().err
    assert main(["history", "--last", "0", "--project", str(tmp_path)]) == 2
    assert main(["history", "--project", str(tmp_path / "nowhere")]) == 0
    assert "no sealed complete report" in capsys.readouterr().out


def test_the_view_shows_a_history_panel_per_scenario_when_history_exists(tmp_path: Path) -> None:
    from pytest_atlante.report.view import write_view

    first = save(tmp_path, make_run(1, {"alpha": PASS, "beta": PASS}))
    page = write_view(first).read_text()
    assert 'class="history"' not in page                       # one run: no history yet
    save(tmp_path, make_run(2, {"alpha": FAIL, "beta": PASS}, harness="h2"))
    newest = save(tmp_path, make_run(3, {"alpha": PASS, "beta": PASS}, harness="h2"))
    page = write_view(newest).read_text()
    assert page.count('<div class="history">') == 2
    assert "<code>PFP</code> · status <strong>passing</strong>" in page and "<code>PPP</code>" in page
    assert "harness sha256:h1 → sha256:h2" in page
    outside = tmp_path / "elsewhere" / "report.json"          # a report outside a project's runs: no panel
    outside.parent.mkdir()
    outside.write_bytes(newest.read_bytes())
    assert 'class="history"' not in write_view(outside).read_text()
