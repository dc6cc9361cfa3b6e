"""Scaffolding for integration tests that run whole eval trials through a real host CLI.

Host-neutral on purpose: a ``TrialCase`` is a scenario document plus its scripted-model turns plus
what the trial must produce (verdict and per-check outcome).  ``write_project`` lays the cases out
for either host (``host="claude-code"`` or ``"opencode"``), so an OpenCode matrix reuses the same
cases by switching one argument.  Scripts keep dependent actions in separate turns because OpenCode
runs one turn's tool calls concurrently (docs/scripted-model.md).

Running goes through pytester (``run_eval``) and reads ``<out>/report.json`` back with the report's
own pydantic model.  ``normalise`` drops what legitimately differs between two runs of the same
suite (ids, timestamps, durations, costs) so a serial and an ``-n 2`` run can be compared whole.

This module is also a tiny pytest plugin (``-p trial_helpers`` with its directory on PYTHONPATH):
when ``ATLANTE_TEST_REQUEST_LOG`` names a directory, every scripted-model server of the run writes
the requests it saw there when it stops.  The engine keeps its server private; this spy lets a test
see what the host sent (e.g. the system prompt of an ``--agent`` session) without changing it.
"""

from __future__ import annotations

import json
import os
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pytest
from pydantic import BaseModel

from pytest_atlante.hosts.names import HostName
from pytest_atlante.records import CheckResult, TrialRecord, Verdict
from pytest_atlante.report.model import EvalReport
from pytest_atlante.sandbox.trialdir import SANDBOX_DIR_PREFIX

if TYPE_CHECKING:
    from conftest import Project

CheckOutcome = Literal["pass", "fail", "error", "timeout"]
# ``{scenario: (verdict, per-check outcomes)}``
OutcomeTable = dict[str, tuple[Verdict, tuple[CheckOutcome, ...]]]

REQUEST_LOG_ENV = "ATLANTE_TEST_REQUEST_LOG"
HELPERS_DIR = Path(__file__).resolve().parent
# Body of the harness agent ``helper`` in every project written here: a test can look for it in
# what the host sent to the model.
AGENT_SENTINEL = "AGENT-BODY-SENTINEL-7f3c: you are the helper agent and write small files."
FIXTURE_FILES: dict[str, str] = {
    "README.md": "# app\n",
    "config.ini": "[app]\nmode = prod\n",
    "src/app.py": "def main():\n    return 'app'\n",
}
# Report keys that differ between two runs of the same suite (anywhere in the document).
VOLATILE_KEYS = frozenset({
    "runId", "startedAt", "finishedAt", "durationMs", "hostDurationMs", "meanDurationMs",
    "p95DurationMs", "costUsd",
})  # fmt: skip


# --------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class TrialCase:
    """One scenario, its scripted turns, and the outcome its single trial must have."""

    name: str
    turns: list[dict[str, Any]]
    checks: list[dict[str, Any]]
    verdict: Verdict
    # One entry per check, in order: what that check must report; ``None`` when no check may run
    # (the trial ends before its checks, e.g. a failed setup).
    outcomes: tuple[CheckOutcome, ...] | None
    prompt: str = "Do the task."
    setup: list[str] | None = None
    agent: str | None = None
    timeout_ms: int | None = None
    version: str = "0.1"  # "0.2" for the trajectory check types

    def __post_init__(self) -> None:
        if self.outcomes is not None and len(self.outcomes) != len(self.checks):
            raise ValueError(f"{self.name}: {len(self.checks)} checks but {len(self.outcomes)} expected outcomes")

    def document(self) -> dict[str, Any]:
        from conftest import (
            scenario_doc,  # lazy: the plugin half of this module runs without the repo root
        )

        task: dict[str, Any] = {"fixture": "eval/fixtures/app", "prompt": self.prompt}
        if self.setup is not None:
            task["setup"] = self.setup
        if self.agent is not None:
            task["agent"] = self.agent
        overrides: dict[str, Any] = {"task": task, "checks": self.checks}
        if self.timeout_ms is not None:
            overrides["budget"] = {"timeoutMs": self.timeout_ms}
        if self.version != "0.1":
            overrides.update({"version": self.version,
                              "$schema": f"https://atlante.sh/schema/v{self.version}/eval-scenario.json"})
        return scenario_doc(self.name, **overrides)


def write_turn(path: str, content: str, text: str = "Writing.") -> dict[str, Any]:
    return {"text": text, "actions": [{"type": "write", "path": path, "content": content}]}


