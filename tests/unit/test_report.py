"""The eval report: aggregation by hand-computed numbers, path scrubbing, atomic writes, gitignore."""

from __future__ import annotations

import json
import os
import random
import re
import tempfile
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from pytest_atlante import __version__
from pytest_atlante.records import CheckResult, TrialRecord, Usage, Verdict, iso_utc
from pytest_atlante.report.model import (
    REPORT_SCHEMA,
    BudgetRecord,
    EvalReport,
    HostIdentity,
    RunState,
    build_report,
    ensure_gitignore,
    keyed,
    new_run_id,
    write_report,
)
from pytest_atlante.sandbox.redact import redact_sandbox_paths, scrub_paths

START = datetime(2025, 6, 1, 8, 36, 55, 123456, tzinfo=UTC)
HOST = HostIdentity(name="claude-code", version="2.1.197", dialect="claude-code")
BUDGET = BudgetRecord(trials=3, timeoutMs=600_000, maxSessions=15, maxTokens=400_000)


def trial(scenario: str, n: int, verdict: Verdict, ms: int = 0, **extra: Any) -> TrialRecord:
    node = f"eval/scenarios/{scenario}.eval.json::{scenario}[trial-{n}]"
    return TrialRecord(scenario=scenario, trial=n, nodeId=node, verdict=verdict, durationMs=ms, **extra)


def report_of(trials: list[TrialRecord], **overrides: Any) -> EvalReport:
    names = list(dict.fromkeys(t.scenario for t in trials))
    args: dict[str, Any] = {
        "run_id": "20250601T083655Z-abcdef",
        "started_at": START,
        "finished_at": START + timedelta(minutes=3),
        "host": HOST,
        "model": None,
        "scripted": True,
        "budget": BUDGET,
        "scenarios": [
            (n, f"eval/scenarios/{n}.eval.json", "local", sum(t.scenario == n for t in trials))
            for n in names
        ],
        "trials": trials,
        "complete": True,
        "interrupted": False,
        "exit_status": 1,
        "errors": [],
    }
    args.update(overrides)
    scenarios, finished_at, complete, exit_status = (args.pop(k) for k in ("scenarios", "finished_at", "complete", "exit_status"))
    state = RunState(records=keyed(args.pop("trials")), reported_errors=args.pop("errors"), **args)
    return build_report(state, scenarios, finished_at=finished_at, complete=complete, exit_status=exit_status)


# --- aggregation -----------------------------------------------------------------------------


def test_mixed_scenario_pass_rate_mean_and_p95_exclude_skipped() -> None:
    scenario = report_of(
        [
            trial("a", 1, "pass", 100),
            trial("a", 2, "fail", 300),
            trial("a", 3, "pass", 200),
            trial("a", 4, "skipped-budget"),
        ]
    ).scenarios[0]
    # 2 passed of 3 that ran; mean (100+300+200)/3 = 200; p95 rank ceil(0.95*3)=3 -> 300.
    assert scenario.passRate == pytest.approx(2 / 3)
    assert scenario.meanDurationMs == 200.0
    assert scenario.p95DurationMs == 300.0


def test_p95_is_nearest_rank_over_twenty_trials() -> None:
    durations = list(range(1, 21))  # 1..20 ms
    random.Random(7).shuffle(durations)
    trials = [trial("a", i + 1, "fail" if d == 20 else "pass", d) for i, d in enumerate(durations)]
    scenario = report_of(trials).scenarios[0]
    # rank ceil(0.95*20) = 19 -> the 19th smallest duration, 19 ms; mean (1+..+20)/20 = 10.5.
    assert scenario.p95DurationMs == 19.0
    assert scenario.meanDurationMs == 10.5
    assert scenario.passRate == 0.95


def test_p95_rounds_the_rank_up() -> None:
    trials = [trial("a", i, "pass", i * 10) for i in range(1, 22)]  # 21 trials, 10..210 ms
    # rank ceil(0.95*21) = ceil(19.95) = 20 -> 200 ms.
    assert report_of(trials).scenarios[0].p95DurationMs == 200.0


def test_all_skipped_scenario_has_zero_pass_rate_and_durations() -> None:
    scenario = report_of([trial("a", 1, "skipped-budget"), trial("a", 2, "skipped-budget")]).scenarios[0]
    assert (scenario.passRate, scenario.meanDurationMs, scenario.p95DurationMs) == (0.0, 0.0, 0.0)


