"""The metering proxy (docs/design.md §10): usage read from the provider's responses, ``maxTokens``
enforced at the crossing response, and HTTPS forwarding that verifies the upstream's certificate
(against a local TLS server and a test certificate authority made here with ``openssl``)."""

from __future__ import annotations

import contextlib
import http.client
import json
import select
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from conftest import make_test_ca
from counting_upstream import Answer, CountingUpstream, SeenRequest
from pytest_atlante.provider.loopback import new_trial_key, strip_trial_key
from pytest_atlante.provider.meter import ResponseMeter
from pytest_atlante.provider.proxy import MeteringProxy, Upstream
from pytest_atlante.provider.routes import LOCAL, refusal
from pytest_atlante.provider.wire.anthropic import anthropic_message, anthropic_stream
from pytest_atlante.provider.wire.openai_chat import openai_stream
from pytest_atlante.provider.wire.shared import Reply, ReplyUsage
from pytest_atlante.records import Usage

# --------------------------------------------------------------------------- a provider stand-in


def provider_of(usages: list[ReplyUsage], *, tls: ssl.SSLContext | None = None, wire: str = "anthropic",
                address: str = "127.0.0.1") -> CountingUpstream:
    """A loopback model API (optionally over TLS) answering each POST with the next reply's stream."""

    def answer(number: int, _request: SeenRequest) -> Answer:
        reply = Reply(f"msg_{number}", "m", "hi", (), usages[min(number, len(usages)) - 1])
        stream = anthropic_stream(reply) if wire == "anthropic" else openai_stream(reply, 0, True)
        return Answer(stream, "text/event-stream")

    return CountingUpstream(answer, tls=tls, address=address)


def ask(proxy: MeteringProxy, path: str = "/v1/messages", *, keyed: bool = True) -> tuple[int, bytes]:
    """A request the way the trial's host sends it: under the base URL, which holds the trial's key."""
    connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
    body = json.dumps({"model": "m", "stream": True, "messages": []})
    prefix = urlsplit(proxy.base_url).path if keyed else ""
    connection.request("POST", prefix + path, body=body, headers={"Content-Type": "application/json", "x-api-key": "k"})
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, data


def ask_with(proxy: MeteringProxy, text: str) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
    body = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": text}]})
    connection.request("POST", urlsplit(proxy.base_url).path + "/v1/messages", body=body,
                       headers={"Content-Type": "application/json", "x-api-key": "k"})
    connection.getresponse().read()
    connection.close()


@pytest.mark.parametrize(("sent", "verbatim"), [
    ("/greet the team", True),  # the host sent the prompt as typed: no command ran
    ("<command-name>/greet</command-name>\nGreet the team.", False),  # an expansion naming it
    ("Greet the team.", False),
])
def test_the_proxy_notes_a_slash_command_prompt_sent_as_typed(provider: CountingUpstream, sent: str, verbatim: bool) -> None:
    with MeteringProxy(Upstream(f"http://127.0.0.1:{provider.port}"), max_tokens=10_000) as proxy:
        proxy.watch_for_verbatim("/greet the team")
        ask_with(proxy, sent)
        assert proxy.metering().verbatim_prompt is verbatim
    with MeteringProxy(Upstream(f"http://127.0.0.1:{provider.port}"), max_tokens=10_000) as proxy:
        ask_with(proxy, "/greet the team")  # nothing watched: nothing noted
        assert proxy.metering().verbatim_prompt is False


def test_a_request_without_the_trial_s_key_is_refused_before_the_model(provider: CountingUpstream) -> None:
    """Another trial's agent that found the port (``/proc/net/tcp``) does not know the key."""
    with MeteringProxy(Upstream(f"http://127.0.0.1:{provider.port}"), max_tokens=10_000) as proxy:
        assert ask(proxy, keyed=False)[0] == 404
        assert ask(proxy, "/" + proxy.trial_key[:-1] + "x/v1/messages", keyed=False)[0] == 404
        assert ask(proxy)[0] == 200
        seen = proxy.metering()
    assert (seen.foreign, seen.served) == (2, 1) and [r.path for r in provider.requests] == ["/v1/messages"]


