"""scripts/demo's orchestration, with a fake ``scripts/setup`` and a fake ``atlante`` in a copy of the
script's tree: ``--host NAME`` runs one host (every host by default), the set-up's noise goes to
``.atlante-demo/setup.log`` rather than the screen, the first eval writes the HTML view and the demo
prints its path, and a last summary says what ran and what failed on purpose.  The real demo drives
the real CLIs (scripts/demo itself; the same commands run in tests/integration)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from conftest import REPO_ROOT

HOSTS = ["claude-code", "opencode", "codex", "gemini-cli"]
NOISE = "npm warn EBADENGINE Unsupported engine"

FAKE_SETUP = f"""#!/usr/bin/env bash
for i in $(seq 40); do echo "{NOISE} $i"; echo "pip: some deprecation $i" >&2; done
echo "setup: ready (fake)"
"""

# Exit statuses as the real commands give them on the example project: its eval fails on purpose
# (1), the self-test finds a vacuous scenario (1), the forecast, the trigger suite and compare pass.
FAKE_ATLANTE = """#!/usr/bin/env bash
echo "$PWD :: $*" >> "$CALLS"
case "$1" in
  build|compare) exit 0 ;;
  selftest) exit 1 ;;
  eval)
    case " $* " in
      *" --atlante-forecast "*|*" --atlante-project trigger-suite "*) exit 0 ;;
    esac
    run=".atlante/eval/run-$RANDOM$RANDOM"
    mkdir -p "$run"
    case " $* " in *" --atlante-html "*) echo "<html>" > "$run/report.html"; echo "html: $PWD/$run/report.html" ;; esac
    exit 1 ;;
esac
exit 3
"""


def demo_tree(root: Path) -> Path:
    (root / "scripts").mkdir(parents=True)
    shutil.copy2(REPO_ROOT / "scripts" / "demo", root / "scripts" / "demo")
    for path, text in (("scripts/setup", FAKE_SETUP), (".venv/bin/atlante", FAKE_ATLANTE)):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
        (root / path).chmod(0o755)
    for folder in ("example_project/selftest-demo", "example_project/trigger-suite", "hosts-npm/node_modules/.bin"):
        (root / folder).mkdir(parents=True)
    return root


def demo(root: Path, *args: str) -> tuple[int, str, list[str]]:
    calls = root / "calls.log"
    run = subprocess.run(["bash", str(root / "scripts" / "demo"), *args], cwd=root, capture_output=True, text=True,
                         timeout=120, check=False, env={"PATH": "/usr/bin:/bin", "CALLS": str(calls), "HOME": str(root)})
    return run.returncode, run.stdout + run.stderr, calls.read_text().splitlines() if calls.exists() else []


def test_one_host_quiet_setup_the_view_path_and_a_summary(tmp_path: Path) -> None:
    root = demo_tree(tmp_path)
    status, output, calls = demo(root, "--host", "opencode")
    assert status == 0, output
    evals = [c for c in calls if " :: eval " in c]
    assert evals and all("--host opencode" in c for c in evals), calls
    assert not any(h in c for c in calls for h in ("claude-code", "codex", "gemini-cli")), calls
    assert not any(" :: compare " in c for c in calls)  # one host: nothing to compare

    assert NOISE not in output and "deprecation" not in output, output  # the set-up is quiet...
    log = (root / ".atlante-demo" / "setup.log").read_text()
    assert f"{NOISE} 40" in log and "deprecation 40" in log           # ... and kept in its log
    assert "setup: ready (fake)" in output

    [view_line] = [line for line in output.splitlines() if line.startswith("demo: the HTML view of the first eval: ")]
    view = Path(view_line.rpartition(": ")[2])
    assert view.is_file() and view.name == "report.html", view_line
    assert sum("--atlante-html" in c for c in evals) == 1  # the first eval only

    summary = output[output.index("=== demo: summary ==="):].splitlines()
    assert "demo: eval opencode: exit 1, as expected (keeps-settings-untouched fails on purpose; the rest pass)" in summary
    assert any(line.startswith("demo: selftest opencode: exit 1, as expected (already-greets is vacuous") for line in summary)
    assert any(line.startswith("demo: trigger suite opencode: exit 0") for line in summary)
    assert summary[-1].startswith("demo: done in ") and "wall time" in summary[-1]


def test_every_host_by_default_and_each_compared_with_the_first(tmp_path: Path) -> None:
    root = demo_tree(tmp_path)
    status, output, calls = demo(root)
    assert status == 0, output
    hosts_run = [c.split("--host ")[1].split()[0] for c in calls if " :: eval --scripted " in c and "--atlante-forecast" not in c]
    assert hosts_run == HOSTS, calls
    compares = [c for c in calls if " :: compare " in c]
    assert [c.split("demo-")[-1].split("/")[0] for c in compares] == HOSTS[1:]
    assert sum(line.startswith("demo: eval ") for line in output.splitlines()) == 4


def test_an_unknown_host_is_a_usage_error(tmp_path: Path) -> None:
    root = demo_tree(tmp_path)
    status, output, calls = demo(root, "--host", "cursor")
    assert status == 2 and "usage: scripts/demo [--host" in output and calls == []
