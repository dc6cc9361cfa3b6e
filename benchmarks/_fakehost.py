"""Shared helpers for the eval benchmarks: a temp eval project and FAKE ``claude`` executables.

The benchmarks measure the plugin, not a model, so the host is a stand-in: an executable named
``claude`` placed first on PATH that answers ``--version`` like Claude Code 2.1.197 (so the host
probe accepts it) and otherwise prints Claude Code ``stream-json`` events.  Runs use
``--atlante-scripted`` so no credential is needed; the fake host ignores the scripted server the
engine starts.

The trial environment is allowlisted (PATH, LANG, …), so a fake host cannot be parameterised
through environment variables: every parameter (sleep, event count, log file) is written into the
generated script itself.
"""

from __future__ import annotations

import compileall
import functools
import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
FAKE_VERSION = "2.1.197 (Claude Code)"
FAKE_MODEL = "claude-fake-bench"
SCENARIO_SCHEMA = "https://atlante.sh/schema/v0.1/eval-scenario.json"
SCENARIO_NAME = "bench"
FIXTURE_REL = "eval/fixtures/app"


def result_event(input_tokens: int = 10, output_tokens: int = 2) -> dict[str, Any]:
    """The smallest ``result`` event the Claude monitor treats as a successful session."""
    return {
        "type": "result", "subtype": "success", "is_error": False, "num_turns": 1, "result": "done",
        "session_id": "bench", "total_cost_usd": 0.0,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
        "modelUsage": {FAKE_MODEL: {"inputTokens": input_tokens, "outputTokens": output_tokens,
                                    "cacheReadInputTokens": 0, "cacheCreationInputTokens": 0}},
    }


