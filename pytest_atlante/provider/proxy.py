"""The metering proxy: a loopback HTTP endpoint of one trial between the host and its model.

Every model request of a metered trial passes here (the host's provider base URL points at the
proxy, docs/design.md §10): the proxy forwards it to the upstream — the real provider over HTTPS with
certificate verification, or the scripted model — relays the response as it arrives, and reads the
usage from the provider's own response (``provider/meter.py``).  Counts only go up: every response is
counted, a request the agent sends itself through the proxy included.

``maxTokens`` is enforced here: the response whose usage crosses the threshold is served whole and
is the last one served — a request that arrives afterwards is refused, a response still in flight
is cut — and the proxy's ``abort_fd`` turns readable so the runner ends the session (the same
abort path as the stream's token gate).
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import ssl
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit

from pytest_atlante.hosts.prices import model_base
from pytest_atlante.hosts.streams import sum_usage
from pytest_atlante.provider.loopback import LoopbackServer, LoopbackService, new_trial_key, strip_trial_key
from pytest_atlante.provider.meter import MAX_EVENT_BYTES, ResponseMeter
from pytest_atlante.provider.routes import LOCAL, refusal
from pytest_atlante.provider.served import Served, ServedCall
from pytest_atlante.provider.wire import metered_wire
from pytest_atlante.records import Usage

#: Request and response headers that belong to one connection, not to the message (RFC 9110 §7.6.1),
#: plus those the proxy sets itself.  ``accept-encoding`` is dropped so the upstream answers in
#: plain text the meter can read.
_HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te",
    "trailer", "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding",
})  # fmt: skip
#: A model response can stream for many minutes; the host session's own timeout ends it sooner.
UPSTREAM_TIMEOUT_S = 900.0
#: The largest request body relayed (a long session's context is a few MiB).  Bodies are read one at a
#: time per trial (after the request's turn came), so held requests hold no body.
MAX_REQUEST_BYTES = 64 * 1024 * 1024
#: The largest response relayed; a longer one is cut and the trial's model access ends (its usage
#: could not be read).  The meter holds one event of at most this size (``meter.MAX_EVENT_BYTES``).
MAX_RESPONSE_BYTES = MAX_EVENT_BYTES
#: Requests waiting for their turn (one model request in flight per trial) beyond which more are refused.
MAX_WAITING = 8
#: What every stand-in credential starts with (``MeteringProxy.stand_in_for``).
STAND_IN_PREFIX = "atlante-stand-in-"
#: Where a host sends its model credential, and so the only places a stand-in becomes the real one:
#: the API-key and bearer headers, and Gemini's ``key`` query parameter.  Anywhere else (an
#: ``anthropic-beta`` value, a model name in the path, another parameter) a provider may echo the
#: value back in an error, which would hand the agent the real credential.
CREDENTIAL_HEADERS = frozenset({"authorization", "x-api-key", "x-goog-api-key", "api-key"})
CREDENTIAL_PARAMETER = "key"
#: How many refused requests a trial's record names (the count is whole).
MAX_REFUSED_NAMED = 10
_CHUNK = 64 * 1024
#: How long the end of a session waits for responses still being counted.
SETTLE_S = 2.0
#: How many upstream problems a trial keeps, in words.
MAX_PROBLEMS = 5


@dataclass(frozen=True)
class Upstream:
    """Where the proxy forwards: ``http(s)://host[:port][/base path]``; HTTPS verifies the certificate
    against ``cafile`` when given, else the system's trust store (which honours ``SSL_CERT_FILE``)."""

    url: str
    cafile: str | None = None

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"the model endpoint {self.url!r} is no http:// or https:// URL")

    @property
    def base_path(self) -> str:
        return urlsplit(self.url).path.rstrip("/")

    def tls_context(self) -> ssl.SSLContext:
        """Verifies chain and host name against ``cafile``, else the system's trust store plus the
        extra CAs Node-based hosts are given (``NODE_EXTRA_CA_CERTS``, a corporate TLS proxy's CA):
        what the host itself would have trusted."""
        context = ssl.create_default_context(cafile=self.cafile)
        extra = os.environ.get("NODE_EXTRA_CA_CERTS")
        if self.cafile is None and extra and os.path.isfile(extra):
            with contextlib.suppress(ssl.SSLError, OSError):  # an unreadable bundle adds nothing
                context.load_verify_locations(cafile=extra)
        return context

    def connect(self) -> http.client.HTTPConnection:
        """A connection to the upstream, through the user's ``https_proxy``/``http_proxy`` (a CONNECT
        tunnel; ``no_proxy`` and loopback addresses bypass it) as the host itself would have gone."""
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        via = _proxy_for(parts.scheme, host)
        address = (via.hostname or "", via.port or 8080) if via is not None else (host, port)
        if parts.scheme == "https":
            connection: http.client.HTTPConnection = http.client.HTTPSConnection(
                *address, timeout=UPSTREAM_TIMEOUT_S, context=self.tls_context())
        else:
            connection = http.client.HTTPConnection(*address, timeout=UPSTREAM_TIMEOUT_S)
        if via is not None:
            headers = {}
            if via.username:
                login = f"{unquote(via.username)}:{unquote(via.password or '')}".encode()
                headers["Proxy-Authorization"] = "Basic " + base64.b64encode(login).decode()
            connection.set_tunnel(host, port, headers=headers)
        return connection


