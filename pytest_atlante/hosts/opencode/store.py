"""OpenCode's store: the stored authentication (``auth.json`` and, V2, the credential tables of its
database) and, after a trial, the sessions that trial's OpenCode recorded.

Only credentials and migration bookkeeping reach a trial; session history never does (eval
reference, "Host versions"). The database copy keeps the *whole schema* — every table, index,
trigger and view — but copies rows only of the credential and bookkeeping tables: with the
migration rows present OpenCode will not re-run its migrations, so every table they would have
created must already exist, empty.

Table names as measured in OpenCode 1.18.33's ``opencode.db`` (the V2 dialect is designed from
them; there is no V2 release to measure yet).

After a session, :func:`read_sessions` reads what ``opencode export`` would print — each session's
model, cost and tokens (host-facts §8) — from the ``session`` table of the database the trial's
OpenCode wrote in the trial HOME, instead of starting the CLI again.  That database is as
untrusted as the sandbox (the agent's shell could rewrite it), so it is read like hostile input:
no symlink anywhere below the trial HOME, regular files of bounded size, copied before sqlite opens
them, and a query whose work is bounded.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from collections.abc import Iterable, Mapping
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_atlante.fsutil import UnreadableFile, read_capped
from pytest_atlante.hosts.base import CREDENTIALS_LIMIT
from pytest_atlante.hosts.opencode.stream import opencode_usage
from pytest_atlante.records import Usage

#: Tables holding stored logins (provider credentials, accounts and the active-account pointer).
CREDENTIAL_TABLES: tuple[str, ...] = ("credential", "account", "account_state", "control_account")
#: Tables recording which schema and data migrations already ran.
MIGRATION_TABLES: tuple[str, ...] = ("migration", "data_migration", "__drizzle_migrations")

_DATA_REL = Path(".local") / "share" / "opencode"


def data_dir(home: Path, env: Mapping[str, str] | None = None) -> Path:
    """OpenCode's data directory: ``$XDG_DATA_HOME/opencode`` or ``~/.local/share/opencode``."""
    xdg = (env or {}).get("XDG_DATA_HOME")
    return Path(xdg) / "opencode" if xdg else home / _DATA_REL


def read_auth(path: Path) -> dict[str, Any] | None:
    """The providers in an ``auth.json``; None when it is missing or not a JSON object."""
    try:
        document = json.loads(read_capped(path, CREDENTIALS_LIMIT))
    except (UnreadableFile, ValueError):  # UnicodeDecodeError is a ValueError
        return None
    return document if isinstance(document, dict) else None


def has_auth_for(auth: Mapping[str, Any], model: str | None) -> bool:
    """Whether ``auth`` holds an entry usable for ``model`` (``provider/model``; None: any entry)."""
    usable = {provider for provider, entry in auth.items() if isinstance(entry, dict) and entry}
    if model is None:
        return bool(usable)
    provider = model.split("/", 1)[0]
    return provider in usable


def _connect_read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0)


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def stored_credential_rows(db: Path) -> int:
    """How many rows the credential tables of ``db`` hold (0 when it is missing or unreadable)."""
    if not db.is_file():
        return 0
    try:
        with closing(_connect_read_only(db)) as source:
            tables = _table_names(source)
            return sum(
                int(source.execute(f"SELECT count(*) FROM {_quote(name)}").fetchone()[0])
                for name in CREDENTIAL_TABLES
                if name in tables
            )
    except sqlite3.Error:
        return 0