def bash_turn(command: str, text: str = "Running a command.") -> dict[str, Any]:
    return {"text": text, "actions": [{"type": "bash", "command": command}]}


DONE: dict[str, Any] = {"text": "Done."}


def new_marker() -> str:
    """A unique word to put in a process's command line, so a test can look for that process later."""
    return f"MARKER-{uuid.uuid4().hex}"


def write_project(root: Path, host: HostName, cases: list[TrialCase], *, harness: dict[str, Any] | None = None,
                  files: dict[str, str] | None = None, **eval_overrides: Any) -> Path:
    """A valid, built eval project at ``root`` holding one scenario document per case.

    ``harness`` adds entries to the config's ``harness`` (e.g. ``commands``) beside the usual agent
    and skill; ``files`` (project-relative path → text) are written before the build, so a harness
    entry can name them."""
    from conftest import Project, config_doc

    project = Project(root)
    root.mkdir(parents=True)
    config = config_doc(host, **eval_overrides)
    config["harness"].update(harness or {})
    project.config(config)
    for rel, content in (files or {}).items():
        project.write(rel, content)
    project.write("harness/helper.md", AGENT_SENTINEL + "\n")
    project.write("harness/tidy/SKILL.md", "Keep files tidy.\n")
    for rel, content in FIXTURE_FILES.items():
        project.write(f"eval/fixtures/app/{rel}", content)
    for case in cases:
        project.scenario(case.document(), file=f"eval/scenarios/{case.name}.eval.json")
        project.script(case.name, case.turns)
    project.build()
    return root


# --------------------------------------------------------------------------- shared cases

GIT_ID = "-c user.name=agent -c user.email=agent@example.invalid"
SANDBOX_RMTREE = "python3 -c \"import shutil; shutil.rmtree('.git')\""  # `rm -rf` is denied by the policy


def sleeper(marker: str, flag: str) -> str:
    """A shell command for a long sleep whose own process carries ``marker`` in its command line.

    It creates ``flag`` first, so the trial's diff proves the sleep had started.
    """
    return f"python3 -c 'import pathlib, time; pathlib.Path(\"{flag}\").touch(); time.sleep(300)' {marker}"


# A check command that outlives its timeout carries this marker, so the test can prove it was killed.
CHECK_SLEEP_MARKER = new_marker()

ALL_CHECKS_PASS = TrialCase(
    name="writes-hello",
    turns=[write_turn("hello.txt", "hello\n"), DONE],
    checks=[
        {"type": "command", "run": ["python3", "-c", "import pathlib, sys; sys.exit(pathlib.Path('hello.txt').read_text() != 'hello\\n')"]},
        {"type": "command", "run": ["cat", "hello.txt"], "outputMatches": "(?m)^hello$"},
        {"type": "file-exists", "path": "hello.txt"},
        {"type": "file-absent", "path": "bye.txt"},
        {"type": "file-unchanged", "path": "README.md"},
        {"type": "file-contains", "path": "hello.txt", "pattern": "hello"},
        {"type": "file-contains", "path": "hello.txt", "pattern": "(?m)^hel+o$", "regex": True},
        {"type": "diff-allowlist", "allow": ["hello.txt"]},
    ],
    verdict="pass",
    outcomes=("pass",) * 8,
)

ALL_CHECKS_FAIL = TrialCase(
    name="fails-every-check",
    turns=[
        write_turn("hello.txt", "goodbye\n"),
        write_turn("bye.txt", "bye\n"),
        {"text": "Reading.", "actions": [{"type": "read", "path": "README.md"}]},
        {"text": "Editing.", "actions": [{"type": "edit", "path": "README.md", "old": "# app", "new": "# renamed app"}]},
        DONE,
    ],
    checks=[
        {"type": "command", "run": ["python3", "-c", "import sys; print('checking'); sys.exit(3)"]},
        {"type": "command", "run": ["cat", "hello.txt"], "outputMatches": "(?m)^hello$"},
        {"type": "file-exists", "path": "missing.txt"},
        {"type": "file-absent", "path": "bye.txt"},
        {"type": "file-unchanged", "path": "README.md"},
        {"type": "file-contains", "path": "hello.txt", "pattern": "hello"},
        {"type": "file-contains", "path": "hello.txt", "pattern": "(?m)^hel+o$", "regex": True},
        {"type": "diff-allowlist", "allow": ["hello.txt"]},
    ],
    verdict="fail",
    outcomes=("fail",) * 8,
)