def test_the_trial_key_is_stripped_exactly() -> None:
    assert strip_trial_key("/k3y/v1/messages?beta=true", "k3y") == "/v1/messages?beta=true"
    assert strip_trial_key("/k3y", "k3y") == "/" and strip_trial_key("/k3y?x=1", "k3y") == "/?x=1"
    assert strip_trial_key("/k3yy/v1", "k3y") is None and strip_trial_key("/v1/k3y/messages", "k3y") is None
    assert strip_trial_key("k3y/v1", "k3y") is None and strip_trial_key("/any", None) == "/any"
    assert new_trial_key() != new_trial_key() and len(new_trial_key()) == 32


def abort_signalled(proxy: MeteringProxy, wait_s: float = 0.0) -> bool:
    return bool(select.select([proxy.abort_fd], [], [], wait_s)[0])


@pytest.fixture
def provider() -> Iterator[CountingUpstream]:
    server = provider_of([ReplyUsage(100, 10), ReplyUsage(100, 10), ReplyUsage(5000, 10), ReplyUsage(100, 10)])
    yield server
    server.close()


# --------------------------------------------------------------------------- metering


def test_usage_is_read_from_the_providers_responses_and_relayed_unchanged(provider: CountingUpstream) -> None:
    with MeteringProxy(Upstream(f"http://127.0.0.1:{provider.port}"), max_tokens=10_000) as proxy:
        status, data = ask(proxy)
        assert status == 200 and b"message_stop" in data
        ask(proxy)
        seen = proxy.metering()
    assert seen.usage == Usage(inputTokens=200, outputTokens=20)
    assert (seen.served, seen.answered, seen.failed, seen.refused, seen.tripped_at) == (2, 2, 0, 0, None)
    assert seen.vouches_for_the_model
    # the credentials and the path reach the provider; the encoding is one the meter can read
    assert provider.requests[0].path == "/v1/messages"
    assert provider.requests[0].headers["x-api-key"] == "k"
    assert provider.requests[0].headers["Accept-Encoding"] == "identity"


def test_the_crossing_response_is_the_last_one_served(provider: CountingUpstream) -> None:
    with MeteringProxy(Upstream(f"http://127.0.0.1:{provider.port}"), max_tokens=3000) as proxy:
        assert ask(proxy)[0] == 200 and ask(proxy)[0] == 200
        assert not abort_signalled(proxy)
        status, data = ask(proxy)  # 5210 tokens: crosses, still served whole
        assert status == 200 and b"message_stop" in data
        assert abort_signalled(proxy, wait_s=5)
        refused, answer = ask(proxy)
        assert refused == 400 and b"maxTokens=3000" in answer
        seen = proxy.metering()
    assert len(provider.requests) == 3  # the refused request never reached the provider
    assert (seen.tripped_at, seen.refused, seen.usage.total) == (5230, 1, 5230)


def test_a_request_the_agent_sends_itself_is_counted(provider: CountingUpstream) -> None:
    # Any client of the loopback port goes through the same count: nothing is ever subtracted.
    with MeteringProxy(Upstream(f"http://127.0.0.1:{provider.port}"), max_tokens=10_000) as proxy:
        for _ in range(2):
            ask(proxy, "/v1/messages?beta=true")
        assert proxy.metering().usage.total == 220


def test_an_unreachable_upstream_is_a_failure_not_a_crash() -> None:
    with MeteringProxy(Upstream("http://127.0.0.1:9"), max_tokens=100) as proxy:
        status, data = ask(proxy)
        seen = proxy.metering()
    assert status == 502 and b"the model endpoint failed" in data
    assert (seen.failed, seen.answered, seen.vouches_for_the_model) == (1, 0, False)
    assert seen.problems and "127.0.0.1:9" in seen.problems[0]


