"""A run that stays in flight until told to end, with the kinds of process a host CLI's run leaves.

usage: concurrent.py GO_FILE [--plain-child] [--setsid-orphan] [--session-orphan] [--escaped-orphan]
Prints "token <run token>", then "<kind> <pid>" for each sleeper it starts (each one up before
its line), then "ready"; waits until GO_FILE exists; then prints "alive <kind> yes|no" for each
sleeper (the same process, by start time, neither dead nor a zombie) and exits 0.

--plain-child     a sleeper in this session and process group, with the token (our child).
--setsid-orphan   a sleeper with the token in a session of its own (``setsid``) whose parent exits,
                  so it is re-parented to the runner: a host CLI's tool shell.
--session-orphan  a sleeper that left this process group and dropped the token, whose parent exits:
                  only the session says it is this run's (bubblewrap's sandbox init, re-parented
                  to the runner when bubblewrap's outer process exits first).
--escaped-orphan  ``setsid env -i`` behind a double fork: no token, its own session and group, its
                  parent gone — nothing but the process tree ever said whose it was.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

SLEEPER = "print('up', flush=True); import time; time.sleep(300)"
# Started by an intermediate that prints the sleeper's pid and exits, so the sleeper is orphaned.
INTERMEDIATE = (
    "import os, subprocess, sys\n"
    "kind, sleeper = sys.argv[1], sys.argv[2]\n"
    "mark = {k: v for k, v in os.environ.items() if k == 'ATLANTE_PROCESS_TEST'}\n"
    "without_token = {k: v for k, v in os.environ.items() if k != 'ATLANTE_RUN_TOKEN'}\n"
    "options = {\n"
    "    'setsid-orphan': dict(start_new_session=True),\n"
    "    'session-orphan': dict(process_group=0, env=without_token),\n"
    "    'escaped-orphan': dict(start_new_session=True, env=mark),\n"
    "}[kind]\n"
    "child = subprocess.Popen([sys.executable, '-c', sleeper], stdout=subprocess.PIPE, **options)\n"
    "assert child.stdout.readline() == b'up\\n'\n"
    "print(child.pid, flush=True)\n"
)
KINDS = ("plain-child", "setsid-orphan", "session-orphan", "escaped-orphan")


def start_time(pid: int) -> str | None:
    """Field 22 of /proc/<pid>/stat, or None if the process is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def start(kind: str) -> int:
    if kind == "plain-child":
        child = subprocess.Popen([sys.executable, "-c", SLEEPER], stdout=subprocess.PIPE)
        assert child.stdout is not None and child.stdout.readline() == b"up\n"
        return child.pid
    said = subprocess.run([sys.executable, "-c", INTERMEDIATE, kind, SLEEPER],
                          stdout=subprocess.PIPE, check=True)
    return int(said.stdout)


go = Path(sys.argv[1])
print("token", os.environ.get("ATLANTE_RUN_TOKEN", ""), flush=True)
started = {}
for kind in KINDS:
    if f"--{kind}" in sys.argv:
        pid = start(kind)
        started[kind] = (pid, start_time(pid))
        print(kind, pid, flush=True)
print("ready", flush=True)
while not go.exists():
    time.sleep(0.01)
for kind, (pid, when) in started.items():
    print("alive", kind, "yes" if when is not None and start_time(pid) == when else "no", flush=True)
