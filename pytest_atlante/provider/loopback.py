"""A threaded HTTP server on ``127.0.0.1:<ephemeral port>`` (or on a unix socket): the lifecycle the
scripted model and the metering proxy share (start, the port, a stop that returns at once), and the
per-trial key in the path that keeps one trial out of another's servers.

A port on the machine's loopback is reachable by every process of the machine: under ``-n`` with
the network shared, an agent found another trial's proxy in ``/proc/net/tcp`` and spent that
trial's tokens.  So each trial's servers live under a path of their own, ``/<key>/…``, where the
key is 192 random bits made for the trial: the host is given a base URL holding it (every host
appends its API's path to its base URL), and a request whose path does not start with it is
refused before anything else is read.  The key is in the trial's own environment or configuration
only, which another trial cannot see under namespace isolation (its own PID namespace, a private
``/tmp``); with isolation off every process of the user can read every other's environment, and
nothing keeps trials apart (docs/integrity.md).
"""

from __future__ import annotations

import hmac
import secrets
import selectors
import socket
import socketserver
import threading
from abc import ABC, abstractmethod
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self


def new_trial_key() -> str:
    """A trial's key: 192 random bits, URL-safe (it goes into a base URL's path)."""
    return secrets.token_urlsafe(24)


def strip_trial_key(path: str, key: str | None) -> str | None:
    """The request path without its leading ``/<key>`` (``/`` when nothing follows), or None when it
    does not start with ``key`` (compared in constant time).  ``key`` None: no key is required."""
    if key is None:
        return path
    head, slash, rest = path[1:].partition("/") if path.startswith("/") else ("", "", "")
    if not hmac.compare_digest(head.split("?", 1)[0].encode(), key.encode()):
        return None
    if "?" in head:  # /<key>?query
        return "/?" + head.split("?", 1)[1]
    return "/" + rest if slash else "/"


class ThreadingUnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """HTTP on a unix socket (a ``model-only`` trial's way to the metering proxy, docs/design.md §11)."""

    daemon_threads = True


def serve_until_woken(httpd: socketserver.TCPServer, wake: socket.socket) -> None:
    """Accept requests until ``wake`` turns readable.

    Not ``serve_forever``: it notices ``shutdown()`` only between polls, so every stop waited
    half a poll interval on average (17 ms per trial at a 50 ms poll, measured), and a shorter
    poll wakes every idle server many times a second.  A socket pair ends the wait at once.
    """
    with selectors.DefaultSelector() as selector:
        selector.register(httpd, selectors.EVENT_READ)
        selector.register(wake, selectors.EVENT_READ)
        while True:
            ready = {key.fileobj for key, _ in selector.select()}
            if wake in ready:
                return
            httpd.handle_request()


class LoopbackServer:
    """One ``ThreadingHTTPServer`` on the loopback interface, served by a daemon thread."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._httpd: socketserver.TCPServer | None = None
        self._thread: threading.Thread | None = None
        self._wake: tuple[socket.socket, socket.socket] | None = None

    def start_serving(self, handler: type[BaseHTTPRequestHandler], *, unix_socket: Path | None = None) -> None:
        """Serve ``handler`` on an ephemeral loopback port, or on ``unix_socket`` (created owner-only)."""
        if self._httpd is not None:
            raise RuntimeError(f"{self._name} already started")
        httpd: socketserver.TCPServer
        if unix_socket is not None:
            httpd = ThreadingUnixHTTPServer(str(unix_socket), handler)
            unix_socket.chmod(0o600)
        else:
            httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
            httpd.daemon_threads = True
        # handle_request() is only called when the listening socket is readable; a zero timeout
        # keeps a connection reset before accept() from blocking it (and so stop()).
        httpd.timeout = 0
        self._httpd = httpd
        self._wake = socket.socketpair()
        self._thread = threading.Thread(target=serve_until_woken, args=(httpd, self._wake[0]), name=self._name,
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        httpd, thread, wake = self._httpd, self._thread, self._wake
        if httpd is None:
            return
        if wake is not None:
            wake[1].send(b"x")
        if thread is not None:
            thread.join(timeout=5)
        httpd.server_close()
        for end in wake or ():
            end.close()
        self._httpd = self._thread = self._wake = None

    @property
    def port(self) -> int:
        if not isinstance(self._httpd, ThreadingHTTPServer):
            raise RuntimeError(f"{self._name} not started on a port")
        return int(self._httpd.server_address[1])


class LoopbackService(ABC):
    """A service on a ``LoopbackServer`` (the scripted model, the metering proxy): a context manager
    around its ``start`` and ``stop``, and its server's port."""

    _server: LoopbackServer

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._server.port