CHECK_TIMES_OUT = TrialCase(
    name="check-times-out",
    turns=[write_turn("hello.txt", "hello\n"), DONE],
    checks=[
        {"type": "command", "run": ["python3", "-c", "import time; time.sleep(300)", CHECK_SLEEP_MARKER], "timeoutMs": 1500},
        {"type": "file-exists", "path": "hello.txt"},
    ],
    verdict="fail",
    outcomes=("timeout", "pass"),
)

CHECK_CANNOT_START = TrialCase(
    name="check-cannot-start",
    turns=[write_turn("hello.txt", "hello\n"), DONE],
    checks=[
        {"type": "command", "run": ["atlante-no-such-program-3b1e"]},
        {"type": "file-exists", "path": "hello.txt"},
    ],
    verdict="infra-error",
    outcomes=("error", "pass"),
)

SETUP_FAILS = TrialCase(
    name="setup-fails",
    setup=["python3", "-c", "import sys; print('setup broke'); sys.exit(4)"],
    turns=[write_turn("hello.txt", "hello\n"), DONE],
    checks=[{"type": "file-exists", "path": "hello.txt"}],
    verdict="infra-error",
    outcomes=None,
)

MATRIX = [ALL_CHECKS_PASS, ALL_CHECKS_FAIL, CHECK_TIMES_OUT, CHECK_CANNOT_START, SETUP_FAILS]
# The matrix rows whose point is a check the runner runs after the session (one that times out, one
# that cannot start): the same on every host, so only ``ONE_HOST`` runs them; their sessions are
# ``ALL_CHECKS_PASS``'s again.
RUNNER_ONLY_ROWS = frozenset({CHECK_TIMES_OUT.name, CHECK_CANNOT_START.name})


def matrix_for(host: HostName) -> list[TrialCase]:
    """``MATRIX`` as ``host`` runs it: every row on ``ONE_HOST``, the others without ``RUNNER_ONLY_ROWS``."""
    from conftest import ONE_HOST

    return MATRIX if host == ONE_HOST else [case for case in MATRIX if case.name not in RUNNER_ONLY_ROWS]
# What the first line of each non-passing matrix trial's failure text says after
# "<name> trial 1: <verdict>: ": the first failed check (or the setup) and why.
FIRST_LINES = {
    "fails-every-check": ("command `python3 -c", "exit 3 (expected 0)"),
    "check-times-out": ("command `python3 -c 'import time; time.sleep(300)'", "timed out after 1500 ms"),
    "check-cannot-start": ("command `atlante-no-such-program-3b1e`", "could not start"),
    "setup-fails": ("setup python3 -c", "failed: exited 4"),
}


def commit_all(message: str) -> str:
    return f"git add -A && git {GIT_ID} commit -qm {message}"


def hiding_cases() -> list[TrialCase]:
    """Agents that change files, then try to make git say nothing changed."""
    setup = ["sh", "-c", f"git init -q && {commit_all('baseline')}"]
    checks = [{"type": "diff-allowlist", "allow": ["allowed.txt"]},
              {"type": "command", "run": ["git", "status", "--porcelain"], "outputMatches": r"\S"}]
    tampering = {
        "hides-with-reset-hard": f"{commit_all('work')} && git reset -q --hard HEAD",
        "hides-by-rewriting-git": f"{SANDBOX_RMTREE} && git init -q && {commit_all('work')}",
    }
    cases = [
        TrialCase(
            name=name,
            setup=setup,
            turns=[write_turn("sneaky.txt", "sneaky\n"), bash_turn("echo tampered >> README.md"), bash_turn(command), DONE],
            checks=checks,
            verdict="fail",
            # git itself is fooled (a clean status); the diff-allowlist is not.
            outcomes=("fail", "fail"),
        )
        for name, command in tampering.items()
    ]
    cases.append(TrialCase(
        name="hides-by-deleting-git",
        setup=setup,
        turns=[write_turn("sneaky.txt", "sneaky\n"), bash_turn("echo tampered >> README.md"), bash_turn(SANDBOX_RMTREE), DONE],
        checks=checks[:1],
        verdict="fail",
        outcomes=("fail",),
    ))
    return cases


def session_timeout_case(marker: str, timeout_ms: int = 8000) -> TrialCase:
    """The host session outlives ``budget.timeoutMs``: a tool shell sleeps in the foreground, and a
    second sleeper has left the process group with ``setsid``.  Both carry ``marker``."""
    command = f"(setsid {sleeper(marker + '-detached', 'detached.txt')} &) ; {sleeper(marker, 'sleeping.txt')}"
    return TrialCase(
        name="session-times-out",
        timeout_ms=timeout_ms,
        turns=[bash_turn(command), DONE],
        checks=[{"type": "file-exists", "path": "sleeping.txt"}],
        verdict="timeout",
        outcomes=("pass",),
    )


