"""pytest hooks for pytest-atlante.

Thin by design (as in pytest-xdist and pytest-cov): options, and at configure time the per-role
objects that carry the behaviour — ``EvalSession`` for ``--atlante-eval`` runs and the Atlas
query-regression plugin when ``atlante.jsonc`` names a query corpus.  Without ``--atlante-eval`` and
without an ``atlas`` section nothing is registered and pytest behaves exactly as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .items import SESSION_KEY


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("atlante", "pytest-atlante: evaluate agent harnesses")
    group.addoption("--atlante-eval", action="store_true", default=False,
                    help="collect and run the eval scenarios configured in atlante.jsonc (one item per trial)")
    group.addoption("--atlante-scenario", action="append", metavar="NAME", default=[],
                    help="run only the named scenario (repeatable); filters after discovery, never opts a pack in")
    group.addoption("--atlante-out", metavar="DIR", default=None,
                    help="write report.json (and diagnostics.json) into DIR, as given (relative to the "
                         "working directory); default: <project>/.atlante/eval/<run-id>/")
    group.addoption("--atlante-keep", action="store_true", default=False,
                    help="keep trial sandboxes under $TMPDIR/atlante-eval-<run-id>/ for inspection")
    group.addoption("--atlante-project", metavar="DIR", default=None,
                    help="project root holding atlante.jsonc (default: the directory pytest was started in)")
    group.addoption("--atlante-host", choices=["claude-code", "opencode"], default=None,
                    help="run the suite under this host instead of eval.host (compare hosts without editing the config)")
    group.addoption("--atlante-scripted", action="store_true", default=False,
                    help="run trials through the real CLIs against the offline scripted model "
                         "(each scenario's scripted/<name>.json) instead of a real provider")
    group.addoption("--atlante-selftest", action="store_true", default=False,
                    help="zero-token self-test of every scenario: a no-op trial must fail the checks, the "
                         "scripted reference trial must pass them; writes selftest.json (exit 0 when all are sound)")
    group.addoption("--atlante-forecast", action="store_true", default=False,
                    help="dry run: forecast sessions, tokens, cost and wall time from earlier reports in "
                         ".atlante/eval/, print a table and exit 0 (no host session)")
    group.addoption("--atlante-max-cost", metavar="USD", type=_usd, default=None,
                    help="refuse to start when the forecast p95 cost exceeds USD (exit 2); once the recorded "
                         "spend reaches USD, the remaining trials are skipped-budget")


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
    from .session import EvalSession, Options

    options = Options.from_config(config)
    if not config.getoption("atlante_eval") and (options.selftest or options.forecast or options.max_cost is not None):
        raise pytest.UsageError("--atlante-selftest, --atlante-forecast and --atlante-max-cost need --atlante-eval "
                                "(or use `atlante selftest` / `atlante eval`)")
    if config.getoption("atlante_eval"):
        # An eval run is the eval suite: its items, report and exit status are the trials'.
        session: EvalSession
        if options.selftest:
            from .selftest_session import SelftestSession

            session = SelftestSession(config, options)
        else:
            session = EvalSession(config, options)
        config.stash[SESSION_KEY] = session
        config.pluginmanager.register(session, "atlante-eval")
    else:
        _register_atlas(config, options.project_root)


def _register_atlas(config: pytest.Config, project_root: Path) -> None:
    from .config import load_project_config

    if not (project_root / "atlante.jsonc").is_file():
        return
    project, _, problems = load_project_config(project_root)
    if project is None or project.atlas is None or problems:
        return
    from .atlas.items import AtlasQueryPlugin

    config.pluginmanager.register(
        AtlasQueryPlugin(project_root, project_root / project.atlas.queryCorpus, project_root / project.atlas.queryResults),
        "atlante-atlas",
    )


@pytest.fixture
def atlante_budget(request: pytest.FixtureRequest) -> Any:
    """The budget of the current eval trial (timeoutMs, maxTokens, maxSessions, trials, allocated)."""
    session = request.config.stash.get(SESSION_KEY, None)
    if session is None:
        pytest.skip("atlante_budget is only available in --atlante-eval runs")
    return session.budget_for(request.node)
