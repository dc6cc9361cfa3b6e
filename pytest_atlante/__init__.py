"""pytest-atlante: evaluate coding-agent harnesses with pytest.

PYTEST_DONT_REWRITE: pytest marks every ``pytest11`` plugin package for assertion rewriting, and
warns (``PytestAssertRewriteWarning``) when the package is already imported, which the ``atlante``
command always has; the plugin's own asserts need no rewriting, so the package opts out
(docs/design.md §12).
"""

__version__ = "0.1.0"
