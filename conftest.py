"""Root conftest: shared fixtures for the test suite (pytester is enabled in pyproject addopts).

``atlante_project`` lays out a small, valid eval project in a temp dir — config, harness, one
scenario, a fixture and a finished build — that tests mutate to provoke exactly one problem.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import subprocess
from collections.abc import Callable
from contextlib import chdir
from pathlib import Path
from typing import Any

import pytest

from pytest_atlante.hosts.names import HOST_NAMES, HostName, min_config_version

REPO_ROOT = Path(__file__).resolve().parent
HOSTS_BIN = REPO_ROOT / "hosts-npm" / "node_modules" / ".bin"
# The newest Claude Code release, beside the pinned one: a smoke subset of the host tests runs on it.
NEWEST_DIR = REPO_ROOT / "hosts-npm-newest"
SCENARIO_SCHEMA = "https://atlante.sh/schema/v0.1/eval-scenario.json"

# Which real CLIs a real-CLI test runs on.  CI has to stay within its time budget as hosts join, so
# each such test says which kind it is:
# * EVERY_HOST: behaviour each host has its own way (its stream, policy, budget abort, interrupt,
#   credentials, transcript, isolation of its own files).  A host added to hosts/names.py joins these
#   tests by itself.
# * ONE_HOST: host-neutral logic that needs *a* real agent loop (run files, audit, reports, selection,
#   shards, forecast, redaction after the session): once, on the fastest host.
EVERY_HOST: tuple[HostName, ...] = HOST_NAMES
ONE_HOST: HostName = "claude-code"


def per_host_then_once(per_host: list[Any], once: list[Any]) -> list[tuple[Any, ...]]:
    """Parameters ``(host, *value)`` of a test half of whose variants exercise each host's own
    behaviour and half only host-neutral logic: every ``per_host`` value on each of ``EVERY_HOST``,
    then every ``once`` value on ``ONE_HOST``.  A value is one parameter or a tuple of several."""

    def row(host: HostName, value: Any) -> tuple[Any, ...]:
        return (host, *value) if isinstance(value, tuple) else (host, value)

    return [*(row(host, value) for value in per_host for host in EVERY_HOST), *(row(ONE_HOST, value) for value in once)]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The real-CLI tests (marked ``hosts``) first, each group in its own order.  They are the long
    ones: started first, and with xdist handing out one test at a time (scripts/test:
    ``--maxschedchunk 1``), the short tests fill the workers at the end, so no worker is left running
    a long test while the others idle."""
    items.sort(key=lambda item: item.get_closest_marker("hosts") is None)


def bind_unix(server: socket.socket, path: Path) -> None:
    """Bind a unix socket at ``path`` however deep it is.  A socket address holds 107 bytes, and a
    deep checkout with a long ``$TMPDIR`` puts pytest's temp directories past that; the address is
    the name relative to its directory, bound from inside it."""
    with chdir(path.parent):
        server.bind(path.name)


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """``<session temp>/<name>/``, filled by ``make`` once per test session.  The xdist workers share
    it (the first to ask makes it, the others wait for it): a real run that several per-host tests
    compare against is not repeated on each worker.  ``make`` writes into the directory it is given."""
    base = tmp_path_factory.getbasetemp()
    # A worker's basetemp is popen-gw<N>/ inside this session's directory; a serial run's is that
    # directory itself (its parent holds other sessions' directories).
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    target = root / name
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / ".made").exists():  # a worker whose make failed left no mark: try again
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir()
            make(target)
            (target / ".made").touch()
    return target


