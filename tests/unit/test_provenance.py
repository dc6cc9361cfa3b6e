"""The pack provenance view: a valid report is shown; anything missing, malformed, unsafe or
inconsistent is ignored with a reason, and nothing a report holds can make the view raise."""

from __future__ import annotations

import copy
import json
import os
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import json_paths
from pytest_atlante.records import CheckResult, TrialRecord, Usage, Verdict
from pytest_atlante.report.exitcodes import decide
from pytest_atlante.report.model import MAX_REPORT_BYTES, BudgetRecord, HostIdentity, RunState, build_report, keyed
from pytest_atlante.report.provenance import (
    Ignored,
    ProvenanceView,
    cmd_pack_report,
    pack_report_view,
    provenance_view,
)

START = datetime(2025, 6, 1, 8, 0, 0, tzinfo=UTC)
NOW = datetime(2025, 7, 1, tzinfo=UTC)
MODEL = "claude-sonnet-4-5-20250929"
SANDBOX_FREE = "no sandbox here"
Doc = dict[str, Any]


def _trial(scenario: str, n: int, verdict: Verdict, ms: int, model: str | None = MODEL) -> TrialRecord:
    ran = verdict != "skipped-budget"
    return TrialRecord(
        scenario=scenario,
        trial=n,
        nodeId=f"eval/scenarios/{scenario}.eval.json::{scenario}[trial-{n}]",
        verdict=verdict,
        durationMs=ms,
        hostDurationMs=ms // 2,
        usage=Usage(inputTokens=100 * n, outputTokens=10) if ran else None,
        costUsd=0.01 * n if ran else None,
        modelIdentity=model if ran else None,
        checks=_checks_for(verdict),
    )


def _checks_for(verdict: Verdict) -> list[CheckResult]:
    """Checks as the engine records them for ``verdict`` (a pass needs every check passed)."""
    if verdict == "skipped-budget":
        return []
    passed = verdict in ("pass", "timeout")
    return [
        CheckResult(index=0, type="file-exists", passed=True, message="file-exists a.py: exists"),
        CheckResult(index=1, type="command", passed=passed, message="command pytest: exit 0", exitCode=0 if passed else 1),
    ]


def valid_report(model_identity: str = MODEL) -> Doc:
    """A report as the writer makes it: two scenarios, mixed verdicts, one skipped trial."""
    trials = [
        _trial("adds-health-endpoint", 1, "pass", 1200, model_identity),
        _trial("adds-health-endpoint", 2, "fail", 3400, model_identity),
        _trial("adds-health-endpoint", 3, "pass", 2100, model_identity),
        _trial("keeps-tests-green", 1, "pass", 900, model_identity),
        _trial("keeps-tests-green", 2, "timeout", 5000, model_identity),
        _trial("keeps-tests-green", 3, "skipped-budget", 0),
    ]
    state = RunState(
        run_id="20250601T080000Z-0a1b2c",
        started_at=START,
        host=HostIdentity(name="opencode", version="1.18.33", dialect="opencode-v1"),
        model="anthropic/claude-sonnet-4-5",
        scripted=False,
        budget=BudgetRecord(trials=3, timeoutMs=600_000, maxSessions=5, maxTokens=400_000),
        records=keyed(trials),
    )
    report = build_report(
        state,
        [
            ("adds-health-endpoint", "eval/scenarios/health.eval.json", "local", 3),
            ("keeps-tests-green", "node_modules/@acme/review-pack/eval/scenarios/g.eval.json", "@acme/review-pack", 3),
        ],
        finished_at=START + timedelta(minutes=4),
        complete=True,
        exit_status=decide(validation_failed=False, run_level_error=False, verdicts=[t.verdict for t in trials]),
    )
    doc: Doc = json.loads(report.to_json())
    return doc


def _encode(doc: Any) -> bytes:
    return json.dumps(doc, indent=2).encode()


def view_of(data: bytes, directory: Path) -> ProvenanceView | Ignored:
    path = directory / "report.json"
    path.write_bytes(data)
    return provenance_view(path, now=NOW)


# --- the valid report ------------------------------------------------------------------------


