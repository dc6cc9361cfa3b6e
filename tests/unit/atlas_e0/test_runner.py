"""scripts/atlas-eval/run-opt-in.sh run as a real subprocess: every rejection, then a real run."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ._builders import REPO

SCRIPT = REPO / "scripts/atlas-eval/run-opt-in.sh"
EXAMPLE = REPO / "example_project/benchmarks/atlas"
BASH = shutil.which("bash") or "/bin/bash"

# A stand-in agent: records that it started and its argv, then prints one graded receipt per
# planned run using the D4 values the runner exported.  Extra argv "fail" makes it exit 3.
AGENT = """#!{python}
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "started"), "w") as f:
    json.dump(sys.argv[1:], f)
if "fail" in sys.argv[2:]:
    print("partial output")
    sys.exit(3)
plan = json.load(open(sys.argv[1]))
for run in plan["runs"]:
    print(json.dumps({{
        "case_id": run["case_id"], "arm": run["arm"], "trial": run["trial"],
        "correctness": {{"passed": run["arm"] == "atlas"}},
        "file_reads": run["trial"], "graph_calls": 1, "tool_calls": 2, "duration_ms": 10,
        "context_bytes": 100, "query_metrics_schema": "agent-spec/atlas-eval/query-metrics-v1",
        "response_bytes": 5, "read_back_calls": 0, "follow_up_queries": 0, "truncated_queries": 0,
        "atlas_serving_mode": os.environ["ATLAS_EVAL_D4_MODE"],
        "concurrent_query_receipt_path": os.environ["ATLAS_EVAL_D4_RECEIPT"],
        "concurrent_query_receipt_hash": os.environ["ATLAS_EVAL_D4_RECEIPT_SHA256"],
    }}))
