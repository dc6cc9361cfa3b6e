"""Boundary: packs and their published reports, as ``atlante pack report`` reads them.

The table runs the real command in a subprocess with a timeout against a pack whose config or
report was made hostile (special files, sparse multi-GiB files, reports whose numbers or labels
lie), and asserts the ignore code, no traceback, no hang and the peak RSS; the project's own large
valid reports must be accepted.  The property test mutates real reports (the example pack's former
replay, made a real run, and a writer-built one) and checks that whatever is displayed follows from
the trials listed, recomputed here independently, and that nothing else is displayed.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bounded import assert_clean, run_bounded, sparse
from conftest import json_paths
from pytest_atlante.records import CHANGED_PATHS_CAP, DIFF_CAP_CHARS, CheckResult, TrialRecord, Usage
from pytest_atlante.report.model import MAX_REPORT_BYTES, BudgetRecord, HostIdentity, RunState, build_report, keyed
from pytest_atlante.report.provenance import Ignored, ProvenanceView, view_for_path

DATA = Path(__file__).parent / "data"
SCENARIO = "adds-module-docstring"
GIB = 1 << 30
Doc = dict[str, Any]


def real_report() -> Doc:
    """The report the example pack used to publish, turned into what a real run would write."""
    doc: Doc = json.loads((DATA / "scripted-pack-report.json").read_text())
    doc["scripted"] = False
    for scenario in doc["scenarios"]:
        for trial in scenario["trials"]:
            trial["scriptedTurns"] = None
    return doc


def big_report(scenarios: int, trials: int) -> Doc:
    """A valid report as the writer makes it with every per-trial cap filled."""
    check = CheckResult(index=0, type="diff-allowlist", passed=False, message="diff-allowlist: outside", output="o" * 2000)
    records = [
        TrialRecord(scenario=f"s{s}", trial=t, nodeId=f"e/s{s}.eval.json::s{s}[trial-{t}]", verdict="fail",
                    durationMs=1000 + t, hostDurationMs=900, checks=[check], diff="d" * DIFF_CAP_CHARS, diffTruncated=True,
                    changedPaths=[f"many/f{i:06d}" for i in range(CHANGED_PATHS_CAP)], changedPathsTotal=200_000,
                    usage=Usage(inputTokens=10), costUsd=0.01, modelIdentity="claude-sonnet-4-5")
        for s in range(scenarios) for t in range(1, trials + 1)
    ]
    start = datetime(2026, 11, 1, tzinfo=UTC)
    state = RunState(
        run_id="20261101T000000Z-abcdef", started_at=start,
        host=HostIdentity(name="claude-code", version="2.1.197", dialect="claude-code"), model=None, scripted=False,
        budget=BudgetRecord(trials=trials, timeoutMs=600_000, maxSessions=1000, maxTokens=400_000),
        records=keyed(records),
    )
    report = build_report(state, [(f"s{s}", f"eval/s{s}.eval.json", "local", trials) for s in range(scenarios)],
                          finished_at=start + timedelta(hours=1), complete=True, exit_status=1)
    doc: Doc = json.loads(report.to_json())
    return doc


def make_pack(root: Path, report: Doc | None, names: list[str]) -> Path:
    (root / "eval" / "scenarios").mkdir(parents=True)
    (root / "atlante.jsonc").write_text(
        '{"version": "0.2", "name": "p", "eval": {"scenarios": "eval/scenarios/*.eval.json", "report": "eval/report.json"}}')
    for name in names:
        (root / "eval" / "scenarios" / f"{name}.eval.json").write_text(json.dumps({"name": name}))
    if report is not None:
        (root / "eval" / "report.json").write_text(json.dumps(report))
    return root


# --- the table ---------------------------------------------------------------------------------

Arrange = Callable[[Path], Path]  # pack root -> the path given to `atlante pack report`


def edit(change: Callable[[Doc], Any]) -> Arrange:
    def arrange(pack: Path) -> Path:
        doc = real_report()
        change(doc)
        (pack / "eval" / "report.json").write_text(json.dumps(doc))
        return pack
    return arrange


def replace(rel: str, make: Callable[[Path], Any], view: str = ".") -> Arrange:
    def arrange(pack: Path) -> Path:
        path = pack / rel
        path.unlink()
        make(path)
        return pack / view
    return arrange


def first_trial(doc: Doc) -> Doc:
    trial: Doc = doc["scenarios"][0]["trials"][0]
    return trial


def fail_a_check(doc: Doc) -> None:
    first_trial(doc)["checks"][0]["passed"] = False


def dialect(doc: Doc) -> None:
    doc["host"]["dialect"] = "opencode-v1"


def exit_one(doc: Doc) -> None:
    doc["exitStatus"] = 1


def scripted(doc: Doc) -> None:
    doc["scripted"] = True


def foreign(doc: Doc) -> None:
    doc["scenarios"][0]["name"] = "deletes-the-tests"
    first_trial(doc)["scenario"] = "deletes-the-tests"


def replayed(doc: Doc) -> None:
    first_trial(doc)["scriptedTurns"] = 3


def capped_paths_lie(doc: Doc) -> None:
    first_trial(doc)["changedPathsTotal"] = 0


def large_valid(pack: Path) -> Path:
    doc = big_report(scenarios=12, trials=50)
    data = json.dumps(doc, indent=2).encode()
    assert 20 << 20 < len(data) <= MAX_REPORT_BYTES  # the project's own output at its caps
    (pack / "eval" / "report.json").write_bytes(data)
    for name in (s["name"] for s in doc["scenarios"]):
        (pack / "eval" / "scenarios" / f"{name}.eval.json").write_text(json.dumps({"name": name}))
    return pack


R = "eval/report.json"
CASES: list[tuple[str, Arrange, str | None]] = [
    ("pack-config-is-a-fifo", replace("atlante.jsonc", os.mkfifo), "report-not-declared"),
    ("pack-config-is-a-directory", replace("atlante.jsonc", lambda p: p.mkdir()), "report-not-declared"),
    ("pack-config-1gib-sparse", replace("atlante.jsonc", lambda p: sparse(p, GIB, b"{")), "report-not-declared"),
    ("report-is-a-fifo", replace(R, os.mkfifo), "report-unsafe"),
    ("report-is-a-directory", replace(R, lambda p: p.mkdir()), "report-unsafe"),
    ("report-file-links-to-a-device", replace(R, lambda p: p.symlink_to("/dev/zero"), view=R), "report-unsafe"),
    ("report-6gib-sparse", replace(R, lambda p: sparse(p, 6 * GIB, b"{")), "report-too-large"),
    ("pass-whose-check-failed", edit(fail_a_check), "report-inconsistent"),
    ("host-speaks-another-dialect", edit(dialect), "report-inconsistent"),
    ("exit-1-with-every-trial-passing", edit(exit_one), "report-inconsistent"),
    ("scripted-replay", edit(scripted), "report-scripted"),
    ("scripted-turns-in-a-real-run", edit(replayed), "report-inconsistent"),
    ("scenario-not-in-the-pack-suite", edit(foreign), "report-foreign"),
    ("changed-paths-total-below-the-list", edit(capped_paths_lie), "report-inconsistent"),
    ("the-real-report-itself", edit(lambda doc: None), None),
    ("large-valid-report", large_valid, None),
]


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("arrange", "code"), [pytest.param(*row[1:], id=row[0]) for row in CASES])
def test_pack_report_boundary(tmp_path: Path, arrange: Arrange, code: str | None) -> None:
    pack = make_pack(tmp_path / "pack", real_report(), [SCENARIO])
    target = arrange(pack)
    outcome = run_bounded([sys.executable, "-m", "pytest_atlante.cli", "pack", "report", str(target)],
                          cwd=tmp_path, timeout_s=120)
    assert_clean(outcome)
    printed = json.loads(outcome.stdout)
    if code is None:
        assert outcome.returncode == 0, printed
        assert printed["label"] == "self-reported evaluation"
    else:
        assert (outcome.returncode, printed["ignored"], printed["code"]) == (1, True, code), printed
        assert printed["reason"]


# --- the property ------------------------------------------------------------------------------


def _writer_report() -> Doc:
    doc = big_report(scenarios=2, trials=3)
    # Make it a mix: one pass, a timeout, a skipped trial, so every rule has something to judge.
    trials = doc["scenarios"][0]["trials"]
    trials[0].update(verdict="pass", checks=[{**trials[0]["checks"][0], "passed": True}])
    trials[1].update(verdict="timeout")
    trials[2].update(verdict="skipped-budget", durationMs=0, hostDurationMs=0, checks=[], diff=None,
                     diffTruncated=False, changedPaths=[], changedPathsTotal=None)
    _recompute(doc)
    return doc


BASES: list[Doc] = []  # filled below, once _recompute is defined
# Values that matter to the checks: verdicts, dialects, host names, booleans, counts, rates.
VALUES = st.one_of(
    st.sampled_from(["pass", "fail", "timeout", "infra-error", "skipped-budget", "budget-exceeded",
                     "claude-code", "opencode", "opencode-v1", "opencode-v2", SCENARIO, "s0", "x"]),
    st.booleans(), st.none(), st.integers(-2, 5), st.floats(0, 1), st.sampled_from([0.5, 1.0, 2 / 3]),
)


def _mutate(doc: Doc, path: tuple[Any, ...], value: Any) -> None:
    node = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value


def _recompute(doc: Doc) -> None:
    """What a careful forger does after a change: make every aggregate agree with the trials."""
    from pytest_atlante.report.model import EvalReport

    try:
        report = EvalReport.model_validate(doc)
    except Exception:  # noqa: BLE001 - a shape the writer cannot express stays as it is
        return
    trials = [t for s in report.scenarios for t in s.trials]
    try:
        state = RunState(
            run_id=report.runId, started_at=datetime.fromisoformat(report.startedAt.replace("Z", "+00:00")),
            host=report.host, model=report.model, scripted=report.scripted, budget=report.budget,
            records=keyed(trials), interrupted=report.interrupted, reported_errors=report.errors,
        )
        rebuilt = build_report(
            state, [(s.name, s.file, s.source, s.expectedTrials) for s in report.scenarios],
            finished_at=datetime.fromisoformat(report.finishedAt.replace("Z", "+00:00")),
            complete=report.complete, exit_status=report.exitStatus,
        )
    except ValueError:  # e.g. a trial filed under a scenario the report does not list
        return
    doc.clear()
    doc.update(json.loads(rebuilt.to_json()))


BASES += [real_report(), _writer_report()]


def _verdict_follows(trial: Doc) -> bool:
    checks = trial["checks"]
    failed = [c for c in checks if not c["passed"]]
    errored = [c for c in checks if c["error"]]
    if trial["verdict"] == "pass":
        return bool(checks) and not failed
    if trial["verdict"] == "fail":
        return bool(failed) and not errored
    return not errored or trial["verdict"] == "infra-error"


def _assert_displayed_is_consistent(doc: Doc, view: ProvenanceView, suite: set[str]) -> None:
    """Recompute everything the view shows from the document, independently of provenance.py."""
    assert set(view.model_dump()) == {"label", "runDate", "atlanteVersion", "host", "model", "modelVersion", "scenarios"}
    assert view.label == "self-reported evaluation"
    assert doc["scripted"] is False and doc["complete"] is True and doc["interrupted"] is False
    host = doc["host"]
    assert view.host.model_dump() == host
    assert host["dialect"] == "claude-code" if host["name"] == "claude-code" else host["dialect"].startswith("opencode-")
    trials = [t for s in doc["scenarios"] for t in s["trials"]]
    assert all(_verdict_follows(t) for t in trials)
    assert all(t.get("scriptedTurns") is None for t in trials)
    worst = 0 if all(t["verdict"] == "pass" for t in trials) else 1
    assert doc["exitStatus"] == worst and not doc["errors"]
    assert view.runDate == doc["startedAt"][:10] and view.atlanteVersion == doc["atlanteVersion"]
    models = Counter(t["modelIdentity"] for t in trials if t["modelIdentity"])
    assert (view.modelVersion is None) == (not models)
    if models:
        assert models[doc["modelVersion"]] == max(models.values())
    assert [s.name for s in view.scenarios] == [s["name"] for s in doc["scenarios"]]
    assert {s.name for s in view.scenarios} <= suite
    for shown, scenario in zip(view.scenarios, doc["scenarios"], strict=True):
        counted = [t for t in scenario["trials"] if t["verdict"] != "skipped-budget"]
        assert len(scenario["trials"]) == scenario["expectedTrials"]
        expected = sum(t["verdict"] == "pass" for t in counted) / len(counted) if counted else 0.0
        assert abs(shown.passRate - expected) < 1e-9


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), base=st.sampled_from(range(len(BASES))), forge=st.booleans())
def test_whatever_the_view_displays_follows_from_the_trials(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, base: int, forge: bool
) -> None:
    doc = copy.deepcopy(BASES[base])
    suite = {s["name"] for s in doc["scenarios"]}
    for _ in range(data.draw(st.integers(1, 3))):
        _mutate(doc, data.draw(st.sampled_from(json_paths(doc))), data.draw(VALUES))
    if forge:
        _recompute(doc)
    pack = make_pack(tmp_path_factory.mktemp("pack"), doc, sorted(suite))
    result = view_for_path(pack, now=datetime(2027, 1, 1, tzinfo=UTC))
    if isinstance(result, Ignored):
        assert result.code.startswith("report-") and result.reason
        return
    _assert_displayed_is_consistent(doc, result, suite)


def test_the_unmutated_bases_are_displayed(tmp_path: Path) -> None:
    for index, doc in enumerate(BASES):
        pack = make_pack(tmp_path / str(index), doc, [s["name"] for s in doc["scenarios"]])
        view = view_for_path(pack, now=datetime(2027, 1, 1, tzinfo=UTC))
        assert isinstance(view, ProvenanceView), view
        _assert_displayed_is_consistent(doc, view, {s["name"] for s in doc["scenarios"]})
