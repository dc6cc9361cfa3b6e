"""The Atlas output contract: pretty JSON plus a newline on stdout, or an atomic ``--out`` file.

Callers build the whole result object before calling ``emit`` so that a schema or parsing error
always happens before any JSON reaches stdout.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pydantic_core import to_json

from pytest_atlante.fsutil import atomic_write_bytes


def render(result: Any) -> bytes:
    # pydantic-core's serializer is native code: about 3x faster than json.dumps(indent=2) on large
    # receipts, with the same layout (floats may print in shorter, equally valid forms).  Bytes
    # all the way to the file or stdout: a receipt can be tens of MB, and every text round trip
    # is another copy of it.
    return to_json(result, indent=2) + b"\n"


def emit(result: Any, out: Path | None) -> None:
    data = render(result)
    if out is None:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        atomic_write_bytes(out, data)