def assistant_event(index: int, input_tokens: int) -> dict[str, Any]:
    """One assistant message (its own ``message.id``) carrying ``input_tokens`` of usage."""
    return {
        "type": "assistant", "session_id": "bench", "parent_tool_use_id": None,
        "message": {"id": f"msg_bench_{index:05d}", "type": "message", "role": "assistant", "model": FAKE_MODEL,
                    "content": [{"type": "text", "text": f"event {index}"}],
                    "usage": {"input_tokens": input_tokens, "output_tokens": 0,
                              "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}},
    }


def _install(bin_dir: Path, text: str) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "claude"
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)
    return path


def install_quick_claude(bin_dir: Path, *, sleep_s: float = 0.0) -> Path:
    """A ``/bin/sh`` fake host: optional sleep, one ``result`` event, exit 0.

    A shell script rather than Python so that "a host that exits at once" costs ~1 ms, not the
    ~20 ms of an interpreter start, and the overhead measured is the plugin's.
    """
    sleep = f"sleep {sleep_s}\n" if sleep_s > 0 else ""
    return _install(bin_dir, (
        "#!/bin/sh\n"
        f'if [ "$1" = "--version" ]; then echo {shlex.quote(FAKE_VERSION)}; exit 0; fi\n'
        f"{sleep}"
        f"printf '%s\\n' {shlex.quote(json.dumps(result_event()))}\n"
    ))


def install_streaming_claude(bin_dir: Path, *, events: int, tokens_per_event: int, interval_s: float,
                             log_path: Path, honour_sigint: bool) -> Path:
    """A Python fake host that streams ``events`` assistant events, one every ``interval_s``.

    After each event is written and flushed to stdout it appends ``<pid> emitted <i> <monotonic>``
    to ``log_path``, so the log lists the events that reached the pipe before the process died (an
    event is logged only after its write returned; a SIGKILL between the write and the log line
    can hide at most one event).  On SIGINT it appends ``<pid> sigint <last emitted index>
    <monotonic>``; with ``honour_sigint`` it then stops like Claude
    Code does (host-facts §6: abort, print a ``result`` event, exit), otherwise it keeps streaming until
    the engine's SIGKILL after the grace period — the worst case for a host that ignores SIGINT.
    """
    events_json = json.dumps([json.dumps(assistant_event(i, tokens_per_event)) for i in range(1, events + 1)])
    return _install(bin_dir, f"""#!{sys.executable}
import json, os, signal, sys, time
if sys.argv[1:2] == ["--version"]:
    print({FAKE_VERSION!r}); sys.exit(0)
LOG = {str(log_path)!r}
EVENTS = json.loads({events_json!r})
RESULT = {json.dumps(result_event(tokens_per_event * events, 0))!r}
PID = os.getpid()
state = {{"last": 0, "stop": False}}
log = open(LOG, "a", buffering=1)
def on_sigint(signum, frame):
    log.write(f"{{PID}} sigint {{state['last']}} {{time.monotonic()}}\\n")
    state["stop"] = {honour_sigint!r}
signal.signal(signal.SIGINT, on_sigint)
for index, line in enumerate(EVENTS, start=1):
    if state["stop"]:
        break
    sys.stdout.write(line + "\\n"); sys.stdout.flush()
    state["last"] = index
    log.write(f"{{PID}} emitted {{index}} {{time.monotonic()}}\\n")
    time.sleep({interval_s!r})
sys.stdout.write(RESULT + "\\n"); sys.stdout.flush()
""")


def write_fixture(fixture: Path, files: int) -> None:
    """``files`` small text files (~200 bytes), 100 per directory, plus nothing else."""
    for index in range(files):
        path = fixture / f"d{index // 100:03d}" / f"f{index:05d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"file {index}\n" + "x" * 190 + "\n", encoding="utf-8")


def make_project(root: Path, *, files: int, trials: int, max_tokens: int = 400_000, timeout_ms: int = 120_000,
                 script_turns: list[dict[str, Any]] | None = None, scenarios: int = 1, host: str = "claude-code") -> Path:
    """A built eval project with ``scenarios`` scenarios over a generated fixture of ``files`` files.

    ``trials`` is ``budget.trials`` (maxSessions is raised to match, so no trial is skipped).  One
    scenario is named ``bench``; several are ``bench-1``, ``bench-2``, … with the same task.  The
    scenario's only check is ``file-exists`` on a fixture file: the cheapest check there is.  The
    scripted-model script (required in scripted mode) is ``script_turns`` or one trivial turn.
    """
    from pytest_atlante.hosts.names import min_config_version

    root.mkdir(parents=True)

    config = {
        "version": max("0.2", min_config_version(host)),  # a host that joined later needs its version
        "harness": {"agents": {"helper": {"description": "Benchmark agent.", "prompt": "harness/helper.md"}}},
        "eval": {"host": host, "scenarios": "eval/scenarios/*.eval.json",
                 "budget": {"trials": trials, "maxSessions": max(trials * scenarios, 1), "timeoutMs": timeout_ms,
                            "maxTokens": max_tokens}},
    }
    names = [SCENARIO_NAME] if scenarios == 1 else [f"{SCENARIO_NAME}-{i}" for i in range(1, scenarios + 1)]
    script = {"schema": "atlante/scripted-model-v1", "turns": script_turns or [{"text": "Nothing to do."}]}
    (root / "harness").mkdir()
    (root / "harness" / "helper.md").write_text("You help.\n", encoding="utf-8")
    (root / "atlante.jsonc").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    folder = root / "eval" / "scenarios"
    (folder / "scripted").mkdir(parents=True)
    for name in names:
        scenario = {
            "$schema": SCENARIO_SCHEMA, "version": "0.1", "name": name,
            "task": {"fixture": FIXTURE_REL, "prompt": "Do nothing."},
            "checks": [{"type": "file-exists", "path": "d000/f00000.txt"}],
        }
        (folder / f"{name}.eval.json").write_text(json.dumps(scenario, indent=2) + "\n", encoding="utf-8")
        (folder / "scripted" / f"{name}.json").write_text(json.dumps(script, indent=2) + "\n", encoding="utf-8")
    write_fixture(root / FIXTURE_REL, max(files, 1))
    from pytest_atlante.suite.build import build

    build(root)
    return root


def bench_env() -> dict[str, str]:
    """The environment for every timed child, the plugin's and the floor's alike.

    Bytecode caching on, as for an installed package (pip compiles a wheel's modules at install):
    a checkout run with PYTHONDONTWRITEBYTECODE compiles the package from source in every process,
    and under ``-n 8`` that is every worker timing the compiler (about 0.1 s of CPU each here).
    The package is compiled once up front, as pip would.
    """
    _compile_package()
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


@functools.cache
def _compile_package() -> None:
    compileall.compile_dir(str(REPO_ROOT / "pytest_atlante"), quiet=1)


@dataclass(frozen=True)
class EvalRun:
    returncode: int
    wall_s: float
    report: dict[str, Any]
    output: str

    @property
    def trials(self) -> list[dict[str, Any]]:
        return [t for s in self.report.get("scenarios", []) for t in s.get("trials", [])]


def run_eval(project: Path, bin_dir: Path | None, out_dir: Path, *extra: str, path_prefix: str | None = None) -> EvalRun:
    """``pytest --atlante-eval --atlante-scripted`` on ``project`` in a child process, timed.

    ``bin_dir`` goes first on PATH (the fake host); ``None`` leaves PATH as it is.  ``path_prefix``
    (directories joined by ``os.pathsep``) goes first instead, when given.
    """
    env = bench_env()
    prefix = path_prefix if path_prefix is not None else (str(bin_dir) if bin_dir is not None else None)
    if prefix is not None:
        env["PATH"] = f"{prefix}{os.pathsep}{env.get('PATH', '')}"
    argv = [sys.executable, "-m", "pytest", "--atlante-eval", "--atlante-scripted", "-p", "no:cacheprovider", "-q",
            "--atlante-project", str(project), "--atlante-out", str(out_dir), *extra]
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    report_path = out_dir / "report.json"
    report = json.loads(report_path.read_text(encoding="utf-8")) if report_path.is_file() else {}
    return EvalRun(proc.returncode, wall, report, proc.stdout + proc.stderr)


def require_verdicts(run: EvalRun, allowed: set[str], what: str) -> None:
    """Stop the benchmark loudly when trials did not do what was measured (e.g. infra-error)."""
    verdicts = [t.get("verdict") for t in run.trials]
    if not verdicts or any(v not in allowed for v in verdicts):
        sys.exit(f"{what}: unexpected verdicts {verdicts} (exit {run.returncode})\n{run.output[-3000:]}")


def machine_line() -> str:
    """Where the figures came from: CPU model, cores, Python, git."""
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    git = subprocess.run(["git", "--version"], capture_output=True, text=True, check=False).stdout.strip()
    return (f"{cpu}, {os.cpu_count()} cores, Python {sys.version.split()[0]}, {git}, "
            f"{time.strftime('%Y-%m-%d %H:%M %Z')}")
