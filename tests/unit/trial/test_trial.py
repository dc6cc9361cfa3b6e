"""The trial pipeline (``trial.py``): the pure verdict table, and every step on the test-only echo host.

Runs in-process through ``TrialRunner`` (no pytest-in-pytest, no real CLI), so the whole pipeline —
sandbox, setup, baseline, host session with its token gate, diff, checks, record — is covered in
about a second per trial.  The echo host reaches the runner through the host registry alone.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import FrozenInstanceError, fields
from pathlib import Path
from typing import Any

import pytest

from conftest import Project, scenario_doc
from echohost import NAME, EchoHost
from pytest_atlante.hosts import host_for
from pytest_atlante.hosts.base import HostInfo
from pytest_atlante.hosts.registry import register
from pytest_atlante.records import CheckResult, TrialRecord, Verdict
from pytest_atlante.report.model import new_run_id
from pytest_atlante.sandbox.redact import REDACTED, Secrets, secrets_in_env
from pytest_atlante.sandbox.trialdir import Sandbox
from pytest_atlante.suite.discovery import discover
from pytest_atlante.trial.budget import TrialBudget
from pytest_atlante.trial.runner import Facts, RunnerSettings, TrialRunner, scrubbed, verdict
from pytest_atlante.trial.transcript import Redactor


def expected_verdict(f: Facts) -> Verdict:
    """docs/design.md §4.6 written as the first matching row of a table (independent of ``verdict``)."""
    rows: list[tuple[bool, Verdict]] = [
        (not f.allocated, "skipped-budget"),
        (not f.prepared, "infra-error"),
        (not f.host_started, "infra-error"),
        (f.check_error, "infra-error"),
        (f.host_failed and not f.timed_out and not f.aborted, "infra-error"),
        (f.timed_out, "timeout"),
        (f.aborted, "budget-exceeded"),
        (f.session_killed, "fail"),  # the agent ended its own session (docs/design.md §10)
        (f.check_failed, "fail"),
        (f.escaped, "fail"),
    ]
    return next((v for hit, v in rows if hit), "pass")


def all_facts() -> Iterator[Facts]:
    names = [f.name for f in fields(Facts)]
    for values in itertools.product([False, True], repeat=len(names)):
        yield Facts(**dict(zip(names, values, strict=True)))


def test_verdict_follows_the_precedence_table_for_every_combination() -> None:
    seen = set()
    for facts in all_facts():
        assert verdict(facts) == expected_verdict(facts), facts
        seen.add(verdict(facts))
    assert len(list(all_facts())) == 2 ** len(fields(Facts))
    assert seen == {"pass", "fail", "timeout", "budget-exceeded", "infra-error", "skipped-budget"}


def test_the_budget_view_is_read_only() -> None:
    budget = TrialBudget(timeoutMs=1000, maxTokens=50, maxSessions=1, trials=1, allocated=True)
    with pytest.raises(FrozenInstanceError):
        budget.maxTokens = 10**9  # type: ignore[misc]


# --------------------------------------------------------------------------- the echo host


@pytest.fixture
def echo(atlante_project: Project) -> Iterator[Project]:
    unregister = register(NAME, EchoHost)
    yield atlante_project
    unregister()


def run_trial(project: Project, spec: dict[str, Any], *, info: HostInfo | None = None, allocated: bool = True,
              max_tokens: int = 10_000, timeout_ms: int = 20_000, **scenario: Any) -> Any:
    project.scenario(scenario_doc(task={"fixture": "eval/fixtures/app", "prompt": json.dumps(spec),
                                        **scenario.pop("task", {})}, **scenario))
    suite = discover(project.root)
    assert not suite.diagnostics, suite.diagnostics
    phases: list[str] = []
    runner = TrialRunner(suite.validated(), new_run_id(__import__("datetime").datetime.now()),
                         info or host_for(NAME).probe({}), sources={}, report_dir=project.root / ".atlante" / "eval" / "run",
                         settings=RunnerSettings(transcripts=False))
    budget = TrialBudget(timeoutMs=timeout_ms, maxTokens=max_tokens, maxSessions=1, trials=1, allocated=allocated)
    record = runner.run(suite.scenarios[0], 1, "node", budget, phases.append)
    return record, phases


WRITES_HELLO = {"write": {"hello.txt": "hello\n"}, "usage": [10, 5]}


def test_a_passing_trial_goes_through_every_step(echo: Project) -> None:
    record, phases = run_trial(echo, WRITES_HELLO)
    assert record.verdict == "pass", record
    assert phases == ["sandbox", "host session", "checks"]
    assert record.usage is not None and record.usage.total == 15 and record.budgetUnmonitored is False
    assert record.changedPaths == ["hello.txt"]  # the host-owned .echo/ is not part of the diff
    assert [c.passed for c in record.checks] == [True, True] and record.modelIdentity == "echo-model"


ECHO_CASES = [
    # (id, spec, runner keywords, verdict, error text)
    ("check-fails", {"usage": [1]}, {}, "fail", None),
    ("budget", {"usage": [100, 100, 100, 100], "gap": 0.2}, {"max_tokens": 150}, "budget-exceeded",
     "cumulative usage 200 exceeded maxTokens=150"),
    ("timeout", {"usage": [1], "sleep": 30}, {"timeout_ms": 1000}, "timeout", "exceeded timeoutMs=1000"),
    ("host-fails", {"write": {"hello.txt": "hello\n"}, "exit": 3}, {}, "infra-error", "host session failed (exit 3)"),
    ("unallocated", WRITES_HELLO, {"allocated": False}, "skipped-budget", None),
    ("setup-fails", WRITES_HELLO, {"task": {"setup": [sys.executable, "-c", "raise SystemExit(4)"]}},
     "infra-error", "failed: exited 4"),
    ("no-host", WRITES_HELLO, {"info": HostInfo(NAME, "1.0.0", NAME, "/nonexistent/echo")},  # type: ignore[arg-type]
     "infra-error", "the host could not start"),
]


@pytest.mark.parametrize(("spec", "keywords", "want", "error"), [c[1:] for c in ECHO_CASES], ids=[c[0] for c in ECHO_CASES])
def test_each_way_a_trial_ends(echo: Project, spec: dict[str, Any], keywords: dict[str, Any], want: Verdict,
                               error: str | None) -> None:
    record, _ = run_trial(echo, spec, **keywords)
    assert record.verdict == want, record
    if error is not None:
        assert error in (record.error or ""), record.error
    if want == "skipped-budget":
        assert record.checks == [] and record.durationMs == 0


def test_a_write_outside_the_sandbox_is_an_escape_and_never_a_pass(echo: Project) -> None:
    record, _ = run_trial(echo, {**WRITES_HELLO, "write": {"hello.txt": "hello\n", str(echo.root / "escaped.txt"): "x"}})
    assert record.verdict == "fail" and record.escapes == ["escaped.txt"]
    assert all(c.passed for c in record.checks)  # the escape alone fails it, and says where
    assert record.error == "the trial changed 1 path(s) outside its sandbox: escaped.txt"


def test_a_known_credential_never_leaves_the_trial(echo: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "tok-0123456789-parent"
    monkeypatch.setenv("ATLANTE_TEST_TOKEN", secret)
    record, _ = run_trial(echo, {"write": {"hello.txt": "hello\n", f"leak-{secret}.txt": f"key={secret}\n"}},
                          checks=[{"type": "command", "run": ["cat", f"leak-{secret}.txt"], "outputMatches": "nothing"}])
    assert secret not in record.model_dump_json()
    assert "+key=<redacted>" in (record.diff or "") and "leak-<redacted-1>.txt" in record.changedPaths
    assert record.checks[0].output == "key=<redacted>\n"


def test_the_agent_cannot_choose_what_the_report_hides(echo: Project) -> None:
    """Issue 26: strings the agent writes into its login file after the session started are not
    secrets, so a changed path, the diff, a check's message and an escape keep their names."""
    login = {"echo": {"token": "stolen-notes-of-the-agent.txt"}, "api_token": "escaped-by-name-of-the-agent.txt", "password": "allowed-only"}
    record, _ = run_trial(echo, {"write": {"stolen-notes-of-the-agent.txt": "x\n", str(echo.root / "escaped-by-name-of-the-agent.txt"): "y",
                                           "../home/.echo-login.json": json.dumps(login)}},
                          checks=[{"type": "diff-allowlist", "allow": ["allowed-only"]}])
    assert record.verdict == "fail" and "stolen-notes-of-the-agent.txt" in record.changedPaths, record
    assert "+++ b/stolen-notes-of-the-agent.txt" in (record.diff or "")
    assert record.checks[0].message == "diff-allowlist: 1 changed path(s) outside the allowlist: stolen-notes-of-the-agent.txt"
    assert record.escapes == ["escaped-by-name-of-the-agent.txt"] and "escaped-by-name-of-the-agent.txt" in (record.error or "")
    assert REDACTED not in record.model_dump_json()


