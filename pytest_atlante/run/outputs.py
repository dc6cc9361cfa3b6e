"""What pytest and its plugins are configured to write while an eval runs: never a trial's escape.

The hermeticity audit (``sandbox/audit.py``) fingerprints the project around each trial.  Other
writers of the same run write into it meanwhile — under ``-n 2`` an xdist worker finishes a trial
and allure-pytest writes its result while the other worker's trial is in its window; the
controller appends to ``--report-log`` as each report arrives; pytest-cov's workers save
``.coverage.<host>.<pid>.<random>`` when they end; another terminal's run of the same project
writes its report beside this one's.  This module reads those paths from the pytest config and
hands them down as plain absolute paths (the sandbox package knows no pytest); a last segment with
a pattern (``.coverage.*``) names the matching entries of its directory.

Read here: ``--junitxml``, ``--report-log`` (pytest-reportlog), ``--alluredir`` (allure-pytest),
``--log-file`` / ``log_file``, ``--basetemp``, the cache directory (``cache_dir``), pytest-cov's
data file and its suffixed siblings when ``--cov`` is active (the data file coverage itself was
configured with, else ``$COVERAGE_FILE``, else ``.coverage``), and the project's default report
location of other runs (``.atlante/eval/<run id>/``, ``.atlante/.gitignore``).  Not read: outputs
written only after the last trial (``--cov-report`` files, ``--html``), and any other plugin's.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from pytest_atlante.report.seal import key_file

__all__ = ["configured_outputs", "own_basetemp"]

# new_run_id's shape: ``20261130T083655Z-1a2b3c``.
OTHER_RUN_PATTERN = "[0-9]*T[0-9]*Z-*"


def configured_outputs(config: pytest.Config, project_root: Path) -> tuple[Path, ...]:
    """Every path the run's other writers may change while a trial's window is open."""
    base = config.invocation_params.dir
    option = config.option
    found: list[Path] = []
    for value in (getattr(option, "xmlpath", None), getattr(option, "report_log", None),
                  getattr(option, "allure_report_dir", None), getattr(option, "basetemp", None),
                  _log_file(config)):
        if value:
            found.append(_absolute(str(value), base))
    cache_dir = _ini(config, "cache_dir")
    if cache_dir:
        found.append(_absolute(os.path.expandvars(cache_dir), config.rootpath))
    found += _coverage_files(config, base)
    atlante = project_root / ".atlante"
    found += [atlante / "eval" / OTHER_RUN_PATTERN, atlante / ".gitignore"]
    # Where every run of this user keeps its report key (report/seal.py): the first run to end
    # creates it, perhaps while another run's trial is open (at HOME's top that is ``~/.local``).
    found.append(key_file().parent)
    return tuple(found)


def own_basetemp(config: pytest.Config, run_id: str) -> Path | None:
    """Under xdist, when the user named none (``--basetemp``): a base temp directory of the run's
    own, ``$TMPDIR/atlante-pytest-<run id>``, set as the run's ``--basetemp``; else None.

    Why: xdist asks the controller for pytest's base temp directory to give each worker one below
    it.  Left to pytest, that is a new numbered ``pytest-of-<user>/pytest-N``, and at the end of the
    session — after the report and its page are written — pytest removes every such directory but
    the newest three: those of the user's other pytest runs, whatever they hold.  An eval run then
    ended long after its report, the longer the more other runs had left (measured on a loaded
    machine beside other test suites: 7-12 s of 47-70 s runs spent in that removal).  A run's own
    directory is no numbered one: pytest removes nothing else, and the controller removes it at the
    end (a run killed outright leaves it, empty unless a fixture of the project wrote there).
    Must be called before pytest's own ``pytest_configure`` reads ``--basetemp`` (the plugin's
    configure hook runs first).
    """
    option = config.option
    if getattr(option, "basetemp", None) or getattr(option, "dist", "no") == "no":
        return None
    path = Path(os.path.realpath(tempfile.gettempdir())) / f"atlante-pytest-{run_id}"
    option.basetemp = str(path)
    return path


def _absolute(value: str, base: Path) -> Path:
    path = Path(os.path.expanduser(value))
    return Path(os.path.normpath(path if path.is_absolute() else base / path))


def _ini(config: pytest.Config, name: str) -> str | None:
    try:
        value = config.getini(name)
    except (ValueError, KeyError):
        return None
    return value if isinstance(value, str) and value else None


def _log_file(config: pytest.Config) -> str | None:
    return getattr(config.option, "log_file", None) or _ini(config, "log_file")


def _coverage_files(config: pytest.Config, base: Path) -> list[Path]:
    """pytest-cov's data file and the ``<file>.<suffix>`` files parallel mode and xdist write."""
    option = config.option
    if not getattr(option, "cov_source", None) or getattr(option, "no_cov", False):
        return []
    data_file: str | None = None
    plugin: Any = config.pluginmanager.get_plugin("_cov")
    controller = getattr(plugin, "cov_controller", None)
    configured = getattr(getattr(getattr(controller, "cov", None), "config", None), "data_file", None)
    if isinstance(configured, str) and configured:
        data_file = configured
        base = Path(getattr(controller, "topdir", None) or base)
    path = _absolute(data_file or os.environ.get("COVERAGE_FILE") or ".coverage", base)
    return [path, path.parent / f"{path.name}.*"]
