"""An installed but idle plugin imports nothing beyond its hooks and the host names.

Without ``--atlante-eval`` and without an ``atlas`` section, every pytest run of a user's codebase
pays only for ``plugin.py`` and ``hosts/registry.py``; the cost itself is measured (never asserted)
by ``benchmarks/plugin_import.py``.
"""

from __future__ import annotations

import ast

import pytest

# fsutil (stdlib only) reads atlante.jsonc without blocking, so a FIFO there cannot hang the run.
# projectroot: the upward search for atlante.jsonc (an Atlas section there registers the query plugin),
# a leaf of os.path calls.
IDLE_MODULES = ["pytest_atlante", "pytest_atlante.fsutil", "pytest_atlante.hosts", "pytest_atlante.hosts.names", "pytest_atlante.hosts.registry",
                "pytest_atlante.plugin", "pytest_atlante.projectroot"]

REPORTER = (
    "import sys\n"
    "def pytest_sessionfinish(session):\n"
    "    print('MODULES', sorted(m for m in sys.modules if m.startswith(('pytest_atlante', 'pydantic', 'json5'))))\n"
)


def loaded(pytester: pytest.Pytester) -> list[str]:
    pytester.makeconftest(REPORTER)
    pytester.makepyfile("def test_ordinary():\n    pass\n")
    result = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()
    line = next(line for line in result.stdout.lines if "MODULES" in line)
    modules: list[str] = ast.literal_eval(line.split("MODULES", 1)[1].strip())
    return modules


@pytest.mark.parametrize("config", [None, '{"version": "0.2", "eval": {"host": "opencode", "scenarios": "x/*.json"}}'],
                         ids=["no-config", "config-without-atlas"])
def test_an_idle_plugin_imports_only_its_hooks(pytester: pytest.Pytester, config: str | None) -> None:
    if config is not None:
        (pytester.path / "atlante.jsonc").write_text(config)
    assert loaded(pytester) == IDLE_MODULES


def test_atlante_budget_outside_an_eval_run_skips_with_the_reason(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_wants_a_budget(atlante_budget):\n    pass\n")
    result = pytester.runpytest_inprocess("-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*atlante_budget is only available in --atlante-eval runs*"])