KEY_SHAPE = "sk-ant-" + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"
KNOWN = "tok-0123456789-known"
DEPLOY = "deploy-value-0123456789"
SAME_TEXTS = [  # (text, what the report and the transcript must both make of it)
    (f"token={KNOWN}", f"token={REDACTED}"),
    (f"DEPLOY_PRIVATE={DEPLOY}\n", f"DEPLOY_PRIVATE={REDACTED}\n"),
    (f"+key={KEY_SHAPE} and sk-proj-0123456789abcdefghij", f"+key={REDACTED} and {REDACTED}"),
    ("curl -H 'Authorization: Bearer abcdefghijklmnop0123'", f"curl -H 'Authorization: {REDACTED}'"),
    (f"{KNOWN}/{DEPLOY}/{KEY_SHAPE}", f"{REDACTED}/{REDACTED}/{REDACTED}"),
    ("nothing secret: sk-short, KEY=1, risk", "nothing secret: sk-short, KEY=1, risk"),
]


@pytest.mark.parametrize(("text", "want"), SAME_TEXTS, ids=["known", "deploy-private", "sk-shape", "bearer", "mixed", "plain"])
def test_the_report_and_the_transcript_redact_a_text_alike(tmp_path: Path, text: str, want: str) -> None:
    """One definition of a secret: the record's scrubbing and the transcript's redactor agree."""
    secrets = Secrets(secrets_in_env({"ATLANTE_TEST_TOKEN": KNOWN, "DEPLOY_PRIVATE": DEPLOY, "PATH": "/usr/bin"}))
    sb = Sandbox(trial_dir=tmp_path, root=tmp_path / "sandbox", home=tmp_path / "home", git_dir=tmp_path / "git")
    rec = TrialRecord(scenario="s", trial=1, nodeId="n", verdict="fail", diff=text, error=text, changedPaths=[text],
                      checks=[CheckResult(index=0, type="command", passed=False, message=text, output=text)])
    report = scrubbed(rec, sb, secrets)
    assert [report.diff, report.error, report.checks[0].message, report.checks[0].output] == [want] * 4
    # a name keeps showing that something is there: each secret in it becomes a numbered placeholder
    numbered = re.escape(want).replace(re.escape(REDACTED), r"<redacted-\d+>")
    assert re.fullmatch(numbered, report.changedPaths[0]), report.changedPaths
    transcript = Redactor(secrets, [str(sb.root), str(sb.trial_dir), str(sb.home)])
    assert transcript(text) == want


