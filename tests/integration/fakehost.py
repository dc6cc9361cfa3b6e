"""A fake ``claude`` executable for fast runner tests (never the only proof that a host works).

The scenario's prompt carries the behaviour as JSON after ``FAKE:``, so one executable serves every
test: ``{"usage": [n, ...], "sleep": s, "write": {path: text}, "started": path, "exit": code}``;
``"sessions": path`` appends the trial directory's name (``<scenario>-<trial>``) there, one line per
host session, and ``"no_write_in": [trial, ...]`` skips ``write`` in those trials (a failing check);
for the boundary tests ``"many": {"dir": d, "count": n}``, ``"sparse": {path: size}``, ``"fifo": [path]``
and ``"noline": bytes`` (stdout with no newline); ``"barrier": {"dir": d, "count": n, "timeout": s}``
writes its pid to ``d/<trial dir>`` and waits until ``n`` sessions have (exit 1 after ``s`` seconds):
sessions that all pass it ran at once.
It answers ``--version`` like Claude Code 2.1.197 (or the ``version`` it is installed with, for a
test of a host upgraded between runs) and appends one line per probe to ``probe.log`` beside itself,
so a test can count probes.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

SCRIPT = r'''#!PYTHON
import json, os, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:]
if args == ["--version"]:
    with open(os.path.join(HERE, "probe.log"), "a") as log:
        log.write("probe\n")
    print("HOST_VERSION (Claude Code)")
    sys.exit(0)
prompt = args[args.index("-p") + 1]
spec = json.loads(prompt.split("FAKE:", 1)[1]) if "FAKE:" in prompt else {}
def emit(event):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()
emit({"type": "system", "subtype": "init", "model": "fake-model", "apiKeySource": "ANTHROPIC_API_KEY"})
if spec.get("started"):
    open(spec["started"], "w").write(str(os.getpid()))
trial_dir = os.path.basename(os.path.dirname(os.getcwd()))
if spec.get("sessions"):
    open(spec["sessions"], "a").write(trial_dir + "\n")
barrier = spec.get("barrier")
if barrier:
    os.makedirs(barrier["dir"], exist_ok=True)
    open(os.path.join(barrier["dir"], trial_dir), "w").write(str(os.getpid()))
    waited = time.time() + barrier.get("timeout", 60)
    while len(os.listdir(barrier["dir"])) < barrier["count"]:
        if time.time() > waited:
            emit({"type": "result", "subtype": "error_during_execution", "is_error": True, "num_turns": 0,
                  "result": "barrier: %d of %d sessions at once" % (len(os.listdir(barrier["dir"])), barrier["count"])})
            sys.exit(1)
        time.sleep(0.05)
writes = spec.get("write", {})
if spec.get("no_write_in") and int(trial_dir.rsplit("-", 1)[1]) in spec["no_write_in"]:
    writes = {}
for path, text in writes.items():
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    open(path, "w").write(text)
many = spec.get("many")  # {"dir": d, "count": n}: n empty files, as an agent gone wild writes them
if many:
    os.makedirs(many["dir"], exist_ok=True)
    for i in range(many["count"]):
        open(os.path.join(many["dir"], "f%06d" % i), "w").close()
for path, size in spec.get("sparse", {}).items():  # a huge file that costs no disk
    with open(path, "wb") as f:
        f.truncate(size)
for path in spec.get("fifo", []):
    os.mkfifo(path)
if spec.get("noline"):  # this many bytes of stdout before the next newline
    chunk = "x" * 65536
    for _ in range(spec["noline"] // 65536):
        sys.stdout.write(chunk)
    sys.stdout.write("\n")
    sys.stdout.flush()
total = 0
for index, tokens in enumerate(spec.get("usage", [])):
    total += tokens
    if spec.get("events_log"):  # logged before the event is written, so a kill cannot race the log
        open(spec["events_log"], "a").write("%d\n" % index)
    emit({"type": "assistant", "message": {"id": "msg_%d" % index, "model": "fake-model", "role": "assistant",
          "content": [{"type": "text", "text": "turn %d" % index}],
          "usage": {"input_tokens": tokens, "output_tokens": 0}}})
    time.sleep(spec.get("event_gap", 0))
time.sleep(spec.get("sleep", 0))
usage = {"input_tokens": total, "output_tokens": 0, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
if spec.get("usage"):
    emit({"type": "result", "subtype": "success", "is_error": False, "num_turns": len(spec["usage"]),
          "result": "done", "total_cost_usd": 0.001, "usage": usage})
else:
    emit({"type": "result", "subtype": "success", "is_error": False, "num_turns": 1, "result": "done"})
sys.exit(spec.get("exit", 0))
'''


def install_fake_claude(bin_dir: Path, version: str = "2.1.197") -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "claude"
    path.write_text(SCRIPT.replace("PYTHON", sys.executable, 1).replace("HOST_VERSION", version, 1))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def fake_env(bin_dir: Path) -> dict[str, str]:
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "ANTHROPIC_API_KEY": "fake-key"}
