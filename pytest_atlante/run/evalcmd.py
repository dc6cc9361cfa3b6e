"""``atlante eval``: ``pytest --atlante-eval`` with the eval reference's flags and an exit status in 0–3.

The reference names ``--scenario``, ``--out`` and ``--keep``; ``--host`` and ``--scripted`` are the
short forms of the other ``--atlante-*`` options.  They are translated to the plugin's options and
every other argument goes to pytest unchanged (``-n 4``, ``-k``, ``--lf``, ``-x`` …).

The plugin already sets 0–3 whenever it ran; this wrapper maps the statuses pytest can produce
before or without it: a usage error (4) and "no tests collected" (5, e.g. ``-k`` selected no trial)
are requests that could not be honoured → 2; pytest's internal error (3) stays 3.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import pytest

from pytest_atlante.hosts.names import HOST_NAMES

_MAPPED = {4: 2, 5: 2}
PASS_THROUGH_NOTE = ("every other argument is passed to pytest unchanged (e.g. -n 4, -k NAME, --lf, -x, -v); "
                     "the --atlante-* options work too (`pytest --help` lists them under pytest-atlante)")


def add_eval_options(parser: argparse.ArgumentParser) -> None:
    """The reference's flags; shared by ``atlante eval --help`` and the translation below."""
    parser.add_argument("--scenario", action="append", metavar="NAME", default=[],
                        help="run only the named scenario (repeatable); same as --atlante-scenario")
    parser.add_argument("--out", metavar="DIR", help="write report.json into DIR; same as --atlante-out")
    parser.add_argument("--keep", action="store_true", help="keep trial sandboxes; same as --atlante-keep")
    parser.add_argument("--host", choices=HOST_NAMES,
                        help="run under this host instead of eval.host; same as --atlante-host")
    parser.add_argument("--scripted", action="store_true",
                        help="run against the offline scripted model; same as --atlante-scripted")


def pytest_args(argv: Sequence[str], *, selftest: bool = False) -> list[str]:
    """``atlante eval`` (``selftest``: ``atlante selftest``) arguments → pytest's: the short forms
    become ``--atlante-*`` options."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    add_eval_options(parser)
    if selftest:
        add_selftest_options(parser)
    known, rest = parser.parse_known_args([a for a in argv if a != "--"])
    args = ["--atlante-eval", *(["--atlante-selftest"] * selftest),
            *(["--atlante-selftest-full"] * bool(selftest and known.full))]
    for name in known.scenario:
        args += ["--atlante-scenario", name]
    if known.out is not None:
        args += ["--atlante-out", known.out]
    if known.host is not None:
        args += ["--atlante-host", known.host]
    args += ["--atlante-keep"] * known.keep + ["--atlante-scripted"] * known.scripted
    return args + rest


def add_selftest_options(parser: argparse.ArgumentParser) -> None:
    """``atlante selftest``'s own flag, beside the eval ones."""
    parser.add_argument("--full", action="store_true",
                        help="run every scenario's reference trial, reusing none from an earlier sealed self-test "
                             "whose inputs are unchanged; same as --atlante-selftest-full")


def eval_command(argv: Sequence[str], *, selftest: bool = False) -> int:
    """``atlante eval`` (and ``atlante selftest``: the same with ``--atlante-selftest``, and ``--full``)."""
    status = int(pytest.main(pytest_args(argv, selftest=selftest)))
    if status == 5:
        print(f"atlante {'selftest: no scenario' if selftest else 'eval: no trial'} was selected", file=sys.stderr)
    return _MAPPED.get(status, status if 0 <= status <= 3 else 3)
