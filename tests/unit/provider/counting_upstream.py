"""A loopback model API for the metering proxy's tests: the upstream the proxy relays to.

One server for every proxy test (``test_proxy.py``, ``test_proxy_bounds.py``): it records each POST
that reached it (so a test can count what got past the proxy) and answers it with whatever the
test's ``answer`` makes of the request and its number — a scripted reply stream, a fixed payload,
an oversized one, a refusal.  Optionally over TLS, on any loopback address.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


@dataclass(frozen=True)
class SeenRequest:
    """One request as it reached the upstream (after the proxy's rewriting)."""

    path: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Answer:
    """The upstream's response to one request."""

    payload: bytes
    content_type: str = "application/json"
    status: int = 200


# ``answer(n, request)`` for the n-th request that reached the upstream (counted from 1).
Answering = Callable[[int, SeenRequest], Answer]


class CountingUpstream:
    """A loopback HTTP(S) server answering each POST with ``answer`` and keeping every request."""

    def __init__(self, answer: Answering, *, tls: ssl.SSLContext | None = None, address: str = "127.0.0.1") -> None:
        self.requests: list[SeenRequest] = []
        lock = threading.Lock()  # requests are numbered in arrival order, whatever thread serves them
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                seen = SeenRequest(self.path, dict(self.headers), body)
                with lock:
                    upstream.requests.append(seen)
                    number = len(upstream.requests)
                response = answer(number, seen)
                self.send_response(response.status)
                self.send_header("Content-Type", response.content_type)
                self.send_header("Content-Length", str(len(response.payload)))
                self.end_headers()
                self.wfile.write(response.payload)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

        self.httpd = ThreadingHTTPServer((address, 0), Handler)
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> CountingUpstream:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()
