"""JSONC parsing against ``json.loads`` of the same data: scenario-sized documents and the script.

Three texts of about ``--mib`` MiB (documents are read up to 4 MiB) carry the same data: plain JSON; JSONC (a block comment per
entry, a line comment per entry, a trailing comma in every list and object, comment markers inside
strings); and the JSONC text with a syntax error on its last line.  Each round times, interleaved
so machine load hits all alike: the floor ``json.loads(plain)``; ``suite.jsonc.loads`` of each
text; and ``load_script`` of a plain-JSON scripted-model script of ``--script-mib`` MiB (the script was
parsed with json5 even when it was plain JSON).  Reported: the median of each, and the median of
the per-round ratios to the floor.  With ``--json5`` it also times json5 (the parser used before)
on a 64 KiB prefix of the JSONC text, scaled to the whole, once.

    python benchmarks/jsonc_parse.py [--mib 3.9] [--script-mib 1] [--rounds 7] [--json5]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_atlante.suite import jsonc
from pytest_atlante.suite.script import load_script

ENTRY = (
    '  /* scenario {i} */ {{"name": "scenario-{i}", // its name\n'
    '   "tags": ["api", "health", "a // b", "c /* d */",],\n'
    '   "task": {{"prompt": "Add the endpoint, then run \\"pytest -q\\"", "timeoutMs": {i},}},\n'
    "  }},\n"
)


def texts(mib: float) -> tuple[str, str, str]:
    entries = []
    size = 0
    i = 0
    while size < mib * 2**20:
        entry = ENTRY.format(i=i)
        entries.append(entry)
        size += len(entry)
        i += 1
    commented = '// the suite\n{"scenarios": [\n' + "".join(entries) + "],}\n"
    plain = json.dumps(jsonc.loads(commented), indent=1)
    broken = commented[:-3] + ",,}\n"
    return plain, commented, broken


def script_text(mib: float) -> str:
    turns = []
    size = 0
    while size < mib * 2**20:
        turn = {"text": "Writing the file.", "actions": [{"type": "write", "path": f"src/m{len(turns)}.py", "content": "x = 1\n" * 20}]}
        turns.append(turn)
        size += len(json.dumps(turn))
    turns.append({"text": "Done."})
    return json.dumps({"schema": "atlante/scripted-model-v1", "turns": turns})


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def must_fail(text: str) -> None:
    try:
        jsonc.loads(text)
    except jsonc.JsoncError:
        return
    raise AssertionError("the broken text parsed")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=float, default=3.9)  # documents are read up to 4 MiB
    parser.add_argument("--script-mib", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json5", action="store_true")
    options = parser.parse_args()
    plain, commented, broken = texts(options.mib)
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / "script.json"
        script_source = script_text(options.script_mib)
        script.write_text(script_source)
        cases: dict[str, Callable[[], object]] = {
            "floor: json.loads(plain JSON)": lambda: json.loads(plain),
            "jsonc.loads(plain JSON)": lambda: jsonc.loads(plain),
            "jsonc.loads(JSONC)": lambda: jsonc.loads(commented),
            "jsonc.loads(JSONC with an error)": lambda: must_fail(broken),
            "floor: json.loads(script)": lambda: json.loads(script_source),
            "jsonc.loads(script)": lambda: jsonc.loads(script_source),
            "load_script (read, parse, validate)": lambda: load_script(script),
        }
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(options.rounds):
            for name, action in cases.items():
                samples[name].append(timed(action))
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"documents {len(plain) / 2**20:.2f} MiB plain, {len(commented) / 2**20:.2f} MiB JSONC; {options.rounds} rounds")
    for name, values in samples.items():
        floor = samples["floor: json.loads(script)" if "script" in name.lower() else "floor: json.loads(plain JSON)"]
        ratio = statistics.median(v / f for v, f in zip(values, floor, strict=True))
        print(f"{name:36} median {statistics.median(values) * 1000:9.1f} ms   {ratio:6.2f}x floor")
    if options.json5:
        import json5

        prefix = commented[: 64 * 1024]
        seconds = timed(lambda: _json5_attempt(json5, prefix))
        print(f"json5 on a 64 KiB prefix: {seconds * 1000:.0f} ms, scaled to the JSONC text: "
              f"{seconds * len(commented) / len(prefix):.1f} s")


def _json5_attempt(json5: object, text: str) -> None:
    # A prefix is cut mid-document: the time to the error is what counts.
    with contextlib.suppress(ValueError):
        json5.loads(text)  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
