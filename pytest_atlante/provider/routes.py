"""Which requests the metering proxy serves: each wire format's model routes, nothing else.

The proxy holds the way to the provider (and, with stand-in credentials, the real key), so a route
it forwards is a route the agent can use: the provider's Message Batches results fetched through it
were tokens no response of a model call reported, its Files API a channel out.  So the proxy serves
an allowlist, by method and path (the path after the trial's key, relative to the base URL the host
was given, which may or may not end in ``/v1``):

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

import re
from urllib.parse import parse_qs, urlsplit

__all__ = ["LOCAL", "refusal"]

#: A request the proxy answers itself (200, empty) without reaching the provider.
LOCAL = "answered by the proxy"

_V1 = r"(?:/v1)?"
#: Anthropic's token count, a model route that spends nothing (named apart from the pattern below).
_COUNT = "/count_tokens"
_POST_ROUTES = (
    rf"^{_V1}/messages(?:{_COUNT})?$|^{_V1}/chat/completions$|^{_V1}/responses$"
    r"|^/v1(?:beta|alpha)?/models/[^/:]+:(?:generateContent|streamGenerateContent|countTokens)$"
)
_POST = re.compile(_POST_ROUTES)
_GET = re.compile(r"^(?:/v1|/v1beta|/v1alpha)?/models(?:/[^/:]+)?$")


def refusal(method: str, path: str) -> str | None:
    """Why the proxy does not serve ``method path`` (None: a model route it serves)."""
    parts = urlsplit(path)
    route = parts.path.rstrip("/") or "/"
    if method == "POST" and _POST.match(route):
        if route.endswith(":streamGenerateContent") and parse_qs(parts.query).get("alt") != ["sse"]:
            return "a Gemini stream not framed as server-sent events (alt=sse), which is not metered"
        return None
    if method in ("GET", "HEAD") and route == "/":
        return LOCAL
    if method in ("GET", "HEAD") and _GET.match(route):
        return None
    return "not a model route"