def test_valid_report_gives_exactly_the_provenance_view(tmp_path: Path) -> None:
    view = view_of(_encode(valid_report()), tmp_path)
    assert isinstance(view, ProvenanceView)
    assert view.model_dump() == {
        "label": "self-reported evaluation",
        "runDate": "2025-06-01",
        "atlanteVersion": valid_report()["atlanteVersion"],
        "host": {"name": "opencode", "version": "1.18.33", "dialect": "opencode-v1"},
        "model": "anthropic/claude-sonnet-4-5",
        "modelVersion": MODEL,
        # 2 of 3 passed; 1 of the 2 that ran (the skipped one does not count).
        "scenarios": [
            {"name": "adds-health-endpoint", "passRate": 2 / 3},
            {"name": "keeps-tests-green", "passRate": 0.5},
        ],
    }


def test_untrusted_text_is_stripped_and_capped(tmp_path: Path) -> None:
    hostile = "\x1b[2J\x1b]0;pwned\x07claude\u202e\u200b\u2028" + "x" * 5000
    doc = valid_report(model_identity=hostile)
    doc["model"] = hostile
    view = view_of(_encode(doc), tmp_path)
    assert isinstance(view, ProvenanceView)
    for text in (view.model, view.modelVersion):
        assert text is not None and len(text) <= 200
        assert text.startswith("[2J]0;pwnedclaudexxx")  # escapes lose their control bytes
        assert not any(unicodedata.category(c) in ("Cc", "Cf", "Zl") for c in text)


# --- hostile and broken reports --------------------------------------------------------------

SENTINEL = "@@RAW@@"


def _raw(change: Callable[[Doc], Any], literal: str) -> Callable[[Doc], bytes]:
    """Put ``literal`` (JSON text no encoder would produce) where ``change`` put the sentinel."""

    def apply(doc: Doc) -> bytes:
        change(doc)
        return _encode(doc).replace(json.dumps(SENTINEL).encode(), literal.encode())

    return apply


def _const(data: bytes) -> Callable[[Doc], bytes]:
    return lambda doc: data


def _s(i: int = 0) -> Callable[[Doc], Doc]:
    return lambda doc: doc["scenarios"][i]


def _set(getter: Callable[[Doc], Any], key: str | int, value: Any) -> Callable[[Doc], None]:
    def change(doc: Doc) -> None:
        getter(doc)[key] = value

    return change


def _root(doc: Doc) -> Doc:
    return doc


def _t(scenario: int, trial: int) -> Callable[[Doc], Doc]:
    return lambda doc: doc["scenarios"][scenario]["trials"][trial]


def _verdicts(doc: Doc) -> Any:
    return doc["verdicts"]


def _pad_past_cap(doc: Doc) -> bytes:
    text = _encode(doc)
    return text[:-1] + b" " * (MAX_REPORT_BYTES + 1 - len(text)) + b"}"


def _many_scenarios(doc: Doc) -> None:
    doc["scenarios"] = [doc["scenarios"][0]] * 1001


def _many_trials(doc: Doc) -> None:
    doc["scenarios"][0]["trials"] = doc["scenarios"][0]["trials"] * 17  # 51


def _duplicate_scenario(doc: Doc) -> None:
    doc["scenarios"][1] = copy.deepcopy(doc["scenarios"][0])
    doc["verdicts"] = {"pass": 4, "fail": 2, "timeout": 0, "budget-exceeded": 0, "infra-error": 0, "skipped-budget": 0}


def _renamed_scenario(name: str) -> Callable[[Doc], None]:
    def change(doc: Doc) -> None:
        doc["scenarios"][0]["name"] = name
        for trial in doc["scenarios"][0]["trials"]:
            trial["scenario"] = name

    return change


def _drop_trial(doc: Doc) -> None:
    doc["scenarios"][0]["trials"].pop()


def _delete(getter: Callable[[Doc], Any], key: str) -> Callable[[Doc], None]:
    def change(doc: Doc) -> None:
        del getter(doc)[key]

    return change


def _duplicate_key(doc: Doc) -> bytes:
    return _encode(doc).replace(b'"passRate": ', b'"passRate": 1.0, "passRate": ', 1)


