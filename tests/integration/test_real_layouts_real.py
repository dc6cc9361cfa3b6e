"""Real public harnesses, one per host layout, taken in as a new user would (issue 37, first must-show).

Each data set under tests/data/harnesses/ is an unmodified copy of a public repository's harness
files (its SOURCE.md names the repository, commit and paths; its LICENSE is beside it): a Claude
Code plugin that is also a Gemini CLI extension (obra/superpowers), an OpenCode layout
(LibPDF-js/core), a Codex project (openai/openai-agents-python) and a Gemini CLI layout
(google-gemini/gemini-cli).  Each goes through ``atlante init`` → ``atlante build`` (every host) →
``atlante selftest`` (on the layout's host) → ``atlante eval --scripted`` on the real CLI of its own layout's host and
of one other (``CASES``), one trial each.  What counts is what reached the model: the scripted model server's requests (the
``trial_helpers`` request log) must carry the skill's body after the script loads the skill through
the host's own skill mechanism, the command's expansion (its text, the arguments substituted) when
the prompt is ``/command …`` on a host that has commands, and the memory file; and the trial's own
checks count the skill (``skill-used``) and the command (``command-used``) from the transcript.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import EVERY_HOST, HARNESSES
from pytest_atlante.hosts import host_for
from pytest_atlante.hosts.base import PluginLoader, no_place
from pytest_atlante.hosts.names import HostName
from pytest_atlante.report.model import EvalReport
from pytest_atlante.suite.jsonc import loads as jsonc_loads
from test_init_real import atlante
from trial_helpers import DONE, HELPERS_DIR, REQUEST_LOG_ENV, logged_requests, write_turn

pytestmark = [pytest.mark.hosts, pytest.mark.timeout(600)]

SCENARIO = "reaches-the-model"


@dataclass(frozen=True)
class RealHarness:
    """One public data set and what of it must reach the model."""

    folder: str
    host: HostName                       # the layout's host: init's eval.host
    adopted: tuple[str, ...]             # lines init prints ("adopted skill NAME (PATH, HOST layout)")
    skill: str
    skill_text: str                      # a sentence of the skill's SKILL.md body
    command: str | None = None           # a command the prompt names as `/command ARGS`
    command_args: str = ""
    command_text: str = ""               # a sentence of the command as the host expands it
    instructions_text: str | None = None  # a sentence of the memory file
    plugin: str | None = None            # the Claude Code plugin the parts are in (its manifest's name)
    # Files the harness's own text names by their source path (a skill's script, a memory file's
    # `@` import): each must be in the trial there (``-x``: and executable).
    trial_paths: tuple[tuple[str, str], ...] = ()
    # A sentence of a file the memory file imports (`@./…`), and the hosts that expand such imports.
    imported_text: str | None = None
    import_hosts: tuple[HostName, ...] = ()

    def command_on(self, host: HostName) -> str | None:
        """The command as ``host`` names it: ``plugin:command`` where the host keeps plugin
        namespaces (Claude Code answers ``Unknown command`` to the plain name); None: no command
        there (Codex runs no slash commands)."""
        if self.command is None or no_place(host_for(host), "command") is not None:
            return None
        return f"{self.plugin}:{self.command}" if self.plugin and isinstance(host_for(host), PluginLoader) else self.command

    def prompt(self, host: HostName) -> str:
        command = self.command_on(host)
        return f"/{command} {self.command_args}" if command else f"Use the {self.skill} skill, then write done.txt."


HARNESS_SETS = [
    RealHarness(
        "obra-superpowers", "claude-code",
        adopted=("adopted agent code-reviewer (agents/code-reviewer.md, claude-code layout)",
                 "adopted skill writing-plans (skills/writing-plans, claude-code layout)",
                 "adopted command write-plan (commands/write-plan.md, claude-code layout)"),
        skill="writing-plans",
        skill_text="Write comprehensive implementation plans assuming the engineer has zero context",
        command="write-plan", command_args="for a farewell message",
        command_text="Tell your human partner that this command is deprecated", plugin="superpowers",
        # GEMINI.md is `@./skills/using-superpowers/SKILL.md` and its gemini-tools reference
        trial_paths=(("-f", "skills/using-superpowers/SKILL.md"), ("-f", "skills/using-superpowers/references/gemini-tools.md")),
        imported_text="If you think there is even a 1% chance a skill might apply to what you are doing",
        import_hosts=("claude-code", "gemini-cli")),
    RealHarness(
        "LibPDF-js-core", "opencode",
        adopted=("adopted skill conventional-commit (.opencode/skills/conventional-commit, opencode layout)",
                 "adopted command commit (.opencode/commands/commit.md, opencode layout)"),
        skill="conventional-commit",
        skill_text="Create a git commit for the current changes using the Conventional Commits standard.",
        command="commit", command_args="the notes",
        command_text="Load the conventional-commit skill and execute the commit process."),
    RealHarness(
        "openai-openai-agents-python", "codex",
        adopted=("adopted skill code-change-verification (.agents/skills/code-change-verification, codex layout)",
                 "adopted instructions codex (AGENTS.md, codex layout)"),
        skill="code-change-verification",
        skill_text="Ensure work is only marked complete after formatting, linting, type checking, and tests pass.",
        # its SKILL.md runs `bash .agents/skills/code-change-verification/scripts/run.sh`
        trial_paths=(("-x", ".agents/skills/code-change-verification/scripts/run.sh"),),
        instructions_text="This guide helps new contributors get started with the OpenAI Agents Python repository."),
    RealHarness(
        "google-gemini-gemini-cli", "gemini-cli",
        adopted=("adopted skill code-reviewer (.gemini/skills/code-reviewer, gemini-cli layout)",
                 "adopted command introspect (.gemini/commands/introspect.toml, gemini-cli layout)",
                 "adopted instructions gemini-cli (GEMINI.md, gemini-cli layout)"),
        skill="code-reviewer",
        skill_text="This skill guides the agent in conducting professional and thorough code reviews",
        command="introspect", command_args="why you read files first",
        # the TOML prompt's {{args}}, substituted by the host (or by the build's translation)
        command_text="**Specific point of interest:** why you read files first",
        instructions_text="Gemini CLI is an open-source AI agent that brings the power of Gemini directly"),
]


def test_the_data_sets_hold_what_the_assertions_look_for() -> None:
    """The sentences below are the upstream files' own (a test that finds them in a request is not
    finding text this test wrote)."""
    for harness in HARNESS_SETS:
        root = HARNESSES / harness.folder
        assert (root / "LICENSE").is_file() or (root / "LICENSE.md").is_file(), harness.folder
        assert "commit:" in (root / "SOURCE.md").read_text()
        texts = "\n".join(p.read_text() for p in root.rglob("*") if p.is_file() and p.name != "SOURCE.md")
        assert harness.skill_text in texts, harness.folder
        if harness.command is not None:
            assert harness.command_text.split(harness.command_args)[0].strip() in texts, harness.folder
        if harness.instructions_text is not None:
            assert harness.instructions_text in texts, harness.folder
        if harness.imported_text is not None:
            assert harness.imported_text in texts, harness.folder
        for flag, path in harness.trial_paths:
            assert (root / path).is_file() and (flag != "-x" or os.access(root / path, os.X_OK)), path


def adopt(project: Path, harness: RealHarness, env: dict[str, str]) -> None:
    """``atlante init`` in a copy of the data set, then one trial per scenario and our scenario."""
    shutil.copytree(HARNESSES / harness.folder, project, ignore=shutil.ignore_patterns("SOURCE.md"))
    created = atlante(project, env, "init")
    assert created.returncode == 0, created.stdout + created.stderr
    for line in harness.adopted:
        assert f"atlante init: {line}" in created.stdout, created.stdout
    config_text = (project / "atlante.jsonc").read_text()
    assert jsonc_loads(config_text)["eval"]["host"] == harness.host  # the layout's host
    assert '"trials": 3' in config_text
    (project / "atlante.jsonc").write_text(config_text.replace('"trials": 3', '"trials": 1'))
    (project / "eval/fixtures/app").mkdir(parents=True)
    (project / "eval/fixtures/app/README.md").write_text("# app\n")
    (project / "eval/scenarios/scripted").mkdir(parents=True, exist_ok=True)
    script = {"schema": "atlante/scripted-model-v1",
              "turns": [{"text": "Loading the skill.", "actions": [{"type": "skill", "name": harness.skill}]},
                        write_turn("done.txt", "done\n"), DONE]}
    (project / f"eval/scenarios/scripted/{SCENARIO}.json").write_text(json.dumps(script))


def write_scenario(project: Path, harness: RealHarness, host: HostName) -> None:
    checks: list[dict[str, Any]] = [{"type": "file-exists", "path": "done.txt"},
                                    {"type": "diff-allowlist", "allow": ["done.txt"]},
                                    {"type": "skill-used", "skill": harness.skill, "min": 1, "max": 1}]
    if harness.command_on(host):
        checks.append({"type": "command-used", "command": harness.command_on(host), "min": 1, "max": 1})
    checks += [{"type": "command", "run": ["test", flag, path]} for flag, path in harness.trial_paths]
    scenario = {"$schema": "https://atlante.sh/schema/v0.2/eval-scenario.json", "version": "0.2", "name": SCENARIO,
                "task": {"fixture": "eval/fixtures/app", "prompt": harness.prompt(host)}, "checks": checks}
    (project / f"eval/scenarios/{SCENARIO}.eval.json").write_text(json.dumps(scenario, indent=2))


def turn_texts(log_dir: Path) -> list[tuple[str, list[dict[str, Any]]]]:
    """Each main-session model request of the one trial: its whole body as text, and the skills the
    host answered skill calls with (``skills_loaded``)."""
    [requests] = logged_requests(log_dir).values()
    return [(json.dumps(r["body"], ensure_ascii=False), r["skills_loaded"]) for r in requests if r["kind"] == "turn"]


# Each data set on its own layout's host and on one other, so that every host runs two of them, one
# its own and one translated by the build (a plugin's parts out of their namespace, a TOML command
# as Markdown, a skill moved out of `.agents/skills`, an OpenCode command for Codex which has none).
# Each of the 16 pairs ran green when this was written; the other host of each data set adds
# nothing host-neutral a second time (the build for every host runs in each case), and the CI has
# a 20-minute budget on two cores.
OTHER_HOST: dict[str, HostName] = {"obra-superpowers": "gemini-cli", "LibPDF-js-core": "codex",
                                   "openai-openai-agents-python": "claude-code", "google-gemini-gemini-cli": "opencode"}
CASES = [(harness, host) for harness in HARNESS_SETS for host in (harness.host, OTHER_HOST[harness.folder])]


def test_every_host_runs_one_data_set_of_its_own_layout_and_one_translated() -> None:
    assert sorted(host for _, host in CASES) == sorted([*EVERY_HOST, *EVERY_HOST])
    assert sorted(harness.host for harness in HARNESS_SETS) == sorted(EVERY_HOST)


@pytest.mark.parametrize(("harness", "host"), CASES, ids=[f"{h.folder}-{host}" for h, host in CASES])
def test_a_public_harness_is_adopted_built_and_reaches_the_model(
        tmp_path: Path, hosts_path: Callable[[], str], harness: RealHarness, host: HostName) -> None:
    project = tmp_path / harness.folder
    log_dir = tmp_path / "requests"
    log_dir.mkdir()
    env = {**os.environ, "PATH": hosts_path(), REQUEST_LOG_ENV: str(log_dir),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(HELPERS_DIR), os.environ.get("PYTHONPATH")]))}
    adopt(project, harness, env)
    write_scenario(project, harness, host)

    built = atlante(project, env, "build")
    assert built.returncode == 0, built.stdout + built.stderr
    assert "would dangle" not in built.stdout, built.stdout  # every path the harness's text uses lands there
    for each in EVERY_HOST:
        assert f"atlante build: {each}: " in built.stdout, built.stdout
    manifest = json.loads((project / f".atlante/build/{host}/manifest.json").read_text())
    assert any(f"skills/{harness.skill}/SKILL.md" in o["path"] for o in manifest["outputs"]), manifest["outputs"]

    if host == harness.host:
        selftest = atlante(project, env, "selftest", "--host", host, "--out", str(tmp_path / "selftest"),
                           "-p", "no:cacheprovider")
        assert selftest.returncode == 0, selftest.stdout[-4000:] + selftest.stderr[-2000:]
        statuses = {s["name"]: s["status"] for s in json.loads((tmp_path / "selftest/selftest.json").read_text())["scenarios"]}
        assert statuses[SCENARIO] == "sound" and set(statuses.values()) == {"sound"}, statuses
        shutil.rmtree(log_dir)
        log_dir.mkdir()

    out = tmp_path / "eval"
    run = atlante(project, env, "eval", "--scripted", "--host", host, "--out", str(out), "-p", "no:cacheprovider",
                  "-p", "trial_helpers", "-k", SCENARIO)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    report = EvalReport.model_validate_json((out / "report.json").read_text())
    assert [(t.scenario, t.verdict) for s in report.scenarios for t in s.trials] == [(SCENARIO, "pass")]

    turns = turn_texts(log_dir)
    assert turns, run.stdout[-2000:]
    # the script names the harness skill; a plugin's loads as plugin:name where the host namespaces it
    loaded = [s for _, skills in turns for s in skills if s["name"].rpartition(":")[2] == harness.skill]
    assert loaded and all(harness.skill_text in s["text"] for s in loaded), loaded  # the skill's own body
    assert any(harness.skill_text in body for body, _ in turns[1:])
    if harness.prompt(host).startswith("/"):
        first = turns[0][0]
        assert harness.command_text in first, first[-3000:]  # expanded, the arguments in place
    if harness.instructions_text is not None:
        assert all(harness.instructions_text in body for body, _ in turns), turns[0][0][:3000]
    if harness.imported_text is not None and host in harness.import_hosts:
        assert all(harness.imported_text in body for body, _ in turns), turns[0][0][:3000]  # the import resolved