def json_paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (keys and list indexes) to a value inside a JSON document, parents first."""
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += json_paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += json_paths(value, (*prefix, index))
    return found


def scenario_doc(name: str = "writes-hello", **overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "$schema": SCENARIO_SCHEMA,
        "version": "0.1",
        "name": name,
        "task": {"fixture": "eval/fixtures/app", "prompt": "Create hello.txt containing hello."},
        "checks": [
            {"type": "file-contains", "path": "hello.txt", "pattern": "hello"},
            {"type": "diff-allowlist", "allow": ["hello.txt"]},
        ],
    }
    doc.update(overrides)
    return doc


def config_doc(host: str = "claude-code", **eval_overrides: Any) -> dict[str, Any]:
    return {
        "version": max("0.2", min_config_version(host)),  # a host that joined later needs its version
        "harness": {
            "agents": {"helper": {"description": "Writes small files.", "prompt": "harness/helper.md"}},
            "skills": {"tidy": {"description": "Keeps files tidy.", "dir": "harness/tidy"}},
        },
        "eval": {"host": host, "scenarios": "eval/scenarios/*.eval.json*", "budget": {"trials": 1}, **eval_overrides},
    }


# A project conftest that tries to loosen the trial's budget: it reads the plugin's value (requesting
# the fixture it overrides) and hands trials a copy with maxTokens=10**9 and a session for everyone.
LOOSENING_CONFTEST = (
    "import dataclasses, pytest\n"
    "@pytest.fixture\n"
    "def atlante_budget(atlante_budget):\n"
    "    return dataclasses.replace(atlante_budget, maxTokens=10**9, allocated=True)\n"
    "@pytest.fixture(autouse=True)\n"
    "def _reads_the_budget(atlante_budget):\n"
    "    assert atlante_budget.maxTokens == 10**9\n"
)


class Project:
    """A temp eval project; ``write`` and ``scenario`` edit it, ``build`` refreshes the native tree."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, rel: str, content: str | dict[str, Any] | list[Any]) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else json.dumps(content, indent=2) + "\n")
        return path

    def config(self, doc: dict[str, Any]) -> None:
        self.write("atlante.jsonc", doc)

    def scenario(self, doc: dict[str, Any], file: str = "eval/scenarios/main.eval.json") -> Path:
        return self.write(file, doc)

    def script(self, name: str, turns: list[dict[str, Any]]) -> Path:
        return self.write(f"eval/scenarios/scripted/{name}.json", {"schema": "atlante/scripted-model-v1", "turns": turns})

    def build(self) -> None:
        from pytest_atlante.suite.build import build

        build(self.root)


@pytest.fixture
def atlante_project(tmp_path: Path) -> Project:
    project = Project(tmp_path / "project")
    project.root.mkdir()
    project.config(config_doc())
    project.write("harness/helper.md", "You write small files.\n")
    project.write("harness/tidy/SKILL.md", "Keep files tidy.\n")
    project.write("eval/fixtures/app/README.md", "# app\n")
    project.scenario(scenario_doc())
    project.script("writes-hello", [
        {"text": "Writing.", "actions": [{"type": "write", "path": "hello.txt", "content": "hello\n"}],
         "usage": {"input": 100, "output": 20}},
        {"text": "Done."},
    ])
    project.build()
    return project


@pytest.fixture
def hosts_path() -> Callable[[], str]:
    """PATH with the pinned CLIs (installed by scripts/setup) in front."""

    def make() -> str:
        if not (HOSTS_BIN / "claude").exists():
            pytest.fail(f"the pinned host CLIs are missing from {HOSTS_BIN}: run scripts/setup")
        return f"{HOSTS_BIN}{os.pathsep}{os.environ.get('PATH', '')}"

    return make


@pytest.fixture
def real_project(atlante_project: Project, hosts_path: Callable[[], str], monkeypatch: pytest.MonkeyPatch) -> Project:
    """``atlante_project`` with the pinned CLIs first on PATH: a scripted eval through a real host."""
    monkeypatch.setenv("PATH", hosts_path())
    return atlante_project


