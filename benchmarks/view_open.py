"""The HTML view of a large report: page size, render time, and open time in headless Chromium.

Builds synthetic reports (every trial with a 12-line diff and a transcript of ``--turns`` turns)
with the report's own builder, renders each with ``atlante view``'s renderer and opens it in the
system Chromium through Playwright (the browser tests' helpers).  Prints size and times per report
size and the 5 MB / 2 s goals beside them; nothing is asserted.

    python benchmarks/view_open.py [--trials 50,200,1000] [--turns 8] [--opens 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))
from pytest_atlante.report.view import write_view
from view_helpers import browser, synthetic_report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", default="50,200,1000", help="comma-separated total trials (10 per scenario)")
    parser.add_argument("--turns", type=int, default=8, help="transcript turns per trial")
    parser.add_argument("--opens", type=int, default=3, help="page loads per size (median shown)")
    args = parser.parse_args()
    print(f"{'trials':>7} {'html MB':>8} {'render s':>9} {'open s':>7}  goals: < 5 MB and < 2 s at 200 trials")
    with tempfile.TemporaryDirectory(prefix="atlante-view-bench-") as tmp:
        root = Path(tmp)
        for total in (int(n) for n in args.trials.split(",")):
            out = root / f"r{total}"
            report = synthetic_report(out, scenarios=max(total // 10, 1), trials=min(total, 10), transcript_turns=args.turns)
            started = time.monotonic()
            html = write_view(report)
            rendered = time.monotonic() - started
            opens = []
            with browser(root / f"profile-{total}") as context:
                for _ in range(args.opens):
                    page = context.new_page()
                    started = time.monotonic()
                    page.goto(html.as_uri(), wait_until="load")
                    opens.append(time.monotonic() - started)
                    page.close()
            print(f"{total:>7} {html.stat().st_size / 1e6:>8.2f} {rendered:>9.2f} {statistics.median(opens):>7.2f}")


if __name__ == "__main__":
    main()
