"""``maxTokens`` enforcement latency: how many usage events pass between the crossing and the abort.

Part 1 — fake host.  A fake ``claude`` streams assistant events, each a new ``message.id`` with
100 input tokens, one every 50 ms, and logs every event it managed to write before it stopped (see
``_fakehost.install_streaming_claude``).  ``maxTokens = 100 × K − 1``, so the cumulative usage the
Claude monitor computes (the sum of per-message usage) crosses the threshold exactly at event K.
Counted per trial from the host's own log: events written after event K.  Two hosts:
  * ``sigint-honoured``: stops on SIGINT like Claude Code (host-facts §6) — measures how fast the engine
    reacts to the crossing line;
  * ``sigint-ignored``: keeps streaming until the engine's SIGKILL after the grace period — the
    worst case, bounded by ``process.run``'s grace (3 s) rather than by the gate;
  * ``burst-1ms``: honours SIGINT but writes an event every 1 ms, so several events can be in the
    pipe before the engine has read the crossing one.
Also shown: the time from writing event K to receiving SIGINT (both clocks are the host's
``time.monotonic``; a value just below 0 means the signal landed between the host's write of event K
and its log line).

Part 2 — the real ``claude`` and ``opencode`` CLIs through the scripted model (skipped with a note
when the pinned CLIs are missing).  Every scripted turn reports 1,000 input and 10 output tokens
and reads one fixture file (so the session goes on); ``maxTokens = 1001 × K − 1`` is crossed by turn
K: the trial's metering proxy counts 1,010 per turn from the model's responses (docs/design.md §10).
The run is in-process (``pytest.main``) with ``ScriptedModelServer`` wrapped so every served turn
is counted; reported: turns served after turn K (the proxy's promise: none).

Part 3 — the proxy's added latency.  A loopback model API answers every POST with one Anthropic
stream (a fixed reply, ``--reply-kib`` of text); the same requests go to it directly and through a
``MeteringProxy`` in front of it, interleaved (direct, proxied, direct, …) so both see the same
load, each on a new connection as the proxy's upstream side makes one per request.  Reported: the
median and p90 time to the last byte per request, the proxy's added milliseconds, and the ratio
proxied / direct of the medians, within the same run.

Nothing is asserted; the goal reported against is "abort within 1 usage event".

    python benchmarks/token_abort.py [--trials 5] [--cross-at 20] [--no-real] [--latency-requests 200]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _fakehost import REPO_ROOT, install_streaming_claude, machine_line, make_project, require_verdicts, run_eval

TOKENS_PER_EVENT = 100
INTERVAL_S = 0.05
EVENTS = 200            # 10 s of streaming: far past the crossing, well under the trial timeout
# (name, host stops on SIGINT, seconds between events)
VARIANTS: tuple[tuple[str, bool, float], ...] = (
    ("sigint-honoured", True, INTERVAL_S), ("sigint-ignored", False, INTERVAL_S), ("burst-1ms", True, 0.001))
REAL_TURNS = 12
REAL_INPUT = 1_000
REAL_HOSTS_BIN = REPO_ROOT / "hosts-npm" / "node_modules" / ".bin"


def parse_log(log: Path) -> list[dict[str, Any]]:
    """Per fake-host process: last emitted index, SIGINT index and times."""
    runs: dict[str, dict[str, Any]] = defaultdict(lambda: {"last": 0, "sigint": None, "times": {}, "sigint_t": None})
    for line in log.read_text(encoding="utf-8").splitlines():
        pid, kind, index, stamp = line.split()
        run = runs[pid]
        if kind == "emitted":
            run["last"] = max(run["last"], int(index))
            run["times"][int(index)] = float(stamp)
        else:
            run["sigint"], run["sigint_t"] = int(index), float(stamp)
    return list(runs.values())


def fake_host_part(tmp: Path, trials: int, cross_at: int) -> list[tuple[str, list[int], list[float], list[str]]]:
    rows = []
    for name, honour, interval in VARIANTS:
        bin_dir, log = tmp / f"bin-{name}", tmp / f"{name}.log"
        install_streaming_claude(bin_dir, events=EVENTS, tokens_per_event=TOKENS_PER_EVENT, interval_s=interval,
                                 log_path=log, honour_sigint=honour)
        project = make_project(tmp / f"project-{name}", files=10, trials=trials,
                               max_tokens=TOKENS_PER_EVENT * cross_at - 1, timeout_ms=60_000)
        # The fake host logs outside its sandbox, which namespace isolation would hide from it.
        run = run_eval(project, bin_dir, tmp / f"out-{name}", "--atlante-isolation", "off")
        require_verdicts(run, {"budget-exceeded"}, f"token abort ({name})")
        after, latency_ms = [], []
        for host_run in parse_log(log):
            after.append(host_run["last"] - cross_at)
            if host_run["sigint_t"] is not None and cross_at in host_run["times"]:
                latency_ms.append((host_run["sigint_t"] - host_run["times"][cross_at]) * 1000)
        errors = sorted({str(t.get("error")) for t in run.trials})
        rows.append((name, after, latency_ms, errors))
    return rows


def real_cli_part(tmp: Path, trials: int, cross_at: int, host: str) -> list[int] | str:
    """Turns the scripted server played after turn ``cross_at``, per trial (or why it was skipped)."""
    executable = "claude" if host == "claude-code" else host
    if not (REAL_HOSTS_BIN / executable).exists():
        return f"skipped: the pinned {executable} CLI is missing from {REAL_HOSTS_BIN} (run scripts/setup)"
    import pytest

    import pytest_atlante.provider.scripted as scripted

    turns: list[dict[str, Any]] = [
        {"text": f"Turn {i + 1}.", "actions": [{"type": "read", "path": f"d000/f{i:05d}.txt"}],
         "usage": {"input": REAL_INPUT, "output": 10}}
        for i in range(REAL_TURNS - 1)
    ] + [{"text": "Done.", "usage": {"input": REAL_INPUT, "output": 10}}]
    project = make_project(tmp / f"project-real-{host}", files=REAL_TURNS, trials=trials,
                           max_tokens=(REAL_INPUT + 1) * cross_at - 1, timeout_ms=120_000, script_turns=turns, host=host)
    served: list[list[int]] = []   # per server (= per trial): the turn indexes it played
    original = scripted.ScriptedModelServer

    class CountingServer(original):  # type: ignore[misc, valid-type]
        def start(self) -> None:
            served.append([])
            super().start()

        def stop(self) -> None:
            super().stop()
            served[-1] = sorted({r.turn_index for r in self.requests if r.kind == "turn" and r.turn_index is not None})

    old_path = os.environ["PATH"]
    os.environ["PATH"] = f"{REAL_HOSTS_BIN}{os.pathsep}{old_path}"
    scripted.ScriptedModelServer = CountingServer  # type: ignore[misc]
    try:
        out = tmp / f"out-real-{host}"
        with contextlib.redirect_stdout(io.StringIO()) as captured:
            status = pytest.main(["--atlante-eval", "--atlante-scripted", "-p", "no:cacheprovider", "-q",
                                  "--atlante-project", str(project), "--atlante-out", str(out), str(project)])
    finally:
        scripted.ScriptedModelServer = original  # type: ignore[misc]
        os.environ["PATH"] = old_path
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    verdicts = [t["verdict"] for s in report["scenarios"] for t in s["trials"]]
    if any(v != "budget-exceeded" for v in verdicts):
        return (f"unexpected verdicts {verdicts} (pytest exit {status}); figures not comparable\n"
                f"{captured.getvalue()[-3000:]}")
    # Turn indexes are 0-based; turn K (1-based) is index K-1, so turns after it have index >= K.
    return [sum(1 for index in indexes if index >= cross_at) for indexes in served]


def latency_part(requests: int, reply_kib: int) -> tuple[list[float], list[float]]:
    """Seconds to the last byte per request: (direct, through the metering proxy), interleaved."""
    import http.client
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import urlsplit

    from pytest_atlante.provider.proxy import MeteringProxy, Upstream
    from pytest_atlante.provider.wire.anthropic import anthropic_stream
    from pytest_atlante.provider.wire.shared import Reply, ReplyUsage

    payload = anthropic_stream(Reply("msg_bench", "m", "x" * (reply_kib * 1024), (), ReplyUsage(100, 10)))

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    body = json.dumps({"model": "m", "stream": True, "max_tokens": 64,
                       "messages": [{"role": "user", "content": "hi " * 2000}]}).encode()

    def once(port: int, path: str) -> float:
        start = time.perf_counter()
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json", "x-api-key": "k"})
        response = connection.getresponse()
        response.read()
        connection.close()
        if response.status != 200:
            raise SystemExit(f"latency part: HTTP {response.status}")
        return time.perf_counter() - start

    direct, proxied = [], []
    port = int(server.server_address[1])
    try:
        with MeteringProxy(Upstream(f"http://127.0.0.1:{port}"), max_tokens=10**12) as proxy:
            prefix = urlsplit(proxy.base_url).path
            for _ in range(5):  # warm both paths (imports, first connections)
                once(port, "/v1/messages")
                once(proxy.port, prefix + "/v1/messages")
            for _ in range(requests):
                direct.append(once(port, "/v1/messages"))
                proxied.append(once(proxy.port, prefix + "/v1/messages"))
            counted = proxy.metering().answered
        if counted != requests + 5:
            raise SystemExit(f"latency part: the proxy counted {counted} answers of {requests + 5}")
    finally:
        server.shutdown()
        server.server_close()
    return direct, proxied


def print_latency(requests: int, reply_kib: int) -> None:
    direct, proxied = latency_part(requests, reply_kib)

    def p90(values: list[float]) -> float:
        return sorted(values)[int(0.9 * (len(values) - 1))]

    d, p = statistics.median(direct) * 1000, statistics.median(proxied) * 1000
    print(f"\nproxy latency: {requests} requests each way, interleaved, a {reply_kib} KiB streamed reply, "
          "new connection per request")
    print(f"  direct:  median {d:.2f} ms, p90 {p90(direct) * 1000:.2f} ms")
    print(f"  proxied: median {p:.2f} ms, p90 {p90(proxied) * 1000:.2f} ms")
    print(f"proxy: +{p - d:.2f} ms per request (median), ratio proxied/direct {p / d:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--cross-at", type=int, default=20, help="fake-host event K that crosses maxTokens")
    parser.add_argument("--real-cross-at", type=int, default=4, help="scripted turn K that crosses maxTokens (real CLI)")
    parser.add_argument("--no-real", action="store_true", help="skip the real-CLI part")
    parser.add_argument("--latency-requests", type=int, default=200, help="requests each way (proxy latency part)")
    parser.add_argument("--reply-kib", type=int, default=8, help="text in each reply (proxy latency part)")
    parser.add_argument("--latency-only", action="store_true", help="run the proxy latency part only")
    args = parser.parse_args()
    print(f"machine: {machine_line()}")
    if args.latency_only:
        print_latency(args.latency_requests, args.reply_kib)
        return
    with tempfile.TemporaryDirectory(prefix="atlante-bench-tokens-") as raw:
        tmp = Path(raw)
        rows = fake_host_part(tmp, args.trials, args.cross_at)
        print(f"\nfake host: {TOKENS_PER_EVENT} tokens per event, one per {INTERVAL_S * 1000:.0f} ms (burst: 1 ms), "
              f"maxTokens={TOKENS_PER_EVENT * args.cross_at - 1} (crossed at event {args.cross_at}), {args.trials} trials")
        print(f"{'host':<16} {'events after crossing (per trial)':<36} {'max':>4} {'crossing->SIGINT ms (median)':>29}")
        for name, after, latency, _ in rows:
            median = f"{statistics.median(latency):.2f}" if latency else "-"
            print(f"{name:<16} {after!s:<36} {max(after):>4} {median:>29}")
        for name, after, _, errors in rows:
            goal = f"  (goal <= 1: {'met' if max(after) <= 1 else 'NOT met'})" if name != "sigint-ignored" else ""
            print(f"{name}: at most {max(after)} usage event(s) emitted after the crossing event{goal}")
            print(f"  trial error text: {errors[0] if len(errors) == 1 else errors}")
        for host in () if args.no_real else ("claude-code", "opencode"):
            real = real_cli_part(tmp, args.trials, args.real_cross_at, host)
            print(f"\nreal {host} CLI (scripted model): {REAL_INPUT} input tokens per turn, "
                  f"maxTokens={(REAL_INPUT + 1) * args.real_cross_at - 1} (crossed at turn {args.real_cross_at} of {REAL_TURNS})")
            if isinstance(real, str):
                print(f"  {real}")
                continue
            print(f"  scripted turns served after the crossing turn, per trial: {real}")
            goal = "met" if max(real) == 0 else "NOT met"
            print(f"real {host}: at most {max(real)} scripted turn(s) served after the crossing turn  (goal 0: {goal})")
    print_latency(args.latency_requests, args.reply_kib)


if __name__ == "__main__":
    main()
