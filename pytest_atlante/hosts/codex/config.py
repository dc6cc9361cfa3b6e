"""What a Codex trial's fresh CODEX_HOME holds: ``config.toml`` and the policy's execpolicy rules.

The config (host-facts-codex §3–§4) turns off everything that reaches beyond the model: analytics
(an OTLP export that also added 5 s to every run), the curated-plugin sync, the update check and
the hosted web-search tool; approvals are never asked (a headless run cannot answer); Codex's own
sandbox is ``workspace-write`` with ``/tmp`` excluded (the command line switches it to
``danger-full-access`` under the project's namespace isolation, where it cannot start).  The
scripted model is a custom provider (``wire_api = "responses"``, no retries, no key).  The project
is never marked trusted, so a ``.codex/config.toml`` or ``.codex/rules`` could not apply anyway.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_atlante.fsutil import UnreadableFile, read_capped
from pytest_atlante.hosts.base import ScriptedEndpoint
from pytest_atlante.hosts.policy import POLICY, ContainmentPolicy

#: The model a scripted Codex session names: a slug of Codex's catalog, so it offers ``apply_patch``
#: (an unknown name gets fallback metadata and no patch tool, host-facts-codex §3).
SCRIPTED_CATALOG_MODEL = "gpt-5.5"
SCRIPTED_PROVIDER_ID = "atlante-scripted"
PROXY_PROVIDER_ID = "atlante-metered"
#: Where the built-in provider sends an API-key session (its default ``openai_base_url``).
OPENAI_API_URL = "https://api.openai.com/v1"
_CONFIG_LIMIT = 1024 * 1024


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value), ensure_ascii=False)  # a TOML basic string: JSON's escapes are TOML's


def _toml(config: Mapping[str, Any]) -> str:
    """Top-level scalars, then one ``[table]`` per nested mapping (dotted for deeper levels)."""
    lines = [f"{key} = {_toml_value(value)}" for key, value in config.items() if not isinstance(value, Mapping)]

    def tables(prefix: str, node: Mapping[str, Any]) -> None:
        for key, value in node.items():
            if isinstance(value, Mapping):
                name = f"{prefix}.{key}" if prefix else key
                scalars = {k: v for k, v in value.items() if not isinstance(v, Mapping)}
                if scalars:
                    lines.extend(["", f"[{name}]", *(f"{k} = {_toml_value(v)}" for k, v in scalars.items())])
                tables(name, value)

    tables("", config)
    return "\n".join(lines) + "\n"


def config_document(*, model: str | None, scripted: ScriptedEndpoint | None,
                    openai_base_url: str | None, proxy_url: str | None = None) -> dict[str, Any]:
    """The trial's ``config.toml``.  A scripted session's provider is the scripted model (behind the
    proxy); a metered real-provider session (``proxy_url``) gets a provider of its own pointing at
    the metering proxy, which forwards to the user's endpoint (``openai_base_url``'s place is taken
    by the proxy's upstream, ``provider_endpoint``); otherwise the built-in provider, at the user's
    ``openai_base_url`` when they set one."""
    config: dict[str, Any] = {
        "approval_policy": "never",
        "sandbox_mode": "workspace-write",
        "web_search": "disabled",
        "check_for_update_on_startup": False,
    }
    if scripted is not None:
        config |= {"model": SCRIPTED_CATALOG_MODEL, "model_provider": SCRIPTED_PROVIDER_ID}
    elif model:
        config["model"] = model
    if scripted is None and proxy_url is not None:
        config["model_provider"] = PROXY_PROVIDER_ID
    elif scripted is None and openai_base_url:
        config["openai_base_url"] = openai_base_url
    config |= {
        "analytics": {"enabled": False},
        "features": {"plugins": False},
        # /tmp is the machine's; the session's TMPDIR is the trial's own, removed with it.
        "sandbox_workspace_write": {"exclude_slash_tmp": True, "exclude_tmpdir_env_var": False},
    }
    if scripted is not None:
        config["model_providers"] = {SCRIPTED_PROVIDER_ID: {
            "name": "Atlante scripted model", "base_url": scripted.openai_base_url, "wire_api": "responses",
            "request_max_retries": 0, "stream_max_retries": 0}}
    elif proxy_url is not None:
        # requires_openai_auth: the session's own credential (CODEX_API_KEY, or the copied API-key
        # login) is sent as the built-in provider would send it (measured on 0.171.0); a custom
        # provider never tries the built-in one's WebSocket first (host-facts-codex §3).
        config["model_providers"] = {PROXY_PROVIDER_ID: {
            "name": "OpenAI through the atlante metering proxy", "base_url": proxy_url, "wire_api": "responses",
            "requires_openai_auth": True, "supports_websockets": False}}
    return config


def render_config(*, model: str | None, scripted: ScriptedEndpoint | None, openai_base_url: str | None,
                  proxy_url: str | None = None) -> str:
    return _toml(config_document(model=model, scripted=scripted, openai_base_url=openai_base_url, proxy_url=proxy_url))


def rule_patterns(policy: ContainmentPolicy = POLICY) -> list[list[str]]:
    """One token pattern per denied command (``rm -rf`` → ``["rm", "-rf"]``)."""
    return [command.split() for command in policy.denied_commands]


def codex_rules(policy: ContainmentPolicy = POLICY) -> str:
    """``$CODEX_HOME/rules/atlante.rules``: a ``forbidden`` prefix rule per denied command.

    Codex matches rules on the command's words (``/bin/rm`` and ``rm`` alike, each part of an
    ``&&``/``|`` chain apart); a redirection or a nested ``bash -c`` makes it miss (host-facts-codex §4,
    docs/hosts.md "Containment per host")."""
    lines = ["# The containment policy's denied commands (pytest-atlante): never edit by hand."]
    for pattern in rule_patterns(policy):
        lines.append(f"prefix_rule(pattern = {json.dumps(pattern)}, decision = \"forbidden\", "
                     f"justification = {json.dumps(' '.join(pattern) + ' is denied by the containment policy')})")
    return "\n".join(lines) + "\n"


def user_base_url(parent_env: Mapping[str, str], user_home: Path) -> str | None:
    """The provider endpoint the user set: ``openai_base_url`` in their Codex config, else
    ``OPENAI_BASE_URL`` (which Codex itself ignores; eval honours it as ANTHROPIC_BASE_URL is for
    Claude Code)."""
    home = Path(parent_env["CODEX_HOME"]) if parent_env.get("CODEX_HOME") else user_home / ".codex"
    try:
        document = tomllib.loads(read_capped(home / "config.toml", _CONFIG_LIMIT).decode("utf-8"))
    except (UnreadableFile, ValueError):
        document = {}
    configured = document.get("openai_base_url")
    if isinstance(configured, str) and configured:
        return configured
    return parent_env.get("OPENAI_BASE_URL") or None
