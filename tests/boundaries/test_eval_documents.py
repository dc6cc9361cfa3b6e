"""Boundary: the eval documents a user writes (config, scenarios, scripts, harness sources, fixtures).

Every row turns a valid project hostile in one way, runs ``pytest --atlante-eval`` as a real
subprocess with a timeout, and asserts exit 2, the diagnostic's code, file and location in the
envelope, no traceback, no hang, and the runner's peak RSS under the bound (the big rows use sparse
files of up to 6 GiB, so reading them whole would blow far past it).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bounded import assert_clean, run_bounded, sparse
from conftest import Project, scenario_doc

M = "atlante.jsonc"
S = "eval/scenarios/main.eval.json"
SCRIPT = "eval/scenarios/scripted/writes-hello.json"
MANIFEST = ".atlante/build/claude-code/manifest.json"
GIB = 1 << 30

Mutation = Callable[[Project], Any]


def replace_with(rel: str, make: Callable[[Path], Any]) -> Mutation:
    def mutate(p: Project) -> None:
        path = p.root / rel
        if path.exists():
            path.unlink()
        path.parent.mkdir(parents=True, exist_ok=True)
        make(path)
    return mutate


def task(**values: Any) -> Mutation:
    base: dict[str, Any] = {"fixture": "eval/fixtures/app", "prompt": "Create hello.txt."}
    base.update(values)
    return lambda p: p.scenario(scenario_doc(task=base))


def command_check(run: list[str]) -> Mutation:
    return lambda p: p.scenario(scenario_doc(checks=[{"type": "command", "run": run}]))


def fifo_in_fixture(p: Project) -> None:
    os.mkfifo(p.root / "eval/fixtures/app/pipe")


def harness_prompt_fifo(p: Project) -> None:
    (p.root / "harness/helper.md").unlink()
    os.mkfifo(p.root / "harness/helper.md")


# (id, mutation, extra args, code, file, location, message fragment)
CASES: list[tuple[str, Mutation, list[str], str, str, str, str]] = [
    ("scenario-6gib-sparse", replace_with(S, lambda f: sparse(f, 6 * GIB, b"{")), [],
     "eval-scenario-invalid", S, "", "larger than 4194304 bytes"),
    ("config-1gib-sparse", replace_with(M, lambda f: sparse(f, GIB, b"{")), [],
     "eval-config-invalid", M, "", "larger than 4194304 bytes"),
    ("config-is-a-directory", replace_with(M, lambda f: f.mkdir()), [],
     "eval-config-invalid", M, "", "is a directory"),
    ("config-is-a-fifo", replace_with(M, os.mkfifo), [], "eval-config-invalid", M, "", "FIFO"),
    ("config-dangling-symlink", replace_with(M, lambda f: f.symlink_to("nowhere.jsonc")), [],
     "eval-config-invalid", M, "", "does not exist"),
    ("scenario-is-a-fifo", replace_with(S, os.mkfifo), [], "eval-scenario-invalid", S, "", "FIFO"),
    ("scenario-links-to-a-device", replace_with(S, lambda f: f.symlink_to("/dev/zero")), [],
     "eval-scenario-invalid", S, "", "character device"),
    ("scenario-is-a-directory", replace_with(S, lambda f: f.mkdir()), [],
     "eval-scenario-invalid", S, "", "is a directory"),
    ("prompt-over-argv-limit", task(prompt="x" * (128 * 1024)), [],
     "eval-scenario-invalid", S, "$.task.prompt", "a process argument holds at most"),
    ("prompt-multibyte-over-limit", task(prompt="é" * (64 * 1024)), [],
     "eval-scenario-invalid", S, "$.task.prompt", "131072 bytes"),
    ("prompt-nul", task(prompt="Create\u0000hello.txt."), [], "eval-scenario-invalid", S, "$.task.prompt", "NUL"),
    ("setup-argv-nul", task(setup=["touch", "a\u0000b"]), [], "eval-scenario-invalid", S, "$.task.setup[1]", "NUL"),
    ("check-argv-nul", command_check(["python3", "-c", "print(1)\u0000"]), [],
     "eval-scenario-invalid", S, "$.checks[0].run[2]", "NUL"),
    ("fixture-holds-a-fifo", fifo_in_fixture, [], "eval-fixture-invalid", S, "$.task.fixture", "FIFO"),
    ("harness-prompt-is-a-fifo", harness_prompt_fifo, [], "eval-harness-invalid", M,
     "$.harness.agents.helper.prompt", ""),
    ("build-manifest-is-a-fifo", replace_with(MANIFEST, os.mkfifo), [], "eval-build-modified", MANIFEST, "", "FIFO"),
    ("script-is-a-fifo", replace_with(SCRIPT, os.mkfifo), ["--atlante-scripted"], "eval-script-invalid", SCRIPT, "", "FIFO"),
    ("script-6gib-sparse", replace_with(SCRIPT, lambda f: sparse(f, 6 * GIB, b"{")), ["--atlante-scripted"],
     "eval-script-invalid", SCRIPT, "", "larger than"),
]


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("mutate", "extra", "code", "file", "location", "fragment"),
                         [pytest.param(*row[1:], id=row[0]) for row in CASES])
def test_hostile_document_is_a_diagnostic(
    atlante_project: Project, tmp_path: Path, mutate: Mutation, extra: list[str], code: str, file: str,
    location: str, fragment: str,
) -> None:
    mutate(atlante_project)
    out = tmp_path / "out"
    outcome = run_bounded(
        [sys.executable, "-m", "pytest", "--atlante-eval", "--atlante-project", str(atlante_project.root),
         "--atlante-out", str(out), "-p", "no:cacheprovider", "--rootdir", str(atlante_project.root), *extra],
        cwd=tmp_path, timeout_s=120,
    )
    assert_clean(outcome)
    assert outcome.returncode == 2, outcome.text[-3000:]
    found = json.loads((out / "diagnostics.json").read_text())["diagnostics"]
    matching = [d for d in found if (d["code"], d["file"], d["location"]) == (code, file, location)]
    assert matching, found
    assert fragment in matching[0]["message"], matching[0]
    assert matching[0]["hint"]
