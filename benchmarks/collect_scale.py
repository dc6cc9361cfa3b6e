"""Collection at scale: ``--atlante-eval --collect-only`` of N scenario files against two floors.

For each N (default 1,000 and 5,000), in one run, interleaved ``--repeat`` times:
  * eval:  ``pytest --atlante-eval --collect-only -q`` (child process) in a built project whose
           ``eval/scenarios/`` holds N scenario documents (one trial each, one shared fixture);
           this includes discovery and validation of every document, as a real run does.
  * floor: ``pytest --collect-only -q`` of the *same* N JSON documents, collected as one item each
           by the 12-line ``conftest.py`` below (read, ``json.loads``, one item named after the
           scenario): the fair floor, the least any JSON-document plugin can do.
  * plain: ``pytest --collect-only -q`` of N ordinary test files (one test each): importing N
           Python modules, the floor this script used before issue 28 (kept for comparison).
Prints the median wall time of each and the median of the per-round ratios eval/floor and
eval/plain, with the load average.  Nothing is asserted: speed is measured, never gated.
Goal reported against: eval within 1.5x of the fair floor.

    python benchmarks/collect_scale.py [--sizes 1000,5000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _fakehost import FIXTURE_REL, SCENARIO_SCHEMA, machine_line, make_project


def scenario_project(root: Path, count: int) -> Path:
    make_project(root, files=1, trials=1)
    scenarios = root / "eval" / "scenarios"
    (scenarios / "bench.eval.json").unlink()
    for index in range(count):
        doc = {"$schema": SCENARIO_SCHEMA, "version": "0.1", "name": f"scenario-{index:05d}",
               "task": {"fixture": FIXTURE_REL, "prompt": "Do nothing."},
               "checks": [{"type": "file-exists", "path": "d000/f00000.txt"}]}
        (scenarios / f"s{index:05d}.eval.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return root


FLOOR_CONFTEST = """\
import json
import pytest
def pytest_collect_file(file_path, parent):
    if file_path.name.endswith(".eval.json"):
        return ScenarioFile.from_parent(parent, path=file_path)
class ScenarioFile(pytest.File):
    def collect(self):
        document = json.loads(self.path.read_text(encoding="utf-8"))
        yield ScenarioItem.from_parent(self, name=document["name"])
class ScenarioItem(pytest.Item):
    def runtest(self):
        pass
"""


def floor_project(root: Path, scenarios: Path) -> Path:
    """The same scenario documents, collected by the 12-line conftest above."""
    shutil.copytree(scenarios, root / "scenarios")
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (root / "conftest.py").write_text(FLOOR_CONFTEST, encoding="utf-8")
    return root


def plain_project(root: Path, count: int) -> Path:
    tests = root / "tests"
    tests.mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    for index in range(count):
        (tests / f"test_{index:05d}.py").write_text(f"def test_{index:05d}():\n    assert True\n", encoding="utf-8")
    return root


def collect(cwd: Path, *args: str) -> tuple[float, int]:
    """Wall seconds of one ``--collect-only`` child process and the number of items it listed."""
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args]
    # Bytecode caching on, as for any installed package (a PYTHONDONTWRITEBYTECODE=1 shell would
    # make every run recompile, and pytest re-rewrite, the plugin's modules: the floor has none).
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"collection failed ({done.returncode}) in {cwd}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return wall, sum(1 for line in done.stdout.splitlines() if "::" in line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds; medians are reported")
    args = parser.parse_args()
    print(machine_line())
    print(f"{'files':>6} {'eval s':>8} {'floor s':>8} {'plain s':>8} {'eval/floor':>11} {'eval/plain':>11}  load")
    work = Path(tempfile.mkdtemp(prefix="atlante-collect-bench-"))
    try:
        for count in (int(n) for n in args.sizes.split(",")):
            evals = scenario_project(work / f"eval-{count}", count)
            floor = floor_project(work / f"floor-{count}", evals / "eval" / "scenarios")
            plain = plain_project(work / f"plain-{count}", count)
            runs: dict[str, list[float]] = {"eval": [], "floor": [], "plain": []}
            for _ in range(args.repeat):
                for name, (cwd, extra) in {"eval": (evals, ("--atlante-eval",)), "floor": (floor, ()),
                                           "plain": (plain, ())}.items():
                    wall, items = collect(cwd, *extra)
                    assert items == count, f"{name} collected {items} of {count}"
                    runs[name].append(wall)
            to_floor = statistics.median(e / f for e, f in zip(runs["eval"], runs["floor"], strict=True))
            to_plain = statistics.median(e / p for e, p in zip(runs["eval"], runs["plain"], strict=True))
            load = " ".join(f"{x:.1f}" for x in os.getloadavg())
            print(f"{count:>6} {statistics.median(runs['eval']):>8.2f} {statistics.median(runs['floor']):>8.2f} "
                  f"{statistics.median(runs['plain']):>8.2f} {to_floor:>10.2f}x {to_plain:>10.2f}x  {load}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
