"""Logins copied into the trial HOME: stand-ins where the session goes through the metering proxy
(issue 38, item 1; the real CLIs' side is tests/integration/test_stand_ins_real.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_atlante.hosts.base import HostInfo, TrialWiring
from pytest_atlante.hosts.claude_code.adapter import ClaudeCodeHost
from pytest_atlante.hosts.codex.adapter import CodexHost, codex_home
from pytest_atlante.hosts.logins import copy_login, exposed_fields, with_stand_ins
from pytest_atlante.hosts.names import HostName
from pytest_atlante.hosts.opencode.adapter import OpenCodeHost

REAL = "real-credential-0123456789"


def stand_in(value: str) -> str:
    return f"atlante-stand-in-{len(value)}"


def is_stand_in(value: str) -> bool:
    return value.startswith("atlante-stand-in-")


def write(path: Path, document: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_a_stood_in_login_keeps_only_the_named_entries_with_each_credential_replaced() -> None:
    document: dict[str, Any] = {"claudeAiOauth": {"accessToken": REAL, "refreshToken": REAL + "-r", "expiresAt": 1, "scopes": ["a"]},
                "mcpOAuth": {"server": {"accessToken": REAL + "-mcp"}}}
    login = with_stand_ins(document, {"claudeAiOauth"}, [("claudeAiOauth", "accessToken"),
                                                         ("claudeAiOauth", "refreshToken")], stand_in)
    assert login == {"claudeAiOauth": {"accessToken": stand_in(REAL), "refreshToken": stand_in(REAL + "-r"),
                                       "expiresAt": 1, "scopes": ["a"]}}
    assert document["claudeAiOauth"]["accessToken"] == REAL  # the user's document is not changed
    assert with_stand_ins({"tokens": {"access_token": REAL}}, {"tokens"}, [("OPENAI_API_KEY",)], stand_in) is None


def test_a_wildcard_field_names_every_entry() -> None:
    document = {"anthropic": {"type": "api", "key": REAL}, "openai": {"type": "oauth", "access": REAL, "refresh": REAL}}
    login = with_stand_ins(document, {"anthropic", "openai"}, [("*", "key"), ("*", "access"), ("*", "refresh")], stand_in)
    assert login is not None and REAL not in json.dumps(login)
    assert exposed_fields(document, [("*", "key"), ("*", "access")], is_stand_in)
    assert not exposed_fields(login, [("*", "key"), ("*", "access")], is_stand_in)
    assert not exposed_fields(None, [("*", "key")], is_stand_in) and not exposed_fields([REAL], [("*",)], is_stand_in)


def test_without_a_stand_in_the_login_is_copied_as_it_is_and_with_one_an_unreadable_login_is_not(tmp_path: Path) -> None:
    source = tmp_path / "user" / "auth.json"
    source.parent.mkdir()
    source.write_text(json.dumps({"anthropic": {"key": REAL}}) + " ", encoding="utf-8")
    assert copy_login(source, tmp_path / "a" / "auth.json", None, keep=(), fields=())
    assert (tmp_path / "a" / "auth.json").read_bytes() == source.read_bytes()
    assert copy_login(source, tmp_path / "b" / "auth.json", stand_in, keep=("anthropic",), fields=[("anthropic", "key")])
    copied = tmp_path / "b" / "auth.json"
    assert json.loads(copied.read_text()) == {"anthropic": {"key": stand_in(REAL)}}
    assert copied.stat().st_mode & 0o077 == 0
    source.write_text("not json", encoding="utf-8")
    assert not copy_login(source, tmp_path / "c" / "auth.json", stand_in, keep=("anthropic",), fields=[("anthropic", "key")])
    assert not (tmp_path / "c" / "auth.json").exists()
    assert not copy_login(tmp_path / "missing.json", tmp_path / "d.json", stand_in, keep=(), fields=())


def wiring(tmp_path: Path, host: HostName, model: str | None, **env: str) -> TrialWiring:
    info = HostInfo(host, "1.0.0", {"claude-code": "claude-code", "codex": "codex-responses"}.get(host, "opencode-v1"),
                    host)
    return TrialWiring(info, sandbox_root=tmp_path / "sb", home=tmp_path / "home", user_home=tmp_path / "user",
                       parent_env=env, model=model, scripted=None, stand_in=stand_in)


def test_claude_code_s_copied_oauth_login_holds_stand_ins_and_no_mcp_tokens(tmp_path: Path) -> None:
    write(tmp_path / "user" / ".claude" / ".credentials.json",
          {"claudeAiOauth": {"accessToken": REAL, "refreshToken": REAL + "r", "expiresAt": 9, "subscriptionType": "max"},
           "mcpOAuth": {"github|1": {"accessToken": REAL + "m"}}})
    ClaudeCodeHost().prepare(wiring(tmp_path, "claude-code", None))
    copied = json.loads((tmp_path / "home" / ".claude" / ".credentials.json").read_text())
    assert copied == {"claudeAiOauth": {"accessToken": stand_in(REAL), "refreshToken": stand_in(REAL + "r"),
                                        "expiresAt": 9, "subscriptionType": "max"}}


@pytest.mark.parametrize(("auth", "copied"), [
    ({"auth_mode": "apikey", "OPENAI_API_KEY": REAL, "tokens": None}, {"auth_mode": "apikey", "OPENAI_API_KEY": stand_in(REAL)}),
    ({"auth_mode": "chatgpt", "tokens": {"access_token": REAL, "refresh_token": REAL}}, None),  # CODEX_API_KEY is used
])
def test_codex_s_copied_login_is_an_api_key_stand_in_or_nothing(tmp_path: Path, auth: dict[str, Any],
                                                                  copied: dict[str, Any] | None) -> None:
    write(tmp_path / "user" / ".codex" / "auth.json", auth)
    CodexHost().prepare(wiring(tmp_path, "codex", "gpt-5.5", CODEX_API_KEY="k"))
    target = codex_home(tmp_path / "home") / "auth.json"
    assert (json.loads(target.read_text()) if target.exists() else None) == copied


def test_opencode_s_copied_login_holds_only_the_model_s_provider_as_a_stand_in(tmp_path: Path) -> None:
    write(tmp_path / "user" / ".local" / "share" / "opencode" / "auth.json",
          {"anthropic": {"type": "api", "key": REAL}, "openai": {"type": "api", "key": REAL + "o"}})
    OpenCodeHost().prepare(wiring(tmp_path, "opencode", "anthropic/claude-sonnet-4-5"))
    copied = json.loads((tmp_path / "home" / ".local" / "share" / "opencode" / "auth.json").read_text())
    assert copied == {"anthropic": {"type": "api", "key": stand_in(REAL)}}


def test_a_session_is_exposed_by_a_real_value_where_its_credentials_are(tmp_path: Path) -> None:
    """``credentialExposed`` (trial/session.py): a login as copied, the session's variables, the isolation."""
    from pytest_atlante.trial.session import credential_exposed

    host = ClaudeCodeHost()
    stood = {"claudeAiOauth": {"accessToken": "atlante-stand-in-a", "refreshToken": "atlante-stand-in-b", "scopes": ["x"]}}
    login = tmp_path / ".credentials.json"
    env = {"ANTHROPIC_API_KEY": "atlante-stand-in-c"}
    assert not credential_exposed(host, env, {login: stood}, confined=True)
    assert not credential_exposed(host, env, {login: None}, confined=True)  # nothing was copied
    assert credential_exposed(host, env, {login: stood}, confined=False)  # beside the runner, as its user
    assert credential_exposed(host, {**env, "CLAUDE_CODE_USE_BEDROCK": "1"}, {login: stood}, confined=True)
    assert credential_exposed(host, env, {login: {"claudeAiOauth": {"accessToken": REAL}}}, confined=True)
    database = tmp_path / "opencode.db"
    database.write_bytes(b"SQLite format 3\x00")  # OpenCode V2's credential tables: no JSON to stand in
    assert credential_exposed(OpenCodeHost(), {}, {database: None}, confined=True)