def _proxy_for(scheme: str, host: str) -> SplitResult | None:
    """The user's proxy for ``scheme`` toward ``host``, unless ``no_proxy`` or loopback says direct."""
    if host in ("localhost", "::1") or host.startswith("127."):
        return None
    # Imported here: urllib.request costs 7 MiB of memory, and a scripted run (loopback) never needs it.
    import urllib.request

    via = urllib.request.getproxies_environment().get(scheme)
    if not via or urllib.request.proxy_bypass(host):
        return None
    parts = urlsplit(via if "://" in via else f"http://{via}")
    return parts if parts.hostname else None


@dataclass(frozen=True)
class Metering:
    """What the proxy saw of one trial's model traffic (read once the session ended)."""

    usage: Usage
    cost_usd: float | None     # only when the provider priced its responses itself
    served: int                # responses relayed (model requests and any other)
    answered: int              # model responses with status < 400 that reported usage
    failed: int                # model requests the upstream failed (status >= 400, no connection)
    refused: int               # requests refused after the crossing response
    unmetered: int             # model responses with status < 400 that reported no usage
    tripped_at: int | None     # the total when a response crossed maxTokens
    problems: tuple[str, ...]  # the first upstream failures, in words
    calls: tuple[ServedCall, ...] = ()   # the tool calls of the served responses
    responses: tuple[Usage, ...] = ()    # the usage of each served response that reported one
    empty: int = 0             # model responses with status < 400 that held no text, thinking or tool call
    foreign: int = 0           # requests without the trial's key (refused before anything was read)
    off_route: tuple[str, ...] = ()  # the first requests refused as no model route ("METHOD /path: why")
    off_route_count: int = 0   # all of them
    # Failed model requests the provider refused as the requester's own doing (a malformed request,
    # an unknown route or model, a request without the trial's credential): any client of the proxy
    # — the agent's tools too — can cause one, so it says nothing of the provider (:func:`requester_error`).
    requester_errors: int = 0
    response_models: tuple[str | None, ...] = ()  # the model each of ``responses`` says answered it
    # A request held the prompt as typed, as one whole JSON string (``MeteringProxy.watch_for_verbatim``):
    # the host sent a ``/name`` prompt to the model as text instead of expanding the command.
    verbatim_prompt: bool = False
    crossing_calls: tuple[str, ...] = ()  # the ids of the crossing response's tool calls (never run)

    @property
    def model_answers(self) -> Served:
        """What the transcript's events are checked against (``provider/served.py``)."""
        return Served(self.calls, self.responses, self.usage)

    @property
    def provider_failures(self) -> int:
        """Model requests that failed by the provider's (or the network's) doing, as the proxy saw
        them: an upstream it could not reach, a status the provider decides (an authentication
        refusal of the trial's own credential, a rate limit, a server error), an empty answer."""
        return self.failed - self.requester_errors + self.empty

    @property
    def vouches_for_the_model(self) -> bool:
        """The model answered, and the provider failed no request: a host's claim of an API or login
        failure is not what happened (docs/design.md §10).  A request the provider refused as
        malformed does not count against this — the agent can send one itself through the proxy —
        while an empty answer does (Gemini CLI reports it as an error and exits 0)."""
        return self.answered > 0 and self.provider_failures == 0

    @property
    def models(self) -> tuple[str, ...]:
        """The models the provider says answered, each once, in order of first answer."""
        return tuple(dict.fromkeys(model for model in self.response_models if model is not None))

    @property
    def main_model(self) -> str | None:
        """The model that answered the most tokens (not a host's side requests to a small model:
        Claude Code's quota and title checks, Gemini CLI's router)."""
        tokens: dict[str, int] = {}
        for model, usage in zip(self.response_models, self.responses, strict=False):
            if model is not None:
                tokens[model] = tokens.get(model, 0) + usage.total
        return max(tokens, key=lambda model: tokens[model], default=None)

    def names_model(self, model: str | None) -> bool:
        """``model`` is one the provider's responses name (a dated snapshot of it counts)."""
        return model is not None and any(model_base(model) == model_base(seen) for seen in self.models)

    def empty_answers(self) -> str | None:
        """The provider's empty answers, in words (None when there were none)."""
        if not self.empty:
            return None
        requests = "request" if self.empty == 1 else "requests"
        return (f"the provider answered {self.empty} model {requests} with an empty response "
                "(no text, thinking or tool call)")


