"""Write to stdout and stderr, optionally flood stderr first, and exit with a given code.

usage: streams.py EXIT_CODE [STDERR_BYTES]
"""

import sys

exit_code = int(sys.argv[1])
flood = int(sys.argv[2]) if len(sys.argv) > 2 else 0
if flood:
    # Far more than a pipe buffer (64 KiB): blocks forever unless the reader drains stderr.
    sys.stderr.write("e" * flood)
    sys.stderr.flush()
sys.stdout.write("out-line\n")
sys.stderr.write("err-line\n")
sys.exit(exit_code)