def test_skipped_trials_do_not_dilute_the_pass_rate() -> None:
    scenario = report_of(
        [trial("a", 1, "pass", 50), trial("a", 2, "skipped-budget"), trial("a", 3, "skipped-budget")]
    ).scenarios[0]
    assert scenario.passRate == 1.0
    assert scenario.meanDurationMs == 50.0


def test_skipped_trial_evidence_is_emptied() -> None:
    skipped = trial(
        "a",
        1,
        "skipped-budget",
        999,
        hostDurationMs=5,
        diff="x",
        changedPaths=["a"],
        checks=[CheckResult(index=0, type="file-exists", passed=False, message="m")],
    )
    recorded = report_of([skipped]).scenarios[0].trials[0]
    assert (recorded.durationMs, recorded.hostDurationMs) == (0, 0)
    assert (recorded.checks, recorded.diff, recorded.changedPaths) == ([], None, [])


def test_a_scenario_that_never_ran_is_not_run_not_zero_percent() -> None:
    report = report_of([], scenarios=[("a", "eval/scenarios/a.eval.json", "local", 3)])
    scenario = report.scenarios[0]
    assert (scenario.passRate, scenario.notRun, scenario.meanDurationMs, scenario.expectedTrials) == (None, 3, 0.0, 3)
    assert scenario.trials == []


def test_trials_not_run_are_counted_and_left_out_of_the_pass_rate() -> None:
    report = report_of([trial("a", 1, "pass"), trial("a", 2, "fail")], scenarios=[("a", "eval/scenarios/a.eval.json", "local", 4)])
    assert (report.scenarios[0].passRate, report.scenarios[0].notRun) == (0.5, 2)
    skipped = report_of([trial("a", 1, "skipped-budget")], scenarios=[("a", "eval/scenarios/a.eval.json", "local", 1)])
    assert (skipped.scenarios[0].passRate, skipped.scenarios[0].notRun) == (0.0, 0)  # all skipped: 0 (reference)


def test_an_empty_selection_says_nothing_was_selected(tmp_path: Path) -> None:
    """Collected with no trial (``-k nomatch``, an empty splitter group): no scenario, pytest's 5."""
    from pytest_atlante.run.evalrun import summary_lines

    report = report_of([], scenarios=[], exit_status=5, collected=True)
    assert (report.scenarios, report.selectedTrials, report.complete, report.exitStatus) == ([], 0, True, 5)
    lines = summary_lines(report, tmp_path / "report.json")
    assert lines[0].startswith("atlante: no trial was selected") and lines[0].endswith("exit status 5")
    assert not any(line.startswith("verdicts:") for line in lines)
    # Before collection (the run could not start) nothing says how many were selected.
    assert report_of([], scenarios=[], exit_status=3).selectedTrials is None
    with pytest.raises(ValidationError, match="exit status 4"):
        EvalReport.model_validate({**report.model_dump(mode="json", by_alias=True), "exitStatus": 4})


def test_the_verdicts_line_never_starts_with_a_comma(tmp_path: Path) -> None:
    from pytest_atlante.run.evalrun import summary_lines

    report = report_of([], scenarios=[("a", "eval/scenarios/a.eval.json", "local", 2)], exit_status=1)
    assert "verdicts: 2 not run; exit status 1" in summary_lines(report, tmp_path / "report.json")


def test_interrupted_trial_is_kept_and_makes_the_run_incomplete() -> None:
    report = report_of(
        [trial("a", 1, "pass", 10), trial("a", 2, "infra-error", 40, interrupted=True)],
        complete=True,
        interrupted=True,
    )
    assert [t.interrupted for t in report.scenarios[0].trials] == [False, True]
    assert report.scenarios[0].passRate == 0.5
    assert report.complete is False and report.interrupted is True


def test_verdict_counts_name_every_verdict() -> None:
    report = report_of([trial("a", 1, "pass"), trial("b", 1, "timeout"), trial("b", 2, "timeout")])
    assert report.verdicts == {
        "pass": 1,
        "fail": 0,
        "timeout": 2,
        "budget-exceeded": 0,
        "infra-error": 0,
        "skipped-budget": 0,
    }


