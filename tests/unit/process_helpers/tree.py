"""A process tree like a host CLI's: this parent plus a grandchild in its own session.

usage: tree.py [--ignore-signals] [--exit-after-spawn] [--tokenless-sibling] [--escaped]
Prints "token <run token>", "grandchild <pid>" (once the grandchild ignores SIGINT and SIGTERM,
like a tool shell started with setsid), then "ready", then sleeps 300 s or exits at once.
--ignore-signals makes this parent ignore SIGINT and SIGTERM too, so only SIGKILL ends it.
--tokenless-sibling also starts a sleeper whose environment lacks the run token that stays in
this process group, and prints "tokenless <pid>" before "ready".
--escaped also starts a sleeper that has neither the run token nor this process group (a new
session and an emptied environment, as ``setsid env -i`` makes), and prints "escaped <pid>".
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
if "--tokenless-sibling" in sys.argv:
    tokenless = subprocess.Popen(
        [sys.executable, "-c", "print('up', flush=True); import time; time.sleep(300)"],
        # No run token; only the test suite's cleanup mark is passed on.
        env={k: v for k, v in os.environ.items() if k == "ATLANTE_PROCESS_TEST"},
        stdout=subprocess.PIPE,
    )
    assert tokenless.stdout is not None
    assert tokenless.stdout.readline() == b"up\n"
    print("tokenless", tokenless.pid, flush=True)
if "--escaped" in sys.argv:
    escaped = subprocess.Popen(
        [sys.executable, "-c", "print('up', flush=True); import time; time.sleep(300)"],
        env={k: v for k, v in os.environ.items() if k == "ATLANTE_PROCESS_TEST"},
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert escaped.stdout is not None
    assert escaped.stdout.readline() == b"up\n"
    print("escaped", escaped.pid, flush=True)
print("ready", flush=True)
if "--exit-after-spawn" not in sys.argv:
    time.sleep(300)