def _table_names(connection: sqlite3.Connection) -> set[str]:
    return {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def copy_credential_database(source_db: Path, target_db: Path) -> list[str]:
    """Create ``target_db`` with ``source_db``'s schema and only credential + bookkeeping rows.

    Returns the names of the tables whose rows were copied. Raises ``sqlite3.Error`` or
    ``OSError`` when the source cannot be read or the target written.
    """
    target_db.parent.mkdir(parents=True, exist_ok=True)
    for leftover in (target_db, target_db.with_name(target_db.name + "-wal"), target_db.with_name(target_db.name + "-shm")):
        leftover.unlink(missing_ok=True)
    copied: list[str] = []
    with closing(_connect_read_only(source_db)) as source:
        schema = [
            (kind, name, sql)
            for kind, name, sql in source.execute(
                "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid"
            )
            if not name.startswith("sqlite_")
        ]
        target = sqlite3.connect(target_db)
        try:
            target.execute("PRAGMA foreign_keys = OFF")
            # Tables first, then indexes, triggers and views, which refer to them.
            for _kind, _name, sql in sorted(schema, key=lambda entry: entry[0] != "table"):
                target.execute(sql)
            tables = {name for kind, name, _sql in schema if kind == "table"}
            for name in CREDENTIAL_TABLES + MIGRATION_TABLES:
                if name not in tables:
                    continue
                cursor = source.execute(f"SELECT * FROM {_quote(name)}")
                columns = ", ".join(_quote(column[0]) for column in cursor.description)
                marks = ", ".join("?" for _ in cursor.description)
                target.executemany(f"INSERT INTO {_quote(name)} ({columns}) VALUES ({marks})", cursor)
                copied.append(name)
            target.commit()
        finally:
            target.close()
    target_db.chmod(0o600)
    return copied


# --------------------------------------------------------------------------- sessions of a trial

#: A trial's database and its write-ahead log are each read up to this size (the rows a few
#: sessions need are kilobytes; a bigger file is the agent's doing and yields no figures).
SESSION_STORE_LIMIT = 64 * 1024 * 1024
#: sqlite virtual-machine steps one query may take before it is interrupted (a hostile schema
#: could make ``session`` expensive); a real trial's query takes a few thousand.
_QUERY_STEP_LIMIT = 5_000_000
_PROGRESS_INTERVAL = 10_000


@dataclass(frozen=True)
class StoredSession:
    """What ``opencode export <id>`` reports about one session: ``info.model`` as
    ``providerID/id``, ``info.cost`` and ``info.tokens``."""

    model: str | None
    cost: float
    usage: Usage | None


def read_sessions(home: Path, env: Mapping[str, str], session_ids: Iterable[str]) -> dict[str, StoredSession]:
    """The sessions ``session_ids`` as the trial's OpenCode stored them under ``home``.

    Missing, unreadable, oversized or malformed stores give an empty mapping (the figures are then
    unknown, as when ``opencode export`` failed); a session id not in the store is left out.
    """
    wanted = sorted(set(session_ids))
    store = data_dir(home, env)
    if not wanted or not _inside(store, home):
        return {}
    try:
        database = read_capped(store / "opencode.db", SESSION_STORE_LIMIT, follow_symlinks=False)
        journal = _optional(store / "opencode.db-wal")
    except UnreadableFile:
        return {}
    with tempfile.TemporaryDirectory(prefix="atlante-opencode-store-") as scratch:
        copy = Path(scratch) / "opencode.db"
        copy.write_bytes(database)
        if journal is not None:
            copy.with_name("opencode.db-wal").write_bytes(journal)
        try:
            return _query_sessions(copy, wanted)
        except (sqlite3.Error, ValueError, OverflowError):
            return {}


def _inside(store: Path, home: Path) -> bool:
    """Whether ``store`` is ``home``'s own directory: no component below ``home`` is a symlink
    (the agent could point ``.local`` at the user's real store)."""
    try:
        return store.resolve(strict=True) == home.resolve(strict=True) / store.relative_to(home)
    except (OSError, ValueError):
        return False


def _optional(path: Path) -> bytes | None:
    try:
        return read_capped(path, SESSION_STORE_LIMIT, follow_symlinks=False)
    except UnreadableFile as exc:
        if exc.missing:
            return None
        raise


def _query_sessions(db: Path, wanted: list[str]) -> dict[str, StoredSession]:
    steps = 0

    def out_of_budget() -> int:
        nonlocal steps
        steps += _PROGRESS_INTERVAL
        return 1 if steps > _QUERY_STEP_LIMIT else 0

    with closing(sqlite3.connect(db, timeout=0.0)) as connection:
        connection.set_progress_handler(out_of_budget, _PROGRESS_INTERVAL)
        connection.execute("PRAGMA trusted_schema = OFF")
        kinds = dict(connection.execute("SELECT name, type FROM sqlite_master WHERE name IN ('session', 'message')"))
        if kinds.get("session") != "table":
            return {}
        marks = ", ".join("?" for _ in wanted)
        rows = connection.execute(
            "SELECT id, model, cost, tokens_input, tokens_output, tokens_reasoning, tokens_cache_read,"
            f" tokens_cache_write FROM session WHERE id IN ({marks})",
            wanted,
        ).fetchall()
        found: dict[str, StoredSession] = {}
        for session_id, model, cost, *tokens in rows:
            if not isinstance(session_id, str):
                continue
            ref = _model_ref(_json(model), "id")
            if ref is None and kinds.get("message") == "table":
                ref = _last_assistant_model(connection, session_id)
            found[session_id] = StoredSession(model=ref, cost=_cost(cost), usage=_usage(tokens))
        return found


def _json(value: object) -> object:
    if not isinstance(value, str):
        return None
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return None


def _model_ref(value: object, id_key: str) -> str | None:
    if not isinstance(value, dict):
        return None
    provider, model = value.get("providerID"), value.get(id_key)
    if isinstance(provider, str) and isinstance(model, str) and provider and model:
        return f"{provider}/{model}"
    return None


def _last_assistant_model(connection: sqlite3.Connection, session_id: str) -> str | None:
    """The model of the session's last assistant message (a session row without ``model``)."""
    rows = connection.execute(
        "SELECT data FROM message WHERE session_id = ? ORDER BY time_created DESC, id DESC", (session_id,)
    )
    for (data,) in rows:
        info = _json(data)
        if isinstance(info, dict) and info.get("role") == "assistant":
            ref = _model_ref(info, "modelID")
            if ref:
                return ref
    return None


def _cost(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _usage(columns: list[object]) -> Usage | None:
    """The ``tokens_*`` columns as export's ``tokens`` object (input, output, reasoning, cache)."""
    if not all(isinstance(value, int) and not isinstance(value, bool) for value in columns):
        return None
    input_tokens, output, reasoning, cache_read, cache_write = columns
    return opencode_usage({"input": input_tokens, "output": output, "reasoning": reasoning,
                           "cache": {"read": cache_read, "write": cache_write}})
