"""Where the project is: the nearest directory holding ``atlante.jsonc``, from the working directory up.

As pytest finds its rootdir by looking for its ini file in the directory it was started in and then
in each parent, ``atlante`` and ``pytest --atlante-eval`` started anywhere inside a project find the
project's configuration, and write only under that project's ``.atlante/``.  ``--atlante-project``
(``atlante build --project``) names the project instead of searching.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CONFIG_FILE", "find_project_root", "project_root"]

CONFIG_FILE = "atlante.jsonc"


def find_project_root(start: Path) -> Path | None:
    """The nearest of ``start`` and its parents that holds ``atlante.jsonc`` (anything by that name:
    what it is, a directory or a FIFO, is validation's to report), or None."""
    here = Path(os.path.abspath(start))
    for directory in (here, *here.parents):
        if os.path.lexists(directory / CONFIG_FILE):
            return directory
    return None


def project_root(named: str | Path | None, start: Path) -> Path:
    """The project a command works on: the directory named (``--atlante-project DIR``), else the
    nearest one holding ``atlante.jsonc`` from ``start`` up, else ``start`` itself (where a missing
    configuration is then reported)."""
    if named is not None:
        return Path(named).resolve()
    return find_project_root(start) or Path(os.path.abspath(start))
