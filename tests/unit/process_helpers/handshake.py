"""Print "first", wait until the reader proves it saw it (creates MARKER), then print "second".

usage: handshake.py MARKER
If lines only reached the reader after exit, MARKER never appears and this waits out the timeout.
"""

import os
import sys
import time

marker = sys.argv[1]
print("first", flush=True)
deadline = time.monotonic() + 120
while not os.path.exists(marker) and time.monotonic() < deadline:
    time.sleep(0.01)
print("second" if os.path.exists(marker) else "marker never appeared", flush=True)
