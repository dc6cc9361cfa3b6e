"""Which requests the metering proxy serves: each wire format's model routes, nothing else.

The proxy holds the way to the provider (and, with stand-in credentials, the real key), so a route
it forwards is a route the agent can use: the provider's Message Batches results fetched through it
were tokens no response of a model call reported, its Files API a channel out.  So the proxy serves
an allowlist, by method and path (the path after the trial's key, relative to the base URL the host
was given, which may or may not end in ``/v1``).  Each wire format declares its own part of it in
its module (``proxied_calls``, ``model_lists``, ``refused_call``: ``provider/wire/``), and this
module asks the one table of formats, ``WIRE_FORMATS``:

- Anthropic Messages: ``POST /v1/messages``, ``POST /v1/messages/count_tokens``;
- OpenAI chat completions: ``POST /v1/chat/completions``;
- OpenAI Responses: ``POST /v1/responses``;
- Gemini: ``POST /v1beta/models/<model>:generateContent``, ``:countTokens``, and
  ``:streamGenerateContent`` **with** ``alt=sse`` only — without it Gemini streams a JSON array,
  a framing the meter does not read, so it is refused rather than served unmetered;
- the model lists (``GET /v1/models``, ``GET /v1beta/models``, one model's entry under them);
- ``HEAD /`` or ``GET /`` (Claude Code's reachability check before its first request), answered by
  the proxy itself (``LOCAL``), never forwarded.

Everything else — batches, files, fine-tuning, a WebSocket upgrade (Codex's built-in provider tries
``GET /v1/responses`` first, then posts) — is answered 404 by the proxy itself, never forwarded, and
counted in the trial's record (``proxyRefused``).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pytest_atlante.provider.wire import WIRE_FORMATS

__all__ = ["LOCAL", "refusal"]

#: A request the proxy answers itself (200, empty) without reaching the provider.
LOCAL = "answered by the proxy"


def refusal(method: str, path: str) -> str | None:
    """Why the proxy does not serve ``method path`` (None: a model route it serves)."""
    parts = urlsplit(path)
    route = parts.path.rstrip("/") or "/"
    if method == "POST":
        wire = next((wire for wire in WIRE_FORMATS.values() if wire.proxied_calls.match(route)), None)
        if wire is not None:
            return wire.refused_call(route, parts.query)
    if method in ("GET", "HEAD") and route == "/":
        return LOCAL
    if method in ("GET", "HEAD") and any(wire.model_lists.match(route) for wire in WIRE_FORMATS.values()):
        return None
    return "not a model route"
