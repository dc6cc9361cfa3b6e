"""The metering proxy's memory does not grow with what the agent holds open (issue 38: eight held
60 MiB request bodies grew the pytest process by 480 MiB).

Asserted on the proxy's buffering, never on RSS or timing: a request body is read only once the
request's turn came (one model request in flight per trial), so a held request holds no body; at
most ``MAX_WAITING`` wait, the next is refused at once; a body over ``MAX_REQUEST_BYTES`` is refused
before any of it is read; a response over ``MAX_RESPONSE_BYTES`` is cut and ends the trial's model
access."""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from counting_upstream import Answer, CountingUpstream
from pytest_atlante.provider.proxy import MAX_REQUEST_BYTES, MAX_RESPONSE_BYTES, MAX_WAITING, MeteringProxy, Upstream

HELD_BODY = 60 * 1024 * 1024


USAGE_JSON = b'{"usage": {"input_tokens": 1, "output_tokens": 1}, "type": "message"}'


@pytest.fixture
def upstream() -> Iterator[CountingUpstream]:
    """A model API answering every POST with a small metered message (and counting what reached it)."""
    with CountingUpstream(lambda _number, _request: Answer(USAGE_JSON)) as server:
        yield server


def held_request(proxy: MeteringProxy, length: int) -> socket.socket:
    """A model request whose headers announce ``length`` body bytes, none of them sent yet."""
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=30)
    path = urlsplit(proxy.base_url).path + "/v1/messages"
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {length}\r\n\r\n".encode())
    return sock


def push(sock: socket.socket, limit: int) -> int:
    """Body bytes the connection takes before it would block (the peer not reading), up to ``limit``."""
    sock.setblocking(False)
    chunk, sent = b"x" * (1024 * 1024), 0
    try:
        while sent < limit:
            sent += sock.send(chunk[: limit - sent])
    except BlockingIOError:
        pass
    finally:
        sock.setblocking(True)
    return sent


def settle(proxy: MeteringProxy, state: tuple[bool, int]) -> None:
    """Wait until the proxy's threads have taken up the requests sent (they run in no promised
    order: on a loaded machine a request not yet parsed is neither in flight nor waiting)."""
    for _ in range(3000):
        if proxy.queue() == state:
            return
        time.sleep(0.01)
    raise AssertionError(f"the proxy never reached {state}: {proxy.queue()}")


def status_of(proxy: MeteringProxy, body: bytes = b'{"model": "m", "messages": []}') -> tuple[int, bytes]:
    """The status and the body as far as it came (a cut response ends short of its length)."""
    connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
    connection.request("POST", urlsplit(proxy.base_url).path + "/v1/messages", body=body,
                       headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    try:
        data = response.read()
    except http.client.IncompleteRead as cut:
        data = cut.partial
    connection.close()
    return response.status, data


def test_held_requests_hold_no_body_and_one_past_the_waiting_limit_is_refused(upstream: CountingUpstream) -> None:
    assert MAX_WAITING == 8
    with MeteringProxy(Upstream(upstream.url), max_tokens=10**9) as proxy:
        first = held_request(proxy, HELD_BODY)  # its turn came: its body is being read (the one in flight)
        push(first, 1024 * 1024)
        settle(proxy, (True, 0))
        waiting = [held_request(proxy, HELD_BODY) for _ in range(MAX_WAITING)]
        settle(proxy, (True, MAX_WAITING))
        # Nothing reads a waiting request's body: each takes only what the kernel's socket buffers
        # hold, far from its 60 MiB (before: each body was read into memory as it arrived).
        taken = [push(sock, HELD_BODY) for sock in waiting]
        assert max(taken) < HELD_BODY // 4, taken
        status, answer = status_of(proxy)  # one more than may wait: refused at once, nothing read
        assert status == 429 and b"too many requests waiting" in answer
        for sock in [first, *waiting]:
            sock.close()
        seen = proxy.metering()
    assert seen.refused >= 1 and upstream.requests == []  # no held body reached the model


def test_a_body_over_the_limit_is_refused_before_any_of_it_is_read(upstream: CountingUpstream) -> None:
    with MeteringProxy(Upstream(upstream.url), max_tokens=10**9) as proxy:
        sock = held_request(proxy, MAX_REQUEST_BYTES + 1)  # announced, never sent
        sock.settimeout(30)
        answer = b""
        while data := sock.recv(65536):
            answer += data
        sock.close()
    assert answer.startswith(b"HTTP/1.1 400") and b"unreadable request body" in answer
    assert upstream.requests == []


def test_a_response_over_the_limit_is_cut_and_ends_the_trials_model_access() -> None:
    # One SSE event past MAX_RESPONSE_BYTES, no usage the meter could read: relayed up to the limit,
    # then cut, and no further model request is served (an unmetered answer is not free).
    huge = b"data: " + json.dumps({"type": "ping", "pad": "x" * (MAX_RESPONSE_BYTES + 1024)}).encode() + b"\n\n"
    server = CountingUpstream(lambda _number, _request: Answer(huge, "text/event-stream"))
    with server, MeteringProxy(Upstream(server.url), max_tokens=10**9) as proxy:
        status, data = status_of(proxy)
        assert status == 200 and len(data) <= MAX_RESPONSE_BYTES
        refused, answer = status_of(proxy)
        seen = proxy.metering()
    assert refused == 400 and b"maxTokens" in answer
    assert any("was cut" in problem for problem in seen.problems) and seen.tripped_at is not None
    assert len(server.requests) == 1
