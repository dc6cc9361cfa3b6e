"""Known credential values never leave a trial: the redactor and where its secrets come from."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from pytest_atlante.sandbox.redact import (
    REDACTED,
    Secrets,
    login_document,
    redact,
    refreshed_credentials,
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


# --------------------------------------------------------------------------- the agent cannot steer it

CLAUDE_FIELDS = (("claudeAiOauth", "accessToken"), ("claudeAiOauth", "refreshToken"))
OPENCODE_FIELDS = (("*", "key"), ("*", "access"), ("*", "refresh"))
OLD_ACCESS = "sk-ant-oat01-" + "a" * 40
NEW_ACCESS = "sk-ant-oat01-" + "b" * 40


def test_a_token_refresh_is_learned_and_nothing_else_the_file_says(tmp_path: Path) -> None:
    login = tmp_path / ".credentials.json"
    login.write_text(json.dumps({"claudeAiOauth": {"accessToken": OLD_ACCESS, "refreshToken": "sk-ant-ort01-" + "c" * 40}}))
    before = login_document(login)
    # The host refreshed the access token; the agent added strings of its choosing under other keys.
    login.write_text(json.dumps({"claudeAiOauth": {"accessToken": NEW_ACCESS, "refreshToken": "sk-ant-ort01-" + "c" * 40,
                                                   "apiToken": "src/app.py-long-enough"},
                                 "token": "escape-notes-long.txt", "otherAuth": {"accessToken": "README-notes-long"}}))
    assert refreshed_credentials(before, login, CLAUDE_FIELDS) == [NEW_ACCESS]


def test_a_credential_field_the_agent_rewrites_with_a_path_or_a_sentence_is_not_a_secret(tmp_path: Path) -> None:
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"anthropic": {"type": "oauth", "access": "oa-access-" + "d" * 30, "refresh": "r" * 30}}))
    before = login_document(auth)
    auth.write_text(json.dumps({"anthropic": {"type": "oauth", "access": "src/components/Button.tsx",
                                              "refresh": "the changed file names"},
                                "planted": {"type": "api", "key": "a-planted-provider-key-long"}}))
    assert refreshed_credentials(before, auth, OPENCODE_FIELDS) == []  # a path, a sentence, a field never copied


def test_a_login_that_was_never_copied_adds_nothing_after_the_session(tmp_path: Path) -> None:
    """Scripted runs copy no login: whatever the agent writes at its place is not a refresh."""
    login = tmp_path / ".credentials.json"
    before = login_document(login)
    login.write_text(json.dumps({"claudeAiOauth": {"accessToken": NEW_ACCESS}}))
    assert before is None and refreshed_credentials(before, login, CLAUDE_FIELDS) == []


def test_a_login_read_follows_no_symlink_and_waits_on_no_fifo(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"claudeAiOauth": {"accessToken": NEW_ACCESS}}))
    (tmp_path / "link.json").symlink_to(target)
    os.mkfifo(tmp_path / "fifo.json")
    assert login_document(tmp_path / "link.json") is None and login_document(tmp_path / "fifo.json") is None
    assert secrets_in_file(tmp_path / "link.json") == [] and secrets_in_file(tmp_path / "fifo.json") == []


def test_a_name_holding_a_secret_still_shows_as_a_numbered_placeholder() -> None:
    secrets = Secrets(["first-secret-value", "second-secret-value"])
    names = ["dir/first-secret-value.txt", "second-secret-value", "first-secret-value/other", "plain.txt",
             "sk-ant-" + "k" * 30]
    shown = [secrets.numbered(name) for name in names]
    assert shown == ["dir/<redacted-1>.txt", "<redacted-2>", "<redacted-1>/other", "plain.txt", "<redacted-3>"]
    assert len(set(shown)) == len(names)  # two names never collapse into one
    assert "first-secret" not in "".join(shown) and secrets("x first-secret-value") == f"x {REDACTED}"
