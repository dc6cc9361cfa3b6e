"""The Atlas output contract: pretty JSON plus a newline on stdout, or an atomic ``--out`` file.

Callers build the whole result object before calling ``emit`` so that a schema or parsing error
always happens before any JSON reaches stdout.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ..fsutil import atomic_write_text


def render(result: Any) -> str:
    return json.dumps(result, indent=2, ensure_ascii=False) + "\n"


def emit(result: Any, out: Path | None) -> None:
    text = render(result)
    if out is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        atomic_write_text(out, text)
