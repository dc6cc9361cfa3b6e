"""Known credential values never leave a trial: the redactor and where its secrets come from."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pytest_atlante.sandbox.redact import (
    REDACTED,
    Secrets,
    redact,
    secrets_in_env,
    secrets_in_file,
)


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


KEY = "sk-ant-" + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"  # a key shape no variable names


def test_one_definition_covers_known_values_private_names_and_key_shapes() -> None:
    env = {"DEPLOY_PRIVATE": "deploy-private-0123", "OAUTH_REFRESH": "refresh-0123456", "HOME": "/home/someone"}
    secrets = Secrets(secrets_in_env(env))
    assert set(secrets.values) == {"deploy-private-0123", "refresh-0123456"}
    text = (f"a=deploy-private-0123 b=refresh-0123456 c={KEY} d=sk-proj-0123456789abcdefXYZ "
            "e=Authorization: Bearer abcdefghijklmnop0123 f=/home/someone g=sk-short")
    assert secrets(text) == (f"a={REDACTED} b={REDACTED} c={REDACTED} d={REDACTED} "
                             f"e=Authorization: {REDACTED} f=/home/someone g=sk-short")


def test_a_known_value_is_found_in_its_json_escaped_form_too() -> None:
    value = 'pa"ss\\word-0123'
    secrets = Secrets([value])
    line = json.dumps({"text": f"x {value} y"})
    assert value not in json.loads(secrets(line))["text"] and json.loads(secrets(line))["text"] == f"x {REDACTED} y"


def test_no_other_module_defines_a_secret() -> None:
    """The name pattern and the key shapes live in sandbox/redact.py and nowhere else."""
    package = Path(__file__).parents[2] / "pytest_atlante"
    words = re.compile(r"re\.compile\([^)]*(TOKEN|SECRET|PASSW|CREDENTIAL|PRIVATE|sk-|bearer)", re.IGNORECASE | re.DOTALL)
    defining = sorted(str(p.relative_to(package)) for p in package.rglob("*.py") if words.search(p.read_text(encoding="utf-8")))
    assert defining == ["sandbox/redact.py"]


def test_a_key_shape_starts_only_where_a_word_does() -> None:
    """``sk-`` inside a word is prose (``risk-assessment-…`` in a diff), not a key; after a JSON escape it is one."""
    secrets = Secrets()
    assert secrets("risk-assessment-framework-v2 and task-management-system") == \
        "risk-assessment-framework-v2 and task-management-system"
    assert secrets('"line\\nsk-abcdefghijklmnopqrstu"') == '"line\\n<redacted>"'
    assert secrets("key=sk-ant-abcdefghijklmnopqrstuvwxyz") == "key=<redacted>"
