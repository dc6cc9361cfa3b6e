"""A tiny test-only third host: proof that adding a host is one module plus one registry entry.

Its "CLI" is a few lines of Python that read a JSON spec from the prompt and print one
``{"tokens": n}`` line per model turn, so the fast trial-pipeline tests exercise every step of
``trial.py`` (sandbox, setup, baseline, host session with the token gate, diff, checks, record)
without a real CLI.  Spec keys: ``write`` {path: text}, ``usage`` [n, ...], ``sleep`` s, ``exit`` code.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_atlante.diagnostics import Diagnostic
from pytest_atlante.hosts.base import (
    HostInfo,
    ProviderEndpoint,
    RenderedFields,
    ScriptedEndpoint,
    SessionOutcome,
    TrialWiring,
)
from pytest_atlante.hosts.transcripts import TranscriptBuilder
from pytest_atlante.records import Usage

NAME = "echo"

CLI = r'''
import json, os, sys, time
spec = json.loads(sys.argv[1])
for path, text in spec.get("write", {}).items():
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    open(path, "w").write(text)
for tokens in spec.get("usage", []):
    print(json.dumps({"tokens": tokens}), flush=True)
    time.sleep(spec.get("gap", 0))
time.sleep(spec.get("sleep", 0))
sys.exit(spec.get("exit", 0))
'''


class EchoMonitor:
    def __init__(self) -> None:
        self.total: int | None = None
        self.events = 0

    def feed(self, line: str) -> None:
        try:
            tokens = json.loads(line)["tokens"]
        except (ValueError, KeyError, TypeError):
            return
        self.total = (self.total or 0) + int(tokens)
        self.events += 1

    @property
    def cumulative_tokens(self) -> int | None:
        return self.total

    def outcome(self) -> SessionOutcome:
        usage = Usage(inputTokens=self.total) if self.total is not None else None
        return SessionOutcome(usage=usage, cost_usd=None, model_identity="echo-model", is_error=False,
                              error_message=None, usage_events=self.events, budget_unmonitored=self.events == 0)


class EchoHost:
    name = NAME
    owned_dir = ".echo"
    interrupt_signal = int(signal.SIGTERM)
    credential_env: tuple[str, ...] = ()
    stand_in_env: tuple[str, ...] = ()
    refreshed_fields: tuple[tuple[str, ...], ...] = (("echo", "token"),)
    login_fields: tuple[tuple[str, ...], ...] = (("echo", "token"),)
    forbidden_fixture_files: Mapping[str, str] = {".echo/config.json": "the echo host would merge it"}
    stream_call_ids = True
    selects_agent = True
    shell_tools = None

    def probe(self, env: Mapping[str, str]) -> HostInfo:
        return HostInfo(NAME, "1.0.0", NAME, sys.executable)  # type: ignore[arg-type]

    def config_diagnostics(self, info: HostInfo, model: str | None) -> list[Diagnostic]:
        return []

    def credential_diagnostics(self, info: HostInfo, parent_env: Mapping[str, str], user_home: Path,
                               model: str | None) -> list[Diagnostic]:
        return []

    instructions_file = "ECHO.md"

    def knows_tool(self, name: str) -> bool:
        return False

    def model_fits(self, model: str) -> bool:
        return True

    def frontmatter_tools(self, fields: Mapping[str, object]) -> tuple[tuple[str, ...] | None, list[str]]:
        return None, []

    def agent_frontmatter(self, name: str, agent: Any) -> RenderedFields:
        return RenderedFields({"description": agent.description})

    def skill_frontmatter(self, name: str, skill: Any) -> RenderedFields:
        return RenderedFields({"name": name, "description": skill.description})

    def command_frontmatter(self, name: str, command: Any) -> RenderedFields:
        return RenderedFields({"description": command.description})

    def prepare(self, wiring: TrialWiring) -> None:
        (wiring.sandbox_root / self.owned_dir).mkdir(exist_ok=True)
        (wiring.sandbox_root / self.owned_dir / "config.json").write_text("{}")

    def command(self, info: HostInfo, *, prompt: str, agent: str | None, model: str | None) -> list[str]:
        return [info.executable, "-c", CLI, prompt]

    def environment(self, info: HostInfo, *, base_env: Mapping[str, str], parent_env: Mapping[str, str],
                    home: Path, scripted: ScriptedEndpoint | None) -> dict[str, str]:
        return dict(base_env)

    def provider_endpoint(self, parent_env: Mapping[str, str], model: str | None) -> ProviderEndpoint | None:
        return None  # it talks to no model: metered from its stream

    def credential_files(self, home: Path, env: Mapping[str, str]) -> list[Path]:
        return [home / ".echo-login.json"]

    def new_monitor(self) -> EchoMonitor:
        return EchoMonitor()

    def stream_path_forms(self, path: str) -> tuple[str, ...]:
        return ()

    def transcript_events(self, lines: Iterable[tuple[int, str]], builder: TranscriptBuilder) -> None:
        monitor = EchoMonitor()
        last = 0
        for t, line in lines:
            before = monitor.total or 0
            monitor.feed(line)
            if monitor.total is not None and monitor.total != before:
                builder.turn += 1
                builder.usage(t, Usage(inputTokens=monitor.total - before), None, exact=True)
            last = t
        usage = monitor.outcome().usage
        builder.emit(last, "result", usage=usage.model_dump() if usage else None, costUsd=None, turns=builder.turn,
                     stopReason=None, isError=False)

    def finalize(self, info: HostInfo, monitor: Any, *, env: Mapping[str, str], cwd: Path,
                 wrap: Callable[[list[str]], list[str]] | None = None) -> SessionOutcome:
        outcome: SessionOutcome = monitor.outcome()
        return outcome
