"""Harness variants (configuration 0.4): the merge patch, the arms it gives, and every way a
declaration can be wrong, each a located diagnostic before any build or session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import Project, config_doc
from pytest_atlante.run.evalrun import validate
from pytest_atlante.suite.discovery import discover
from pytest_atlante.suite.variants import CONTROL, arms_named, merge_patch

# RFC 7396, Appendix A: every example, target / patch / result.
RFC_EXAMPLES: list[tuple[Any, Any, Any]] = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "result"), RFC_EXAMPLES)
def test_merge_patch_follows_rfc_7396(target: Any, patch: Any, result: Any) -> None:
    before = repr(target)
    assert merge_patch(target, patch) == result
    assert repr(target) == before   # the target is never modified


def with_variants(project: Project, variants: dict[str, Any], version: str = "0.4", **eval_overrides: Any) -> None:
    doc = config_doc(**eval_overrides)
    doc["version"] = version
    doc["variants"] = variants
    project.config(doc)


def problems_of(project: Project) -> list[tuple[str, str, str]]:
    suite = discover(project.root)
    return [(d.code, d.location, d.message) for d in suite.diagnostics]


def test_the_issue_example_gives_four_arms(atlante_project: Project) -> None:
    with_variants(atlante_project, {
        "no-skill": {"harness": {"skills": {"tidy": None}}},
        "on-codex": {"eval": {"host": "codex"}},
        "again": {"replicateOf": "control"},
    }, model="sonnet")
    suite = discover(atlante_project.root)
    assert suite.diagnostics == []
    arms = {arm.name: arm for arm in suite.arms}
    assert list(arms) == [CONTROL, "no-skill", "on-codex", "again"]
    assert arms["no-skill"].harness.skills == {} and arms["no-skill"].harness.agents == arms[CONTROL].harness.agents
    assert arms["no-skill"].harness_of == "no-skill" and arms["no-skill"].host == "claude-code"
    assert arms["on-codex"].host == "codex" and arms["on-codex"].harness_of is None   # shares the control's build
    assert arms["on-codex"].model == "sonnet"     # the eval patch left the model alone
    assert arms["again"].replicate_of == CONTROL and arms["again"].harness == arms[CONTROL].harness
    assert arms_named(suite.arms, None) == (suite.arms[:1], [])
    assert arms_named(suite.arms, "all") == (suite.arms, [])
    chosen, unknown = arms_named(suite.arms, "again, nope")
    assert [a.name for a in chosen] == [CONTROL, "again"] and unknown == ["nope"]


def test_a_model_patch_and_its_removal(atlante_project: Project) -> None:
    with_variants(atlante_project, {"opus": {"eval": {"model": "opus"}}, "default": {"eval": {"model": None}}},
                  model="sonnet")
    suite = discover(atlante_project.root)
    assert suite.diagnostics == []
    assert [(a.name, a.model) for a in suite.arms] == [(CONTROL, "sonnet"), ("opus", "opus"), ("default", None)]


def test_a_replicate_of_a_variant_runs_its_patched_harness(atlante_project: Project) -> None:
    with_variants(atlante_project, {"bare": {"harness": {"skills": None}}, "bare-again": {"replicateOf": "bare"}})
    arms = {a.name: a for a in discover(atlante_project.root).arms}
    assert arms["bare-again"].harness == arms["bare"].harness and arms["bare-again"].harness_of == "bare"


BAD: list[tuple[str, dict[str, Any], str, str, str]] = [
    ("reserved name", {"control": {"eval": {"host": "codex"}}}, "eval-variant-invalid", "$.variants.control", "reserved"),
    ("changes nothing", {"same": {"harness": {"skills": {"tidy": {"dir": "harness/tidy"}}}}},
     "eval-variant-invalid", "$.variants.same", "changes nothing"),
    ("an empty variant", {"empty": {}}, "eval-variant-invalid", "$.variants.empty", "changes nothing"),
    ("the control's own host", {"same-host": {"eval": {"host": "claude-code"}}},
     "eval-variant-invalid", "$.variants.same-host", "changes nothing"),
    ("removes a skill that is not there", {"typo": {"harness": {"skills": {"tdy": None}}, "eval": {"host": "codex"}}},
     "eval-variant-invalid", "$.variants.typo.harness.skills.tdy", "does not define"),
    ("a patched harness that is not valid", {"bad": {"harness": {"agents": {"helper": {"prompt": None}}}}},
     "eval-variant-invalid", "$.variants.bad.harness.agents.helper.prompt", "missing required key"),
    ("an unknown harness key", {"bad": {"harness": {"plugins": {}}}},
     "eval-variant-invalid", "$.variants.bad.harness.plugins", "unknown key"),
    ("the budget differs", {"bigger": {"eval": {"budget": {"trials": 9}}}},
     "eval-config-invalid", "$.variants.bigger.eval.budget", "only the harness, the host and the model"),
    ("the scenarios differ", {"other": {"eval": {"scenarios": "x/*.json"}}},
     "eval-config-invalid", "$.variants.other.eval.scenarios", "only the harness, the host and the model"),
    ("the host removed", {"hostless": {"eval": {"host": None, "model": "x"}}},
     "eval-variant-invalid", "$.variants.hostless.eval.host", "cannot remove the host"),
    ("an unknown host", {"cursor": {"eval": {"host": "cursor"}}}, "eval-config-invalid", "$.variants.cursor.eval.host", ""),
    ("a replicate of nothing", {"again": {"replicateOf": "nope"}},
     "eval-variant-invalid", "$.variants.again.replicateOf", "not another arm"),
    ("a replicate of itself", {"again": {"replicateOf": "again"}},
     "eval-variant-invalid", "$.variants.again.replicateOf", "not another arm"),
    ("a replicate of a replicate", {"a1": {"replicateOf": "control"}, "a2": {"replicateOf": "a1"}},
     "eval-variant-invalid", "$.variants.a2.replicateOf", "itself a replicate"),
    ("a replicate that patches", {"again": {"replicateOf": "control", "eval": {"host": "codex"}}},
     "eval-variant-invalid", "$.variants.again", "also patches"),
    ("a name that is no slug", {"No Skill": {"eval": {"host": "codex"}}}, "eval-config-invalid", "$.variants", ""),
]


@pytest.mark.parametrize(("variants", "code", "location", "words"), [pytest.param(*row[1:], id=row[0]) for row in BAD])
def test_a_bad_variant_is_a_located_diagnostic_before_any_build(atlante_project: Project, variants: dict[str, Any],
                                                                  code: str, location: str, words: str) -> None:
    with_variants(atlante_project, variants)
    found = problems_of(atlante_project)
    assert any(c == code and loc.startswith(location) and words in message for c, loc, message in found), found
    _, problems = validate(atlante_project.root)   # the run's own validation says the same, with a hint
    assert any(d.code == code and d.location.startswith(location) and d.hint for d in problems)


def test_variants_need_version_0_4_and_older_documents_are_unchanged(atlante_project: Project) -> None:
    with_variants(atlante_project, {"codex": {"eval": {"host": "codex"}}}, version="0.3")
    assert ("eval-config-invalid", "$.variants") in [(c, loc) for c, loc, _ in problems_of(atlante_project)]
    doc = config_doc()
    doc["version"] = "0.3"
    atlante_project.config(doc)
    suite = discover(atlante_project.root)
    assert suite.diagnostics == [] and [a.name for a in suite.arms] == [CONTROL]


def test_a_trajectory_check_may_name_a_skill_only_a_variant_defines(atlante_project: Project) -> None:
    atlante_project.write("harness/extra/SKILL.md", "---\nname: extra\ndescription: Extra.\n---\nBody.\n")
    with_variants(atlante_project, {"with-extra": {"harness": {"skills": {"extra": {"description": "Extra.",
                                                                                      "dir": "harness/extra"}}}}})
    doc = {"$schema": "https://atlante.sh/schema/v0.2/eval-scenario.json", "version": "0.2", "name": "writes-hello",
           "task": {"fixture": "eval/fixtures/app", "prompt": "Create hello.txt."},
           "checks": [{"type": "skill-used", "skill": "extra", "min": 1}]}
    atlante_project.scenario(doc)
    assert problems_of(atlante_project) == []
    doc["checks"] = [{"type": "skill-used", "skill": "nowhere", "min": 1}]
    atlante_project.scenario(doc)
    assert [c for c, _, _ in problems_of(atlante_project)] == ["eval-scenario-invalid"]


# --- built per variant (atlante build) and verified by the run's validation ---------------------

def tree_bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_build_writes_each_patched_variant_for_its_host_byte_stably(atlante_project: Project) -> None:
    control_before = tree_bytes(atlante_project.root / ".atlante/build")
    atlante_project.write("harness/helper-v2.md", "You write small files, and test them.\n")
    with_variants(atlante_project, {
        "no-skill": {"harness": {"skills": {"tidy": None}}},
        "helper-v2": {"harness": {"agents": {"helper": {"prompt": "harness/helper-v2.md"}}}, "eval": {"host": "opencode"}},
        "on-codex": {"eval": {"host": "codex"}},
        "again": {"replicateOf": "control"},
    })
    atlante_project.build()
    first = tree_bytes(atlante_project.root / ".atlante/build")
    atlante_project.build()
    assert tree_bytes(atlante_project.root / ".atlante/build") == first   # byte-stable
    variants = {path for path in first if path.startswith("variants/")}
    assert {p.split("/")[1] + "/" + p.split("/")[2] for p in variants} == {"no-skill/claude-code", "helper-v2/opencode"}
    assert "variants/no-skill/claude-code/tree/.claude/skills/tidy/SKILL.md" not in first
    assert first["variants/helper-v2/opencode/tree/.opencode/agents/helper.md"].endswith(b"and test them.\n")
    manifest = json.loads(first["variants/no-skill/claude-code/manifest.json"])
    assert manifest["variant"] == "no-skill" and manifest["host"] == "claude-code"
    # The control's build is what it was before variants were declared (but for the config's digest).
    changed = {p for p in control_before if first.get(p) != control_before[p]}
    assert all(p.endswith("manifest.json") for p in changed)
    assert all(json.loads(first[p])["outputs"] == json.loads(control_before[p])["outputs"] for p in changed)
    suite, problems = validate(atlante_project.root, variants="all")
    assert problems == [] and [a.name for a in suite.arms] == ["control", "no-skill", "helper-v2", "on-codex", "again"]
    # A variant removed from the configuration leaves no build behind.
    with_variants(atlante_project, {"no-skill": {"harness": {"skills": {"tidy": None}}}})
    atlante_project.build()
    assert not (atlante_project.root / ".atlante/build/variants/helper-v2").exists()


def test_eval_refuses_a_missing_modified_or_stale_variant_build(atlante_project: Project) -> None:
    atlante_project.write("harness/tidy-v2/SKILL.md", "Keep files tidy, always.\n")
    with_variants(atlante_project, {"tidy-v2": {"harness": {"skills": {"tidy": {"dir": "harness/tidy-v2"}}}}})
    _, problems = validate(atlante_project.root, variants="all")
    assert [(d.code, d.file) for d in problems] == [
        ("eval-build-missing", ".atlante/build/variants/tidy-v2/claude-code/manifest.json")], problems
    assert "variant 'tidy-v2'" in problems[0].message
    _, problems = validate(atlante_project.root)   # the control alone does not need it
    assert problems == []
    atlante_project.build()
    assert validate(atlante_project.root, variants="tidy-v2")[1] == []
    atlante_project.write("harness/tidy-v2/SKILL.md", "Edited after the build.\n")
    assert [d.code for d in validate(atlante_project.root, variants="all")[1]] == ["eval-build-stale"]
    atlante_project.build()
    atlante_project.write(".atlante/build/variants/tidy-v2/claude-code/tree/.claude/skills/tidy/SKILL.md", "x\n")
    assert [d.code for d in validate(atlante_project.root, variants="all")[1]] == ["eval-build-modified"]


def test_a_variant_whose_build_equals_the_controls_changes_nothing(atlante_project: Project) -> None:
    """Another source directory with the same files renders the same outputs: the configuration
    differs, the build does not, and only the build decides what the arm runs."""
    atlante_project.write("harness/tidy-copy/SKILL.md", (atlante_project.root / "harness/tidy/SKILL.md").read_text())
    with_variants(atlante_project, {"copy": {"harness": {"skills": {"tidy": {"dir": "harness/tidy-copy"}}}}})
    atlante_project.build()
    _, problems = validate(atlante_project.root, variants="all")
    assert [(d.code, d.location) for d in problems] == [("eval-variant-invalid", "$.variants.copy")]
    assert "changes nothing" in problems[0].message and "replicateOf" in problems[0].hint


def test_an_unknown_variant_on_the_command_line(atlante_project: Project) -> None:
    with_variants(atlante_project, {"codex": {"eval": {"host": "codex"}}})
    _, problems = validate(atlante_project.root, variants="codex,nope")
    assert [(d.code, d.location, d.message) for d in problems] == [
        ("eval-variant-unknown", "--atlante-variants", "no variant named 'nope'")]