def test_trials_are_grouped_by_scenario_and_ordered_by_number() -> None:
    report = report_of(
        [trial("b", 2, "pass"), trial("a", 2, "fail"), trial("b", 1, "pass"), trial("a", 1, "pass")],
        scenarios=[
            ("a", "eval/scenarios/a.eval.json", "local", 2),
            ("b", "node_modules/@acme/review-pack/eval/scenarios/b.eval.json", "@acme/review-pack", 2),
        ],
    )
    assert [(s.name, [t.trial for t in s.trials]) for s in report.scenarios] == [
        ("a", [1, 2]),
        ("b", [1, 2]),
    ]
    assert report.scenarios[1].source == "@acme/review-pack"


def test_model_version_is_the_most_frequent_identity_ties_to_first_seen() -> None:
    most = report_of(
        [
            trial("a", 1, "pass", modelIdentity="m-old"),
            trial("a", 2, "pass", modelIdentity="m-new"),
            trial("a", 3, "pass", modelIdentity="m-new"),
            trial("a", 4, "skipped-budget"),
        ]
    )
    assert most.modelVersion == "m-new"
    tie = report_of([trial("a", 1, "pass", modelIdentity="x"), trial("a", 2, "pass", modelIdentity="y")])
    assert tie.modelVersion == "x"
    assert report_of([trial("a", 1, "pass")]).modelVersion is None


def test_totals_sum_tokens_and_known_costs() -> None:
    report = report_of(
        [
            trial("a", 1, "pass", usage=Usage(inputTokens=10, outputTokens=5, cacheReadTokens=2), costUsd=0.25),
            trial("a", 2, "pass", usage=Usage(inputTokens=1, cacheWriteTokens=4), costUsd=float("nan")),
            trial("a", 3, "pass", costUsd=0.5),
            trial("b", 1, "pass", usage=Usage(outputTokens=7)),
        ]
    )
    assert report.scenarios[0].totals.tokens == 22
    assert report.scenarios[0].totals.costUsd == 0.75  # the NaN cost is unknown, not a poison
    assert (report.scenarios[1].totals.tokens, report.scenarios[1].totals.costUsd) == (7, None)


def test_run_fields() -> None:
    report = report_of([trial("a", 1, "pass")], model="anthropic/claude-sonnet-4-5", exit_status=0)
    assert report.schema_ == REPORT_SCHEMA
    assert report.startedAt == "2025-06-01T08:36:55.123Z"
    assert report.finishedAt == "2025-06-01T08:39:55.123Z"
    assert report.atlanteVersion == __version__
    assert (report.model, report.exitStatus, report.complete) == ("anthropic/claude-sonnet-4-5", 0, True)


def test_unlisted_and_duplicate_scenarios_are_caller_bugs() -> None:
    with pytest.raises(ValueError, match="unlisted scenarios: ghost"):
        report_of([trial("ghost", 1, "pass")], scenarios=[("a", "a.json", "local", 1)])
    with pytest.raises(ValueError, match="more than once: a"):
        report_of([], scenarios=[("a", "a.json", "local", 1), ("a", "b.json", "local", 1)])


def test_host_version_must_be_bare() -> None:
    with pytest.raises(ValidationError):
        HostIdentity(name="claude-code", version="2.1.197 (Claude Code)", dialect="claude-code")


# --- evidence caps and sandbox paths ---------------------------------------------------------


def test_diff_and_output_are_capped() -> None:
    long_output = "o" * 4000 + "END"
    recorded = report_of(
        [
            trial(
                "a",
                1,
                "fail",
                diff="d" * 25_000,
                checks=[CheckResult(index=0, type="command", passed=False, message="m", output=long_output)],
            )
        ]
    ).scenarios[0].trials[0]
    assert recorded.diff is not None and len(recorded.diff) == 20_000 and recorded.diffTruncated
    assert recorded.checks[0].output is not None
    assert len(recorded.checks[0].output) == 2000 and recorded.checks[0].output.endswith("END")


def test_scrub_paths_replaces_whole_roots_longest_first() -> None:
    run = "/tmp/atlante-eval-r1/a-1"
    text = f"{run}/sandbox/src/a.ts and {run}/home/.claude.json and {run}/sandbox2/x and {run}/sandbox"
    scrubbed = scrub_paths(text, [run, f"{run}/sandbox/"])
    assert scrubbed == "./src/a.ts and ./home/.claude.json and ./sandbox2/x and ."


