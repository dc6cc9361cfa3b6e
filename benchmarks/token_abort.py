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

Nothing is asserted; the goal reported against is "abort within 1 usage event".

    python benchmarks/token_abort.py [--trials 5] [--cross-at 20] [--no-real]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--cross-at", type=int, default=20, help="fake-host event K that crosses maxTokens")
    parser.add_argument("--real-cross-at", type=int, default=4, help="scripted turn K that crosses maxTokens (real CLI)")
    parser.add_argument("--no-real", action="store_true", help="skip the real-CLI part")
    args = parser.parse_args()
    print(f"machine: {machine_line()}")
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
        if args.no_real:
            return
        for host in ("claude-code", "opencode"):
            real = real_cli_part(tmp, args.trials, args.real_cross_at, host)
            print(f"\nreal {host} CLI (scripted model): {REAL_INPUT} input tokens per turn, "
                  f"maxTokens={(REAL_INPUT + 1) * args.real_cross_at - 1} (crossed at turn {args.real_cross_at} of {REAL_TURNS})")
            if isinstance(real, str):
                print(f"  {real}")
                continue
            print(f"  scripted turns served after the crossing turn, per trial: {real}")
            goal = "met" if max(real) == 0 else "NOT met"
            print(f"real {host}: at most {max(real)} scripted turn(s) served after the crossing turn  (goal 0: {goal})")


if __name__ == "__main__":
    main()
