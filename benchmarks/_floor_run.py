"""One trial done by hand: the floor of ``floor_trial.py`` (in pytest) and ``concurrency.py`` (in a
process pool and as a plain script).

A trial does what the plugin's must and nothing else, with the project's own pieces where the
trial needs them: write the sandbox and HOME the host saw (from a capture run's ``plan.json``),
``git init`` / ``add`` / ``commit``, start the project's scripted model server, run the exact
argv and environment the plugin ran, run the scenario's two checks, ``git add -A`` + ``git diff``,
remove the directory.  Plain code (no pytest), so every floor runs the very same steps.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

URL = re.compile(r"http://127\.0\.0\.1:[0-9]+")
# The engine's server answers only under a per-trial path key (``provider/loopback.py``): the
# captured base URL carries one, and the floor's server is started with the same key.
KEYED_URL = re.compile(r"http://127\.0\.0\.1:[0-9]+/([A-Za-z0-9_-]+)")
FINISHED = ('"result"', '"step_finish"', '"turn.completed"')
GIT = ["git", "-c", "user.name=floor", "-c", "user.email=floor@example.invalid", "-c", "commit.gpgsign=false"]


def place(text: str, old: str, new: str, url: str) -> str:
    return URL.sub(url, text.replace(old, new))


def write_tree(root: Path, files: dict[str, str], old: str, new: str, url: str) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(place(text, old, new, url), encoding="utf-8", errors="surrogateescape")


def load_plan(path: Path) -> dict[str, Any]:
    plan: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return plan


def run_trial(plan: dict[str, Any], trial: int, new: Path) -> dict[str, Any]:
    """Trial ``trial`` in the fresh directory ``new``: ``{"trial", "ms", "hostMs"}`` (``AssertionError``
    when the host or a check did not do what the floor expects)."""
    from pytest_atlante.hosts.registry import host_for
    from pytest_atlante.provider.scripted import ScriptedModelServer
    from pytest_atlante.suite.script import load_script

    started = time.perf_counter()
    old = plan["trialDir"]
    sandbox = Path(plan["cwd"].replace(old, str(new)))
    home = Path(plan["home"].replace(old, str(new)))
    # The key is in the environment (Claude Code, OpenCode) or a configuration file in HOME (Codex).
    texts = [*plan["env"].values(), *plan["homeFiles"].values(), *plan["sandbox"].values()]
    keys = {m.group(1) for text in texts for m in KEYED_URL.finditer(text)}
    server = ScriptedModelServer(load_script(Path(plan["script"])), sandbox_root=sandbox,
                                 trial_key=keys.pop() if len(keys) == 1 else None,
                                 shell_tools=host_for(plan["host"]).shell_tools)
    with server:
        url = f"http://127.0.0.1:{server.port}"   # the captured path (and key) after it stays
        write_tree(sandbox, plan["sandbox"], old, str(new), url)
        write_tree(home, plan["homeFiles"], old, str(new), url)
        env = {name: place(value, old, str(new), url) for name, value in plan["env"].items()}
        for path in {env.get("TMPDIR"), str(home)} - {None}:
            Path(str(path)).mkdir(parents=True, exist_ok=True)
        subprocess.run([*GIT, "init", "-q"], cwd=sandbox, check=True)
        subprocess.run([*GIT, "add", "-A"], cwd=sandbox, check=True)
        subprocess.run([*GIT, "commit", "-q", "-m", "baseline"], cwd=sandbox, check=True)
        host_started = time.perf_counter()
        with subprocess.Popen([plan["executable"], *plan["argv"]], cwd=sandbox, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, stdin=subprocess.DEVNULL) as host:
            assert host.stdout is not None and host.stderr is not None
            stream = host.stdout.read().decode("utf-8", "replace").splitlines()
            host.stderr.read()
        host_ms = (time.perf_counter() - host_started) * 1000
    # The stream's last event of a completed session: Claude Code's and Gemini CLI's "result",
    # OpenCode's "step_finish", Codex's "turn.completed".
    assert host.returncode == 0 and any(end in line for line in stream for end in FINISHED), stream[-3:]
    assert (sandbox / plan["fileCheck"]).exists()
    check = subprocess.run(plan["commandCheck"], cwd=sandbox, capture_output=True, text=True, check=False)
    assert check.returncode == 0
    subprocess.run([*GIT, "add", "-A"], cwd=sandbox, check=True)
    subprocess.run([*GIT, "diff", "--cached", "HEAD"], cwd=sandbox, capture_output=True, check=True)
    shutil.rmtree(new)
    return {"trial": trial, "ms": (time.perf_counter() - started) * 1000, "hostMs": host_ms}