def test_a_private_variable_and_a_key_shape_never_leave_the_trial(echo: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEPLOY_PRIVATE", DEPLOY)
    record, _ = run_trial(echo, {"write": {"hello.txt": "hello\n", "leak.txt": f"deploy={DEPLOY}\nkey={KEY_SHAPE}\n"}},
                          checks=[{"type": "command", "run": ["cat", "leak.txt"], "outputMatches": "nothing"}])
    dumped = record.model_dump_json()
    assert DEPLOY not in dumped and "sk-ant-" not in dumped
    assert f"+deploy={REDACTED}" in (record.diff or "") and f"+key={REDACTED}" in (record.diff or "")
    assert record.checks[0].output == f"deploy={REDACTED}\nkey={REDACTED}\n"


def test_a_name_that_is_not_utf8_gives_a_normal_fail_that_names_it(echo: Project) -> None:
    """Issue 22 item 2: such a name made the record unserialisable and ended the whole run."""
    # JSON carries the surrogate escapes; the echo CLI's open() turns them back into the raw bytes.
    outside = str(echo.root / "esc\udcff.txt")
    record, _ = run_trial(echo, {"write": {"hello.txt": "hello\n", "bad\udcff\udcfe.txt": "x", "nl\nname\x1b.txt": "y",
                                           outside: "z"}},
                          checks=[{"type": "diff-allowlist", "allow": ["hello.txt"]},
                                  {"type": "command", "run": ["ls"]}])
    assert record.verdict == "fail", record
    assert record.changedPaths == ["bad\\xff\\xfe.txt", "hello.txt", "nl\\nname\\x1b.txt"]
    assert record.checks[0].message == ("diff-allowlist: 2 changed path(s) outside the allowlist: "
                                        "bad\\xff\\xfe.txt, nl\\nname\\x1b.txt")
    assert record.escapes == ["esc\\xff.txt"] and record.error is not None and "esc\\xff.txt" in record.error
    assert record.diff is not None and "diff --git a/bad\\xff\\xfe.txt b/bad\\xff\\xfe.txt" in record.diff
    assert TrialRecord.model_validate_json(record.model_dump_json()) == record


def test_the_echo_host_is_reached_through_the_registry_only(echo: Project, tmp_path: Path) -> None:
    assert isinstance(host_for(NAME), EchoHost)
    with pytest.raises(ValueError, match="unknown host 'nope'"):
        host_for("nope")


def test_a_scripted_trial_plays_the_script_discovery_read(echo: Project) -> None:
    """Discovery keeps the parsed script on the entry; the trial plays it without reading the file."""
    from pytest_atlante.suite.script import load_script

    echo.scenario(scenario_doc(task={"fixture": "eval/fixtures/app", "prompt": json.dumps(WRITES_HELLO)}))
    script_file = echo.script("writes-hello", [{"text": "Done."}])
    suite = discover(echo.root, scripted=True)
    assert not suite.diagnostics, suite.diagnostics
    entry = suite.scenarios[0]
    assert entry.script == script_file and entry.parsed_script == load_script(script_file)
    script_file.unlink()  # a re-read would fail the trial now
    runner = TrialRunner(suite.validated(), new_run_id(__import__("datetime").datetime.now()), host_for(NAME).probe({}),
                         sources={}, report_dir=echo.root / ".atlante" / "eval" / "run",
                         settings=RunnerSettings(scripted=True, transcripts=False))
    budget = TrialBudget(timeoutMs=20_000, maxTokens=10_000, maxSessions=1, trials=1, allocated=True)
    record = runner.run(entry, 1, "node", budget, lambda _: None)
    assert record.verdict == "pass", record
    assert record.scriptedTurns == 0  # the echo host never asks the scripted model


def test_a_suite_without_an_eval_section_does_not_validate(echo: Project) -> None:
    suite = discover(echo.root)
    valid = suite.validated()
    assert (valid.eval, valid.config, valid.scenarios) == (suite.eval, suite.config, suite.scenarios)
    (echo.root / "atlante.jsonc").unlink()
    missing = discover(echo.root)
    assert missing.eval is None
    with pytest.raises(ValueError, match="no valid eval configuration"):
        missing.validated()
