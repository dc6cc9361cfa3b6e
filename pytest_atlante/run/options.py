"""The run's command-line choices, read once in ``pytest_configure``, and the ones refused up front."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_atlante.hosts.names import HostName
from pytest_atlante.projectroot import project_root
from pytest_atlante.run.shard import ShardSpec
from pytest_atlante.sandbox.isolation import IsolationSetting, NetworkSetting
from pytest_atlante.trial.runner import TrialInterrupted

__all__ = ["DIST_EACH_REFUSED", "RERUNS_REFUSED", "Options", "is_user_interrupt", "narrowed_by", "requested_each_distribution", "requested_reruns"]

RERUNS_REFUSED = ("reruns are refused in eval runs: every attempt would be a host session outside maxSessions, "
                  "and a pass on rerun would hide the failure the pass rate measures; use budget.trials to repeat "
                  "a scenario")
DIST_EACH_REFUSED = ("--dist each is refused in eval runs: it runs every trial once on every worker, so each trial "
                     "would be several host sessions outside maxSessions, sharing one trial directory; the other "
                     "--dist modes run each trial once")


@dataclass(frozen=True)
class Options:
    project_root: Path
    names: list[str]
    out: Path | None
    keep: bool
    scripted: bool
    host: HostName | None
    isolation: IsolationSetting | None
    selftest: bool = False
    forecast: bool = False
    max_cost: float | None = None
    baseline: Path | None = None
    fail_on_regression: bool = False
    html: bool = False
    shard: ShardSpec | None = None
    run_group: str | None = None
    network: NetworkSetting | None = None
    variants: str | None = None   # --atlante-variants: "all" or names of atlante.jsonc's variants
    control_from: Path | None = None   # --atlante-control-from: an earlier report's control trials
    selftest_full: bool = False   # --atlante-selftest-full: run every reference trial, reuse none
    in_flight: int = 1   # --atlante-in-flight: trials this process keeps running at once (run/inflight.py)

    @classmethod
    def from_config(cls, config: pytest.Config) -> Options:
        # Default: the nearest directory holding atlante.jsonc from where pytest was started up, as
        # pytest finds its ini file; not pytest's rootdir, which an enclosing repository's ini file
        # can move further up.
        root = project_root(config.getoption("atlante_project"), config.invocation_params.dir)
        out = config.getoption("atlante_out")
        shard = config.getoption("atlante_shard")
        baseline = config.getoption("atlante_baseline")
        return cls(root, list(config.getoption("atlante_scenario") or []),
                   Path(out).resolve() if out else None, bool(config.getoption("atlante_keep")),
                   bool(config.getoption("atlante_scripted")), config.getoption("atlante_host"),
                   config.getoption("atlante_isolation"),
                   bool(config.getoption("atlante_selftest")), bool(config.getoption("atlante_forecast")),
                   config.getoption("atlante_max_cost"),
                   Path(baseline) if baseline else None, bool(config.getoption("atlante_fail_on_regression")),
                   bool(config.getoption("atlante_html")),
                   ShardSpec(*shard) if shard else None, config.getoption("atlante_run_group"),
                   config.getoption("atlante_network"), config.getoption("atlante_variants", None),
                   Path(config.getoption("atlante_control_from")).resolve() if config.getoption("atlante_control_from", None) else None,
                   bool(config.getoption("atlante_selftest_full", False)),
                   int(config.getoption("atlante_in_flight", 1) or 1))



def narrowed_by(config: pytest.Config, options: Options) -> list[str]:
    """What on the command line narrowed the run to part of its suite, as the report records it
    (``SelectionRecord.narrowedBy``); a deselection these miss still shows in the trial counts."""
    found = [f"--atlante-scenario {name}" for name in options.names]
    if options.shard is not None:
        found.append(f"--atlante-shard {options.shard.index}/{options.shard.count}")
    for flag, name in (("-k", "keyword"), ("-m", "markexpr")):
        value = getattr(config.option, name, None)
        if value:
            found.append(f"{flag} {value}")
    if getattr(config.option, "deselect", None):
        found.append("--deselect")
    if getattr(config.option, "lf", False):
        found.append("--lf")
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        found.append("paths: " + " ".join(config.args))
    return found


def requested_reruns(config: pytest.Config) -> str | None:
    """The pytest-rerunfailures setting that asks for reruns of every test, if any (checked up front)."""
    for option, name in (("--reruns", "reruns"), ("--force-reruns", "force_reruns")):
        if config.getoption(name, None):
            return option
    try:
        return "the reruns ini option" if int(config.getini("reruns") or 0) else None
    except ValueError:  # no such ini option: pytest-rerunfailures is not installed
        return None


def requested_each_distribution(config: pytest.Config) -> str | None:
    """pytest-xdist's ``--dist each`` (every test on every worker), if asked for (checked up front).

    The other modes (load, loadscope, loadfile, loadgroup, worksteal) hand each item to one worker.
    """
    return "--dist each" if getattr(config.option, "dist", None) == "each" else None


def is_user_interrupt(exc: BaseException) -> bool:
    """Ctrl-C (or SIGINT), rather than a stop pytest or a plugin asked for.

    pytest (``--sw``) and pytest-xdist (``-x``, ``--maxfail``) stop a run by raising subclasses of
    ``KeyboardInterrupt``; a signal raises ``KeyboardInterrupt`` itself (or the trial pipeline's
    ``TrialInterrupted``), and xdist reports a worker's as "received keyboard-interrupt".
    """
    return type(exc) is KeyboardInterrupt or isinstance(exc, TrialInterrupted) or "keyboard-interrupt" in str(exc)