class MeteringProxy(LoopbackService):
    """One trial's proxy on ``127.0.0.1:<ephemeral port>``; ``base_url`` is what the host is given."""

    def __init__(self, upstream: Upstream, max_tokens: int, *, unix_socket: Path | None = None) -> None:
        """``unix_socket``: also listen there (a ``model-only`` trial's relay connects to it)."""
        self.upstream = upstream
        self.max_tokens = max_tokens
        self.unix_socket = unix_socket
        self._lock = threading.Condition()
        self._done: list[Usage] = []
        self._inflight: dict[int, ResponseMeter] = {}
        self._next_id = 0
        self._crossing: int | None = None
        self._tripped_at: int | None = None
        self._cost: float | None = None
        self._counts = {"served": 0, "answered": 0, "failed": 0, "refused": 0, "unmetered": 0, "empty": 0,
                        "foreign": 0, "off_route": 0, "requester": 0}
        self._off_route: list[str] = []
        # One model request in flight per trial: the crossing response is really the last one
        # served, and one request body at a time is held in memory.
        self._turn = threading.Semaphore(1)
        self._waiting = 0
        self._in_turn = False
        self._problems: list[str] = []
        self._calls: list[ServedCall] = []
        self._reported: list[Usage] = []
        self._models: list[str | None] = []  # beside ``_reported``: the model each response names
        self._crossing_calls: tuple[str, ...] = ()
        self._abort_read, self._abort_write = os.pipe()
        # Only this trial's host knows it (loopback.py): another trial's agent that finds the port
        # in /proc/net/tcp is refused before anything reaches the model.
        self.trial_key = new_trial_key()
        self._stand_ins: dict[str, str] = {}  # stand-in → the real credential (swapped in on the way out)
        self._verbatim: tuple[bytes, ...] = ()
        self._verbatim_seen = False
        self._server = LoopbackServer("atlante-metering-proxy")
        self._unix_server = LoopbackServer("atlante-metering-proxy-unix")

    # -- lifecycle

    def start(self) -> None:
        self._server.start_serving(_handler_for(self))
        if self.unix_socket is not None:
            self._unix_server.start_serving(_handler_for(self), unix_socket=self.unix_socket)

    def stop(self) -> None:
        self._server.stop()
        self._unix_server.stop()
        if self.unix_socket is not None:
            self.unix_socket.unlink(missing_ok=True)
            if self.unix_socket.parent.name.startswith("atlante-model-"):  # runner.model_socket's fallback
                with contextlib.suppress(OSError):
                    self.unix_socket.parent.rmdir()
        for fd in (self._abort_read, self._abort_write):
            with contextlib.suppress(OSError):
                os.close(fd)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{self.trial_key}"

    @property
    def abort_fd(self) -> int:
        """Readable once the crossing response was served: the runner's signal to end the session."""
        return self._abort_read

    # -- what was seen

    def answered(self) -> int:
        """Model responses served with usage so far: the session's turns, live (the terminal's
        status line reads it while the session runs)."""
        return self._counts["answered"]

    def metering(self, settle_s: float = SETTLE_S) -> Metering:
        """What was seen; waits up to ``settle_s`` for responses still being finished (a host can
        read a whole response and exit before the relaying thread has counted it)."""
        with self._lock:
            self._lock.wait_for(lambda: not self._inflight, timeout=settle_s)
            return Metering(self._total(), self._cost, self._counts["served"], self._counts["answered"],
                            self._counts["failed"], self._counts["refused"], self._counts["unmetered"],
                            self._tripped_at, tuple(self._problems), tuple(self._calls), tuple(self._reported),
                            self._counts["empty"], self._counts["foreign"], tuple(self._off_route),
                            self._counts["off_route"], self._counts["requester"], tuple(self._models),
                            verbatim_prompt=self._verbatim_seen, crossing_calls=self._crossing_calls)

    def _total(self) -> Usage:
        return sum_usage([*self._done, *(meter.usage for meter in self._inflight.values())])

    # -- the request path (handler threads)

    def admit(self) -> int | None:
        """A new request's id, or None once the crossing response was served (refused)."""
        with self._lock:
            if self._tripped_at is not None:
                self._counts["refused"] += 1
                return None
            self._next_id += 1
            self._inflight[self._next_id] = ResponseMeter("")
            return self._next_id

    def watch_for_verbatim(self, text: str) -> None:
        """Note whether a request body holds ``text`` as one whole JSON string: a host that expands a
        ``/name`` prompt sends the command's text, one that does not (Gemini CLI without the command)
        sends the prompt as typed (docs/host-facts.md §13).  Set before the session starts."""
        with self._lock:
            self._verbatim = tuple({json.dumps(text).encode(), json.dumps(text, ensure_ascii=False).encode()})

    def note_body(self, body: bytes) -> None:
        if self._verbatim and not self._verbatim_seen and any(marker in body for marker in self._verbatim):
            with self._lock:
                self._verbatim_seen = True

    def note_foreign(self) -> None:
        """A request without this trial's key (another trial's agent, a port scan): refused."""
        with self._lock:
            self._counts["foreign"] += 1

    def stand_in_for(self, real: str) -> str:
        """A per-trial stand-in for the credential ``real``: what the session gets instead; the proxy
        puts ``real`` back into the credential headers and ``key`` parameter of the requests it
        forwards (model routes only: nothing else is forwarded)."""
        stand_in = f"{STAND_IN_PREFIX}{new_trial_key()}"
        self._stand_ins[stand_in] = real
        return stand_in

    def carries_credential(self, texts: Iterable[str]) -> bool:
        """Whether a request holds this trial's credential: one of its stand-ins (every request
        does when the session holds the real credential itself, none standing in)."""
        return not self._stand_ins or any(stand_in in text for text in texts for stand_in in self._stand_ins)

    def with_credentials(self, text: str) -> str:
        for stand_in, real in self._stand_ins.items():
            text = text.replace(stand_in, real)
        return text

    def forwarded_headers(self, headers: dict[str, str]) -> dict[str, str]:
        """``headers`` with the real credential in the credential headers only."""
        return {name: self.with_credentials(value) if name.lower() in CREDENTIAL_HEADERS else value
                for name, value in headers.items()}

    def forwarded_path(self, path: str) -> str:
        """``path`` with the real credential in its ``key`` query parameter only."""
        route, mark, query = path.partition("?")
        if not mark:
            return path
        parts = [self.with_credentials(part) if part.split("=", 1)[0] == CREDENTIAL_PARAMETER else part
                 for part in query.split("&")]
        return f"{route}?{'&'.join(parts)}"

    def note_off_route(self, method: str, path: str, why: str) -> None:
        """A request the proxy does not serve (``provider/routes.py``): refused, never forwarded."""
        with self._lock:
            self._counts["off_route"] += 1
            if len(self._off_route) < MAX_REFUSED_NAMED:
                self._off_route.append(f"{method} {urlsplit(path).path[:200]}: {why}")

    def take_turn(self) -> bool:
        """Wait until no other request of this trial is in flight (False: too many already wait)."""
        with self._lock:
            if self._waiting >= MAX_WAITING:
                self._counts["refused"] += 1
                return False
            self._waiting += 1
        taken = False
        try:
            taken = self._turn.acquire(timeout=UPSTREAM_TIMEOUT_S)
            return taken
        finally:
            with self._lock:
                self._waiting -= 1
                self._in_turn = self._in_turn or taken

    def end_turn(self) -> None:
        with self._lock:
            self._in_turn = False
        self._turn.release()

    def queue(self) -> tuple[bool, int]:
        """Whether a model request holds this trial's turn, and how many wait for it (what a
        test of the bounds waits on: requests reach the proxy's threads in no promised order)."""
        with self._lock:
            return self._in_turn, self._waiting

    def cut_oversized(self, request_id: int) -> None:
        """A response past ``MAX_RESPONSE_BYTES`` whose usage could not be read: no more model
        requests for this trial, as after a crossing (an unmetered answer must not be free)."""
        with self._lock:
            if self._tripped_at is None:
                self._tripped_at, self._crossing = max(self._total().total, self.max_tokens + 1), request_id

    def begin(self, request_id: int, content_type: str, length: int | None) -> ResponseMeter:
        meter = ResponseMeter(content_type, length)
        with self._lock:
            self._inflight[request_id] = meter
        return meter

    def progress(self, request_id: int) -> bool:
        """After a chunk was read into the request's meter: may it still be relayed?  The first
        response to take the total past ``max_tokens`` is the crossing one and goes on; any other
        response in flight then is cut."""
        with self._lock:
            if self._tripped_at is None:
                total = self._total().total
                if total > self.max_tokens:
                    self._tripped_at, self._crossing = total, request_id
            return self._crossing in (None, request_id)

    def finish(self, request_id: int, status: int, *, model_request: bool, problem: str | None = None,
               credentialed: bool = True) -> None:
        """The response ended; ``credentialed``: the request held the trial's credential."""
        with self._lock:
            meter = self._inflight.pop(request_id, None)
            if meter is not None:
                meter.finish()
                self._done.append(meter.usage)
                self._calls.extend(meter.tool_calls.calls)
                if meter.reported:
                    self._reported.append(meter.usage)
                    self._models.append(meter.model)
                if meter.cost_usd is not None:
                    self._cost = (self._cost or 0.0) + meter.cost_usd
            self._counts["served"] += 1
            if model_request:
                if status >= 400:
                    self._counts["failed"] += 1
                    self._counts["requester"] += requester_error(status, credentialed=credentialed)
                elif meter is not None and meter.reported:
                    self._counts["answered"] += 1
                else:
                    self._counts["unmetered"] += 1
                if status < 400 and meter is not None and meter.empty:
                    self._counts["empty"] += 1
            if problem is not None and len(self._problems) < MAX_PROBLEMS:
                self._problems.append(problem[:300])
            if self._tripped_at is None and self._total().total > self.max_tokens:
                self._tripped_at, self._crossing = self._total().total, request_id
            crossed = self._crossing == request_id
            if crossed and meter is not None:  # the session ends on it: the host may never show its calls
                self._crossing_calls = tuple(call.id for call in meter.tool_calls.calls)
            self._lock.notify_all()
        if crossed:
            self._signal_abort()

    def _signal_abort(self) -> None:
        with contextlib.suppress(OSError):  # stopped already
            os.write(self._abort_write, b"x")


