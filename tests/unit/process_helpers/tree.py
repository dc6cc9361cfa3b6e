"""A process tree like a host CLI's: this parent plus a grandchild in its own session.

usage: tree.py [--ignore-signals] [--exit-after-spawn]
Prints "token <run token>", "grandchild <pid>" (once the grandchild ignores SIGINT and SIGTERM,
like a tool shell started with setsid), then "ready", then sleeps 300 s or exits at once.
--ignore-signals makes this parent ignore SIGINT and SIGTERM too, so only SIGKILL ends it.
"""

import os
import signal
import subprocess
import sys
import time

GRANDCHILD = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ignoring', flush=True)\n"
    "time.sleep(300)\n"
)

if "--ignore-signals" in sys.argv:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("token", os.environ.get("ATLANTE_RUN_TOKEN", ""), flush=True)
# start_new_session=True is setsid(): the grandchild leaves our session and process group, and it
# inherits our stderr, so it keeps the runner's stderr pipe open after we exit.
grandchild = subprocess.Popen(
    [sys.executable, "-c", GRANDCHILD], stdout=subprocess.PIPE, start_new_session=True
)
assert grandchild.stdout is not None
assert grandchild.stdout.readline() == b"ignoring\n"
print("grandchild", grandchild.pid, flush=True)
print("ready", flush=True)
if "--exit-after-spawn" not in sys.argv:
    time.sleep(300)
