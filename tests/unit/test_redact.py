"""Known credential values never leave a trial: the redactor and where its secrets come from."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_atlante.sandbox.redact import REDACTED, Secrets, redact, secrets_in_env, secrets_in_file


def test_secret_variables_are_redacted_and_ordinary_ones_are_not() -> None:
    secrets = Secrets(secrets_in_env({
        "ANTHROPIC_API_KEY": "sk-ant-api03-abcdef", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG",
        "GITHUB_TOKEN": "ghp_0123456789", "CLAUDE_CODE_USE_BEDROCK": "1", "PATH": "/usr/local/bin:/usr/bin",
        "SHORT_TOKEN": "abc",
    }))
    text = "key=sk-ant-api03-abcdef aws=wJalrXUtnFEMI/K7MDENG gh=ghp_0123456789 path=/usr/local/bin:/usr/bin mode=1 abc"
    assert redact(text, secrets) == f"key={REDACTED} aws={REDACTED} gh={REDACTED} path=/usr/local/bin:/usr/bin mode=1 abc"


def test_longest_secret_wins_so_none_is_half_replaced() -> None:
    secrets = Secrets(["token-1234", "token-1234-and-more"])
    assert secrets("x token-1234-and-more y token-1234") == f"x {REDACTED} y {REDACTED}"


def test_credential_files_give_their_secret_values(tmp_path: Path) -> None:
    claude = tmp_path / ".credentials.json"
    claude.write_text(json.dumps({"claudeAiOauth": {"accessToken": "sk-ant-oat01-AAAA", "refreshToken": "sk-ant-ort01-BBBB",
                                                    "expiresAt": 1, "subscriptionType": "max"}}))
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"anthropic": {"type": "api", "key": "sk-ant-api03-CCCC"},
                                "openai": {"type": "oauth", "access": "oa-access-DDDD", "refresh": "oa-refresh-EEEE"}}))
    found = secrets_in_file(claude) + secrets_in_file(auth)
    assert set(Secrets(found).values) == {"sk-ant-oat01-AAAA", "sk-ant-ort01-BBBB", "sk-ant-api03-CCCC",
                                 "oa-access-DDDD", "oa-refresh-EEEE"}
    assert secrets_in_file(tmp_path / "missing.json") == []
    (tmp_path / "junk").write_text("not json")
    assert secrets_in_file(tmp_path / "junk") == []