#: Client-error statuses that are the provider's word on the trial, not on one request: an
#: authentication or permission refusal (of a request holding the trial's credential), a request
#: timeout, a rate limit.
_PROVIDER_SAYS = frozenset({401, 403, 408, 429})


def credential_places(path: str, headers: dict[str, str]) -> list[str]:
    """What of a request a host's credential is read from: the credential headers' values and the
    ``key`` query parameters (where a stand-in becomes the real credential)."""
    query = path.partition("?")[2]
    return [*(value for name, value in headers.items() if name.lower() in CREDENTIAL_HEADERS),
            *(part for part in query.split("&") if part.split("=", 1)[0] == CREDENTIAL_PARAMETER)]


def requester_error(status: int, *, credentialed: bool) -> bool:
    """A failed status the requester caused itself: a 4xx other than :data:`_PROVIDER_SAYS`, or an
    authentication refusal of a request that did not hold the trial's credential."""
    if not 400 <= status < 500:
        return False
    return status not in _PROVIDER_SAYS or (status in (401, 403) and not credentialed)


def _is_model_request(method: str, path: str) -> bool:
    """A request that asks the model for tokens (not a health check, a model list or a token count)."""
    route = urlsplit(path).path.rstrip("/")
    return method == "POST" and metered_wire(route) is not None