def test_redaction_backstop_rewrites_unknown_sandbox_paths() -> None:
    text = (
        "error: /private/var/folders/x/T/atlante-eval-9/b-2/sandbox/src/app.py:3: bad\n"
        "HOME=/tmp/atlante-eval-9/b-2/home\n"
        "'/tmp/atlante-eval-9/b-2/sandbox' is the root; scenario atlante-eval-like stays"
    )
    assert redact_sandbox_paths(text) == (
        "error: ./src/app.py:3: bad\nHOME=<atlante-temp>\n'.' is the root; scenario atlante-eval-like stays"
    )


def test_report_holds_no_sandbox_path(tmp_path: Path) -> None:
    # A real run directory of the kind the engine makes, in the real temp dir.
    run_dir = tempfile.mkdtemp(prefix="atlante-eval-")
    try:
        sandbox = f"{run_dir}/a-1/sandbox"
        leaky = trial(
            "a",
            1,
            "infra-error",
            12,
            diff=f"--- {sandbox}/src/a.ts\n+++ {sandbox}/src/a.ts\n",
            changedPaths=[f"{sandbox}/src/a.ts"],
            error=f"host exited; see {run_dir}/a-1/home/.claude/log",
            checks=[
                CheckResult(
                    index=0,
                    type="command",
                    passed=False,
                    error=True,
                    message=f"cannot start in {sandbox}",
                    output=f"cwd={sandbox}\n",
                )
            ],
        )
        report = report_of(
            [leaky], errors=[{"code": "eval-worker-crashed", "message": f"worker died in {run_dir}", "n": 1}]
        )
        text = write_report(report, tmp_path).read_text()
        assert "atlante-eval-" not in text
        assert run_dir not in text
        assert "./src/a.ts" in text
    finally:
        os.rmdir(run_dir)


# --- writing ---------------------------------------------------------------------------------


def test_report_round_trips_through_its_model(tmp_path: Path) -> None:
    report = report_of(
        [
            trial("a", 1, "pass", 10, usage=Usage(inputTokens=3), costUsd=0.1, modelIdentity="m"),
            trial("a", 2, "skipped-budget"),
        ],
        model="m",
        errors=[{"code": "x", "detail": {"k": [1, None, True]}}],
    )
    path = write_report(report, tmp_path / "out")
    assert path == tmp_path / "out" / "report.json"
    text = path.read_text()
    assert json.loads(text)["schema"] == REPORT_SCHEMA
    assert EvalReport.model_validate_json(text) == report
    assert EvalReport.model_validate_json(text, strict=True) == report


def _old_report(tmp_path: Path) -> tuple[Path, str]:
    path = write_report(report_of([trial("a", 1, "pass")]), tmp_path)
    return path, path.read_text()


def test_failed_rename_keeps_the_old_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, old = _old_report(tmp_path)

    def broken_replace(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        write_report(report_of([trial("a", 1, "fail")]), tmp_path)
    assert path.read_text() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "report.json.seal"]  # no temp file left


def test_failed_serialisation_keeps_the_old_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, old = _old_report(tmp_path)

    def broken_json(self: EvalReport) -> str:
        raise TypeError("not serialisable")

    monkeypatch.setattr(EvalReport, "to_json", broken_json)
    with pytest.raises(TypeError):
        write_report(report_of([trial("a", 1, "fail")]), tmp_path)
    assert path.read_text() == old


# --- gitignore and run ids -------------------------------------------------------------------


def test_gitignore_created_then_idempotent(tmp_path: Path) -> None:
    atlante = tmp_path / ".atlante"
    ensure_gitignore(atlante)
    ensure_gitignore(atlante)
    assert (atlante / ".gitignore").read_text() == "eval/\n"


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("build/\n", "build/\neval/\n"),
        ("build/", "build/\neval/\n"),
        ("# keep\nbuild/\r\n", "# keep\nbuild/\r\neval/\r\n"),
        ("build/\neval/\ncache/\n", "build/\neval/\ncache/\n"),
        ("/eval/\n", "/eval/\n"),
        ("evaluation/\n", "evaluation/\neval/\n"),
    ],
)
def test_gitignore_keeps_other_lines(tmp_path: Path, before: str, after: str) -> None:
    (tmp_path / ".gitignore").write_bytes(before.encode())
    ensure_gitignore(tmp_path)
    ensure_gitignore(tmp_path)
    assert (tmp_path / ".gitignore").read_bytes().decode() == after