AGENT_CASE = TrialCase(
    name="uses-helper-agent",
    agent="helper",
    turns=[write_turn("hello.txt", "hello\n"), DONE],
    checks=[{"type": "file-contains", "path": "hello.txt", "pattern": "hello"}],
    verdict="pass",
    outcomes=("pass",),
)


# --------------------------------------------------------------------------- running


@dataclass
class EvalRun:
    result: pytest.RunResult
    out: Path
    report_text: str | None

    @property
    def report(self) -> EvalReport:
        assert self.report_text is not None, f"no report.json in {self.out}\n{self.output()}"
        return EvalReport.model_validate_json(self.report_text)

    def output(self) -> str:
        return "\n".join(self.result.outlines + self.result.errlines)

    def trial(self, scenario: str, number: int = 1) -> TrialRecord:
        for record in self.report.scenarios:
            for trial in record.trials:
                if trial.scenario == scenario and trial.trial == number:
                    return trial
        raise AssertionError(f"no trial {number} of {scenario!r} in the report:\n{self.output()}")


def run_eval(pytester: pytest.Pytester, project: Path, out: Path, *args: str,
             scripted: bool = True, subprocess: bool = True, timeout_s: float = 300) -> EvalRun:
    """``pytest --atlante-eval [--atlante-scripted] --atlante-project P --atlante-out O ARGS``."""
    argv = ["--atlante-eval", *(["--atlante-scripted"] if scripted else []), "--atlante-project", str(project),
            "--atlante-out", str(out), "-p", "no:cacheprovider", *args]
    if subprocess:
        result = pytester.runpytest_subprocess(*argv, timeout=timeout_s)
    else:
        result = pytester.runpytest_inprocess(*argv)
    path = out / "report.json"
    return EvalRun(result, out, path.read_text(encoding="utf-8") if path.exists() else None)


def with_request_log(monkeypatch: pytest.MonkeyPatch, log_dir: Path) -> list[str]:
    """Arguments and environment that load this module as the request-log plugin in the run."""
    log_dir.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv(REQUEST_LOG_ENV, str(log_dir))
    existing = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(HELPERS_DIR) + (os.pathsep + existing if existing else ""))
    return ["-p", "trial_helpers"]