# A mutator edits the valid report in place (returning None) or returns the bytes to publish.
Mutator = Callable[[Doc], "bytes | None"]
HOSTILE: list[tuple[str, Mutator, str]] = [
    # not JSON at all
    ("empty-file", _const(b""), "report-malformed"),
    ("truncated", lambda d: _encode(d)[:200], "report-malformed"),
    ("not-utf8", _const(b'{"schema": "\xff\xfe"}'), "report-malformed"),
    ("utf8-bom", lambda d: b"\xef\xbb\xbf" + _encode(d), "report-malformed"),
    ("nan-pass-rate", _raw(_set(_s(), "passRate", SENTINEL), "NaN"), "report-malformed"),
    ("infinite-mean", _raw(_set(_s(), "meanDurationMs", SENTINEL), "Infinity"), "report-malformed"),
    ("negative-infinite-p95", _raw(_set(_s(), "p95DurationMs", SENTINEL), "-Infinity"), "report-malformed"),
    ("overflowing-float", _raw(_set(_s(), "passRate", SENTINEL), "1e999"), "report-malformed"),
    ("huge-integer", _raw(_set(_t(0, 0), "durationMs", SENTINEL), "1" + "0" * 30), "report-malformed"),
    ("absurd-integer", _raw(_set(_root, "exitStatus", SENTINEL), "9" * 100_000), "report-malformed"),
    ("duplicate-key", _duplicate_key, "report-malformed"),
    ("deep-nesting", _raw(_set(_root, "errors", SENTINEL), "[" * 100_000 + "]" * 100_000), "report-malformed"),
    # not this report
    ("top-level-array", _const(b"[]"), "report-invalid"),
    ("top-level-string", _const(b'"atlante/eval-report-v1"'), "report-invalid"),
    ("schema-missing", _delete(_root, "schema"), "report-schema"),
    ("schema-v2", _set(_root, "schema", "atlante/eval-report-v2"), "report-schema"),
    # wrong shape or types
    ("unknown-top-level-field", _set(_root, "certified", True), "report-invalid"),
    ("unknown-trial-field", _set(_t(0, 0), "signedBy", "atlante"), "report-invalid"),
    ("pass-rate-as-string", _set(_s(), "passRate", "0.6666666666666666"), "report-invalid"),
    ("pass-rate-above-one", _set(_s(), "passRate", 1.5), "report-invalid"),
    ("pass-rate-negative", _set(_s(), "passRate", -0.25), "report-invalid"),
    ("exit-status-bool", _set(_root, "exitStatus", True), "report-invalid"),
    ("exit-status-out-of-range", _set(_root, "exitStatus", 7), "report-invalid"),
    ("unknown-verdict", _set(_t(0, 0), "verdict", "certified-pass"), "report-invalid"),
    ("negative-verdict-count", _set(_verdicts, "fail", -1), "report-invalid"),
    ("missing-verdict-count", _delete(_verdicts, "timeout"), "report-invalid"),
    ("scenarios-not-a-list", _set(_root, "scenarios", {"a": 1}), "report-invalid"),
    ("started-not-iso", _set(_root, "startedAt", "yesterday"), "report-invalid"),
    ("started-with-offset", _set(_root, "startedAt", "2025-06-01T08:00:00+02:00"), "report-invalid"),
    ("started-month-13", _set(_root, "startedAt", "2025-13-01T08:00:00.000Z"), "report-invalid"),
    ("atlante-version-not-a-version", _set(_root, "atlanteVersion", "latest"), "report-invalid"),
    ("atlante-version-with-markup", _set(_root, "atlanteVersion", "1.0.0<script>"), "report-invalid"),
    (
        "host-version-banner",
        _set(lambda d: d["host"], "version", "2.1.197 (Claude Code)"),
        "report-invalid",
    ),
    ("unknown-host", _set(lambda d: d["host"], "name", "cursor"), "report-invalid"),
    # unsafe sizes
    ("oversized-file", _pad_past_cap, "report-too-large"),
    ("too-many-scenarios", _many_scenarios, "report-too-large"),
    ("too-many-trials", _many_trials, "report-too-large"),
    # not a completed run
    ("incomplete-run", _set(_root, "complete", False), "report-incomplete"),
    ("interrupted-run", _set(_root, "interrupted", True), "report-incomplete"),
    # inconsistent with itself
    ("no-host", _set(_root, "host", None), "report-inconsistent"),
    ("no-scenarios", _set(_root, "scenarios", []), "report-inconsistent"),
    ("pass-rate-inflated", _set(_s(), "passRate", 1.0), "report-inconsistent"),
    ("mean-understated", _set(_s(), "meanDurationMs", 100.0), "report-inconsistent"),
    ("p95-understated", _set(_s(1), "p95DurationMs", 900.0), "report-inconsistent"),
    ("tokens-understated", _set(lambda d: d["scenarios"][0]["totals"], "tokens", 1), "report-inconsistent"),
    ("cost-hidden", _set(lambda d: d["scenarios"][0]["totals"], "costUsd", None), "report-inconsistent"),
    ("trigger-rate-invented", _set(_s(), "triggerRates", [{"kind": "skill", "name": "tidy", "used": 3, "trials": 3,
                                                            "rate": 1.0, "interval": None, "wanted": "use"}]),
     "report-inconsistent"),
    ("duplicate-scenario-name", _duplicate_scenario, "report-inconsistent"),
    ("verdict-counts-rigged", _set(_verdicts, "pass", 6), "report-inconsistent"),
    ("finished-before-started", _set(_root, "finishedAt", "2025-05-31T08:00:00.000Z"), "report-inconsistent"),
    ("finished-in-the-future", _set(_root, "finishedAt", "2099-01-01T00:00:00.000Z"), "report-inconsistent"),
    ("scenario-name-traversal", _renamed_scenario("../../etc/passwd"), "report-inconsistent"),
    ("scenario-name-bidi", _renamed_scenario("adds\u202ehealth"), "report-inconsistent"),
    ("scenario-name-huge", _renamed_scenario("a" * 10_000), "report-inconsistent"),
    ("trial-of-another-scenario", _set(_t(0, 1), "scenario", "keeps-tests-green"), "report-inconsistent"),
    ("trial-missing", _drop_trial, "report-inconsistent"),
    ("trial-number-repeated", _set(_t(0, 2), "trial", 1), "report-inconsistent"),
    ("negative-duration", _set(_t(0, 0), "durationMs", -5), "report-inconsistent"),
    ("negative-cost", _set(_t(0, 0), "costUsd", -1.0), "report-inconsistent"),
    ("negative-tokens", _set(lambda d: d["scenarios"][0]["trials"][0]["usage"], "inputTokens", -100), "report-inconsistent"),
    ("skipped-with-duration", _set(_t(1, 2), "durationMs", 10), "report-inconsistent"),
    ("exit-zero-despite-failures", _set(_root, "exitStatus", 0), "report-inconsistent"),
    ("exit-status-validation", _set(_root, "exitStatus", 2), "report-inconsistent"),
    ("model-version-swapped", _set(_root, "modelVersion", "claude-opus-9"), "report-inconsistent"),
]