def test_run_ids_sort_by_time_and_are_unique() -> None:
    first = new_run_id(START)
    assert re.fullmatch(r"20250601T083655Z-[0-9a-f]{6}", first)
    assert new_run_id(START + timedelta(seconds=1)) > first
    assert len({new_run_id(START) for _ in range(500)}) == 500
    naive = new_run_id(START.replace(tzinfo=None))
    assert naive.startswith("20250601T083655Z-")


def test_timestamps_are_utc_with_z() -> None:
    plus_two = timezone(timedelta(hours=2))
    assert iso_utc(datetime(2025, 6, 1, 10, 0, 0, tzinfo=plus_two)) == "2025-06-01T08:00:00.000Z"


def test_gitignore_with_non_utf8_bytes_is_kept_byte_for_byte(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_bytes(b"caf\xe9/\n")
    ensure_gitignore(tmp_path)
    assert (tmp_path / ".gitignore").read_bytes() == b"caf\xe9/\neval/\n"


def test_only_real_temp_paths_are_rewritten() -> None:
    # A file the agent named like a run directory is project content, not a temp path.
    diff = "diff --git a/d/atlante-eval-notes.txt b/d/atlante-eval-notes.txt\n+++ b/d/atlante-eval-notes.txt\n+see /tmp/atlante-eval-notes.txt\n"
    recorded = report_of([trial("a", 1, "pass", 1, diff=diff, changedPaths=["d/atlante-eval-notes.txt"])]).scenarios[0].trials[0]
    assert recorded.changedPaths == ["d/atlante-eval-notes.txt"]
    assert recorded.diff == diff
    real = "/tmp/atlante-eval-20261130T083655Z-1a2b3c/a-1"
    assert redact_sandbox_paths(f"at {real}/sandbox/d/atlante-eval-notes.txt, {real}/home") == (
        "at ./d/atlante-eval-notes.txt, <atlante-temp>"
    )


def test_a_scripted_run_is_labelled_scripted_and_few_trials_say_so(tmp_path: Path) -> None:
    """Offline figures never read as a real model's bill, and a 1-trial interval carries its caveat."""
    from pytest_atlante.run.evalrun import summary_lines

    usage = Usage(inputTokens=100, outputTokens=20)
    trials = [trial("a", 1, "pass", usage=usage, costUsd=0.02, modelIdentity="scripted-model", requestedModel="claude-sonnet-5"),
              trial("b", 1, "fail", usage=usage, costUsd=0.01, modelIdentity="scripted-model", requestedModel="claude-sonnet-5")]
    scripted = report_of(trials)
    assert (scripted.scriptedModel, scripted.modelVersion, scripted.requestedModel) == (
        "scripted-model", "scripted-model", "claude-sonnet-5")
    lines = summary_lines(scripted, tmp_path / "report.json")
    assert "priced $" in lines[0] and "cost $" not in lines[0]
    assert any(line.startswith("a ") and "21-100%*" in line for line in lines)
    assert any(line.startswith("*: a 95% interval over fewer than 5 trials") for line in lines)
    assert ("scripted run: answered offline by scripted-model (the host asked for \"claude-sonnet-5\"); tokens are "
            "the script's and cost $ a price for them: nothing was charged") in lines

    real = report_of([trial("a", n, "pass", usage=usage, costUsd=0.02) for n in range(1, 6)], scripted=False)
    lines = summary_lines(real, tmp_path / "report.json")
    assert real.scriptedModel is None and "cost $" in lines[0]
    assert not any("scripted" in line or line.startswith("*") or "%*" in line for line in lines[:-1])  # [-1]: the path


def test_a_collapsed_suite_interval_is_not_shown_as_a_certainty(tmp_path: Path) -> None:
    from pytest_atlante.run.evalrun import summary_lines

    report = report_of([trial(name, n, "pass") for name in ("a", "b") for n in range(1, 6)])
    assert report.suite is not None and report.suite.passInterval is not None
    assert report.suite.passInterval.low == report.suite.passInterval.high == 1.0
    [suite] = [line for line in summary_lines(report, tmp_path / "r.json") if line.startswith("suite:")]
    assert "95% CI 100-100% (trials clustered by scenario); a point only because every scenario had the same rate" in suite