def test_openai_streams_report_usage_in_their_last_chunk() -> None:
    server = provider_of([ReplyUsage(300, 40, cache_read=50)], wire="openai")
    try:
        with MeteringProxy(Upstream(f"http://127.0.0.1:{server.port}/v1"), max_tokens=10_000) as proxy:
            assert ask(proxy, "/chat/completions")[0] == 200
            seen = proxy.metering()
    finally:
        server.close()
    assert server.requests[0].path == "/v1/chat/completions"  # the upstream's base path kept
    assert seen.usage == Usage(inputTokens=300, outputTokens=40, cacheReadTokens=50)


def test_a_whole_json_body_is_read_before_its_last_byte_is_relayed() -> None:
    # so a non-streamed crossing response trips the gate before the host can send its next request
    body = json.dumps(anthropic_message(Reply("m1", "m", "hi", (), ReplyUsage(10, 5)))).encode()
    meter = ResponseMeter("application/json", len(body))
    meter.feed(body[:-1])
    assert meter.usage.total == 0
    meter.feed(body[-1:])
    assert meter.usage == Usage(inputTokens=10, outputTokens=5)


@pytest.mark.parametrize("bad", [-5, float("nan"), 10**30, "9", True])
def test_the_meter_ignores_invalid_counts(bad: object) -> None:
    meter = ResponseMeter("application/json")
    body = anthropic_message(Reply("m1", "m", "hi", (), ReplyUsage(10, 5)))
    body["usage"]["input_tokens"] = bad
    meter.feed(json.dumps(body).encode())
    meter.finish()
    assert meter.usage == Usage(outputTokens=5)


def test_the_meter_reads_sse_split_anywhere() -> None:
    payload = anthropic_stream(Reply("m1", "m", "hi", (), ReplyUsage(70, 9, cache_read=3, cache_write=4)))
    meter = ResponseMeter("text/event-stream; charset=utf-8")
    for index in range(0, len(payload), 7):
        meter.feed(payload[index:index + 7])
    meter.finish()
    assert meter.usage == Usage(inputTokens=70, outputTokens=9, cacheReadTokens=3, cacheWriteTokens=4)


# --------------------------------------------------------------------------- HTTPS with a test CA