def _refusal(max_tokens: int) -> bytes:
    message = f"atlante: the trial's maxTokens={max_tokens} was exceeded; no more model requests are served"
    # Both error shapes in one body: Anthropic reads error.type/message, OpenAI error.message.
    return json.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": message}}).encode()


def _forwarded(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    return {name: value for name, value in headers if name.lower() not in _HOP_BY_HOP}


def _handler_for(proxy: MeteringProxy) -> type[BaseHTTPRequestHandler]:
    """A request handler class bound to ``proxy`` (a closure: no module-level state)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 60

        def do_GET(self) -> None:  # http.server's naming (do_<METHOD>)
            self._relay()

        def do_HEAD(self) -> None:
            self._relay()

        def do_POST(self) -> None:
            self._relay()

        def do_PUT(self) -> None:
            self._relay()

        def do_PATCH(self) -> None:
            self._relay()

        def do_DELETE(self) -> None:
            self._relay()

        def do_OPTIONS(self) -> None:
            self._relay()

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence stderr logging
            return

        def _body(self) -> bytes | None:
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                return self._chunked_body()
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                return None
            if length < 0 or length > MAX_REQUEST_BYTES:
                return None
            body = self.rfile.read(length) if length else b""
            return body if len(body) == length else None  # a client that hung up mid-body sent no request

        def _chunked_body(self) -> bytes | None:
            body = bytearray()
            while True:
                try:
                    size = int(self.rfile.readline(1024).split(b";")[0].strip() or b"0", 16)
                except ValueError:
                    return None
                if size == 0:
                    while self.rfile.readline(1024).strip():  # trailers
                        pass
                    return bytes(body)
                if len(body) + size > MAX_REQUEST_BYTES:
                    return None
                chunk = self.rfile.read(size)
                if len(chunk) != size:  # the client hung up mid-chunk
                    return None
                body += chunk
                self.rfile.readline(1024)

        def _answer(self, status: int, payload: bytes) -> None:
            self.close_connection = True
            with contextlib.suppress(OSError):  # the client hung up: nothing to tell it
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("Connection", "close")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

        def _relay(self) -> None:
            path = strip_trial_key(self.path, proxy.trial_key)
            if path is None:  # not this trial's host: no body read, nothing counted, nothing forwarded
                proxy.note_foreign()
                self._answer(404, b'{"error": {"message": "atlante metering proxy: not found"}}')
                return
            why = refusal(self.command, path)
            if why == LOCAL:  # a reachability check: nothing to forward
                self._answer(200, b"{}")
                return
            if why is not None:  # not a model route: refused here, before its body is read
                proxy.note_off_route(self.command, path, why)
                self._answer(404, json.dumps({"type": "error", "error": {
                    "type": "not_found_error", "message": f"atlante metering proxy: {why}"}}).encode())
                return
            if not proxy.take_turn():
                self._answer(429, b'{"error": {"message": "atlante metering proxy: too many requests waiting"}}')
                return
            try:
                self._forward(path)
            finally:
                proxy.end_turn()

        def _forward(self, path: str) -> None:
            model_request = _is_model_request(self.command, path)
            body = self._body()
            if body is None:
                self._answer(400, b'{"error": {"message": "atlante metering proxy: unreadable request body"}}')
                return
            if model_request:
                proxy.note_body(body)
            request_id = proxy.admit()
            if request_id is None:
                self._answer(400, _refusal(proxy.max_tokens))
                return
            upstream = proxy.upstream
            connection = upstream.connect()
            sent = _forwarded(self.headers.items())
            credentialed = proxy.carries_credential(credential_places(path, sent))
            headers = proxy.forwarded_headers(sent)
            headers["Accept-Encoding"] = "identity"
            try:
                connection.request(self.command, upstream.base_path + proxy.forwarded_path(path), body=body or None,
                                   headers=headers)
                response = connection.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                connection.close()
                why = f"{upstream.url}: {type(exc).__name__}: {exc}"
                proxy.finish(request_id, 502, model_request=model_request, problem=why, credentialed=credentialed)
                self._answer(502, json.dumps({"type": "error", "error": {
                    "type": "api_error", "message": f"atlante metering proxy: the model endpoint failed: {why}"}}).encode())
                return
            try:
                self._stream(request_id, response, model_request, credentialed)
            finally:
                connection.close()

        def _stream(self, request_id: int, response: http.client.HTTPResponse, model_request: bool,
                    credentialed: bool) -> None:
            length = response.getheader("Content-Length")
            meter = proxy.begin(request_id, response.getheader("Content-Type") or "",
                                int(length) if length is not None and length.isdigit() else None)
            self.send_response(response.status, response.reason)
            for name, value in _forwarded(response.getheaders()).items():
                self.send_header(name, value)
            chunked = length is None and self.command != "HEAD"
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            elif length is not None:
                self.send_header("Content-Length", length)
            self.end_headers()
            problem = f"{proxy.upstream.url} answered HTTP {response.status}" if response.status >= 400 else None
            cut = client_gone = False
            relayed = 0
            try:
                while self.command != "HEAD" and (data := response.read1(_CHUNK)):
                    relayed += len(data)
                    if relayed > MAX_RESPONSE_BYTES:
                        proxy.cut_oversized(request_id)
                        problem, cut = f"a response over {MAX_RESPONSE_BYTES} bytes was cut", True
                        break
                    meter.feed(data)
                    if not proxy.progress(request_id):
                        cut = True  # another response crossed maxTokens while this one flowed
                        break
                    if not client_gone:
                        client_gone = not self._write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
                    # A client that hung up does not end the answer: it is read to its end (its
                    # last usage event) and counted (docs/design.md §10).
                if chunked and not cut and not client_gone:
                    self._write(b"0\r\n\r\n")
            except OSError:  # the upstream broke off
                cut = True
            finally:
                proxy.finish(request_id, response.status, model_request=model_request, problem=problem,
                             credentialed=credentialed)
            if cut or client_gone:
                self.close_connection = True

        def _write(self, data: bytes) -> bool:
            try:
                self.wfile.write(data)
            except OSError:  # the host hung up (it was stopped, or the agent abandoned its request)
                return False
            return True

    return Handler
