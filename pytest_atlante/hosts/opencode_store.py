"""OpenCode's stored authentication: ``auth.json`` and (V2) the credential tables of its database.

Only credentials and migration bookkeeping reach a trial; session history never does (eval
reference, "Host versions"). The database copy keeps the *whole schema* — every table, index,
trigger and view — but copies rows only of the credential and bookkeeping tables: with the
migration rows present OpenCode will not re-run its migrations, so every table they would have
created must already exist, empty.

Table names as measured in OpenCode 1.18.33's ``opencode.db`` (the V2 dialect is designed from
them; there is no V2 release to measure yet).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

from pytest_atlante.fsutil import UnreadableFile, read_capped
from pytest_atlante.hosts.base import CREDENTIALS_LIMIT

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
