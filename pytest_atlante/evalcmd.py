"""``atlante eval``: ``pytest --atlante-eval`` with an exit status always in 0–3.

The plugin already sets 0–3 whenever it ran; this wrapper maps the statuses pytest can produce
before or without it: a usage error (4) and "no tests collected" (5, e.g. ``-k`` selected no trial)
are requests that could not be honoured → 2; pytest's internal error (3) stays 3.
"""

from __future__ import annotations

import sys
from typing import Sequence

import pytest

_MAPPED = {4: 2, 5: 2}


def eval_command(pytest_args: Sequence[str], *, selftest: bool = False) -> int:
    """``atlante eval`` (and ``atlante selftest``: the same with ``--atlante-selftest``)."""
    args = [a for a in pytest_args if a != "--"]
    status = int(pytest.main(["--atlante-eval", *(["--atlante-selftest"] if selftest else []), *args]))
    if status == 5:
        print(f"atlante {'selftest: no scenario' if selftest else 'eval: no trial'} was selected", file=sys.stderr)
    return _MAPPED.get(status, status if 0 <= status <= 3 else 3)
