"""The Gemini CLI adapter against the real ``gemini`` 0.61.0 and the scripted model: one test per
default of the CLI that would break a trial silently (host-facts-gemini §10–§17), each showing
what the adapter does about it, and the containment policy's spelling matrix.

Each test drives the adapter's own ``probe`` → ``prepare`` → ``environment`` → ``command`` →
``new_monitor``/``finalize`` path (``test_hosts_real.run_session``).  Where a control run shows the
default itself, it undoes exactly the one thing the adapter does about it.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_atlante.hosts import host_for
from pytest_atlante.hosts.base import SCRIPTED_MODEL_ID
from pytest_atlante.sandbox.process import Bounds, run
from test_hosts_real import Session, parent_env, prepared_session, run_session
from trial_helpers import new_marker, processes_with

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(300)]

HOST = host_for("gemini-cli")
WRITE = [{"text": "Writing.", "actions": [{"type": "write", "path": "hello.txt", "content": "hello\n"}]},
         {"text": "Done."}]


def events(session: Session, kind: str) -> list[dict[str, Any]]:
    found = []
    for line in session.stdout_lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("type") == kind:
            found.append(event)
    return found


def settings(home: Path) -> dict[str, Any]:
    return json.loads((home / ".gemini" / "settings.json").read_text())


def write_settings(home: Path, document: dict[str, Any]) -> None:
    (home / ".gemini" / "settings.json").write_text(json.dumps(document))


@pytest.fixture
def gemini(hosts_path: Callable[[], str]) -> tuple[str, Any]:
    path = hosts_path()
    return path, HOST.probe(parent_env(path))


def test_a_session_writes_and_succeeds_from_its_result_event(tmp_path: Path, gemini: tuple[str, Any]) -> None:
    path, info = gemini
    session = run_session(HOST, info, tmp_path, WRITE, path)
    assert (session.sandbox / "hello.txt").read_text() == "hello\n"
    assert session.returncode == 0 and not session.outcome.is_error
    assert session.outcome.model_identity == SCRIPTED_MODEL_ID  # the key of result.stats.models
    # The scripted default usage, 100 in and 20 out per turn: only result.stats carries it.
    usage = session.outcome.usage
    assert usage is not None and (usage.inputTokens, usage.outputTokens) == (200, 40)
    # A fixed model: no router side request, every request a scripted turn of that model.
    assert [(r.kind, r.model, r.path.split("?")[0]) for r in session.requests] == [
        ("turn", SCRIPTED_MODEL_ID, f"/v1beta/models/{SCRIPTED_MODEL_ID}:streamGenerateContent")] * 2
    # No web tools offered: the policy's global deny removes them.
    offered = session.requests[0].tools_offered
    assert "write_file" in offered and "run_shell_command" in offered
    assert not {"web_fetch", "google_web_search"} & set(offered)


def test_without_api_key_auth_selected_the_base_url_alone_is_refused_rc_41(tmp_path: Path, gemini: tuple[str, Any]) -> None:
    path, info = gemini

    def undo_auth(sandbox: Path, home: Path) -> None:
        document = settings(home)
        assert document["security"]["auth"]["selectedType"] == "gemini-api-key"
        del document["security"]
        write_settings(home, document)

    session = run_session(HOST, info, tmp_path, WRITE, path, before=undo_auth)
    assert session.returncode == 41 and "Invalid auth method" in session.stderr
    assert session.requests == [] and session.outcome.is_error


def test_without_skip_trust_the_untrusted_sandbox_is_fatal_rc_55(tmp_path: Path, gemini: tuple[str, Any]) -> None:
    path, info = gemini
    argv = HOST.command(info, prompt="Do the task.", agent=None, model=None)
    assert "--skip-trust" in argv
    with prepared_session(HOST, info, tmp_path, WRITE, path) as prepared:
        result = run([a for a in argv if a != "--skip-trust"], cwd=prepared.sandbox, env=prepared.env, timeout_s=120)
        assert result.returncode == 55 and "trusted directory" in result.stderr
        assert prepared.server.requests == []


def test_an_http_500_is_not_retried_for_minutes(tmp_path: Path, gemini: tuple[str, Any]) -> None:
    path, info = gemini
    turns = [{"error": {"status": 500, "message": "scripted failure"}}]
    session = run_session(HOST, info, tmp_path, turns, path)
    assert [r.status for r in session.requests] == [500]  # general.maxAttempts = 1
    # The exit code is the HTTP status modulo 256; the verdict reads the result event instead.
    assert session.returncode == 500 % 256
    assert session.outcome.is_error and "scripted failure" in (session.outcome.error_message or "")


def test_a_fixture_env_file_cannot_change_the_model(tmp_path: Path, gemini: tuple[str, Any]) -> None:
    path, info = gemini

    def plant_env(sandbox: Path, home: Path) -> None:
        (sandbox / ".env").write_text("GEMINI_MODEL=gemini-from-dotenv\nGEMINI_API_KEY=from-dotenv\n")

    session = run_session(HOST, info, tmp_path, WRITE, path, before=plant_env)
    assert not session.outcome.is_error
    assert {r.model for r in session.requests} == {SCRIPTED_MODEL_ID}

    def control(sandbox: Path, home: Path) -> None:  # the same file without ignoreLocalEnv
        plant_env(sandbox, home)
        document = settings(home)
        document["advanced"]["ignoreLocalEnv"] = False
        del document["model"]
        write_settings(home, document)

    (tmp_path / "control").mkdir()
    loaded = run_session(HOST, info, tmp_path / "control", WRITE, path, before=control)
    assert {r.model for r in loaded.requests} == {"gemini-from-dotenv"}


def test_an_interrupt_exits_0_without_a_result_and_leaves_no_process(tmp_path: Path, gemini: tuple[str, Any]) -> None:
    path, info = gemini
    marker = new_marker()
    turns = [{"text": "Waiting.", "actions": [{"type": "bash", "command": f"sleep 300 # {marker}"}]}, {"text": "Done."}]
    with prepared_session(HOST, info, tmp_path, turns, path) as prepared:
        sandbox, env = prepared.sandbox, prepared.env
        assert env["GEMINI_CLI_NO_RELAUNCH"] == "1"  # else the parent ignores SIGINT and SIGTERM
        monitor = HOST.new_monitor()
        seen: list[str] = []

        def on_line(line: str) -> bool:
            seen.append(line)
            monitor.feed(line)
            return False

        # Interrupted once the sleep runs, however long Gemini CLI takes to get there (a fixed
        # timeout either cut it before the tool started on a loaded machine or waited for nothing).
        sleeping, finished = threading.Event(), threading.Event()
        stop_read, stop_write = os.pipe()

        def stop_once_sleeping() -> None:
            while not processes_with(marker):
                if finished.wait(0.1):
                    return
            sleeping.set()
            os.write(stop_write, b"x")

        watcher = threading.Thread(target=stop_once_sleeping, daemon=True)
        watcher.start()
        try:
            result = run(HOST.command(info, prompt="Do the task.", agent=None, model=None), cwd=sandbox, env=env,
                         timeout_s=240, on_stdout_line=on_line,
                         bounds=Bounds(interrupt_signal=int(signal.SIGINT), abort_fd=stop_read))
        finally:
            finished.set()
            watcher.join()
            os.close(stop_read)
            os.close(stop_write)
    assert result.aborted and not result.timed_out  # stopped by the interrupt, well before the sleep ended
    assert sleeping.is_set() and any('"tool_use"' in line for line in seen)  # the sleep really started
    assert not any('"result"' in line for line in seen)
    outcome = HOST.finalize(info, monitor, env=env, cwd=sandbox)
    assert outcome.is_error and "without a result event" in (outcome.error_message or "")
    assert processes_with(marker) == []  # the shell tool's own session was reaped


DENIED = ["rm -rf victim", "/bin/rm -rf victim", "rm  -rf victim", "echo go && rm -r victim",
          "bash -c 'rm -fr victim'", "(cd . && /usr/bin/rm -r victim)", "sudo true", "git   push origin main",
          "dd if=/dev/zero of=victim/keep.txt count=1", "chmod -R 000 victim"]
ALLOWED = ["echo ok > allowed.txt", "rmdir emptydir"]


def test_the_policy_denies_every_spelling_of_a_destructive_command(tmp_path: Path, gemini: tuple[str, Any]) -> None:
    path, info = gemini
    turns = [{"text": f"Step {i}.", "actions": [{"type": "bash", "command": command}]}
             for i, command in enumerate(DENIED + ALLOWED)] + [{"text": "Done."}]

    def plant(sandbox: Path, home: Path) -> None:
        (sandbox / "emptydir").mkdir()

    session = run_session(HOST, info, tmp_path, turns, path, before=plant)
    assert (session.sandbox / "victim" / "keep.txt").read_text() == "precious\n"
    assert (session.sandbox / "allowed.txt").read_text() == "ok\n" and not (session.sandbox / "emptydir").exists()
    calls = {e["tool_id"]: e["parameters"]["command"] for e in events(session, "tool_use")}
    results = {calls[e["tool_id"]]: e for e in events(session, "tool_result")}
    denied = sorted(c for c, e in results.items() if _dict(e.get("error")).get("type") == "policy_violation")
    assert denied == sorted(DENIED)
    assert all(results[c]["status"] == "success" for c in ALLOWED)


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