def test_there_are_at_least_thirty_hostile_reports() -> None:
    assert len(HOSTILE) >= 30
    assert len({name for name, _, _ in HOSTILE}) == len(HOSTILE)


@pytest.mark.parametrize(("make", "code"), [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_hostile_report_is_ignored_with_a_reason(
    tmp_path: Path, make: Mutator, code: str
) -> None:
    doc = valid_report()
    published = make(doc)
    result = view_of(_encode(doc) if published is None else published, tmp_path)
    assert isinstance(result, Ignored), result
    assert result.code == code, result.reason
    assert result.reason and len(result.reason) <= 500
    assert not any(unicodedata.category(c) in ("Cc", "Cf") for c in result.reason)


def test_exit_zero_requires_no_recorded_errors(tmp_path: Path) -> None:
    doc = valid_report()
    for scenario in doc["scenarios"]:
        scenario["trials"] = [t for t in scenario["trials"] if t["verdict"] == "pass"]
    # A run that legitimately passed everything would still show; one that also says it
    # hit a run-level error cannot have exited 0.
    doc["errors"] = [{"code": "eval-worker-crashed"}]
    doc["exitStatus"] = 0
    result = view_of(_encode(doc), tmp_path)
    assert isinstance(result, Ignored)


# --- paths a pack declares -------------------------------------------------------------------


@pytest.fixture()
def pack(tmp_path: Path) -> Path:
    root = tmp_path / "pack"
    (root / "eval").mkdir(parents=True)
    (root / "eval" / "report.json").write_bytes(_encode(valid_report()))
    for name in ("adds-health-endpoint", "keeps-tests-green"):  # the suite the report must match
        (root / "eval" / f"{name}.eval.json").write_text(json.dumps({"name": name}))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "report.json").write_bytes(_encode(valid_report()))  # valid: only the path is wrong
    return root


def test_declared_report_inside_the_pack_is_viewed(pack: Path) -> None:
    assert isinstance(pack_report_view(pack, "eval/report.json", now=NOW), ProvenanceView)
    assert isinstance(pack_report_view(pack, "./eval/report.json", now=NOW), ProvenanceView)


def test_symlink_that_stays_inside_the_pack_is_followed(pack: Path) -> None:
    (pack / "published.json").symlink_to(pack / "eval" / "report.json")
    assert isinstance(pack_report_view(pack, "published.json", now=NOW), ProvenanceView)


UNSAFE_LOCATORS: list[tuple[str, Any]] = [
    ("absolute", "/etc/passwd"),
    ("absolute-into-pack", "{pack}/eval/report.json"),
    ("parent", "../outside/report.json"),
    ("parent-in-the-middle", "eval/../../outside/report.json"),
    ("backslash", "eval\\report.json"),
    ("windows-drive", "C:report.json"),
    ("windows-unc", "\\\\server\\share\\report.json"),
    ("empty", ""),
    ("nul-byte", "eval/report.json\x00.txt"),
    ("newline", "eval/report.json\n"),
    ("overlong", "a/" * 600 + "report.json"),
    ("not-a-string", 123),
    ("none", None),
]


@pytest.mark.parametrize("locator", [c[1] for c in UNSAFE_LOCATORS], ids=[c[0] for c in UNSAFE_LOCATORS])
def test_unsafe_locator_is_refused(pack: Path, locator: Any) -> None:
    if isinstance(locator, str):
        locator = locator.replace("{pack}", str(pack))
    result = pack_report_view(pack, locator, now=NOW)
    assert isinstance(result, Ignored) and result.code == "report-unsafe-path", result


def test_symlink_escaping_the_pack_is_refused(pack: Path) -> None:
    (pack / "eval" / "leak.json").symlink_to(pack.parent / "outside" / "report.json")
    (pack / "linked-dir").symlink_to(pack.parent / "outside", target_is_directory=True)
    for locator in ("eval/leak.json", "linked-dir/report.json"):
        result = pack_report_view(pack, locator, now=NOW)
        assert isinstance(result, Ignored) and result.code == "report-unsafe-path", locator


def test_symlink_loop_is_refused(pack: Path) -> None:
    (pack / "loop-a").symlink_to(pack / "loop-b")
    (pack / "loop-b").symlink_to(pack / "loop-a")
    result = pack_report_view(pack, "loop-a", now=NOW)
    assert isinstance(result, Ignored) and result.code == "report-unsafe-path"


def test_special_files_and_missing_paths(pack: Path) -> None:
    os.mkfifo(pack / "eval" / "fifo.json")  # would block a naive reader forever
    sparse = pack / "eval" / "huge.json"
    with sparse.open("wb") as handle:
        handle.truncate(MAX_REPORT_BYTES * 4)
    cases = {
        "eval": "report-unsafe",
        "eval/fifo.json": "report-unsafe",
        "eval/huge.json": "report-too-large",
        "eval/absent.json": "report-missing",
    }
    for locator, code in cases.items():
        result = pack_report_view(pack, locator, now=NOW)
        assert isinstance(result, Ignored) and result.code == code, (locator, result)
    gone = pack_report_view(pack / "no-such-pack", "eval/report.json", now=NOW)
    assert isinstance(gone, Ignored) and gone.code == "report-missing"


# --- the command -----------------------------------------------------------------------------


def test_cmd_prints_the_labelled_view(pack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cmd_pack_report(pack / "eval" / "report.json") == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["label"] == "self-reported evaluation"
    assert [s["passRate"] for s in printed["scenarios"]] == [2 / 3, 0.5]


def test_cmd_reads_the_pack_root_preset(pack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (pack / "atlante.jsonc").write_text(
        '{\n  // the root preset\n  "version": "0.2",\n  "eval": {"scenarios": "eval/*.eval.json",'
        ' "report": "eval/report.json",},\n}\n'
    )
    assert cmd_pack_report(pack) == 0
    assert json.loads(capsys.readouterr().out)["host"]["name"] == "opencode"


@pytest.mark.parametrize(
    ("config", "code"),
    [
        (None, "report-not-declared"),
        ('{"eval": {"scenarios": "x"}}', "report-not-declared"),
        ('{"eval": {"report": 5}}', "report-unsafe-path"),
        ('{"eval": {"report": "../outside/report.json"}}', "report-unsafe-path"),
        ('{"eval": {"report": "a.json", "report": "b.json"}}', "report-not-declared"),
        ("{not jsonc", "report-not-declared"),
        ("[" * 5000, "report-not-declared"),
    ],
)
def test_cmd_ignores_a_pack_without_a_usable_declaration(
    pack: Path, capsys: pytest.CaptureFixture[str], config: str | None, code: str
) -> None:
    if config is not None:
        (pack / "atlante.jsonc").write_text(config)
    assert cmd_pack_report(pack) == 1
    printed = json.loads(capsys.readouterr().out)
    assert printed["ignored"] is True and printed["code"] == code and printed["reason"]


def test_cmd_reports_an_ignored_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "r.json").write_text("{")
    assert cmd_pack_report(tmp_path / "r.json") == 1
    assert json.loads(capsys.readouterr().out)["code"] == "report-malformed"


# --- properties ------------------------------------------------------------------------------

VALID = valid_report()


PATHS = json_paths(VALID)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def _assert_safe_outcome(result: ProvenanceView | Ignored) -> None:
    assert isinstance(result, (ProvenanceView, Ignored))
    if isinstance(result, Ignored):
        assert result.code.startswith("report-") and result.reason
        # The catch-all exists so callers never see a traceback; reaching it means a check is
        # missing, so the properties treat it as a failure.
        assert not result.reason.startswith("unexpected"), result
        return
    ProvenanceView.model_validate(result.model_dump())
    assert result.label == "self-reported evaluation"
    assert all(0.0 <= s.passRate <= 1.0 for s in result.scenarios)
    for text in (result.model, result.modelVersion, *(s.name for s in result.scenarios)):
        assert text is None or (len(text) <= 200 and text.isprintable())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(PATHS), value=JSON_VALUES, delete=st.booleans())
def test_any_structural_mutation_never_crashes(
    tmp_path_factory: pytest.TempPathFactory, path: tuple[Any, ...], value: Any, delete: bool
) -> None:
    doc = copy.deepcopy(VALID)
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    data = json.dumps(doc).encode()  # NaN/Infinity floats become the non-standard tokens
    _assert_safe_outcome(view_of(data, tmp_path_factory.mktemp("mut")))


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_any_byte_mutation_never_crashes(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    raw = bytearray(json.dumps(VALID).encode())
    start = data.draw(st.integers(0, len(raw)))
    end = data.draw(st.integers(start, min(len(raw), start + 40)))
    raw[start:end] = data.draw(st.binary(max_size=40))
    _assert_safe_outcome(view_of(bytes(raw), tmp_path_factory.mktemp("bytes")))


@settings(max_examples=100, deadline=None)
@given(scenario=st.integers(0, 1), claimed=st.floats(0.0, 1.0))
def test_any_tampered_pass_rate_is_ignored(
    tmp_path_factory: pytest.TempPathFactory, scenario: int, claimed: float
) -> None:
    doc = copy.deepcopy(VALID)
    actual = doc["scenarios"][scenario]["passRate"]
    if abs(claimed - actual) < 1e-6:
        claimed = 1.0 if actual < 0.5 else 0.0
    doc["scenarios"][scenario]["passRate"] = claimed
    result = view_of(_encode(doc), tmp_path_factory.mktemp("rate"))
    assert isinstance(result, Ignored) and result.code == "report-inconsistent"


ALL_VERDICTS: list[Verdict] = ["pass", "fail", "timeout", "budget-exceeded", "infra-error", "skipped-budget"]


@settings(max_examples=100, deadline=None)
@given(where=st.sampled_from([(s, t) for s in (0, 1) for t in (0, 1, 2)]), verdict=st.sampled_from(ALL_VERDICTS))
def test_any_rewritten_verdict_is_ignored(
    tmp_path_factory: pytest.TempPathFactory, where: tuple[int, int], verdict: Verdict
) -> None:
    doc = copy.deepcopy(VALID)
    trial = doc["scenarios"][where[0]]["trials"][where[1]]
    if trial["verdict"] == verdict:
        verdict = "pass" if verdict != "pass" else "fail"
    trial["verdict"] = verdict
    result = view_of(_encode(doc), tmp_path_factory.mktemp("verdict"))
    assert isinstance(result, Ignored) and result.code in ("report-inconsistent", "report-invalid")
