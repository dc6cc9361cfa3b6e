"""The agent never holds the evaluator's credential, on every host (issue 38, item 1), through the
real CLIs against a real-provider-shaped upstream: HTTPS on 127.0.0.1 with a test CA's certificate
(``SSL_CERT_FILE``), serving the scripted model's answers behind the provider's base URL.

Each case stores the real credential where a user has it — a login file (Claude Code's OAuth
``.credentials.json``, Codex's ``auth.json`` from ``codex login --with-api-key``, OpenCode's
``auth.json``) or the key variable (Gemini CLI's ``GEMINI_API_KEY``).  A scripted hostile agent reads
its own environment, every ``/proc/<pid>/environ`` it can see (the CLI's, the relay's under
``model-only``, its shell's) and every JSON file under its HOME (the copied login), and its tool
output goes back to the model — the channel out that every network mode leaves open.  The upstream
must see the real credential on each model request, and no request body (what the agent read) may
hold it: the agent read a per-trial stand-in, which the metering proxy swaps for the real value on
the way out.  Four cases run under ``model-only`` (the relay, which runs in the session's
environment, is among the processes read), two with the network shared.  Before the login stand-ins, the copied login files held the real value (Claude Code,
Codex, OpenCode); Gemini CLI's key variable was stood in already.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import Project, config_doc, make_test_ca, scenario_doc
from test_metering_real import TlsProvider, run

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(600)]

#: No key shape (``sk-…``): nothing may hide it from the assertions by its look.
SECRET = "RealSecretOfTheEvaluator-5f0c2a9e7d"
STEAL = ("(env; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < \"$f\"; echo; done; "
         "find \"$HOME\" -name '*.json' -size -200k -type f -exec cat {} +) 2>/dev/null "
         "| grep -aE 'RealSecret|atlante-stand-in' | cut -c1-400 | sort -u; echo sent > sent.txt")
TURNS: list[dict[str, Any]] = [
    {"text": "reading", "actions": [{"type": "bash", "command": STEAL}], "usage": {"input": 400, "output": 30}},
    {"text": "done", "usage": {"input": 500, "output": 5}},
]


@dataclass(frozen=True)
class Login:
    """Where one host's user keeps the credential, and the run's configuration."""

    host: str
    files: dict[str, str]  # path under the user's HOME → content
    env: dict[str, str]
    config: dict[str, Any]


def _logins(base_url: str) -> dict[str, Login]:
    oauth = {"claudeAiOauth": {"accessToken": SECRET, "refreshToken": SECRET + "-refresh",
                               "expiresAt": 4102444800000, "scopes": ["user:inference", "user:profile"],
                               "subscriptionType": "max"}}
    return {
        "claude-code-oauth": Login("claude-code", {".claude/.credentials.json": json.dumps(oauth)},
                                   {"ANTHROPIC_BASE_URL": base_url},
                                   {"isolation": "namespace", "network": "model-only"}),
        "claude-code-oauth-env": Login("claude-code", {}, {"CLAUDE_CODE_OAUTH_TOKEN": SECRET, "ANTHROPIC_BASE_URL": base_url},
                                       {"isolation": "namespace"}),
        "codex-key": Login("codex", {".codex/config.toml": f'openai_base_url = "{base_url}/v1"\n'},
                           {"CODEX_API_KEY": SECRET}, {"model": "gpt-5.5", "isolation": "namespace"}),
        "codex-login": Login("codex", {".codex/auth.json": json.dumps({"auth_mode": "apikey", "OPENAI_API_KEY": SECRET}),
                                       ".codex/config.toml": f'openai_base_url = "{base_url}/v1"\n'},
                             {}, {"model": "gpt-5.5", "isolation": "namespace", "network": "model-only"}),
        "gemini-key": Login("gemini-cli", {}, {"GEMINI_API_KEY": SECRET, "GOOGLE_GEMINI_BASE_URL": base_url},
                            {"isolation": "namespace", "network": "model-only"}),
        "opencode-login": Login("opencode", {".local/share/opencode/auth.json": json.dumps(
                                    {"anthropic": {"type": "api", "key": SECRET}})},
                                {"ANTHROPIC_BASE_URL": f"{base_url}/v1"},
                                {"model": "anthropic/claude-sonnet-4-5", "isolation": "namespace",
                                 "network": "model-only"}),
    }


@pytest.fixture
def upstream(atlante_project: Project, tmp_path: Path) -> Iterator[tuple[TlsProvider, Path]]:
    ca_dir = tmp_path / "ca"
    ca_dir.mkdir()
    certs = make_test_ca(ca_dir)
    server = TlsProvider(atlante_project, certs["cert"], certs["key"], TURNS)
    yield server, certs["ca"]
    server.close()


def _user_home(tmp_path: Path, login: Login, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "user-home"
    for rel, text in login.files.items():
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o600)
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    for name in ("XDG_DATA_HOME", "CODEX_HOME", "CODEX_API_KEY", "OPENAI_BASE_URL", "CLAUDE_CONFIG_DIR",
                 "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "GEMINI_API_KEY",
                 "GOOGLE_GEMINI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in login.env.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize("case", ["claude-code-oauth", "claude-code-oauth-env", "codex-key", "codex-login", "gemini-key",
                                  "opencode-login"])
def test_the_agent_reads_only_a_stand_in_and_the_upstream_gets_the_real_credential(
        pytester: pytest.Pytester, atlante_project: Project, upstream: tuple[TlsProvider, Path],
        hosts_path: Callable[[], str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, case: str) -> None:
    server, ca = upstream
    login = _logins(server.url)[case]
    _user_home(tmp_path, login, monkeypatch)
    monkeypatch.setenv("PATH", hosts_path())
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    atlante_project.config(config_doc(host=login.host, budget={"trials": 1, "timeoutMs": 180000}, **login.config))
    atlante_project.scenario(scenario_doc(checks=[{"type": "file-exists", "path": "sent.txt"}]))
    atlante_project.build()
    status, report, text = run(pytester, atlante_project)
    [trial] = report.scenarios[0].trials
    assert (trial.verdict, status, trial.meteredBy) == ("pass", 0, "proxy"), text
    turns = [r for r in server.model.requests if r.kind == "turn"]
    assert len(turns) == 2, text
    # The upstream got the real credential on every model request (a header, or Gemini's ?key=).
    assert len(server.credentials) >= 2 and all(SECRET in seen for seen in server.credentials), server.credentials
    read = [json.dumps(r.body) for r in turns]
    leaked = [body[max(0, body.find(SECRET) - 300):body.find(SECRET) + 300] for body in read if SECRET in body]
    assert not leaked, leaked
    assert "atlante-stand-in-" in read[1], read[1][-3000:]  # the agent's tool output: what it read
    assert trial.credentialExposed is False
    assert SECRET not in (pytester.path / "out" / "report.json").read_text()
