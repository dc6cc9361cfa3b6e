"""pytest-atlante: evaluate coding-agent harnesses with pytest."""

__version__ = "0.1.0"