@pytest.fixture(scope="module")
def test_ca(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_test_ca(tmp_path_factory.mktemp("ca"))


def tls_server(test_ca: dict[str, Path], address: str = "127.0.0.1") -> CountingUpstream:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(test_ca["cert"], test_ca["key"])
    return provider_of([ReplyUsage(120, 30)], tls=context, address=address)


@pytest.fixture
def tls_provider(test_ca: dict[str, Path]) -> Iterator[CountingUpstream]:
    server = tls_server(test_ca)
    yield server
    server.close()


def test_https_forwarding_verifies_the_certificate(tls_provider: CountingUpstream, test_ca: dict[str, Path]) -> None:
    upstream = Upstream(f"https://localhost:{tls_provider.port}", cafile=str(test_ca["ca"]))
    with MeteringProxy(upstream, max_tokens=10_000) as proxy:
        status, data = ask(proxy)
        seen = proxy.metering()
    assert status == 200 and b"message_stop" in data
    assert seen.usage == Usage(inputTokens=120, outputTokens=30)
    assert tls_provider.requests[0].headers["x-api-key"] == "k"


def test_https_forwarding_trusts_the_extra_cas_node_hosts_are_given(tls_provider: CountingUpstream, test_ca: dict[str, Path],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NODE_EXTRA_CA_CERTS", str(test_ca["ca"]))
    with MeteringProxy(Upstream(f"https://localhost:{tls_provider.port}"), max_tokens=10_000) as proxy:
        assert ask(proxy)[0] == 200
    monkeypatch.setenv("NODE_EXTRA_CA_CERTS", str(test_ca["other"]))
    with MeteringProxy(Upstream(f"https://localhost:{tls_provider.port}"), max_tokens=10_000) as proxy:
        assert ask(proxy)[0] == 502


def test_https_forwarding_refuses_a_certificate_of_another_ca(tls_provider: CountingUpstream, test_ca: dict[str, Path]) -> None:
    upstream = Upstream(f"https://localhost:{tls_provider.port}", cafile=str(test_ca["other"]))
    with MeteringProxy(upstream, max_tokens=10_000) as proxy:
        status, data = ask(proxy)
        seen = proxy.metering()
    assert status == 502 and b"CERTIFICATE_VERIFY_FAILED" in data, data
    assert tls_provider.requests == [] and seen.failed == 1


def test_https_forwarding_refuses_a_certificate_for_another_name(test_ca: dict[str, Path]) -> None:
    # 127.0.0.2 is loopback too, but the certificate names only localhost and 127.0.0.1
    server = tls_server(test_ca, address="127.0.0.2")
    try:
        with MeteringProxy(Upstream(f"https://127.0.0.2:{server.port}", cafile=str(test_ca["ca"])), 10_000) as proxy:
            status, data = ask(proxy)
    finally:
        server.close()
    assert status == 502 and b"CERTIFICATE_VERIFY_FAILED" in data and b"mismatch" in data, data
    assert server.requests == []


class ConnectProxy:
    """A user's forward proxy: answers ``CONNECT host:port`` with a byte tunnel, and counts them."""

    def __init__(self) -> None:
        self.tunnels: list[str] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._tunnel, args=(client,), daemon=True).start()

    def _tunnel(self, client: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            head += client.recv(4096)
        target = head.split(b" ")[1].decode()
        self.tunnels.append(target)
        port = int(target.rsplit(":", 1)[1])
        upstream = socket.create_connection(("127.0.0.1", port))  # every name of the test is loopback
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")

        def pipe(source: socket.socket, sink: socket.socket) -> None:
            with contextlib.suppress(OSError):
                while data := source.recv(65536):
                    sink.sendall(data)
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)

        threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
        pipe(client, upstream)

    def close(self) -> None:
        self.listener.close()


def test_https_forwarding_goes_through_the_users_proxy(tls_provider: CountingUpstream, test_ca: dict[str, Path],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # The upstream's name is no loopback literal, so the user's https_proxy applies (as it would
    # for api.anthropic.com behind a corporate proxy); the tunnel carries TLS verified end to end.
    forward = ConnectProxy()
    monkeypatch.setenv("https_proxy", forward.url)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    try:
        upstream = Upstream(f"https://provider.test:{tls_provider.port}", cafile=str(test_ca["ca"]))
        with MeteringProxy(upstream, max_tokens=10_000) as proxy:
            status, data = ask(proxy)
    finally:
        forward.close()
    assert forward.tunnels == [f"provider.test:{tls_provider.port}"]
    # the test certificate names localhost, not provider.test: verification still runs through the tunnel
    assert status == 502 and b"CERTIFICATE_VERIFY_FAILED" in data


def test_only_model_routes_are_served() -> None:
    for method, path in (("POST", "/v1/messages?beta=true"), ("POST", "/messages"), ("POST", "/v1/messages/count_tokens"),
                         ("POST", "/v1/chat/completions"), ("POST", "/responses"), ("GET", "/v1/models"),
                         ("POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"),
                         ("POST", "/v1beta/models/gemini-2.5-pro:generateContent"), ("GET", "/v1beta/models/gemini-2.5-pro")):
        assert refusal(method, path) is None, (method, path)
    assert refusal("HEAD", "/") == refusal("GET", "/") == LOCAL
    for method, path in (("GET", "/v1/messages/batches/b/results"), ("POST", "/v1/messages/batches"),
                         ("POST", "/v1/files"), ("GET", "/v1/responses"), ("DELETE", "/v1/messages"),
                         ("POST", "/v1/fine_tuning/jobs"), ("POST", "/v1/models"), ("PUT", "/v1/chat/completions")):
        assert refusal(method, path) == "not a model route", (method, path)
    assert "alt=sse" in (refusal("POST", "/v1beta/models/m:streamGenerateContent") or "")
    assert "alt=sse" in (refusal("POST", "/v1beta/models/m:streamGenerateContent?alt=json") or "")


def test_an_off_route_request_is_refused_counted_and_never_forwarded(provider: CountingUpstream) -> None:
    with MeteringProxy(Upstream(f"http://127.0.0.1:{provider.port}"), max_tokens=10_000) as proxy:
        assert ask(proxy, "/v1/messages/batches")[0] == 404
        assert ask(proxy)[0] == 200
        seen = proxy.metering()
    assert seen.off_route_count == 1 and seen.off_route == ("POST /v1/messages/batches: not a model route",)
    assert [r.path for r in provider.requests] == ["/v1/messages"]


def refusal_of(_number: int, request: SeenRequest) -> Answer:
    """A provider that refuses every request: 401 for a body that parses, 400 for one that does not."""
    try:
        json.loads(request.body)
        status = 401
    except ValueError:
        status = 400
    return Answer(b'{"error": {"message": "refused"}}', status=status)


def send(proxy: MeteringProxy, body: bytes, key: str) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
    connection.request("POST", urlsplit(proxy.base_url).path + "/v1/messages", body=body,
                       headers={"Content-Type": "application/json", "x-api-key": key})
    status = connection.getresponse().status
    connection.close()
    return status


def test_only_a_refusal_of_the_trials_own_credential_is_the_providers_word() -> None:
    # A malformed request, or one without the trial's credential, is the requester's own failure:
    # the agent can send either through the proxy, so neither makes the host's error believed.
    with CountingUpstream(refusal_of) as refusing, MeteringProxy(Upstream(refusing.url), max_tokens=100) as proxy:
        stand_in = proxy.stand_in_for("the-real-key")
        assert send(proxy, b"{not json", stand_in) == 400
        assert send(proxy, b"{}", "a-key-of-the-agent") == 401
        seen = proxy.metering()
        assert (seen.failed, seen.requester_errors, seen.provider_failures) == (2, 2, 0)
        assert send(proxy, b"{}", stand_in) == 401  # the provider refused the trial's credential
        seen = proxy.metering()
        assert (seen.failed, seen.requester_errors, seen.provider_failures) == (3, 2, 1)


def test_a_stand_in_becomes_the_real_credential_only_where_a_host_sends_its_credential(provider: CountingUpstream) -> None:
    """Issue 38, item 1: the proxy swaps the real credential in only in the credential headers and
    Gemini's ``key`` parameter.  Anywhere else — an ``anthropic-beta`` value, a model name in the path,
    another query parameter — a provider may echo it back in an error, handing the agent the real key:
    there the stand-in goes to the provider as the agent wrote it."""
    with MeteringProxy(Upstream(f"http://127.0.0.1:{provider.port}"), max_tokens=10_000) as proxy:
        stand_in = proxy.stand_in_for("real-credential-of-the-evaluator")
        connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
        connection.request("POST", f"{urlsplit(proxy.base_url).path}/v1/messages?beta={stand_in}&key={stand_in}",
                           body=json.dumps({"model": stand_in, "stream": True, "messages": []}),
                           headers={"Content-Type": "application/json", "x-api-key": stand_in,
                                    "Authorization": f"Bearer {stand_in}", "x-goog-api-key": stand_in,
                                    "anthropic-beta": stand_in, "X-Echo": f"x {stand_in}"})
        assert connection.getresponse().status == 200
        connection.close()
    [request] = provider.requests
    headers = {name.lower(): value for name, value in request.headers.items()}
    assert headers["x-api-key"] == headers["x-goog-api-key"] == "real-credential-of-the-evaluator"
    assert headers["authorization"] == "Bearer real-credential-of-the-evaluator"
    assert headers["anthropic-beta"] == stand_in and headers["x-echo"] == f"x {stand_in}"
    assert request.path == f"/v1/messages?beta={stand_in}&key=real-credential-of-the-evaluator"
    assert json.loads(request.body)["model"] == stand_in