def claude_path(release: str, pinned_path: str) -> tuple[str, str]:
    """(PATH, expected ``claude --version``) for the ``pinned`` or the ``newest`` Claude Code release."""
    manifest = (NEWEST_DIR if release == "newest" else HOSTS_BIN.parent.parent) / "package.json"
    version = json.loads(manifest.read_text())["dependencies"]["@anthropic-ai/claude-code"]
    if release == "pinned":
        return pinned_path, version
    newest_bin = NEWEST_DIR / "node_modules" / ".bin"
    if not (newest_bin / "claude").exists():
        pytest.fail(f"the newest Claude Code release is missing from {newest_bin}: run scripts/setup --test")
    return f"{newest_bin}{os.pathsep}{pinned_path}", version


@pytest.fixture(params=["pinned", "newest"])
def claude_release(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, hosts_path: Callable[[], str],
                   private_tmp: Path) -> str:
    """Like ``on_path``, once with the pinned and once with the newest Claude Code first; its version."""
    path, version = claude_path(request.param, hosts_path())
    monkeypatch.setenv("PATH", path)
    return version


def copy_example(tmp_path: Path) -> Path:
    target = tmp_path / "example_project"
    shutil.copytree(REPO_ROOT / "example_project", target, ignore=shutil.ignore_patterns(".atlante", "__pycache__"))
    return target


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """$TMPDIR of the runs: trials make their sandboxes (atlante-eval-<run id>/) in it."""
    path = tmp_path / "tmp"
    path.mkdir()
    monkeypatch.setenv("TMPDIR", str(path))
    return path


@pytest.fixture
def on_path(monkeypatch: pytest.MonkeyPatch, hosts_path: Callable[[], str], private_tmp: Path) -> None:
    """The pinned CLIs first on PATH (and a private TMPDIR)."""
    monkeypatch.setenv("PATH", hosts_path())


# Real public harness files (unmodified, licences beside them: tests/data/harnesses/*/SOURCE.md).
HARNESSES = Path(__file__).resolve().parent / "tests" / "data" / "harnesses"
SKILL = HARNESSES / "anthropics-skills/skills/skill-creator"
DEBUGGER = HARNESSES / "VoltAgent-awesome-claude-code-subagents/categories/04-quality-security/debugger.md"
COMMAND = HARNESSES / "wshobson-agents/plugins/agent-teams/commands/team-review.md"
OPENCODE_AGENT = HARNESSES / "darrenhinde-OpenAgentsControl/.opencode/agent/subagents/code/codebase-pattern-analyst.md"


def adopt_public_harness(root: Path) -> dict[str, Any]:
    """``root`` holds the public files where a user keeps them (and a CLAUDE.md), with the
    ``atlante.jsonc`` whose harness section adopts them in place; returns that section."""
    from pytest_atlante.suite.native import discover_native_harness, harness_section_for

    shutil.copytree(SKILL, root / ".claude/skills/skill-creator")
    for source, target in ((DEBUGGER, ".claude/agents/debugger.md"), (COMMAND, ".claude/commands/team-review.md"),
                           (OPENCODE_AGENT, ".opencode/agent/codebase-pattern-analyst.md")):
        (root / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, root / target)
    (root / "CLAUDE.md").write_text("Run the tests with `make test`.\n")
    section = harness_section_for(discover_native_harness(root))
    (root / "atlante.jsonc").write_text(json.dumps({"version": "0.2", "harness": section}, indent=2))
    return section


def make_test_ca(directory: Path) -> dict[str, Path]:
    """A test certificate authority and a certificate it signed for ``localhost`` and 127.0.0.1,
    made with the ``openssl`` binary (test-only); plus an unrelated CA that must not be accepted.
    Keys: ``ca``, ``other`` (CA certificates), ``cert`` and ``key`` (the server's)."""
    if shutil.which("openssl") is None:
        pytest.fail("the openssl binary is needed to make the test certificate authority")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    for name in ("ca", "other-ca"):
        openssl("req", "-x509", *ec, "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
                "-subj", f"/CN=atlante {name}", "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign")
    openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
    (directory / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.pem", "-days", "2", "-extfile", "san.ext")
    return {"ca": directory / "ca.pem", "other": directory / "other-ca.pem",
            "cert": directory / "server.pem", "key": directory / "server.key"}