"""


class Setup:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.agent = root / "agent"
        self.agent.write_text(AGENT.format(python=sys.executable))
        self.agent.chmod(0o755)
        self.plan = root / "plan.json"
        plan = subprocess.run(
            [sys.executable, "-m", "pytest_atlante.cli", "benchmark", "plan",
             "--corpus", str(EXAMPLE / "corpus.json")],
            capture_output=True, check=True,
        ).stdout
        self.plan.write_bytes(plan)
        self.d4 = root / "d4.json"
        self.d4.write_text('{"matrix": "reviewed"}\n')
        self.receipts = root / "receipts.ndjson"
        self.env = {
            "PATH": os.environ["PATH"],
            "ATLAS_EVAL_AGENT_COMMAND": str(self.agent),
            "ATLAS_EVAL_D4_MODE": "worker",
            "ATLAS_EVAL_D4_RECEIPT": str(self.d4),
        }

    def run(self, *extra: str, **env: str | None) -> subprocess.CompletedProcess[str]:
        merged = dict(self.env)
        for key, value in env.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        return subprocess.run(
            [BASH, str(SCRIPT), str(self.plan), str(self.receipts), *extra],
            capture_output=True, text=True, env=merged, cwd=self.root, timeout=60,
            check=False,
        )

    def tool_dir(self, without: set[str]) -> str:
        """A PATH holding only the tools the runner needs, minus ``without``."""
        bin_dir = self.root / "bin"
        bin_dir.mkdir()
        tools = ["bash", "dirname", "basename", "mktemp", "chmod", "mv", "rm", "jq", "sha256sum"]
        for tool in tools:
            found = shutil.which(tool)
            if tool not in without and found:
                (bin_dir / tool).symlink_to(found)
        return str(bin_dir)


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def assert_rejected(setup: Setup, result: subprocess.CompletedProcess[str], code: str,
                    message: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert f"run-opt-in: atlas-runner-{code}: " in result.stderr
    assert message in result.stderr
    assert not (setup.root / "started").exists(), "the agent must not start"
    assert not setup.receipts.exists()


def test_missing_command_rejected(setup: Setup) -> None:
    result = setup.run(ATLAS_EVAL_AGENT_COMMAND=None)
    assert_rejected(setup, result, "command-missing", "ATLAS_EVAL_AGENT_COMMAND is not set")


def test_builtin_rejected(setup: Setup) -> None:
    result = setup.run(ATLAS_EVAL_AGENT_COMMAND="echo")
    assert_rejected(setup, result, "command-builtin", "'echo' is a shell builtin")


def test_keyword_rejected(setup: Setup) -> None:
    result = setup.run(ATLAS_EVAL_AGENT_COMMAND="if")
    assert_rejected(setup, result, "command-builtin", "'if' is a shell keyword")


def test_function_rejected(setup: Setup) -> None:
    # An exported bash function reaches the runner through the environment.
    result = setup.run(ATLAS_EVAL_AGENT_COMMAND="myagent",
                       **{"BASH_FUNC_myagent%%": f"() {{ {setup.agent} \"$@\"; }}"})
    assert_rejected(setup, result, "command-function", "'myagent' is a shell function")


def test_command_with_arguments_rejected(setup: Setup) -> None:
    result = setup.run(ATLAS_EVAL_AGENT_COMMAND=f"{setup.agent} --flag")
    assert_rejected(setup, result, "command-arguments", "contains arguments")


def test_command_with_newline_rejected(setup: Setup) -> None:
    result = setup.run(ATLAS_EVAL_AGENT_COMMAND=f"{setup.agent}\ntouch pwned")
    assert_rejected(setup, result, "command-newline", "contains a newline")
    assert not (setup.root / "pwned").exists()


def test_name_not_on_path_rejected(setup: Setup) -> None:
    result = setup.run(ATLAS_EVAL_AGENT_COMMAND="no-such-agent-xyz")
    assert_rejected(setup, result, "command-unavailable", "does not resolve through PATH")


def test_non_executable_path_rejected(setup: Setup) -> None:
    setup.agent.chmod(0o644)
    result = setup.run()
    assert_rejected(setup, result, "command-unavailable", "is not an executable file")


def test_missing_jq_rejected(setup: Setup) -> None:
    result = setup.run(PATH=setup.tool_dir(without={"jq"}))
    assert_rejected(setup, result, "jq-missing", "jq is required")


def test_missing_sha256_utility_rejected(setup: Setup) -> None:
    result = setup.run(PATH=setup.tool_dir(without={"sha256sum"}))
    assert_rejected(setup, result, "sha256-missing", "no SHA-256 utility found")


@pytest.mark.parametrize(
    "plan",
    [b"{not json", b'{"schema": "agent-spec/atlas-eval/run-plan-v1", "runs": []}',
     b'{"schema": "other", "runs": [{}]}', b"[]"],
    ids=["malformed", "empty-runs", "wrong-schema", "array"],
)
def test_malformed_or_empty_plan_rejected(setup: Setup, plan: bytes) -> None:
    setup.plan.write_bytes(plan)
    assert_rejected(setup, setup.run(), "plan-invalid", "is malformed or empty")


def test_missing_plan_rejected(setup: Setup) -> None:
    setup.plan.unlink()
    assert_rejected(setup, setup.run(), "plan-invalid", "is not a readable file")


@pytest.mark.parametrize("mode", [None, "", "daemon", "Worker"])
def test_bad_d4_mode_rejected(setup: Setup, mode: str | None) -> None:
    result = setup.run(ATLAS_EVAL_D4_MODE=mode)
    assert_rejected(setup, result, "d4-mode-invalid", "must be 'direct' or 'worker'")


@pytest.mark.parametrize("receipt", [None, "missing.json"])
def test_missing_d4_receipt_rejected(setup: Setup, receipt: str | None) -> None:
    result = setup.run(ATLAS_EVAL_D4_RECEIPT=receipt)
    assert_rejected(setup, result, "d4-receipt-missing", "is not a readable file")


def test_bad_usage_rejected(setup: Setup) -> None:
    result = subprocess.run([BASH, str(SCRIPT), str(setup.plan)], capture_output=True, text=True,
                            env=setup.env, check=False)
    assert result.returncode == 2
    assert "usage: run-opt-in.sh PLAN RECEIPTS [-- AGENT_ARG...]" in result.stderr
    assert not (setup.root / "started").exists()


def test_successful_run_saves_stdout_and_passes_summarize(setup: Setup) -> None:
    result = setup.run("--", "--agent-flag", "value with space", "$(touch pwned)")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    argv = json.loads((setup.root / "started").read_text())
    assert argv == [str(setup.plan), "--agent-flag", "value with space", "$(touch pwned)"]
    assert not (setup.root / "pwned").exists()
    lines = setup.receipts.read_text().splitlines()
    assert len(lines) == 48
    first = json.loads(lines[0])
    assert first["atlas_serving_mode"] == "worker"
    assert first["concurrent_query_receipt_path"] == str(setup.d4)
    assert first["concurrent_query_receipt_hash"] == hashlib.sha256(setup.d4.read_bytes()).hexdigest()
    assert sorted(p.name for p in setup.root.iterdir() if p.name.startswith(".")) == []

    summary = subprocess.run(
        [sys.executable, "-m", "pytest_atlante.cli", "benchmark", "summarize",
         "--receipts", str(setup.receipts)],
        capture_output=True, text=True,
        check=False,
    )
    assert summary.returncode == 0, summary.stderr
    parsed = json.loads(summary.stdout)
    assert parsed["receipts"] == 48
    assert parsed["correctness"] == {"passed": 24, "failed": 24}


def test_agent_resolved_through_path(setup: Setup) -> None:
    result = setup.run(ATLAS_EVAL_AGENT_COMMAND="agent",
                       PATH=f"{setup.root}:{os.environ['PATH']}")
    assert result.returncode == 0, result.stderr
    assert setup.receipts.exists()


def test_stdout_bytes_preserved_unparsed(setup: Setup) -> None:
    raw = b'not json at all\r\n{"partial": \x00\xff\n'
    printer = setup.root / "printer"
    printer.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.buffer.write({raw!r})\n")
    printer.chmod(0o755)
    result = setup.run(ATLAS_EVAL_AGENT_COMMAND=str(printer))
    assert result.returncode == 0, result.stderr
    assert setup.receipts.read_bytes() == raw


def test_failed_agent_leaves_receipts_untouched(setup: Setup) -> None:
    setup.receipts.write_text("previous receipts\n")
    result = setup.run("--", "fail")
    assert result.returncode == 3
    assert setup.receipts.read_text() == "previous receipts\n"
    assert [p.name for p in setup.root.iterdir() if p.name.startswith(".")] == []
    assert "agent exited with status 3" in result.stderr
