"""The wire formats of the model APIs the hosts speak, one module each, and the one table of them.

The scripted model answers in a format, the metering proxy recognises a model request by one; both
look the format up here by the request's route (:func:`wire_for`, :func:`metered_wire`).  The
proxy's allowlist (``provider/routes.py``) and its meter (``provider/meter.py``: usage, whether a
response said anything, ``provider/served.py``: its tool calls) ask every format in this table's
order, each reading only its own routes and documents.  A new format is one module subclassing
:class:`~pytest_atlante.provider.wire.shared.WireFormat` (or ``MessageWire`` for a ``messages``
history) plus its line in ``WIRE_FORMATS``.
"""

from __future__ import annotations

from pytest_atlante.provider.wire import anthropic, gemini, openai_chat, openai_responses
from pytest_atlante.provider.wire.shared import WireFormat, WireName

WIRE_FORMATS: dict[WireName, WireFormat] = {
    "anthropic": anthropic.WIRE,         # Anthropic Messages: Claude Code, OpenCode's anthropic provider
    "openai": openai_chat.WIRE,          # OpenAI chat completions: OpenCode's openai-compatible provider
    "responses": openai_responses.WIRE,  # OpenAI Responses: Codex
    "gemini": gemini.WIRE,               # Gemini's Generative Language API: Gemini CLI
}
if any(name != wire.name for name, wire in WIRE_FORMATS.items()):  # pragma: no cover - a mislabelled line
    raise ImportError("provider.wire: a WIRE_FORMATS key names another format")


def wire_for(route: str) -> WireFormat | None:
    """The format the scripted model answers ``route`` in (an exact path), if any."""
    return next((wire for wire in WIRE_FORMATS.values() if wire.serves(route)), None)


def metered_wire(route: str) -> WireFormat | None:
    """The format of a model request on any provider's ``route`` (a token count is none)."""
    return next((wire for wire in WIRE_FORMATS.values() if wire.requests_tokens(route)), None)
