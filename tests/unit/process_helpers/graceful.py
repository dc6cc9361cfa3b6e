"""Handle SIGINT like Claude Code does: finish up for a second, print a final line, exit 0.

Prints "ready" once the handler is installed, then sleeps 300 s.
"""

import signal
import sys
import time


def _finish(signum: int, frame: object) -> None:
    time.sleep(1.0)  # wrap-up work: only a real grace period lets this line out
    print("final line after SIGINT", flush=True)
    sys.exit(0)


signal.signal(signal.SIGINT, _finish)
print("ready", flush=True)
time.sleep(300)
