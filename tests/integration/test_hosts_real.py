"""The host adapters drive the real pinned CLIs against the scripted model.

Each test goes through the adapter's own ``probe`` → ``prepare`` → ``command`` → ``environment``
→ ``new_monitor``/``finalize`` path, exactly as the trial engine does, and checks effects on disk,
what the host offered the model, and what the adapter read back from the stream.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_atlante.hosts import HostInfo, ScriptedEndpoint, SessionOutcome, host_for
from pytest_atlante.hosts.base import Host, TrialWiring
from pytest_atlante.hosts.opencode.adapter import PROJECT_CONFIG
from pytest_atlante.hosts.opencode.store import data_dir, read_sessions
from pytest_atlante.hosts.opencode.stream import OpenCodeStreamMonitor, opencode_usage
from pytest_atlante.hosts.streams import sum_usage
from pytest_atlante.provider.scripted import RequestRecord, ScriptedModelServer
from pytest_atlante.sandbox.process import Bounds, allowlisted_environment, run
from pytest_atlante.suite.script import Script

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(300)]

SESSION_TIMEOUT_S = 120

WRITE_SCRIPT: list[dict[str, Any]] = [
    {"text": "Writing.", "actions": [{"type": "write", "path": "hello.txt", "content": "hello from the adapter\n"}]},
    {"text": "Done."},
]
RM_SCRIPT: list[dict[str, Any]] = [
    {"text": "Cleaning up.", "actions": [{"type": "bash", "command": "rm -rf victim"}]},
    {"text": "Done."},
]


@dataclass
class Session:
    returncode: int | None
    stdout_lines: list[str]
    stderr: str
    outcome: SessionOutcome
    requests: list[RequestRecord]
    sandbox: Path
    home: Path
    env: dict[str, str]


def endpoint(server: ScriptedModelServer) -> ScriptedEndpoint:
    return server.endpoint


def parent_env(path: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = path
    return env


@dataclass
class Prepared:
    """A sandbox and HOME the adapter prepared, its session environment and the scripted model."""

    sandbox: Path
    home: Path
    env: dict[str, str]
    server: ScriptedModelServer


@contextlib.contextmanager
def prepared_session(host: Host, info: HostInfo, tmp_path: Path, turns: list[dict[str, Any]], path: str, *,
                     before: Callable[[Path, Path], None] | None = None, drop_env: tuple[str, ...] = ()
                     ) -> Iterator[Prepared]:
    """What a trial gives the host before its session: the adapter's ``prepare`` and ``environment``
    for a fresh sandbox and HOME, with the scripted model serving ``turns`` meanwhile."""
    sandbox, home, user_home = tmp_path / "sandbox", tmp_path / "home", tmp_path / "user-home"
    for directory in (sandbox, home, user_home):
        directory.mkdir(exist_ok=True)
    (sandbox / "victim").mkdir(exist_ok=True)
    (sandbox / "victim" / "keep.txt").write_text("precious\n")
    parent = parent_env(path)
    script = Script.model_validate({"schema": "atlante/scripted-model-v1", "turns": turns})
    with ScriptedModelServer(script, sandbox_root=sandbox, shell_tools=host.shell_tools) as server:
        scripted = endpoint(server)
        host.prepare(TrialWiring(info, sandbox_root=sandbox, home=home, user_home=user_home, parent_env=parent, model=None, scripted=scripted))
        if before is not None:
            before(sandbox, home)
        env = host.environment(
            info, base_env=allowlisted_environment(parent, home=home), parent_env=parent, home=home, scripted=scripted
        )
        for name in drop_env:
            env.pop(name, None)
        yield Prepared(sandbox, home, env, server)


def run_session(
    host: Host,
    info: HostInfo,
    tmp_path: Path,
    turns: list[dict[str, Any]],
    path: str,
    *,
    before: Callable[[Path, Path], None] | None = None,
    drop_env: tuple[str, ...] = (),
    agent: str | None = None,
) -> Session:
    with prepared_session(host, info, tmp_path, turns, path, before=before, drop_env=drop_env) as prepared:
        sandbox, home, env, server = prepared.sandbox, prepared.home, prepared.env, prepared.server
        monitor = host.new_monitor()
        lines: list[str] = []

        def on_line(line: str) -> bool:
            lines.append(line)
            monitor.feed(line)
            return False

        argv = host.command(info, prompt="Do the task.", agent=agent, model=None)
        result = run(argv, cwd=sandbox, env=env, timeout_s=SESSION_TIMEOUT_S, on_stdout_line=on_line,
                     bounds=Bounds(interrupt_signal=host.interrupt_signal))
        assert not result.timed_out, result.stderr[-2000:]
        outcome = host.finalize(info, monitor, env=env, cwd=sandbox)
        return Session(result.returncode, lines, result.stderr, outcome, server.requests, sandbox, home, env)


def turn_tools(session: Session) -> list[tuple[str, ...]]:
    return [r.tools_offered for r in session.requests if r.kind == "turn"]


# --------------------------------------------------------------------------- Claude Code


def test_claude_session_writes_a_file_under_the_generated_settings(tmp_path: Path, hosts_path: Callable[[], str]) -> None:
    path = hosts_path()
    host = host_for("claude-code")
    info = host.probe(parent_env(path))
    assert (info.name, info.dialect, info.version) == ("claude-code", "claude-code", "2.1.197")

    session = run_session(host, info, tmp_path, WRITE_SCRIPT, path)

    assert (session.sandbox / "hello.txt").read_text() == "hello from the adapter\n"
    init = json.loads(session.stdout_lines[0])
    assert init["type"] == "system" and init["subtype"] == "init"
    assert "Write" in init["tools"] and "Bash" in init["tools"]
    assert "WebFetch" not in init["tools"] and "WebSearch" not in init["tools"]
    assert all("WebFetch" not in tools and "Write" in tools for tools in turn_tools(session))
    # The allow rules were honoured (trust entry works): nothing was denied, no "ignoring" warning.
    result = json.loads(session.stdout_lines[-1])
    assert result["type"] == "result" and result["permission_denials"] == []
    assert "Ignoring" not in session.stderr
    assert session.outcome.is_error is False
    assert session.outcome.usage is not None and session.outcome.usage.total > 0
    assert session.outcome.cost_usd is not None and session.outcome.cost_usd > 0
    assert session.outcome.model_identity
    # Nothing of the session leaked into the project besides the host-owned settings.
    assert sorted(p.name for p in session.sandbox.iterdir()) == [".claude", "hello.txt", "victim"]


def test_claude_denies_rm_rf(tmp_path: Path, hosts_path: Callable[[], str]) -> None:
    path = hosts_path()
    host = host_for("claude-code")
    info = host.probe(parent_env(path))

    session = run_session(host, info, tmp_path, RM_SCRIPT, path)

    assert (session.sandbox / "victim" / "keep.txt").read_text() == "precious\n"
    result = json.loads(session.stdout_lines[-1])
    denied = [d["tool_input"]["command"] for d in result["permission_denials"]]
    assert denied == ["rm -rf victim"]
    tool_results = [
        block for line in session.stdout_lines for block in _content_blocks(line) if block.get("type") == "tool_result"
    ]
    assert any("has been denied" in str(block.get("content")) for block in tool_results)


def _content_blocks(line: str) -> list[dict[str, Any]]:
    event = json.loads(line)
    content = event.get("message", {}).get("content") if event.get("type") == "user" else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


# --------------------------------------------------------------------------- OpenCode V1


# The background plugin install needs the session to live a while (a 5 s session ends first).
def long_script(wait: str) -> list[dict[str, Any]]:
    """A session kept open by ``wait`` (a shell command), long enough for a plugin install to land."""
    return [
        {"text": "Waiting.", "actions": [{"type": "bash", "command": wait, "timeout_ms": 120000}]},
        {"text": "Writing.", "actions": [{"type": "write", "path": "hello.txt", "content": "late\n"}]},
        {"text": "Done."},
    ]


# The closed-registry session must stay open as long as an install would take to land: 30 s.
LONG_SCRIPT = long_script("sleep 30")
# The control stops waiting once the install has landed (up to 100 s: an install on a loaded machine
# takes longer than on a quiet one, and the wait ends as soon as it is there).
UNTIL_INSTALLED = long_script("for i in $(seq 500); do [ -d .opencode/node_modules ] && break; sleep 0.2; done")


def test_opencode_v1_session_writes_a_file_and_installs_nothing(tmp_path: Path, hosts_path: Callable[[], str]) -> None:
    path = hosts_path()
    host = host_for("opencode")
    info = host.probe(parent_env(path))
    assert (info.name, info.dialect, info.version) == ("opencode", "opencode-v1", "1.18.33")

    # Open as long as OpenCode's background `npm install @opencode-ai/plugin` would take to land.
    session = run_session(host, info, tmp_path, LONG_SCRIPT, path)

    assert session.returncode == 0, session.stderr[-2000:]
    assert (session.sandbox / "hello.txt").read_text() == "late\n"
    offered = turn_tools(session)
    assert offered and all("write" in tools and "bash" in tools for tools in offered)
    assert all("webfetch" not in tools and "websearch" not in tools for tools in offered)
    assert session.outcome.is_error is False
    assert session.outcome.usage is not None and session.outcome.usage.total > 0
    # Model identity comes from the session OpenCode stored (finalize), not from the stream.
    assert session.outcome.model_identity == "atlante-scripted/scripted-model"
    # The background install did not land in the sandbox (the closed loopback registry stopped it).
    assert not (session.sandbox / ".opencode" / "node_modules").exists()
    assert not (session.sandbox / ".opencode" / "package.json").exists()


def test_opencode_v1_denies_rm_rf(tmp_path: Path, hosts_path: Callable[[], str]) -> None:
    path = hosts_path()
    host = host_for("opencode")
    info = host.probe(parent_env(path))

    session = run_session(host, info, tmp_path, RM_SCRIPT, path)

    assert (session.sandbox / "victim" / "keep.txt").read_text() == "precious\n"
    bash_parts = [
        event["part"] for event in map(json.loads, session.stdout_lines)
        if event.get("type") == "tool_use" and event["part"].get("tool") == "bash"
    ]
    assert [p["state"]["status"] for p in bash_parts] == ["error"]
    assert "prevents you from using this specific tool call" in bash_parts[0]["state"]["error"]
    # The loop went on after the denial: the closing turn was played and the run ended normally.
    assert session.returncode == 0
    assert len([r for r in session.requests if r.kind == "turn"]) == 2


TASK_SCRIPT: list[dict[str, Any]] = [
    # The main session delegates to OpenCode's built-in `general` sub-agent, whose own scripted turn
    # reports the same usage as the main session's two turns together.
    {"text": "Delegating.", "actions": [{"type": "task", "agent": "general", "prompt": "Say done.", "description": "note",
                                         "turns": [{"text": "Sub-agent done.",
                                                    "usage": {"input": 150, "output": 27, "cache_read": 5}}]}],
     "usage": {"input": 100, "output": 20, "cache_read": 5}},
    {"text": "Done.", "usage": {"input": 50, "output": 7}},
]


def exported(session: Session, executable: str, session_id: str) -> dict[str, Any]:
    """``opencode export <session_id>``'s ``info`` object, run as the trial's OpenCode ran."""
    result = run([executable, "export", session_id], cwd=session.sandbox, env=session.env, timeout_s=SESSION_TIMEOUT_S,
                 bounds=Bounds(capture_limit=64_000_000))
    assert result.returncode == 0, result.stderr[-2000:]
    info = json.loads(result.stdout[result.stdout.index("{"):])["info"]
    assert isinstance(info, dict) and info["id"] == session_id
    return info


def test_opencode_model_and_subagent_costs_equal_what_opencode_export_gives(
        tmp_path: Path, hosts_path: Callable[[], str]) -> None:
    path = hosts_path()
    host = host_for("opencode")
    info = host.probe(parent_env(path))

    session = run_session(host, info, tmp_path, TASK_SCRIPT, path)

    assert session.returncode == 0, session.stderr[-2000:]
    monitor = host.new_monitor()
    for line in session.stdout_lines:
        monitor.feed(line)
    assert isinstance(monitor, OpenCodeStreamMonitor) and monitor.session_id is not None
    (child,) = monitor.subagent_session_ids
    streamed = monitor.outcome()
    stored = read_sessions(session.home, {}, [monitor.session_id, child])
    for session_id in (monitor.session_id, child):
        export = exported(session, info.executable, session_id)
        mine = stored[session_id]
        assert mine.model == f"{export['model']['providerID']}/{export['model']['id']}"
        assert mine.cost == export["cost"]
        assert mine.usage == opencode_usage(export["tokens"])
    # The adapter's outcome: the main session's model, the stream's figures plus the subagent's.
    main_export, child_export = exported(session, info.executable, monitor.session_id), exported(session, info.executable, child)
    assert session.outcome.model_identity == "atlante-scripted/scripted-model" == stored[monitor.session_id].model
    assert streamed.usage is not None and session.outcome.usage is not None
    assert session.outcome.usage == sum_usage([streamed.usage, opencode_usage(child_export["tokens"])])
    assert session.outcome.usage == sum_usage([opencode_usage(main_export["tokens"]), opencode_usage(child_export["tokens"])])
    assert session.outcome.cost_usd == pytest.approx(main_export["cost"] + child_export["cost"])
    # Each session reported 150 in, 27 out, 5 cache read (the main one over its two turns).
    assert session.outcome.usage.model_dump() == {"inputTokens": 300, "outputTokens": 54, "cacheReadTokens": 10,
                                                  "cacheWriteTokens": 0}


# --------------------------------------------------------------------------- OpenCode V2 (faked)


def fake_v2(tmp_path: Path, real_path: str) -> str:
    """A directory holding an `opencode` that claims 2.0.0, drops --standalone and logs its argv."""
    real = next(Path(d) / "opencode" for d in real_path.split(os.pathsep) if (Path(d) / "opencode").is_file())
    bin_dir = tmp_path / "v2bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "opencode"
    wrapper.write_text(
        "#!/bin/bash\n"
        f'printf "%s\\n" "$*" >> "{bin_dir}/argv.log"\n'
        'if [ "$1" = "--version" ]; then echo 2.0.0; exit 0; fi\n'
        'args=(); for a in "$@"; do [ "$a" = "--standalone" ] || args+=("$a"); done\n'
        f'exec "{real}" "${{args[@]}}"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return f"{bin_dir}{os.pathsep}{real_path}"


def make_user_db(db: Path) -> None:
    """A V2-shaped store: credential tables, migration bookkeeping and session history."""
    db.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(db) as c:
        c.executescript(
            """
            CREATE TABLE credential (id TEXT PRIMARY KEY, label TEXT NOT NULL, value TEXT NOT NULL);
            CREATE TABLE account (id TEXT PRIMARY KEY, email TEXT NOT NULL, access_token TEXT NOT NULL);
            CREATE TABLE migration (id TEXT PRIMARY KEY, time_completed INTEGER NOT NULL);
            CREATE TABLE session (id TEXT PRIMARY KEY, title TEXT NOT NULL);
            CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, data TEXT NOT NULL);
            CREATE INDEX message_session_idx ON message (session_id);
            INSERT INTO credential VALUES ('c1', 'anthropic', 'sk-stored');
            INSERT INTO account VALUES ('a1', 'dev@example.com', 'tok');
            INSERT INTO migration VALUES ('0001_init', 1), ('0002_more', 2);
            INSERT INTO session VALUES ('ses_secret', 'my private work');
            INSERT INTO message VALUES ('m1', 'ses_secret', 'private history');
            """
        )


def test_opencode_v2_dialect_through_a_version_faking_wrapper(tmp_path: Path, hosts_path: Callable[[], str]) -> None:
    path = fake_v2(tmp_path, hosts_path())
    host = host_for("opencode")
    info = host.probe(parent_env(path))
    assert info.dialect == "opencode-v2" and info.version == "2.0.0"
    assert info.executable == str(tmp_path / "v2bin" / "opencode")

    # Credential copy: only credential tables and migration bookkeeping arrive.
    user_home = tmp_path / "user-home"
    store = data_dir(user_home)
    make_user_db(store / "opencode.db")
    (store / "auth.json").write_text(json.dumps({"anthropic": {"type": "api", "key": "sk-auth"}}))
    assert host.credential_diagnostics(info, {}, user_home, "anthropic/claude-sonnet-4-5") == []
    trial_home = tmp_path / "copied-home"
    host.prepare(TrialWiring(info, sandbox_root=tmp_path / "copy-sandbox", home=trial_home, user_home=user_home, parent_env={},
                 model="anthropic/claude-sonnet-4-5", scripted=None))
    copied = data_dir(trial_home) / "opencode.db"
    with sqlite3.connect(copied) as c:
        assert c.execute("SELECT id, label, value FROM credential").fetchall() == [("c1", "anthropic", "sk-stored")]
        assert c.execute("SELECT id FROM account").fetchall() == [("a1",)]
        assert c.execute("SELECT id FROM migration ORDER BY id").fetchall() == [("0001_init",), ("0002_more",)]
        assert c.execute("SELECT count(*) FROM session").fetchone() == (0,)
        assert c.execute("SELECT count(*) FROM message").fetchone() == (0,)
        indexes = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "message_session_idx" in indexes
    assert json.loads((data_dir(trial_home) / "auth.json").read_text()) == {"anthropic": {"type": "api", "key": "sk-auth"}}
    v2_config = json.loads((tmp_path / "copy-sandbox" / PROJECT_CONFIG).read_text())
    assert "permissions" in v2_config and "permission" not in v2_config
    assert v2_config["permissions"]["shell"]["rm -rf *"] == "deny"
    assert v2_config["permissions"]["subagent"] == "allow"
    assert "bash" not in v2_config["permissions"] and "task" not in v2_config["permissions"]
    assert v2_config["model"] == "anthropic/claude-sonnet-4-5"

    # A real session through the wrapper: the CLI is invoked with --standalone from the sandbox
    # cwd, and the V1 binary behind the wrapper recognises the rendered file as a V2 config.
    (tmp_path / "run").mkdir()
    session = run_session(host, info, tmp_path / "run", WRITE_SCRIPT, path)
    run_argv = [line for line in (tmp_path / "v2bin" / "argv.log").read_text().splitlines() if line.startswith("run ")]
    assert run_argv == ["run --standalone --format json Do the task."]
    assert session.returncode == 1
    assert "V2 permissions are not supported by OpenCode V1" in session.stderr
    assert str(session.sandbox / PROJECT_CONFIG) in session.stderr


def test_a_copied_real_database_keeps_its_schema_and_is_accepted_by_the_cli(tmp_path: Path, hosts_path: Callable[[], str]) -> None:
    """The V2 credential copy applied to a database the real CLI wrote: the CLI runs on the copy
    (schema and migration bookkeeping intact) and the earlier session's history is gone."""
    from pytest_atlante.hosts.opencode.store import copy_credential_database

    path = hosts_path()
    host = host_for("opencode")
    info = host.probe(parent_env(path))
    (tmp_path / "first").mkdir()
    first = run_session(host, info, tmp_path / "first", WRITE_SCRIPT, path)
    source = data_dir(first.home) / "opencode.db"
    with sqlite3.connect(source) as c:
        assert c.execute("SELECT count(*) FROM session").fetchone()[0] >= 1
        migrations = c.execute("SELECT count(*) FROM migration").fetchone()[0]
    assert migrations > 0

    def install_copy(sandbox: Path, home: Path) -> None:
        copied = copy_credential_database(source, data_dir(home) / "opencode.db")
        assert "migration" in copied and "credential" in copied and "session" not in copied

    (tmp_path / "second").mkdir()
    second = run_session(host, info, tmp_path / "second", WRITE_SCRIPT, path, before=install_copy)
    assert second.returncode == 0, second.stderr[-2000:]
    assert (second.sandbox / "hello.txt").is_file()
    with sqlite3.connect(data_dir(second.home) / "opencode.db") as c:
        assert c.execute("SELECT count(*) FROM migration").fetchone()[0] == migrations
        titles = [row[0] for row in c.execute("SELECT directory FROM session")]
    # Only the second run's session exists in the copy.
    assert titles == [str(second.sandbox.resolve())]


def test_control_without_the_closed_registry_opencode_installs_into_the_sandbox(
    tmp_path: Path, hosts_path: Callable[[], str]
) -> None:
    """Shows test_opencode_v1_session_writes_a_file_and_installs_nothing can fail: needs the npm
    registry to be reachable (it is on the project's machines; offline this control fails, not the
    adapter)."""
    path = hosts_path()
    host = host_for("opencode")
    info = host.probe(parent_env(path))
    session = run_session(host, info, tmp_path, UNTIL_INSTALLED, path, drop_env=("npm_config_registry",))
    assert (session.sandbox / "hello.txt").read_text() == "late\n"
    assert (session.sandbox / ".opencode" / "node_modules").is_dir(), "npm registry unreachable? see docstring"
