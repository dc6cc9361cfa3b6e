"""The Atlas output contract: pretty JSON plus a newline on stdout, or an atomic ``--out`` file.

Callers build the whole result object before calling ``emit`` so that a schema or parsing error
always happens before any JSON reaches stdout.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pydantic_core import to_json

from ..fsutil import atomic_write_text


def render(result: Any) -> str:
    # pydantic-core's serializer is native code: about 3x faster than json.dumps(indent=2) on large
    # receipts, with the same layout (floats may print in shorter, equally valid forms).
    return to_json(result, indent=2).decode("utf-8") + "\n"


def emit(result: Any, out: Path | None) -> None:
    text = render(result)
    if out is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        atomic_write_text(out, text)
