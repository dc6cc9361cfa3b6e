"""A tiny greeting library: the example project's own application code."""


def greet(name: str) -> str:
    """Return a friendly greeting for ``name``."""
    cleaned = name.strip() or "world"
    return f"Hello, {cleaned}!"
