"""What the installed-but-idle plugin costs a pytest run, as a ratio to ``xdist.plugin``.

Every pytest run in a codebase that installed pytest-atlante imports ``pytest_atlante.plugin``
(its ``pytest11`` entry point), calls its ``pytest_addoption`` and its ``pytest_configure``.
Without ``--atlante-eval`` and without an ``atlas`` section in ``atlante.jsonc`` that must cost
next to nothing (goal: ≤ 5 ms).  Each round starts a fresh interpreter that imports pytest first
(paid by every run anyway), then times, for one plugin module, the import plus its
``pytest_addoption`` and ``pytest_configure`` (against small stand-ins for pytest's parser and
config, in a directory without ``atlante.jsonc``).  The same is done for ``xdist.plugin`` (import
plus ``pytest_addoption``; its configure does nothing without ``-n``), in the same run, rounds
interleaved so machine load hits both alike.  Reported: minimum and median of each, and their
ratios; on a shared machine the minimum is the steadier figure (load only ever adds time).

    python benchmarks/plugin_import.py [--rounds 21]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import os, sys, time, types
from pathlib import Path
import pytest

class Group:
    def addoption(self, *args, **kwargs): pass
    def _addoption(self, *args, **kwargs): pass

class Parser:
    def getgroup(self, *args, **kwargs): return Group()
    def addoption(self, *args, **kwargs): pass
    def addini(self, *args, **kwargs): pass

class Config:
    invocation_params = types.SimpleNamespace(dir=Path(os.getcwd()))
    option = types.SimpleNamespace()
    def addinivalue_line(self, *args): pass
    def getoption(self, name, default=None): return default if default is not None else None
    def getvalue(self, name): return None

which = sys.argv[1]
start = time.perf_counter()
if which == "atlante":
    import pytest_atlante.plugin as plugin
    plugin.pytest_addoption(Parser())
    plugin.pytest_configure(Config())
else:
    import xdist.plugin as plugin
    plugin.pytest_addoption(Parser())
print((time.perf_counter() - start) * 1000)
"""


def measure(which: str, cwd: str) -> float:
    # Bytecode caching on, as in any installed package (site-packages ships .pyc; a checkout with
    # PYTHONDONTWRITEBYTECODE would otherwise compile plugin.py on every run and time the compiler).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = subprocess.run([sys.executable, "-c", CHILD, which], cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args()
    atlante: list[float] = []
    xdist: list[float] = []
    with tempfile.TemporaryDirectory(prefix="atlante-import-bench-") as empty:
        measure("atlante", empty)  # warm the file cache for both
        measure("xdist", empty)
        for _ in range(args.rounds):
            atlante.append(measure("atlante", empty))
            xdist.append(measure("xdist", empty))
    a, x = statistics.median(atlante), statistics.median(xdist)
    print(f"rounds: {args.rounds} (fresh interpreter each, pytest already imported)")
    print(f"pytest_atlante.plugin import + addoption + configure (idle): median {a:.2f} ms "
          f"(min {min(atlante):.2f}, max {max(atlante):.2f})")
    print(f"xdist.plugin import + addoption:                           median {x:.2f} ms "
          f"(min {min(xdist):.2f}, max {max(xdist):.2f})")
    print(f"ratio atlante / xdist: {min(atlante) / min(xdist):.2f} (minimum), {a / x:.2f} (median)")


if __name__ == "__main__":
    main()
