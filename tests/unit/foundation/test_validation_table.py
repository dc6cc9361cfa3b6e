"""Every kind of bad input ends in exit 2 with one located diagnostic — serially and with -n 2.

Each row mutates a valid project (the ``atlante_project`` fixture) to provoke one problem and runs
``evalrun.validate`` on it: the one function the controller calls before anything else, so a row
needs no pytest run.  A handful of rows (one per layer: configuration, scenario, build, filter,
scripted) also run ``pytest --atlante-eval`` end to end, serially and once with ``-n 2``, and check
that the run's diagnostics envelope is exactly what ``validate`` found.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import Project, config_doc, scenario_doc
from pytest_atlante.diagnostics import Diagnostic, envelope
from pytest_atlante.run.evalrun import validate

Mutation = Callable[[Project], Any]


def cfg(**eval_overrides: Any) -> Mutation:
    return lambda p: p.config(config_doc(**eval_overrides))


def cfg_top(**top: Any) -> Mutation:
    def mutate(p: Project) -> None:
        doc = config_doc()
        doc.update(top)
        p.config({k: v for k, v in doc.items() if v is not None})
    return mutate


def budget(**values: Any) -> Mutation:
    return cfg(budget={"trials": 1, **values})


def scen(**overrides: Any) -> Mutation:
    def mutate(p: Project) -> None:
        doc = scenario_doc(**{k: v for k, v in overrides.items() if v is not None})
        for key in [k for k, v in overrides.items() if v is None]:
            doc.pop(key)
        p.scenario(doc)
    return mutate


def checks(*items: dict[str, Any]) -> Mutation:
    return scen(checks=list(items))


V02 = "https://atlante.sh/schema/v0.2/eval-scenario.json"


def v02(*items: dict[str, Any]) -> Mutation:
    """A version 0.2 scenario with these checks (the trajectory check types need 0.2)."""
    return scen(version="0.2", checks=list(items), **{"$schema": V02})


def v02_prompt(prompt: str, *items: dict[str, Any]) -> Mutation:
    """A version 0.2 scenario with this prompt and these checks."""
    return scen(version="0.2", checks=list(items), task={"fixture": "eval/fixtures/app", "prompt": prompt}, **{"$schema": V02})


def both(*mutations: Mutation) -> Mutation:
    """The mutations applied in order (each config mutation writes a whole configuration)."""
    def mutate(p: Project) -> None:
        for each in mutations:
            each(p)
    return mutate


def task(**values: Any) -> Mutation:
    base = {"fixture": "eval/fixtures/app", "prompt": "Create hello.txt."}
    base.update(values)
    return scen(task={k: v for k, v in base.items() if v is not None})


def with_command(p: Project) -> None:
    """The harness defines the command ``greet`` (a version 0.3 configuration: Codex may run it)."""
    doc = config_doc()
    doc["version"] = "0.3"
    doc["harness"]["commands"] = {"greet": {"description": "Greets.", "file": "harness/commands/greet.md"}}
    p.config(doc)
    p.write("harness/commands/greet.md", "Greet the user.\n")


def write(rel: str, text: str) -> Mutation:
    return lambda p: p.write(rel, text)


def symlink_in_fixture(p: Project) -> None:
    os.symlink("README.md", p.root / "eval/fixtures/app/link.md")


def remove_build(p: Project) -> None:
    import shutil

    shutil.rmtree(p.root / ".atlante")


def opencode_with_root_config(p: Project) -> None:
    p.config(config_doc(host="opencode"))
    p.write("eval/fixtures/app/opencode.json", "{}")
    p.build()


def second_file_same_name(p: Project) -> None:
    p.scenario(scenario_doc(), "eval/scenarios/other.eval.jsonc")


M = "atlante.jsonc"
S = "eval/scenarios/main.eval.json"
CLAUDE_MANIFEST = ".atlante/build/claude-code/manifest.json"

# (id, mutation, extra pytest args, expected code, expected file, expected location)
CASES: list[tuple[str, Mutation, list[str], str, str, str]] = [
    ("config-not-json", write(M, '{"version": "0.2",, }'), [], "eval-config-invalid", M, "line 1, column 19"),
    ("config-duplicate-key", write(M, '{"version": "0.2",\n "version": "0.2"}'), [], "eval-config-invalid", M, "line 2, column 2"),
    ("config-unknown-top-key", cfg_top(bogus=1), [], "eval-config-invalid", M, "$.bogus"),
    ("config-unknown-eval-key", cfg(bogus=True), [], "eval-config-invalid", M, "$.eval.bogus"),
    ("config-bad-host", cfg(host="vscode"), [], "eval-config-invalid", M, "$.eval.host"),
    ("config-v01-claude", cfg_top(version="0.1"), [], "eval-config-invalid", M, "$.eval.host"),
    ("config-schema-mismatch", cfg_top(**{"$schema": "https://atlante.sh/schema/v0.1/config.json"}), [], "eval-config-invalid", M, '$["$schema"]'),
    ("config-missing-version", cfg_top(version=None), [], "eval-config-invalid", M, "$.version"),
    ("config-no-eval", cfg_top(eval=None), [], "eval-config-invalid", M, "$.eval"),
    ("config-no-scenarios-no-include", cfg(scenarios=None), [], "eval-config-invalid", M, "$.eval"),
    ("config-glob-matches-nothing", cfg(scenarios="nowhere/*.eval.json"), [], "eval-scenario-invalid", M, "$.eval.scenarios"),
    ("budget-trials-over-50", budget(trials=51), [], "eval-config-invalid", M, "$.eval.budget.trials"),
    ("budget-trials-zero", budget(trials=0), [], "eval-config-invalid", M, "$.eval.budget.trials"),
    ("budget-timeout-over-limit", budget(timeoutMs=3_600_001), [], "eval-config-invalid", M, "$.eval.budget.timeoutMs"),
    ("budget-tokens-string", budget(maxTokens="10"), [], "eval-config-invalid", M, "$.eval.budget.maxTokens"),
    ("budget-unknown-key", budget(maxDollars=5), [], "eval-config-invalid", M, "$.eval.budget.maxDollars"),
    ("harness-unknown-key", cfg_top(harness={"agents": {"helper": {"description": "d", "prompt": "harness/helper.md", "colour": "red"}}}), [], "eval-config-invalid", M, "$.harness.agents.helper.colour"),
    ("variants-before-0.4", cfg_top(variants={"codex": {"eval": {"host": "codex"}}}), [], "eval-config-invalid", M, "$.variants"),
    ("variant-changes-nothing", cfg_top(version="0.4", variants={"same": {}}), [], "eval-variant-invalid", M, "$.variants.same"),
    ("variant-sets-budget", cfg_top(version="0.4", variants={"big": {"eval": {"budget": {}}}}), [], "eval-config-invalid", M, "$.variants.big.eval.budget"),
    ("variant-replicates-nothing", cfg_top(version="0.4", variants={"again": {"replicateOf": "nope"}}), [], "eval-variant-invalid", M, "$.variants.again.replicateOf"),
    ("package-unresolved", cfg_top(packages=["@acme/missing-pack"]), [], "eval-package-unresolved", M, "$.packages[0]"),
    ("include-unselected", cfg(include=["@acme/review-pack"]), [], "eval-include-unselected", M, "$.eval.include[0]"),
    ("missing-config-file", lambda p: (p.root / M).unlink(), [], "eval-config-missing", M, ""),
    ("scenario-not-json", write(S, "{ nope"), [], "eval-scenario-invalid", S, "line 1, column 3"),
    ("scenario-duplicate-key", write(S, '{"name": "a",\n\n "name": "b"}'), [], "eval-scenario-invalid", S, "line 3, column 2"),
    ("scenario-bad-schema-uri", scen(**{"$schema": "https://atlante.sh/schema/v9/eval-scenario.json"}), [], "eval-scenario-invalid", S, '$["$schema"]'),
    ("scenario-bad-version", scen(version="0.9"), [], "eval-scenario-invalid", S, "$.version"),
    ("scenario-version-schema-mismatch", scen(version="0.2"), [], "eval-scenario-invalid", S, '$["$schema"]'),
    ("trajectory-check-in-v01", checks({"type": "skill-used", "skill": "tidy"}), [], "eval-scenario-invalid", S, "$.checks[0].type"),
    ("trajectory-unknown-skill", v02({"type": "skill-used", "skill": "no-such-skill"}), [], "eval-scenario-invalid", S, "$.checks[0].skill"),
    ("trajectory-unknown-agent", v02({"type": "agent-used", "agent": "no-such-agent"}), [], "eval-scenario-invalid", S, "$.checks[0].agent"),
    ("trajectory-min-over-max", v02({"type": "skill-used", "skill": "tidy", "min": 2, "max": 1}), [], "eval-scenario-invalid", S, "$.checks[0].min"),
    ("agent-used-on-a-host-without-sub-agents", both(cfg_top(version="0.3", eval={**config_doc()["eval"], "host": "codex"}), v02({"type": "agent-used", "agent": "helper"})), [], "eval-check-impossible", S, "$.checks[0]"),
    ("task-tool-used-on-a-host-without-sub-agents", both(cfg_top(version="0.3"), v02({"type": "tool-used", "tool": "task", "min": 2})), ["--atlante-host", "codex"], "eval-check-impossible", S, "$.checks[0]"),
    ("prompt-runs-an-unknown-command", task(prompt="/nosuch the file"), [], "eval-command-unknown", S, "$.task.prompt"),
    ("prompt-runs-a-command-on-a-host-without-commands", both(with_command, task(prompt="/greet")), ["--atlante-host", "codex"], "eval-command-unknown", S, "$.task.prompt"),
    ("command-used-unknown-command", v02({"type": "command-used", "command": "nosuch"}), [], "eval-scenario-invalid", S, "$.checks[0].command"),
    ("command-used-in-v01", both(with_command, checks({"type": "command-used", "command": "greet"})), [], "eval-scenario-invalid", S, "$.checks[0].type"),
    ("command-used-on-a-host-without-commands", both(with_command, v02({"type": "command-used", "command": "greet"})), ["--atlante-host", "codex"], "eval-check-impossible", S, "$.checks[0]"),
    ("trajectory-tool-not-neutral", v02({"type": "tool-used", "tool": "Bash"}), [], "eval-scenario-invalid", S, "$.checks[0].tool"),
    ("pattern-input-matches-invalid", v02({"type": "tool-used", "tool": "bash", "inputMatches": "(rm"}), [], "eval-pattern-invalid", S, "$.checks[0].inputMatches"),
    ("usage-within-no-bound", v02({"type": "usage-within"}), [], "eval-scenario-invalid", S, "$.checks[0]"),
    ("usage-within-negative", v02({"type": "usage-within", "turns": -1}), [], "eval-scenario-invalid", S, "$.checks[0].turns"),
    ("scenario-name-not-slug", scen(name="Adds Health"), [], "eval-scenario-invalid", S, "$.name"),
    ("scenario-unknown-key", scen(owner="me"), [], "eval-scenario-invalid", S, "$.owner"),
    ("scenario-missing-task", scen(task=None), [], "eval-scenario-invalid", S, "$.task"),
    ("scenario-missing-prompt", task(prompt=None), [], "eval-scenario-invalid", S, "$.task.prompt"),
    ("scenario-empty-setup", task(setup=[]), [], "eval-scenario-invalid", S, "$.task.setup"),
    ("scenario-no-checks", checks(), [], "eval-scenario-invalid", S, "$.checks"),
    ("scenario-timeout-override-zero", scen(budget={"timeoutMs": 0}), [], "eval-scenario-invalid", S, "$.budget.timeoutMs"),
    ("check-unknown-type", checks({"type": "llm-judge", "path": "x"}), [], "eval-scenario-invalid", S, "$.checks[0]"),
    ("check-unknown-field", checks({"type": "file-exists", "path": "x", "glob": True}), [], "eval-scenario-invalid", S, "$.checks[0].glob"),
    ("check-command-empty-run", checks({"type": "command", "run": []}), [], "eval-scenario-invalid", S, "$.checks[0].run"),
    ("check-command-timeout-over", checks({"type": "command", "run": ["true"], "timeoutMs": 3_600_001}), [], "eval-scenario-invalid", S, "$.checks[0].timeoutMs"),
    ("check-contains-no-pattern", checks({"type": "file-contains", "path": "x"}), [], "eval-scenario-invalid", S, "$.checks[0].pattern"),
    ("check-regex-flag-not-bool", checks({"type": "file-contains", "path": "x", "pattern": "a", "regex": "yes"}), [], "eval-scenario-invalid", S, "$.checks[0].regex"),
    ("pattern-output-invalid", checks({"type": "command", "run": ["true"], "outputMatches": "(unclosed"}), [], "eval-pattern-invalid", S, "$.checks[0].outputMatches"),
    ("pattern-contains-invalid", checks({"type": "file-contains", "path": "x", "pattern": "[a-", "regex": True}), [], "eval-pattern-invalid", S, "$.checks[0].pattern"),
    ("path-fixture-absolute", task(fixture="/etc"), [], "eval-path-unsafe", S, "$.task.fixture"),
    ("path-fixture-traversal", task(fixture="eval/../../outside"), [], "eval-path-unsafe", S, "$.task.fixture"),
    ("path-check-git", checks({"type": "file-exists", "path": ".git/config"}), [], "eval-path-unsafe", S, "$.checks[0].path"),
    ("path-check-nul", checks({"type": "file-unchanged", "path": "a\u0000b"}), [], "eval-path-unsafe", S, "$.checks[0].path"),
    ("fixture-nul", task(fixture="eval/fixtures\u0000/app"), [], "eval-path-unsafe", S, "$.task.fixture"),
    ("package-locator-nul", cfg_top(packages=["./pack\u0000"]), [], "eval-package-unresolved", M, "$.packages[0]"),
    ("package-locator-too-long", cfg_top(packages=["./" + "p" * 300]), [], "eval-package-unresolved", M, "$.packages[0]"),
    ("harness-source-not-utf8", lambda p: (p.root / "harness/helper.md").write_bytes(b"\xff\xfe bad"), [], "eval-harness-invalid", M, "$.harness.agents.helper.prompt"),
    ("harness-frontmatter-malformed", write("harness/helper.md", "---\ndescription: [x\n---\nbody\n"), [], "eval-harness-invalid", "harness/helper.md", "line 3"),
    ("harness-frontmatter-disagrees", write("harness/helper.md", "---\ndescription: Other\n---\nbody\n"), [], "eval-harness-conflict", M, "$.harness.agents.helper.description (and harness/helper.md line 2)"),
    ("harness-tool-unknown", cfg_top(harness={"agents": {"helper": {"description": "d", "prompt": "harness/helper.md", "tools": ["Teleport"]}}}), [], "eval-config-invalid", M, "$.harness.agents.helper.tools[0]"),
    ("harness-command-missing", cfg_top(harness={"commands": {"ship": {"file": "harness/nope.md"}}}), [], "eval-harness-invalid", M, "$.harness.commands.ship.file"),
    ("path-check-absolute", checks({"type": "file-unchanged", "path": "/etc/passwd"}), [], "eval-path-unsafe", S, "$.checks[0].path"),
    ("path-allow-node-modules", checks({"type": "diff-allowlist", "allow": ["src/", "node_modules/x"]}), [], "eval-path-unsafe", S, "$.checks[0].allow[1]"),
    ("fixture-missing", task(fixture="eval/fixtures/nope"), [], "eval-fixture-invalid", S, "$.task.fixture"),
    ("fixture-symlink", symlink_in_fixture, [], "eval-fixture-invalid", S, "$.task.fixture"),
    ("fixture-git-dir", write("eval/fixtures/app/.git/HEAD", "ref: x\n"), [], "eval-fixture-invalid", S, "$.task.fixture"),
    ("fixture-node-modules", write("eval/fixtures/app/node_modules/x/index.js", ""), [], "eval-fixture-invalid", S, "$.task.fixture"),
    ("fixture-claude-mcp", write("eval/fixtures/app/.mcp.json", "{}"), [], "eval-fixture-invalid", S, "$.task.fixture"),
    ("fixture-claude-settings", write("eval/fixtures/app/.claude/settings.json", "{}"), [], "eval-fixture-invalid", S, "$.task.fixture"),
    ("fixture-claude-settings-local", write("eval/fixtures/app/.claude/settings.local.json", "{}"), [], "eval-fixture-invalid", S, "$.task.fixture"),
    ("fixture-opencode-other-config", opencode_with_root_config, [], "eval-fixture-invalid", S, "$.task.fixture"),
    ("scenario-duplicate-name", second_file_same_name, [], "eval-scenario-duplicate", "eval/scenarios/other.eval.jsonc", "$.name"),
    ("build-missing", remove_build, [], "eval-build-missing", CLAUDE_MANIFEST, ""),
    ("build-output-modified", write(".atlante/build/claude-code/tree/.claude/agents/helper.md", "edited\n"), [], "eval-build-modified", ".atlante/build/claude-code/tree/.claude/agents/helper.md", ""),
    ("build-source-stale", write("harness/helper.md", "You write large files.\n"), [], "eval-build-stale", "harness/helper.md", ""),
    ("build-harness-section-stale", cfg_top(harness={"agents": {}, "skills": {}}), [], "eval-build-stale", M, "$.harness"),
    ("filter-matches-nothing", lambda p: None, ["--atlante-scenario", "no-such-scenario"], "eval-scenario-filter-empty", "", "--atlante-scenario"),
    ("scripted-script-missing", lambda p: (p.root / "eval/scenarios/scripted/writes-hello.json").unlink(), ["--atlante-scripted"], "eval-script-missing", S, "$.name"),
    ("scripted-script-invalid", write("eval/scenarios/scripted/writes-hello.json", '{"schema": "atlante/scripted-model-v1", "turns": [{"actions": [{"type": "teleport"}]}]}'), ["--atlante-scripted"], "eval-script-invalid", "eval/scenarios/scripted/writes-hello.json", "$.turns[0].actions[0]"),
]


def validate_as(project: Project, extra: list[str]) -> list[Diagnostic]:
    """``validate`` with the same inputs the plugin derives from these command-line options."""
    names = [extra[i + 1] for i, arg in enumerate(extra) if arg == "--atlante-scenario"]
    host = next((extra[i + 1] for i, arg in enumerate(extra) if arg == "--atlante-host"), None)
    _, problems = validate(project.root, scripted="--atlante-scripted" in extra, names=names,
                           host_override=host)  # type: ignore[arg-type]
    return problems


def run_eval(pytester: pytest.Pytester, project: Project, extra: list[str], workers: int) -> tuple[int, dict[str, Any], str]:
    out = pytester.path / f"out-{workers}"
    args = ["--atlante-eval", "--atlante-project", str(project.root), "--atlante-out", str(out), "-p", "no:cacheprovider", *extra]
    if workers:
        args += ["-n", str(workers)]
    result = pytester.runpytest_inprocess(*args)
    text = result.stdout.str() + result.stderr.str()
    envelope = json.loads((out / "diagnostics.json").read_text()) if (out / "diagnostics.json").exists() else {}
    return int(result.ret), envelope, text


@pytest.mark.parametrize(("mutate", "extra", "code", "file", "location"),
                         [pytest.param(*row[1:], id=row[0]) for row in CASES])
def test_invalid_input_is_a_located_diagnostic(
    atlante_project: Project, mutate: Mutation, extra: list[str], code: str, file: str, location: str
) -> None:
    mutate(atlante_project)
    problems = validate_as(atlante_project, extra)
    found = [(d.code, d.file, d.location) for d in problems]
    assert (code, file, location) in found, found
    assert all(d.message and d.hint for d in problems)


END_TO_END = ["config-not-json", "scenario-name-not-slug", "build-missing", "filter-matches-nothing", "scripted-script-invalid"]


@pytest.mark.parametrize(("mutate", "extra", "code"), [pytest.param(*row[1:3], row[3], id=row[0]) for row in CASES if row[0] in END_TO_END])
def test_a_run_with_invalid_input_exits_2_with_the_validated_envelope(
    pytester: pytest.Pytester, atlante_project: Project, mutate: Mutation, extra: list[str], code: str
) -> None:
    mutate(atlante_project)
    status, found, text = run_eval(pytester, atlante_project, extra, workers=0)
    assert status == 2, text
    assert "Traceback" not in text and "INTERNALERROR" not in text, text
    assert found == json.loads(json.dumps(envelope(validate_as(atlante_project, extra))))
    assert code in text  # also printed for humans


def test_under_xdist_validation_fails_in_the_controller_with_the_same_envelope(pytester: pytest.Pytester, atlante_project: Project) -> None:
    scen(name="Adds Health")(atlante_project)
    status, serial, _ = run_eval(pytester, atlante_project, [], workers=0)
    status_n2, parallel, text = run_eval(pytester, atlante_project, [], workers=2)
    assert status == status_n2 == 2, text
    assert parallel == serial and serial["diagnostics"]
    assert "Traceback" not in text and "INTERNALERROR" not in text, text


def test_the_table_is_large_enough() -> None:
    assert len(CASES) >= 40
    assert len({row[0] for row in CASES}) == len(CASES)


def test_all_problems_in_all_documents_are_reported_in_one_run(atlante_project: Project) -> None:
    atlante_project.scenario(scenario_doc(name="Bad Name"), "eval/scenarios/a.eval.json")
    atlante_project.scenario(scenario_doc(checks=[{"type": "command", "run": ["x"], "outputMatches": "("}]), "eval/scenarios/b.eval.json")
    atlante_project.scenario(scenario_doc(name="third", task={"fixture": "/abs", "prompt": "p"}), "eval/scenarios/c.eval.json")
    remove_build(atlante_project)
    files = {(d.file, d.code) for d in validate_as(atlante_project, [])}
    assert (CLAUDE_MANIFEST, "eval-build-missing") in files  # the build check joins the same run
    assert ("eval/scenarios/a.eval.json", "eval-scenario-invalid") in files
    assert ("eval/scenarios/b.eval.json", "eval-pattern-invalid") in files
    assert ("eval/scenarios/c.eval.json", "eval-path-unsafe") in files


def test_diagnostics_name_both_sources_of_a_duplicate(atlante_project: Project) -> None:
    second_file_same_name(atlante_project)
    [dup] = [d for d in validate_as(atlante_project, []) if d.code == "eval-scenario-duplicate"]
    assert "eval/scenarios/other.eval.jsonc" in (dup.message + dup.file)
    assert "eval/scenarios/main.eval.json" in (dup.message + dup.file)


@pytest.mark.parametrize(("extra", "file", "location"), [
    pytest.param(["--atlante-baseline", "no-baseline.json"], "no-baseline.json", "", id="baseline-missing"),
    pytest.param(["--atlante-fail-on-regression"], "", "--atlante-fail-on-regression", id="gate-without-baseline"),
])
def test_a_bad_baseline_is_a_validation_problem(pytester: pytest.Pytester, atlante_project: Project, extra: list[str],
                                                file: str, location: str) -> None:
    # Options, not documents: checked by the controller beside validate(), before any trial.
    status, found, text = run_eval(pytester, atlante_project, extra, workers=0)
    assert status == 2 and "Traceback" not in text, text
    assert [(d["code"], d["file"], d["location"]) for d in found["diagnostics"]] == [("eval-baseline-invalid", file, location)]


def test_a_shared_fixture_is_walked_once_and_its_problem_named_for_each_scenario(
        atlante_project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_atlante.suite import discovery

    symlink_in_fixture(atlante_project)
    atlante_project.scenario(scenario_doc(name="second"), "eval/scenarios/second.eval.json")
    walks: list[Path] = []
    walk = discovery.fixture_diagnostics
    monkeypatch.setattr(discovery, "fixture_diagnostics",
                        lambda fixture, host, file: walks.append(fixture) or walk(fixture, host, file))
    found = [(d.file, d.location) for d in validate_as(atlante_project, []) if d.code == "eval-fixture-invalid"]
    assert sorted(found) == [(S, "$.task.fixture"), ("eval/scenarios/second.eval.json", "$.task.fixture")]
    assert len(walks) == 1


@pytest.mark.parametrize("prompt", ["/greet", "/greet the team", "/tmp/app is broken: fix it", "Run /nosuch."])
def test_a_prompt_that_runs_a_harness_command_or_none_is_no_problem(atlante_project: Project, prompt: str) -> None:
    """A ``/name`` prompt must name a harness command; a path or a later ``/`` is no command."""
    both(with_command, v02_prompt(prompt, {"type": "command-used", "command": "greet", "max": 1}))(atlante_project)
    found = validate_as(atlante_project, [])
    assert not [d for d in found if d.code in ("eval-command-unknown", "eval-scenario-invalid")], found


def test_a_command_kept_in_a_folder_runs_by_the_hosts_name_only(atlante_project: Project) -> None:
    """``.claude/commands/frontend/component.md`` is ``/frontend:component`` on Claude Code and
    Gemini CLI (the build keeps it in its folder), never ``/component``, which those hosts would
    answer "Unknown command" or send as text; OpenCode names it ``frontend/component``, which no
    ``/name`` prompt can say.  A ``command-used`` check may name it either way."""
    doc = config_doc()
    doc["harness"]["commands"] = {"component": {"file": ".claude/commands/frontend/component.md"}}
    atlante_project.config(doc)
    atlante_project.write(".claude/commands/frontend/component.md", "Make a component.\n")
    v02_prompt("/frontend:component now", {"type": "command-used", "command": "frontend:component"},
               {"type": "command-used", "command": "component"})(atlante_project)
    found = validate_as(atlante_project, [])
    assert not [d for d in found if d.code in ("eval-command-unknown", "eval-scenario-invalid")], found
    task(prompt="/component")(atlante_project)
    (refused,) = [d for d in validate_as(atlante_project, []) if d.code == "eval-command-unknown"]
    assert refused.location == "$.task.prompt"
    assert "for claude-code (it defines: /frontend:component, /tidy)" in refused.message  # and the skill
    task(prompt="/frontend:component")(atlante_project)
    (refused,) = [d for d in validate_as(atlante_project, ["--atlante-host", "opencode"]) if d.code == "eval-command-unknown"]
    assert "for opencode (it defines: /frontend/component, /tidy)" in refused.message


@pytest.mark.parametrize(("host", "runs"), [("claude-code", True), ("opencode", True), ("gemini-cli", False)])
def test_a_skill_runs_as_a_command_where_the_host_runs_skills_so(atlante_project: Project, host: str, runs: bool) -> None:
    """Claude Code and OpenCode run a skill as ``/name`` (its SKILL.md is the expansion); Gemini CLI
    sends ``/tidy`` as text (docs/host-facts.md §13)."""
    config = config_doc(host)
    atlante_project.config(config)
    v02_prompt("/tidy the sources", {"type": "command-used", "command": "tidy"})(atlante_project)
    everything = validate_as(atlante_project, [])
    found = [d for d in everything if d.code in ("eval-command-unknown", "eval-scenario-invalid")]
    assert [d.location for d in found] == ([] if runs else ["$.task.prompt"]), everything


def test_command_used_max_zero_holds_on_a_host_without_commands(atlante_project: Project) -> None:
    both(with_command, v02({"type": "command-used", "command": "greet", "max": 0}))(atlante_project)
    assert not [d for d in validate_as(atlante_project, ["--atlante-host", "codex"])
                if d.code in ("eval-check-impossible", "eval-command-unknown")]


@pytest.mark.parametrize("check", [{"type": "agent-used", "agent": "helper", "max": 0},
                                   {"type": "tool-used", "tool": "task", "max": 0},
                                   {"type": "tool-used", "tool": "bash"}])
def test_a_check_a_host_without_sub_agents_can_satisfy_is_no_problem(atlante_project: Project, check: dict[str, Any]) -> None:
    """``max: 0`` ("must not happen") holds on such a host; only a count it can never reach is refused."""
    cfg_top(version="0.3")(atlante_project)
    v02(check)(atlante_project)
    assert not [d for d in validate_as(atlante_project, ["--atlante-host", "codex"]) if d.code == "eval-check-impossible"]
