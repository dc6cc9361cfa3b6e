"""OpenCode adapter: credentials (auth.json, V2 database), fresh config, command, environment, stored sessions."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from contextlib import closing
from pathlib import Path

import pytest

from pytest_atlante.hosts import ScriptedEndpoint, host_for
from pytest_atlante.hosts.base import HostInfo, TrialWiring
from pytest_atlante.hosts.opencode import store as opencode_store
from pytest_atlante.hosts.opencode.adapter import PROJECT_CONFIG, PROXY_BASE_URL_VARIABLE, render_config
from pytest_atlante.hosts.opencode.store import (
    CREDENTIAL_TABLES,
    StoredSession,
    copy_credential_database,
    data_dir,
    read_sessions,
)
from pytest_atlante.records import Usage

V1 = HostInfo("opencode", "1.18.33", "opencode-v1", "/opt/bin/opencode")
V2 = HostInfo("opencode", "2.0.0", "opencode-v2", "/opt/bin/opencode")
HOST = host_for("opencode")
# The adapter's own wiring for the scripted model (V1 spelling; V2 renames ``provider``).
PROVIDER_BLOCK = {
    "model": "atlante-scripted/scripted-model",
    "small_model": "atlante-scripted/scripted-model",
    "provider": {"atlante-scripted": {
        "npm": "@ai-sdk/openai-compatible",
        "name": "Atlante scripted model",
        "options": {"baseURL": "http://127.0.0.1:9999/v1", "apiKey": "atlante-scripted"},
        "models": {name: {"name": title, "tool_call": True,
                          "cost": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75},
                          "limit": {"context": 200000, "output": 8192}}
                   for name, title in (("scripted-model", "Atlante scripted model"),
                                       ("scripted-agent-model", "Atlante scripted agent model"))},
    }},
}
SCRIPTED = ScriptedEndpoint("http://127.0.0.1:9999", "http://127.0.0.1:9999/v1")


def write_auth(user_home: Path, document: object) -> None:
    path = data_dir(user_home) / "auth.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))


def make_db(path: Path, *, credentials: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as c:
        c.executescript(
            "CREATE TABLE credential (id TEXT PRIMARY KEY, value TEXT);"
            "CREATE TABLE account_state (id INTEGER PRIMARY KEY, active_account_id TEXT);"
            "CREATE TABLE data_migration (name TEXT PRIMARY KEY, time_completed INTEGER);"
            "CREATE TABLE session (id TEXT PRIMARY KEY, title TEXT);"
            "CREATE TABLE part (id TEXT PRIMARY KEY, session_id TEXT REFERENCES session(id));"
            "CREATE TRIGGER part_guard AFTER INSERT ON part BEGIN SELECT 1; END;"
            "INSERT INTO data_migration VALUES ('m1', 1);"
            "INSERT INTO session VALUES ('ses_1', 'history');"
            "INSERT INTO part VALUES ('p1', 'ses_1');"
        )
        c.executemany("INSERT INTO credential VALUES (?, ?)", [(f"c{i}", "secret") for i in range(credentials)])


def test_host_constants() -> None:
    assert (HOST.name, HOST.owned_dir, HOST.interrupt_signal) == ("opencode", ".opencode", 2)


# --------------------------------------------------------------------------- credentials


@pytest.mark.parametrize(
    ("auth", "model", "ok"),
    [
        ({"anthropic": {"type": "api", "key": "k"}}, "anthropic/claude-sonnet-4-5", True),
        ({"anthropic": {"type": "api", "key": "k"}}, "openai/gpt-5", False),
        ({"openai": {"type": "oauth", "refresh": "r"}}, None, True),
        ({}, None, False),
        ({"anthropic": {}}, "anthropic/x", False),
        ([1, 2], None, False),
    ],
)
def test_auth_json_must_hold_the_models_provider(tmp_path: Path, auth: object, model: str | None, ok: bool) -> None:
    write_auth(tmp_path, auth)
    found = HOST.credential_diagnostics(V1, {}, tmp_path, model)
    assert [d.code for d in found] == ([] if ok else ["eval-host-unauthenticated"])
    if not ok:
        assert "opencode auth login" in found[0].hint


def test_shell_api_key_variables_alone_do_not_count(tmp_path: Path) -> None:
    env = {"ANTHROPIC_API_KEY": "sk", "OPENAI_API_KEY": "sk"}
    assert [d.code for d in HOST.credential_diagnostics(V1, env, tmp_path, "anthropic/x")] == ["eval-host-unauthenticated"]


def test_xdg_data_home_is_honoured(tmp_path: Path) -> None:
    (tmp_path / "xdg" / "opencode").mkdir(parents=True)
    (tmp_path / "xdg" / "opencode" / "auth.json").write_text('{"anthropic": {"type": "api", "key": "k"}}')
    assert HOST.credential_diagnostics(V1, {"XDG_DATA_HOME": str(tmp_path / "xdg")}, tmp_path, "anthropic/x") == []


def test_v2_counts_the_database_credential_tables_and_v1_does_not(tmp_path: Path) -> None:
    make_db(data_dir(tmp_path) / "opencode.db", credentials=1)
    assert HOST.credential_diagnostics(V2, {}, tmp_path, "anthropic/x") == []
    assert [d.code for d in HOST.credential_diagnostics(V1, {}, tmp_path, "anthropic/x")] == ["eval-host-unauthenticated"]


def test_v2_with_empty_credential_tables_is_unauthenticated(tmp_path: Path) -> None:
    make_db(data_dir(tmp_path) / "opencode.db", credentials=0)
    [diagnostic] = HOST.credential_diagnostics(V2, {}, tmp_path, None)
    assert "credential tables" in diagnostic.message


# --------------------------------------------------------------------------- prepare


def test_prepare_overwrites_the_fixture_config_and_copies_auth_json(tmp_path: Path) -> None:
    sandbox, home, user_home = tmp_path / "sandbox", tmp_path / "home", tmp_path / "user"
    (sandbox / ".opencode" / "agents").mkdir(parents=True)
    (sandbox / PROJECT_CONFIG).write_text('{"mcp": {"evil": {"type": "local", "command": ["rm"]}}, "provider": {"x": {}}}')
    (sandbox / ".opencode" / "agents" / "a.md").write_text("agent")
    write_auth(user_home, {"anthropic": {"type": "api", "key": "k"}})
    make_db(data_dir(user_home) / "opencode.db", credentials=1)

    HOST.prepare(TrialWiring(V1, sandbox_root=sandbox, home=home, user_home=user_home, parent_env={}, model="anthropic/claude-sonnet-4-5", scripted=None))

    config = json.loads((sandbox / PROJECT_CONFIG).read_text())
    assert config == render_config("opencode-v1", model="anthropic/claude-sonnet-4-5", scripted=None,
                                   proxied="anthropic")
    assert "mcp" not in config
    # Only the model's provider, only its base URL: the metering proxy's address from the environment.
    assert config["provider"] == {"anthropic": {"options": {"baseURL": "{env:ATLANTE_MODEL_BASE_URL}"}}}
    assert config["model"] == "anthropic/claude-sonnet-4-5"
    assert config["experimental"] == {"continue_loop_on_deny": True}
    assert (sandbox / ".opencode" / "agents" / "a.md").read_text() == "agent"
    copied = data_dir(home) / "auth.json"
    assert json.loads(copied.read_text()) == {"anthropic": {"type": "api", "key": "k"}}
    assert stat.S_IMODE(copied.stat().st_mode) == 0o600
    assert not (data_dir(home) / "opencode.db").exists()  # V1 keeps no credentials in its db


def test_prepare_v2_copies_credential_rows_and_bookkeeping_but_no_history(tmp_path: Path) -> None:
    sandbox, home, user_home = tmp_path / "sandbox", tmp_path / "home", tmp_path / "user"
    sandbox.mkdir()
    make_db(data_dir(user_home) / "opencode.db", credentials=2)
    HOST.prepare(TrialWiring(V2, sandbox_root=sandbox, home=home, user_home=user_home, parent_env={}, model="anthropic/x", scripted=None))
    with sqlite3.connect(data_dir(home) / "opencode.db") as c:
        assert c.execute("SELECT count(*) FROM credential").fetchone() == (2,)
        assert c.execute("SELECT name FROM data_migration").fetchall() == [("m1",)]
        assert c.execute("SELECT count(*) FROM session").fetchone() == (0,)
        assert c.execute("SELECT count(*) FROM part").fetchone() == (0,)
        assert c.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall() == [("part_guard",)]
    config = json.loads((sandbox / PROJECT_CONFIG).read_text())
    assert "permissions" in config and "permission" not in config and "experimental" not in config


def test_copy_credential_database_replaces_a_stale_target(tmp_path: Path) -> None:
    source, target = tmp_path / "src.db", tmp_path / "out" / "opencode.db"
    make_db(source, credentials=1)
    target.parent.mkdir()
    target.write_text("stale")
    (target.parent / "opencode.db-wal").write_text("stale wal")
    copied = copy_credential_database(source, target)
    assert copied == ["credential", "account_state", "data_migration"]
    assert set(copied) - {"data_migration"} <= set(CREDENTIAL_TABLES)
    assert not (target.parent / "opencode.db-wal").exists()


def test_prepare_v2_with_an_unreadable_database_is_a_diagnostic(tmp_path: Path) -> None:
    from pytest_atlante.diagnostics import DiagnosticError

    bad = data_dir(tmp_path / "user") / "opencode.db"
    bad.parent.mkdir(parents=True)
    bad.write_text("this is not sqlite")
    (tmp_path / "sandbox").mkdir()
    with pytest.raises(DiagnosticError) as caught:
        HOST.prepare(TrialWiring(V2, sandbox_root=tmp_path / "sandbox", home=tmp_path / "home", user_home=tmp_path / "user",
                     parent_env={}, model=None, scripted=None))
    assert [d.code for d in caught.value.diagnostics] == ["eval-host-prepare-failed"]


def test_prepare_scripted_uses_the_scripted_provider_and_copies_no_login(tmp_path: Path) -> None:
    sandbox, home, user_home = tmp_path / "sandbox", tmp_path / "home", tmp_path / "user"
    sandbox.mkdir()
    write_auth(user_home, {"anthropic": {"type": "api", "key": "k"}})
    HOST.prepare(TrialWiring(V1, sandbox_root=sandbox, home=home, user_home=user_home, parent_env={}, model=None, scripted=SCRIPTED))
    config = json.loads((sandbox / PROJECT_CONFIG).read_text())
    assert config["provider"] == PROVIDER_BLOCK["provider"] and config["model"] == PROVIDER_BLOCK["model"]
    assert not (data_dir(home) / "auth.json").exists()


def test_v2_rendering_uses_v2_field_names() -> None:
    config = render_config("opencode-v2", model=None, scripted=SCRIPTED)
    assert config["providers"] == PROVIDER_BLOCK["provider"] and "provider" not in config
    assert config["permissions"]["shell"]["*"] == "allow" and config["permissions"]["subagent"] == "allow"


# --------------------------------------------------------------------------- fixture, command, environment


@pytest.mark.parametrize(
    ("info", "head"),
    [(V1, ["/opt/bin/opencode", "run", "--format", "json"]), (V2, ["/opt/bin/opencode", "run", "--standalone", "--format", "json"])],
)
def test_command(info: HostInfo, head: list[str]) -> None:
    assert HOST.command(info, prompt="p", agent=None, model=None) == [*head, "p"]
    assert HOST.command(info, prompt="p", agent="rev", model="anthropic/x") == [*head, "--agent", "rev", "--model", "anthropic/x", "p"]
    # `opencode run "/greet"` sends the text as it is: a command prompt runs through --command,
    # its arguments one word each (OpenCode quotes a message argument holding a space).
    assert HOST.command(info, prompt="/greet", agent=None, model=None) == [*head, "--command", "greet"]
    assert HOST.command(info, prompt="/greet the  team", agent="rev", model=None) == \
        [*head, "--agent", "rev", "--command", "greet", "the", "team"]
    assert HOST.command(info, prompt="/tmp/x is broken", agent=None, model=None) == [*head, "/tmp/x is broken"]


def test_environment_is_quiet_and_drops_config_layers(tmp_path: Path) -> None:
    base = {"PATH": "/usr/bin", "HOME": "/ignored", "OPENCODE_CONFIG": "/x.json", "OPENCODE_CONFIG_CONTENT": "{}",
            "OPENCODE_PERMISSION": "{}", "OPENCODE_CONFIG_DIR": "/d"}
    env = HOST.environment(V1, base_env=base, parent_env={"ANTHROPIC_API_KEY": "sk"}, home=tmp_path, scripted=None)
    assert env["HOME"] == str(tmp_path)
    for name in ("OPENCODE_CONFIG", "OPENCODE_CONFIG_CONTENT", "OPENCODE_PERMISSION", "OPENCODE_CONFIG_DIR", "ANTHROPIC_API_KEY"):
        assert name not in env
    for name in ("OPENCODE_DISABLE_AUTOUPDATE", "OPENCODE_DISABLE_MODELS_FETCH", "OPENCODE_DISABLE_SHARE",
                 "OPENCODE_DISABLE_LSP_DOWNLOAD", "OPENCODE_DISABLE_CLAUDE_CODE"):
        assert env[name] == "1"
    assert env["npm_config_registry"].startswith("http://127.0.0.1:")


# --------------------------------------------------------------------------- stored sessions

# The columns of OpenCode 1.18.33's session and message tables that the reader uses.
SESSION_TABLE = (
    "CREATE TABLE session (id text PRIMARY KEY, parent_id text, cost real DEFAULT 0 NOT NULL,"
    " tokens_input integer DEFAULT 0 NOT NULL, tokens_output integer DEFAULT 0 NOT NULL,"
    " tokens_reasoning integer DEFAULT 0 NOT NULL, tokens_cache_read integer DEFAULT 0 NOT NULL,"
    " tokens_cache_write integer DEFAULT 0 NOT NULL, model text)"
)
MESSAGE_TABLE = ("CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL,"
                 " time_created integer NOT NULL, data text NOT NULL)")
MAIN_ROW = ("ses_main", None, 0.25, 10, 5, 1, 2, 3, json.dumps({"id": "scripted-model", "providerID": "s"}))
CHILD_ROW = ("ses_child", "ses_main", 0.5, 7, 4, 0, 0, 1, json.dumps({"id": "small", "providerID": "s"}))


def store_sessions(home: Path, rows: list[tuple[object, ...]], messages: tuple[tuple[object, ...], ...] = ()) -> Path:
    db = data_dir(home) / "opencode.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(db)) as connection:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute(SESSION_TABLE)
        connection.execute(MESSAGE_TABLE)
        connection.executemany("INSERT INTO session VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        connection.executemany("INSERT INTO message VALUES (?, ?, ?, ?)", messages)
        connection.commit()
    return db


def test_stored_sessions_give_model_cost_and_tokens(tmp_path: Path) -> None:
    store_sessions(tmp_path, [MAIN_ROW, CHILD_ROW])
    found = read_sessions(tmp_path, {}, ["ses_main", "ses_child", "ses_unknown"])
    assert set(found) == {"ses_main", "ses_child"}
    assert found["ses_main"] == StoredSession(
        "s/scripted-model", 0.25, Usage(inputTokens=10, outputTokens=6, cacheReadTokens=2, cacheWriteTokens=3))
    assert found["ses_child"].cost == 0.5 and found["ses_child"].model == "s/small"


def test_a_session_without_model_takes_the_last_assistant_message(tmp_path: Path) -> None:
    messages = (("m1", "ses_main", 1, json.dumps({"role": "assistant", "providerID": "a", "modelID": "old"})),
                ("m2", "ses_main", 2, json.dumps({"role": "assistant", "providerID": "a", "modelID": "new"})),
                ("m3", "ses_main", 3, json.dumps({"role": "user", "providerID": "u", "modelID": "x"})))
    store_sessions(tmp_path, [(*MAIN_ROW[:-1], None)], messages)
    assert read_sessions(tmp_path, {}, ["ses_main"])["ses_main"].model == "a/new"


def test_the_write_ahead_log_is_read_with_the_database(tmp_path: Path) -> None:
    # OpenCode exits with its rows still in opencode.db-wal; a reader of the main file alone sees none.
    db = store_sessions(tmp_path, [])
    with closing(sqlite3.connect(db)) as keeper:  # open, it keeps the log from being checkpointed away
        keeper.execute("PRAGMA wal_autocheckpoint = 0")
        keeper.execute("INSERT INTO session VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", MAIN_ROW)
        keeper.commit()
        assert db.with_name("opencode.db-wal").stat().st_size > 0
        with closing(sqlite3.connect(f"{db.as_uri()}?immutable=1", uri=True)) as main_file_only:
            assert main_file_only.execute("SELECT count(*) FROM session").fetchone() == (0,)
        assert read_sessions(tmp_path, {}, ["ses_main"])["ses_main"].cost == 0.25


def test_the_store_follows_xdg_data_home(tmp_path: Path) -> None:
    store_sessions(tmp_path / "data-home", [MAIN_ROW])
    env = {"XDG_DATA_HOME": str(tmp_path / "data-home" / ".local" / "share")}
    assert set(read_sessions(tmp_path / "data-home", env, ["ses_main"])) == {"ses_main"}


def test_a_symlinked_store_directory_is_not_read(tmp_path: Path) -> None:
    # The agent points the trial HOME's .local at another store (the user's, with their history).
    store_sessions(tmp_path / "other", [MAIN_ROW])
    home = tmp_path / "home"
    home.mkdir()
    (home / ".local").symlink_to(tmp_path / "other" / ".local")
    assert read_sessions(home, {}, ["ses_main"]) == {}


def test_a_symlinked_or_special_database_is_not_read(tmp_path: Path) -> None:
    other = store_sessions(tmp_path / "other", [MAIN_ROW])
    store = data_dir(tmp_path / "home")
    store.mkdir(parents=True)
    (store / "opencode.db").symlink_to(other)
    assert read_sessions(tmp_path / "home", {}, ["ses_main"]) == {}
    (store / "opencode.db").unlink()
    os.mkfifo(store / "opencode.db")  # opening it must not hang
    assert read_sessions(tmp_path / "home", {}, ["ses_main"]) == {}


def test_an_oversized_store_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = store_sessions(tmp_path, [MAIN_ROW])
    assert set(read_sessions(tmp_path, {}, ["ses_main"])) == {"ses_main"}
    monkeypatch.setattr(opencode_store, "SESSION_STORE_LIMIT", db.stat().st_size - 1)
    assert read_sessions(tmp_path, {}, ["ses_main"]) == {}


def test_a_session_view_is_refused(tmp_path: Path) -> None:
    # A view in the table's place could compute anything (here: rows that never end).
    db = data_dir(tmp_path) / "opencode.db"
    db.parent.mkdir(parents=True)
    with closing(sqlite3.connect(db)) as connection:
        connection.execute("CREATE VIEW session AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n)"
                           " SELECT 'ses_main' AS id, i AS cost FROM n")
    assert read_sessions(tmp_path, {}, ["ses_main"]) == {}


def test_an_expensive_query_is_interrupted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store_sessions(tmp_path, [(f"ses_{i}", None, 0.0, 1, 1, 0, 0, 0, None) for i in range(2000)])
    assert len(read_sessions(tmp_path, {}, [f"ses_{i}" for i in range(2000)])) == 2000
    monkeypatch.setattr(opencode_store, "_QUERY_STEP_LIMIT", 1)
    assert read_sessions(tmp_path, {}, [f"ses_{i}" for i in range(2000)]) == {}


@pytest.mark.parametrize("content", [b"", b"not a database at all", b"SQLite format 3\x00" + b"\xff" * 200])
def test_junk_stores_give_nothing(tmp_path: Path, content: bytes) -> None:
    db = data_dir(tmp_path) / "opencode.db"
    db.parent.mkdir(parents=True)
    db.write_bytes(content)
    assert read_sessions(tmp_path, {}, ["ses_main"]) == {}


def test_no_store_and_no_sessions_give_nothing(tmp_path: Path) -> None:
    assert read_sessions(tmp_path, {}, ["ses_main"]) == {}
    store_sessions(tmp_path, [MAIN_ROW])
    assert read_sessions(tmp_path, {}, []) == {}


@pytest.mark.parametrize(("env", "model", "expected"), [
    ({}, "anthropic/claude-sonnet-4-5", "https://api.anthropic.com/v1"),
    ({"ANTHROPIC_BASE_URL": "https://api.anthropic.com/"}, "anthropic/claude-sonnet-4-5", "https://api.anthropic.com/v1"),
    ({"ANTHROPIC_BASE_URL": "https://gw.example/anthropic/v1/"}, "anthropic/x", "https://gw.example/anthropic/v1"),
    ({}, "openai/gpt-5", "https://api.openai.com/v1"),
    ({"OPENAI_BASE_URL": "https://gw.example/openai"}, "openai/gpt-5", "https://gw.example/openai"),
    ({"ANTHROPIC_BASE_URL": "https://gw.example/v1"}, "openai/gpt-5", "https://api.openai.com/v1"),
    ({}, "openrouter/some-model", None),  # no default this adapter knows: metered from the stream
    ({}, None, None),                     # OpenCode picks the provider itself
    ({"ANTHROPIC_BASE_URL": "gw.example"}, "anthropic/x", None),
])
def test_the_provider_endpoint_is_the_models_providers_base_url_behind_the_proxy(
        env: dict[str, str], model: str | None, expected: str | None) -> None:
    # docs/design.md §10: where the metering proxy forwards an OpenCode session of a real provider
    endpoint = HOST.provider_endpoint(env, model)
    assert (endpoint.upstream if endpoint is not None else None) == expected
    if endpoint is not None:
        assert endpoint.variable == PROXY_BASE_URL_VARIABLE


def test_a_provider_the_proxy_cannot_front_keeps_its_own_base_url(tmp_path: Path) -> None:
    sandbox, home, user_home = tmp_path / "sandbox", tmp_path / "home", tmp_path / "user"
    write_auth(user_home, {"openrouter": {"type": "api", "key": "k"}})
    HOST.prepare(TrialWiring(V1, sandbox_root=sandbox, home=home, user_home=user_home, parent_env={}, model="openrouter/m",
                 scripted=None))
    assert "provider" not in json.loads((sandbox / PROJECT_CONFIG).read_text())


def test_model_only_admits_an_opencode_provider_the_proxy_fronts_and_refuses_the_others() -> None:
    from pytest_atlante.run.evalrun import model_only_problem

    assert model_only_problem("opencode", {}, "anthropic/claude-sonnet-4-5") is None
    assert model_only_problem("opencode", {}, "openai/gpt-5") is None
    for model in (None, "openrouter/some-model"):
        problem = model_only_problem("opencode", {}, model)
        assert problem is not None and problem.code == "eval-network-unavailable"