def logged_requests(log_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Requests written by the request-log plugin, keyed by trial directory (``<scenario>-<trial>``)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(log_dir.glob("*.json")):
        entry = json.loads(path.read_text(encoding="utf-8"))
        found.setdefault(entry["trial"], []).extend(entry["requests"])
    return found


def system_text(request: dict[str, Any]) -> str:
    """The system prompt of a model request, as one string: Anthropic Messages keep it in ``system``
    (Claude Code), OpenAI chat completions in ``role: system`` messages (OpenCode's provider)."""
    body = request.get("body") or {}
    if "system" in body:
        return _text_of(body["system"])
    if isinstance(body.get("systemInstruction"), dict):  # Gemini CLI: generateContent's systemInstruction
        return _text_of(body["systemInstruction"].get("parts"))
    messages = body.get("messages")
    return "\n".join(_text_of(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "system") \
        if isinstance(messages, list) else ""


def _text_of(content: Any) -> str:
    """A plain string, or the ``text`` of each block of a content list."""
    if isinstance(content, list):
        return "\n".join(block.get("text", "") for block in content if isinstance(block, dict))
    return content if isinstance(content, str) else ""


# --------------------------------------------------------------------------- reading results


def check_outcome(check: CheckResult) -> CheckOutcome:
    if check.error:
        return "error"
    if check.timedOut:
        return "timeout"
    return "pass" if check.passed else "fail"


def outcome_table(run: EvalRun, cases: list[TrialCase]) -> OutcomeTable:
    """What the report says about the given cases."""
    table: OutcomeTable = {}
    for case in cases:
        trial = run.trial(case.name)
        table[case.name] = (trial.verdict, tuple(check_outcome(c) for c in trial.checks))
    return table


def expected_table(cases: list[TrialCase]) -> OutcomeTable:
    return {case.name: (case.verdict, case.outcomes or ()) for case in cases}


def normalise(report: BaseModel, volatile: frozenset[str] = VOLATILE_KEYS) -> Any:
    """The report as plain JSON without the ``volatile`` values, which differ between runs of the same suite."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in volatile}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(report.model_dump(mode="json", by_alias=True))


def assert_clean_run(run: EvalRun, private_tmp: Path) -> None:
    """What every finished run must hold: a valid report without sandbox paths, and no sandbox left
    in ``private_tmp`` (the run's $TMPDIR).  Only sandboxes count: the host's version probe runs in
    the user's own environment, where OpenCode makes its ``$TMPDIR/opencode`` as it always does."""
    assert run.report_text is not None, run.output()
    assert run.report.exitStatus == run.result.ret
    assert_no_sandbox_path(run.report_text)
    assert [p.name for p in private_tmp.iterdir() if p.name.startswith(SANDBOX_DIR_PREFIX)] == []


def assert_matrix_evidence(run: EvalRun, cases: list[TrialCase]) -> None:
    """The matrix trial records (``cases``, ``MATRIX`` or a host's part of it) carry the evidence:
    messages, exit codes, outputs, diff."""
    names = {case.name for case in cases}
    passing = run.trial("writes-hello")
    assert passing.verdict == "pass" and passing.error is None
    assert passing.changedPaths == ["hello.txt"]
    assert passing.diff is not None and "+hello" in passing.diff
    assert passing.usage is not None and passing.usage.total > 0

    failing = run.trial("fails-every-check")
    messages = [c.message for c in failing.checks]
    assert failing.checks[0].exitCode == 3 and "checking" in (failing.checks[0].output or "")
    assert "exit 3 (expected 0)" in messages[0]
    assert "output does not match" in messages[1] and "goodbye" in messages[1]
    assert messages[2] == "file-exists missing.txt: does not exist"
    assert messages[3] == "file-absent bye.txt: file exists"
    assert messages[4].startswith("file-unchanged README.md: content changed")
    assert messages[5] == 'file-contains hello.txt: pattern "hello" not found'
    assert messages[6] == 'file-contains hello.txt: regex "(?m)^hel+o$" not found'
    assert messages[7] == "diff-allowlist: 2 changed path(s) outside the allowlist: README.md, bye.txt"
    assert failing.changedPaths == ["README.md", "bye.txt", "hello.txt"]
    assert failing.diff is not None and "+# renamed app" in failing.diff

    if CHECK_TIMES_OUT.name in names:
        timed_out = run.trial(CHECK_TIMES_OUT.name).checks[0]
        assert timed_out.timedOut and not timed_out.passed and not timed_out.error
        assert "timed out after 1500 ms" in timed_out.message

    if CHECK_CANNOT_START.name in names:
        cannot_start = run.trial(CHECK_CANNOT_START.name)
        assert cannot_start.checks[0].error and "could not start" in cannot_start.checks[0].message

    setup = run.trial("setup-fails")
    assert setup.error is not None and "exited 4" in setup.error and "setup broke" in setup.error
    assert setup.checks == [] and setup.usage is None  # no host session, no checks


def assert_junit_first_lines(junit: Path, run: EvalRun, cases: list[TrialCase]) -> None:
    """JUnit XML of a matrix run of ``cases``: one failure per non-passing trial, whose first line
    says what failed (``FIRST_LINES``)."""
    failures = junit_failures(junit)
    first_lines = {name: line for name, line in FIRST_LINES.items() if name in {case.name for case in cases}}
    assert set(failures) == {f"{name}[trial-1]" for name in first_lines}
    for name, (subject, why) in first_lines.items():
        first_line = failures[f"{name}[trial-1]"].splitlines()[0]
        verdict = run.trial(name).verdict
        assert first_line.startswith(f"{name} trial 1: {verdict}: {subject}") and why in first_line, first_line


def assert_no_sandbox_path(report_text: str) -> None:
    at = report_text.find(SANDBOX_DIR_PREFIX)
    assert at < 0, f"report.json names a sandbox path: ...{report_text[max(at - 80, 0):at + 80]}..."


def junit_failures(path: Path) -> dict[str, str]:
    """``{testcase name: failure message}`` of a JUnit XML file."""
    failures = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        failure = case.find("failure")
        if failure is not None:
            failures[case.get("name", "")] = failure.get("message", "")
    return failures


def processes_with(marker: str) -> list[tuple[int, str]]:
    """Live processes (other than this one) whose command line contains ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # exited while we looked, or not ours to read
        if marker in cmdline:
            found.append((int(entry.name), cmdline.strip()))
    return found


# --------------------------------------------------------------------------- request-log plugin


SECRET = "s3cr3t-6d1f0a"
PARENT_KEY = "parent-key-91b2c4"


def run_hiding_and_secrets(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, private_tmp: Path,
                           host: HostName, secrets: TrialCase) -> EvalRun:
    """Run the host's ``secrets`` case with a secret and a key in the parent environment, and on
    ``ONE_HOST`` ``hiding_cases()`` beside it; assert no change hidden and no secret in the report.
    What reaches the tool shell is each host's own; an agent's git tampering is seen by the diff of
    the sandbox against its baseline, the same for every host."""
    from conftest import ONE_HOST

    monkeypatch.setenv("ATLANTE_TEST_SECRET", SECRET)
    monkeypatch.setenv("ANTHROPIC_API_KEY", PARENT_KEY)
    hiding = hiding_cases() if host == ONE_HOST else []
    cases = [*hiding, secrets]
    run = run_eval(pytester, write_project(tmp_path / "project", host, cases), tmp_path / "out")
    assert run.result.ret == 1, run.output()
    assert outcome_table(run, cases) == expected_table(cases)
    for case in hiding:
        trial = run.trial(case.name)
        assert {"README.md", "sneaky.txt"} <= set(trial.changedPaths), (case.name, trial.changedPaths)
        assert "README.md, sneaky.txt" in trial.checks[0].message
        if len(trial.checks) > 1:  # git ran and saw a clean tree: the tampering worked on git itself
            assert "output does not match" in trial.checks[1].message, trial.checks[1].message
        assert trial.diff is not None and "+sneaky" in trial.diff and "+tampered" in trial.diff
    if hiding:
        assert ".git" in run.trial("hides-by-deleting-git").changedPaths
    assert_clean_run(run, private_tmp)
    assert run.report_text is not None and SECRET not in run.report_text and PARENT_KEY not in run.report_text
    return run


# Issue 22 item 2: file names the agent makes from any bytes.  The bash command goes through the
# tool's shell in double quotes (`\\\\` there is one `\\` for Python, which makes it one backslash);
# Python turns `\xff`, `\n`, `\t`, `\x1b` into the raw bytes.  The write tool's path holds a tab.
ODD_NAMES_COMMAND = ("python3 -c \"[open(n, 'wb').write(b'x') for n in "
                     "(b'bad\\xff\\xfe.txt', b'nl\\nname\\t\\x1b.txt', b'back\\\\\\\\slash\\xff.txt', b'\\xff' * 255)]\"")
ODD_NAMES_SHOWN = ["bad\\xff\\xfe.txt", "nl\\nname\\t\\x1b.txt", "back\\\\slash\\xff.txt", "\\xff" * 255, "tab\\there.txt"]
ODD_NAMES = TrialCase(
    name="odd-file-names",
    turns=[bash_turn(ODD_NAMES_COMMAND), write_turn("tab\there.txt", "tab\n"), bash_turn("ls"), DONE],
    checks=[{"type": "diff-allowlist", "allow": ["hello.txt"]},
            {"type": "file-exists", "path": "nl\nname\t\x1b.txt"},
            {"type": "file-contains", "path": "tab\there.txt", "pattern": "tab"}],
    verdict="fail",
    outcomes=("fail", "pass", "pass"),
)


def run_odd_names(pytester: pytest.Pytester, tmp_path: Path, private_tmp: Path, host: HostName, isolation: str) -> EvalRun:
    """``ODD_NAMES`` beside a passing trial: a normal ``fail`` naming every path in its one shown form
    (pathnames.escape_path) in report.json, the transcript and the HTML view; the other trial passes."""
    cases = [ODD_NAMES, ALL_CHECKS_PASS]
    run = run_eval(pytester, write_project(tmp_path / "project", host, cases), tmp_path / "out",
                   "--atlante-html", "--atlante-isolation", isolation)
    assert run.result.ret == 1, run.output()
    assert "INTERNALERROR" not in run.output()
    assert run.report.complete and run.report.exitStatus == 1
    assert outcome_table(run, cases) == expected_table(cases)
    assert run.report.isolation is not None and run.report.isolation.mode == ("namespace" if isolation == "namespace" else "none")
    trial = run.trial(ODD_NAMES.name)
    assert trial.changedPaths == sorted(ODD_NAMES_SHOWN), trial.changedPaths
    assert trial.checks[0].message == ("diff-allowlist: 5 changed path(s) outside the allowlist: "
                                       + ", ".join(sorted(ODD_NAMES_SHOWN)))
    assert trial.checks[1].message == "file-exists nl\\nname\\t\\x1b.txt: file exists"
    assert trial.diff is not None
    for shown in ODD_NAMES_SHOWN:
        assert f"diff --git a/{shown} b/{shown}\n" in trial.diff, shown
    assert "\ufffd" not in trial.diff and '"' not in trial.diff  # no lossy or git-quoted name
    # The transcript: valid UTF-8 JSON lines, the write tool's path in the shown form; the raw stream too.
    assert trial.transcript is not None and trial.hostStream is not None
    lines = (run.out / trial.transcript).read_bytes().decode("utf-8").splitlines()
    events = [json.loads(line) for line in lines]
    paths = [e["input"].get("path") for e in events if e.get("type") == "tool_call"]
    assert "./tab\\there.txt" in paths, paths
    commands = [e["input"].get("command") for e in events if e.get("type") == "tool_call" and e["tool"] == "bash"]
    assert ODD_NAMES_COMMAND in commands, commands
    for line in (run.out / trial.hostStream).read_bytes().decode("utf-8").splitlines():
        json.loads(line)
    # The HTML view shows the same forms (html.escape leaves backslashes alone).
    page = (run.out / "report.html").read_text(encoding="utf-8")
    for shown in ODD_NAMES_SHOWN:
        assert f"a/{shown}" in page, shown
    assert "write ./tab\\there.txt" in page
    assert_clean_run(run, private_tmp)
    return run


def run_matrix(pytester: pytest.Pytester, tmp_path: Path, private_tmp: Path, host: HostName) -> list[EvalRun]:
    """``matrix_for(host)`` run serially (with JUnit XML): what must hold for every host.  On
    ``ONE_HOST`` also with ``-n 2``, which must give the same report: how xdist workers share the
    trials out and merge their records is the runner's, the same for every host."""
    from conftest import ONE_HOST

    cases = matrix_for(host)
    project = write_project(tmp_path / "project", host, cases)
    junit = tmp_path / "junit.xml"
    runs = [run_eval(pytester, project, tmp_path / "out-serial", f"--junitxml={junit}")]
    if host == ONE_HOST:
        runs.append(run_eval(pytester, project, tmp_path / "out-parallel", "-n", "2"))
    for run in runs:
        assert run.result.ret == 1, run.output()
        assert_clean_run(run, private_tmp)
        assert run.report.complete and run.report.host is not None and run.report.host.name == host
        assert outcome_table(run, cases) == expected_table(cases)
        assert sorted(s.name for s in run.report.scenarios) == sorted(case.name for case in cases)
        assert_matrix_evidence(run, cases)
    assert all(normalise(run.report) == normalise(runs[0].report) for run in runs[1:])
    assert processes_with(CHECK_SLEEP_MARKER) == []
    assert_junit_first_lines(junit, runs[0], cases)
    return runs


def run_session_timeout(pytester: pytest.Pytester, tmp_path: Path, private_tmp: Path, host: HostName, timeout_ms: int) -> EvalRun:
    """A session that outlives ``timeout_ms`` with a foreground and a setsid'd sleeper: ``timeout``,
    and no process of the trial left alive.

    The deadline must hit while both sleepers run, and a loaded machine can hold the host back past
    it (OpenCode, at load ~23 on 2 cores, had not sent its first request after 20 s).  A run whose
    sleepers had not both started is therefore repeated once with three times the timeout; it must
    still have timed out and left nothing behind.  On a quiet machine the first run is the only one.
    """
    for attempt, timeout in enumerate((timeout_ms, 3 * timeout_ms)):
        marker = new_marker()
        case = session_timeout_case(marker, timeout_ms=timeout)
        root = tmp_path / f"attempt-{attempt + 1}"
        run = run_eval(pytester, write_project(root / "project", host, [case]), root / "out")
        assert run.result.ret == 1, run.output()
        trial = run.trial(case.name)
        assert (trial.verdict, trial.error) == ("timeout", f"host session exceeded timeoutMs={timeout}"), run.output()
        # Neither sleeper, nor the shell around it, outlived the trial, whenever the deadline hit.
        assert processes_with(marker) == []
        assert_clean_run(run, private_tmp)
        if trial.changedPaths == ["detached.txt", "sleeping.txt"]:
            break
    # Both sleepers really ran (each made its flag file) when the deadline hit.
    assert trial.changedPaths == ["detached.txt", "sleeping.txt"], run.output()
    assert outcome_table(run, [case]) == expected_table([case])
    return run


def run_without_credentials(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                            private_tmp: Path, host: HostName, *, drop: tuple[str, ...] = (),
                            env: dict[str, str] | None = None, **overrides: Any) -> EvalRun:
    """A real-provider run with an empty HOME, the variables starting with ``drop`` removed and
    ``env`` set: ``eval-host-unauthenticated`` (exit 3) before any trial, no sandbox made."""
    project = write_project(tmp_path / "project", host, [ALL_CHECKS_PASS], **overrides)
    empty_home = tmp_path / "home"
    empty_home.mkdir()
    monkeypatch.setenv("HOME", str(empty_home))
    for name in list(os.environ):
        if drop and name.startswith(drop):
            monkeypatch.delenv(name)
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    run = run_eval(pytester, project, tmp_path / "out", scripted=False)
    assert run.result.ret == 3, run.output()
    assert "eval-host-unauthenticated" in run.output()
    assert "or run the suite offline against the scripted model with --atlante-scripted" in run.output()
    report = run.report
    assert report.exitStatus == 3 and not report.complete
    assert [e["code"] for e in report.errors] == ["eval-host-unauthenticated"]
    assert all(s.trials == [] for s in report.scenarios) and sum(report.verdicts.values()) == 0
    assert_clean_run(run, private_tmp)  # no sandbox was even made
    return run


def run_agent_cases(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: HostName,
                    *args: str) -> EvalRun:
    """``AGENT_CASE`` beside a plain case, with the scripted server's requests logged: every model
    turn of the agent trial runs under the built agent's body, the plain trial's turns never do."""
    cases = [AGENT_CASE, ALL_CHECKS_PASS]
    log_dir = tmp_path / "requests"
    plugin_args = with_request_log(monkeypatch, log_dir)
    run = run_eval(pytester, write_project(tmp_path / "project", host, cases), tmp_path / "out", *args, *plugin_args)
    assert run.result.ret == 0, run.output()
    assert outcome_table(run, cases) == expected_table(cases)
    turns = {trial: [r for r in logged if r["kind"] == "turn"] for trial, logged in logged_requests(log_dir).items()}
    assert set(turns) == {"uses-helper-agent-1", "writes-hello-1"}
    assert turns["uses-helper-agent-1"] and all(AGENT_SENTINEL in system_text(r) for r in turns["uses-helper-agent-1"])
    assert turns["writes-hello-1"] and not any(AGENT_SENTINEL in system_text(r) for r in turns["writes-hello-1"])
    assert all(system_text(r) for r in turns["writes-hello-1"])  # the default agent's prompt is there instead
    return run


def pytest_configure(config: pytest.Config) -> None:
    """Active only as ``-p trial_helpers`` with ``ATLANTE_TEST_REQUEST_LOG`` set (see module doc)."""
    log_dir = os.environ.get(REQUEST_LOG_ENV)
    if not log_dir:
        return
    from pytest_atlante.provider import scripted

    original_stop = scripted.ScriptedModelServer.stop

    def stop_and_log(server: scripted.ScriptedModelServer) -> None:
        original_stop(server)
        # stop() is idempotent: log each server once.  The mark lives on the server itself, not in
        # a set of id()s, which a later server can reuse once the first one is garbage collected.
        if getattr(server, "_atlante_test_logged", False):
            return
        server._atlante_test_logged = True  # type: ignore[attr-defined]
        requests = [
            {"kind": r.kind, "path": r.path, "turn_index": r.turn_index, "model": r.model,
             "tools_offered": list(r.tools_offered), "tool_calls": list(r.tool_calls),
             "unoffered_tools": list(r.unoffered_tools), "subagent": r.subagent, "task_index": r.task_index,
             "skills_loaded": [{"name": s.name, "call_id": s.call_id, "text": s.text} for s in r.skills_loaded],
             "body": r.body}
            for r in server.requests
        ]
        entry = {"trial": server.sandbox_root.parent.name, "requests": requests}
        target = Path(log_dir) / f"{os.getpid()}-{uuid.uuid4().hex}.json"
        target.write_text(json.dumps(entry, default=str), encoding="utf-8")

    # Patched in the child pytest process only, which ends with the run.
    scripted.ScriptedModelServer.stop = stop_and_log  # type: ignore[method-assign, assignment]


def run_scripted_eval(pytester: pytest.Pytester, project: Project, *args: str) -> tuple[int, EvalReport, str]:
    """A scripted eval of ``project`` in a subprocess: its exit status, its report (which must
    exist) and everything it printed."""
    out = pytester.path / "out"
    result = pytester.runpytest_subprocess("--atlante-eval", "--atlante-scripted", "--atlante-project", str(project.root),
                                           "--atlante-out", str(out), "--rootdir", str(project.root),
                                           "-p", "no:cacheprovider", *args, timeout=600)
    text = result.stdout.str() + result.stderr.str()
    assert (out / "report.json").exists(), text
    return int(result.ret), EvalReport.model_validate_json((out / "report.json").read_text()), text
