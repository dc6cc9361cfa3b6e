"""One definition of a secret, end to end on the real CLIs through the scripted model.

The agent writes a key-shaped string (``sk-ant-…``, named by no variable) and the value of the
runner's ``DEPLOY_PRIVATE`` variable into sandbox files, echoes both in a command, and the
scenario's command checks print them again.  Everything that leaves the trial — report.json (diff,
check messages and output), report.html, transcript.jsonl and host-stream.jsonl — must show
``<redacted>`` and never either value: the report and the transcript use the same
``sandbox.redact.Secrets`` (known values, name patterns and key shapes).

Which hosts: each host's transcript, host stream and stored login (where it keeps it, what its
fields are) are its own, so those run on ``EVERY_HOST``, under namespace isolation (the default where
it is possible).  What isolation ``off`` adds — the audit naming a write outside the sandbox, a hard
link out of the HOME a kept sandbox must not keep — is the runner's, the same for every host: once,
on ``ONE_HOST``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import EVERY_HOST, per_host_then_once
from pytest_atlante.sandbox.redact import REDACTED
from trial_helpers import (
    DONE,
    HostName,
    TrialCase,
    bash_turn,
    expected_table,
    outcome_table,
    run_eval,
    write_project,
    write_turn,
)

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(600)]

KEY = "sk-ant-" + "QwErTyUiOpAsDfGhJkLzXcVbNmQwErTyUiOpAsDf"  # 40 letters; no variable names it
DEPLOY = "deploy-private-value-4e7a9c"  # the runner's DEPLOY_PRIVATE

LEAKS = TrialCase(
    name="leaks-secrets",
    turns=[write_turn("key.txt", f"api_key={KEY}\ndeploy={DEPLOY}\n"),
           bash_turn(f"echo key={KEY} && echo deploy={DEPLOY} > deployed.txt && echo wrote"),
           DONE],
    checks=[{"type": "command", "run": ["sh", "-c", "cat key.txt deployed.txt"], "outputMatches": "api_key="},
            {"type": "command", "run": ["cat", "deployed.txt"], "outputMatches": "^nothing$"}],
    verdict="fail",
    outcomes=("pass", "fail"),
)


@pytest.mark.usefixtures("on_path")
@pytest.mark.parametrize("host", EVERY_HOST)
def test_a_key_shape_and_a_private_variable_are_redacted_everywhere(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, private_tmp: Path, host: HostName
) -> None:
    monkeypatch.setenv("DEPLOY_PRIVATE", DEPLOY)
    run = run_eval(pytester, write_project(tmp_path / "project", host, [LEAKS]), tmp_path / "out", "--atlante-html")
    assert outcome_table(run, [LEAKS]) == expected_table([LEAKS]), run.output()
    trial = run.trial(LEAKS.name)

    # report.json: the diff and both checks' output and message
    assert trial.diff is not None
    assert f"+api_key={REDACTED}" in trial.diff and f"+deploy={REDACTED}" in trial.diff, trial.diff
    assert trial.checks[0].output == f"api_key={REDACTED}\ndeploy={REDACTED}\ndeploy={REDACTED}\n"
    assert trial.checks[1].output == f"deploy={REDACTED}\n" and REDACTED in trial.checks[1].message
    assert {"key.txt", "deployed.txt"} <= set(trial.changedPaths)

    # the transcript: the write's content and the command's input and result
    assert trial.transcript is not None and trial.hostStream is not None
    events = [json.loads(line) for line in (run.out / trial.transcript).read_text().splitlines()]
    calls = [e for e in events if e["type"] == "tool_call"]
    assert [c["tool"] for c in calls] == ["write", "bash"], calls
    assert calls[0]["input"]["content"] == f"api_key={REDACTED}\ndeploy={REDACTED}\n"
    assert calls[1]["input"]["command"] == f"echo key={REDACTED} && echo deploy={REDACTED} > deployed.txt && echo wrote"
    assert any(f"key={REDACTED}" in r["text"] for r in events if r["type"] == "tool_result"), events

    kept = {"report.json": run.report_text or "", "transcript": (run.out / trial.transcript).read_text(),
            "host stream": (run.out / trial.hostStream).read_text()}
    html = (run.out / "report.html").read_text()  # rendered from the report (and the transcript)
    kept["report.html"] = html.replace("&lt;", "<").replace("&gt;", ">").replace("\\u003c", "<").replace("\\u003e", ">")
    for name, text in kept.items():
        assert KEY not in text and DEPLOY not in text and "sk-ant-QwEr" not in text, name
        assert REDACTED in text, name


# --------------------------------------------------------------------------- the agent cannot steer it

NOTES = "stolen-notes-of-the-agent.txt"      # token-shaped names: only where they were written decides
ESCAPED = "escaped-by-name-of-the-agent.txt"
# Where each host keeps its login under the trial HOME, and a login naming the agent's own files in
# the very fields a token refresh rewrites.
PLANTED_LOGINS = {
    "claude-code": (".claude/.credentials.json", {"claudeAiOauth": {"accessToken": NOTES, "refreshToken": ESCAPED}}),
    "opencode": (".local/share/opencode/auth.json",
                 {"anthropic": {"type": "oauth", "access": NOTES, "refresh": ESCAPED}, "x": {"type": "api", "key": NOTES}}),
    "codex": (".codex/auth.json", {"OPENAI_API_KEY": NOTES, "tokens": {"access_token": NOTES, "refresh_token": ESCAPED}}),
    "gemini-cli": (".gemini/oauth_creds.json", {"access_token": NOTES, "refresh_token": ESCAPED, "id_token": NOTES}),
}


def steering_case(host: HostName, escape_to: Path | None) -> TrialCase:
    """The agent writes a file, (with isolation off) one into the project, then rewrites the login
    in its HOME so that both names are "credentials"; before issue 26 both became ``<redacted>``."""
    where, login = PLANTED_LOGINS[host]
    plant = (f"mkdir -p \"$(dirname \"$HOME/{where}\")\" && cat > \"$HOME/{where}\" <<'EOF'\n{json.dumps(login)}\nEOF\n"
             "echo planted")
    turns = [write_turn(NOTES, "notes\n")]
    if escape_to is not None:
        turns.append(bash_turn(f"echo out > {escape_to / ESCAPED}"))
    return TrialCase(name="steers-redaction", turns=[*turns, bash_turn(plant), DONE],
                     checks=[{"type": "diff-allowlist", "allow": ["allowed-only.txt"]},
                             {"type": "file-absent", "path": NOTES}],
                     verdict="fail", outcomes=("fail", "fail"))


@pytest.mark.usefixtures("on_path")
@pytest.mark.parametrize(("host", "isolation"), per_host_then_once(["namespace"], once=["off"]))
def test_the_agent_cannot_choose_what_is_redacted(pytester: pytest.Pytester, tmp_path: Path, host: HostName,
                                                  isolation: str) -> None:
    project = tmp_path / "project"
    case = steering_case(host, project if isolation == "off" else None)  # under namespace the project is read-only
    run = run_eval(pytester, write_project(project, host, [case]), tmp_path / "out", "--atlante-isolation", isolation)
    assert outcome_table(run, [case]) == expected_table([case]), run.output()
    trial = run.trial(case.name)
    assert NOTES in trial.changedPaths and f"+++ b/{NOTES}" in (trial.diff or ""), trial
    assert trial.checks[0].message.endswith(f"outside the allowlist: {NOTES}"), trial.checks[0].message
    assert NOTES in trial.checks[1].message, trial.checks[1].message
    if isolation == "off":
        assert trial.escapes == [ESCAPED] and ESCAPED in (trial.error or ""), trial
    assert REDACTED not in (run.report_text or ""), run.report_text


# --------------------------------------------------------------------------- --atlante-keep keeps no credential

TOKEN = "kept-login-token-" + "Zq7" * 12
# Where each host's login is copied to in the trial HOME, and a login holding TOKEN (scripted runs copy
# none, so the scenario's setup puts one there, as a real run's copy would be).
LOGIN_AT = {"claude-code": ".claude/.credentials.json", "opencode": ".local/share/opencode/auth.json",
            "codex": ".codex/auth.json", "gemini-cli": ".gemini/oauth_creds.json"}


def keeps_case(host: HostName) -> TrialCase:
    login = LOGIN_AT[host]
    document = json.dumps({"fake": {"type": "api", "key": TOKEN}})
    plant = f"mkdir -p ../home/{Path(login).parent} && printf '%s' '{document}' > ../home/{login}"
    # A hard link survives the login's deletion; the cat puts the token into the host's session log.
    steal = f"ln \"$HOME/{login}\" stash.json; cat \"$HOME/{login}\"; echo done"
    return TrialCase(name="keeps-a-login", setup=["sh", "-c", plant], turns=[bash_turn(steal), DONE],
                     checks=[{"type": "file-absent", "path": "nothing-here.txt"}], verdict="pass", outcomes=("pass",))


@pytest.mark.usefixtures("on_path")
@pytest.mark.parametrize(("host", "isolation"), per_host_then_once(["namespace"], once=["off"]))
def test_a_kept_trial_holds_no_credential(pytester: pytest.Pytester, tmp_path: Path, private_tmp: Path,
                                          host: HostName, isolation: str) -> None:
    case = keeps_case(host)
    run = run_eval(pytester, write_project(tmp_path / "project", host, [case]), tmp_path / "out",
                   "--atlante-keep", "--atlante-isolation", isolation)
    assert outcome_table(run, [case]) == expected_table([case]), run.output()
    (kept,) = private_tmp.glob("atlante-eval-*/keeps-a-login-1")
    assert sorted(p.name for p in kept.iterdir()) == ["baseline.git", "sandbox"]  # no HOME, no session log
    holding = [path for path in kept.rglob("*") if path.is_file() and not path.is_symlink()
               and TOKEN.encode() in path.read_bytes()]
    assert holding == [], holding
    stash = kept / "sandbox" / "stash.json"
    if isolation == "off":  # under namespace isolation the link fails (HOME and sandbox are two mounts)
        assert stash.is_file() and stash.read_bytes() == b"", "the hard link was made and emptied"
