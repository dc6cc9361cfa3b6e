"""pytest hooks for pytest-atlante.

Thin by design (as in pytest-xdist and pytest-cov): options, and at configure time the one role
object that carries the behaviour — ``roles.Controller`` (with its terminal output,
``terminal.EvalTerminalReporter``) or ``trialrole.Worker`` for ``--atlante-eval`` runs, the Atlas
query-regression plugin when ``atlante.jsonc`` has an ``atlas`` section.  Without
``--atlante-eval`` and without an ``atlas`` section nothing is registered and nothing beyond this
module is imported, so an idle plugin costs a pytest run next to nothing
(``benchmarks/plugin_import.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    from pytest_atlante.hosts.names import HOST_NAMES

    group = parser.getgroup("atlante", "pytest-atlante: evaluate agent harnesses")
    group.addoption("--atlante-eval", action="store_true", default=False,
                    help="collect and run the eval scenarios configured in atlante.jsonc (one item per trial)")
    group.addoption("--atlante-scenario", action="append", metavar="NAME", default=[],
                    help="run only the named scenario (repeatable); filters after discovery, never opts a pack in")
    group.addoption("--atlante-out", metavar="DIR", default=None,
                    help="write report.json (and diagnostics.json) into DIR, as given (relative to the "
                         "working directory); default: <project>/.atlante/eval/<run-id>/")
    group.addoption("--atlante-html", action="store_true", default=False,
                    help="also write report.html (one self-contained page: scenarios, trials, diffs, transcripts) "
                         "beside report.json at the end of the run")
    group.addoption("--atlante-keep", action="store_true", default=False,
                    help="keep trial sandboxes under $TMPDIR/atlante-eval-<run-id>/ for inspection")
    group.addoption("--atlante-project", metavar="DIR", default=None,
                    help="project root holding atlante.jsonc (default: the nearest directory holding it, from "
                         "the one pytest was started in up)")
    group.addoption("--atlante-control-from", default=None, metavar="REPORT",
                    help="with --atlante-variants: reuse the control's trials of this earlier sealed report instead of "
                         "running them (refused, exit 2, when anything but the variants differs)")
    group.addoption("--atlante-variants", default=None, metavar="all|NAME[,NAME…]",
                    help="also run these variants of atlante.jsonc (or all of them) beside the control, every "
                         "scenario and trial in each arm, and compare each with the control")
    group.addoption("--atlante-host", choices=list(HOST_NAMES), default=None,
                    help="run the suite under this host instead of eval.host (compare hosts without editing the config)")
    group.addoption("--atlante-isolation", choices=["auto", "namespace", "off"], default=None,
                    help="OS-level isolation of host sessions and command checks (bubblewrap): auto "
                         "(where it works, else a warning), namespace (required), off; wins over "
                         "eval.isolation")
    group.addoption("--atlante-network", choices=["shared", "model-only"], default=None,
                    help="the trials' network: shared (the machine's) or model-only (a network namespace of "
                         "each trial's own whose only way out is the metering proxy; needs namespace "
                         "isolation); wins over eval.network")
    group.addoption("--atlante-scripted", action="store_true", default=False,
                    help="run trials through the real CLIs against the offline scripted model "
                         "(each scenario's scripted/<name>.json) instead of a real provider")
    group.addoption("--atlante-selftest", action="store_true", default=False,
                    help="zero-token self-test of every scenario: a no-op trial must fail the checks, the "
                         "scripted reference trial must pass them; writes selftest.json (exit 0 when all are sound)")
    group.addoption("--atlante-selftest-full", action="store_true", default=False,
                    help="with --atlante-selftest: run every scenario's reference trial, reusing none from an "
                         "earlier sealed self-test whose inputs are unchanged")
    group.addoption("--atlante-in-flight", metavar="N", type=_in_flight, default=1,
                    help="keep up to N trials running at once in this process (threads; default 1): a wide run "
                         "without one xdist worker per trial (not with -n); trials are still reported in order")
    group.addoption("--atlante-forecast", action="store_true", default=False,
                    help="dry run: forecast sessions, tokens, cost and wall time from earlier reports in "
                         ".atlante/eval/, print a table and exit 0 (no host session)")
    group.addoption("--atlante-max-cost", metavar="USD", type=_usd, default=None,
                    help="refuse to start when the forecast p95 cost exceeds USD (exit 2); once the recorded "
                         "spend reaches USD, the remaining trials are skipped-budget")
    group.addoption("--atlante-baseline", metavar="REPORT", default=None,
                    help="after the run, compare it with this earlier report.json (as `atlante compare` does) "
                         "and record the comparison in the new report")
    group.addoption("--atlante-fail-on-regression", action="store_true", default=False,
                    help="with --atlante-baseline: a significantly regressed scenario fails the run (exit 1)")
    group.addoption("--atlante-shard", metavar="K/N", type=_shard_arg, default=None,
                    help="run shard K of N (1 <= K <= N): the whole suite is collected and maxSessions "
                         "allocated globally, then only this shard's trials run; merge the shards' "
                         "reports with `atlante report merge`")
    group.addoption("--atlante-no-github", action="store_true", default=False,
                    help="under GitHub Actions (GITHUB_ACTIONS=true) do not append the report's Markdown to "
                         "GITHUB_STEP_SUMMARY nor print an ::error annotation per failed trial (both on by default there, "
                         "never on other CIs)")
    group.addoption("--atlante-run-group", metavar="ID", default=None,
                    help="id shared by the shards of one run (default: the suite digest plus the CI's "
                         "run id, e.g. GITHUB_RUN_ID/GITHUB_RUN_ATTEMPT, CI_PIPELINE_ID, BUILDKITE_BUILD_ID)")


def _shard_arg(text: str) -> tuple[int, int]:
    """``K/N`` with 1 <= K <= N; anything else is a usage error naming the diagnostic code."""
    import argparse
    import re

    match = re.fullmatch(r"([0-9]{1,6})/([0-9]{1,6})", text)
    if match is None or not 1 <= int(match[1]) <= int(match[2]):
        raise argparse.ArgumentTypeError(
            f"eval-shard-invalid: {text!r} is not K/N with 1 <= K <= N (hint: --atlante-shard 2/4)")
    return int(match[1]), int(match[2])


def _in_flight(text: str) -> int:
    """A whole number of trials from 1 to 1024; anything else is a usage error naming the option."""
    import argparse

    if not text.isdigit() or not 1 <= int(text) <= 1024:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of trials from 1 to 1024 (hint: --atlante-in-flight 16)")
    return int(text)


def _usd(value: str) -> float:
    import argparse
    import math

    try:
        amount = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an amount in USD") from None
    if not math.isfinite(amount) or amount < 0:
        raise argparse.ArgumentTypeError(f"{value!r}: the cap must be a finite amount >= 0")
    return amount


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "atlante: an atlante eval trial (added automatically)")
    config.addinivalue_line("markers", "atlante_pack: an eval trial from an included pack suite")
    if not config.getoption("atlante_eval") and (config.getoption("atlante_selftest") or config.getoption("atlante_forecast")
                                                 or config.getoption("atlante_max_cost") is not None):
        raise pytest.UsageError("--atlante-selftest, --atlante-forecast and --atlante-max-cost need --atlante-eval "
                                "(or use `atlante selftest` / `atlante eval`)")
    if config.getoption("atlante_selftest_full") and not config.getoption("atlante_selftest"):
        raise pytest.UsageError("--atlante-selftest-full needs --atlante-selftest (or use `atlante selftest --full`)")
    if config.getoption("atlante_eval"):
        # An eval run is the eval suite: its items, report and exit status are the trials'.
        from pytest_atlante.run.gcpause import CollectionGcPause

        config.pluginmanager.register(CollectionGcPause(config), "atlante-gc-pause")
        if getattr(config, "workerinput", None) is not None:
            # An xdist worker imports the trial path only, never the controller's modules.
            from pytest_atlante.run.trialrole import register_worker

            register_worker(config)
        else:
            from pytest_atlante.run.roles import register

            register(config)
    else:
        from pytest_atlante.projectroot import project_root

        _register_atlas(config, project_root(config.getoption("atlante_project"), config.invocation_params.dir))


def _register_atlas(config: pytest.Config, project_root: Path) -> None:
    from pytest_atlante.fsutil import MAX_DOCUMENT_BYTES, UnreadableFile, read_capped

    path = project_root / "atlante.jsonc"
    try:
        # Non-blocking and size-checked: a FIFO or a huge file there must not hang or bloat an
        # ordinary pytest run of the user's codebase.
        text = read_capped(path, MAX_DOCUMENT_BYTES)
    except UnreadableFile:  # no configuration (the common case for a codebase that merely installed us)
        return
    if b'"atlas"' not in text and b"atlas:" not in text and b"'atlas'" not in text:
        # Cheap pre-check: a document without the word cannot have an atlas section, so the
        # configuration models (pydantic) are never imported for it.
        return
    from pytest_atlante.suite.config import load_project_config

    project, _, problems = load_project_config(project_root)
    if project is None or project.atlas is None or problems:
        return
    from pytest_atlante.atlas.items import AtlasQueryPlugin

    config.pluginmanager.register(
        AtlasQueryPlugin(project_root, project_root / project.atlas.queryCorpus, project_root / project.atlas.queryResults),
        "atlante-atlas",
    )


@pytest.fixture
def atlante_budget(request: pytest.FixtureRequest) -> Any:
    """The budget of the current eval trial (timeoutMs, maxTokens, maxSessions, trials, allocated).

    A read-only view (a frozen dataclass) of what the trial is held to: the trial runs with the
    budget decided at collection, so overriding this fixture changes what a reader sees, never
    what is enforced or reported.
    """
    from pytest_atlante.run.items import TrialItem

    budget = request.node.budget if isinstance(request.node, TrialItem) else None
    if budget is None:
        pytest.skip("atlante_budget is only available in --atlante-eval runs")
    return budget

