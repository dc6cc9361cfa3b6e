"""``atlante import evals`` on real public skills' Agent Skills evals (tests/data/skill-evals, each
with its licence), and on the malformed files a user may hand it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO_ROOT
from pytest_atlante.cli import main
from pytest_atlante.suite.init import init_project
from pytest_atlante.suite.scenario import Scenario
from pytest_atlante.suite.skillevals import import_evals, negative_phrase

DATA = REPO_ROOT / "tests" / "data" / "skill-evals"
XCODE = DATA / "AvdLee-Xcode-Disk-Cleanup-Agent-Skill" / "evals" / "evals.json"
CREATOR = DATA / "wyattowalsh-agents" / "skills" / "skill-creator" / "evals" / "evals.json"


def scenario(root: Path, name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((root / "eval" / "scenarios" / f"{name}.eval.json").read_text())
    Scenario.model_validate(doc)          # a valid v0.2 scenario document
    return doc


def test_evals_and_the_trigger_file_beside_them_become_scenarios(tmp_path: Path) -> None:
    source = json.loads(XCODE.read_text())
    queries = json.loads((XCODE.parent / "trigger-evals.json").read_text())
    result = import_evals(XCODE, tmp_path)
    assert len(result.scenarios) == len(source["evals"]) + len(queries) == 24
    first = source["evals"][0]
    doc = scenario(tmp_path, first["name"])
    assert doc["task"] == {"fixture": f"eval/fixtures/{first['name']}", "prompt": first["prompt"]}
    assert doc["checks"] == [{"type": "skill-used", "skill": "xcode-disk-cleanup", "min": 1}]
    assert first["expected_output"] in doc["description"]
    assert all(f"({i}) {text}" in doc["description"] for i, text in enumerate(first["expectations"], 1))
    assert sum(w.startswith(f"{first['name']}: 4 expectations") for w in result.warnings) == 1
    for number, query in enumerate(queries, 1):
        doc = scenario(tmp_path, f"xcode-disk-cleanup-trigger-{number:02d}")
        assert doc["task"]["prompt"] == query["query"]
        bound = {"min": 1} if query["should_trigger"] else {"max": 0}
        assert doc["checks"] == [{"type": "skill-used", "skill": "xcode-disk-cleanup", **bound}]
    assert (tmp_path / "eval/fixtures/low-space-audit/.atlante-fixture").is_file()   # no files: a marker only
    assert not list(tmp_path.glob("eval/scenarios/scripted/*"))                     # no scripted run is written
    # Run again: nothing is overwritten, everything is said to be kept.
    again = import_evals(XCODE, tmp_path)
    assert again.created == [] and again.scenarios == [] and len(again.kept) == 24   # the 24 documents


def test_assertions_string_ids_should_not_phrases_and_unmapped_fields(tmp_path: Path) -> None:
    source = json.loads(CREATOR.read_text())
    result = import_evals(CREATOR, tmp_path)
    assert len(result.scenarios) == len(source["evals"])
    near_miss = scenario(tmp_path, "skill-creator-description-near-miss-agent-request")   # no name: <skill>-<id>
    assert near_miss["checks"] == [{"type": "skill-used", "skill": "skill-creator", "max": 0}]
    assert any(w.startswith("skill-creator-description-near-miss-agent-request: expected_output says 'Does not trigger'")
               for w in result.warnings)
    explicit = scenario(tmp_path, "skill-creator-explicit-invocation")
    assert explicit["checks"][0]["min"] == 1
    assertions = next(e for e in source["evals"] if e["id"] == "explicit-invocation")["assertions"]
    assert f"({len(assertions)}) {assertions[-1]}" in explicit["description"]
    # every field the mapping does not read is named: kind, suite, baseline
    unmapped = {w.split("field ")[1].split(" ")[0] for w in result.warnings if "is not mapped" in w}
    assert unmapped == {"'kind'", "'suite'", "'baseline'"}
    # files are relative to the repository there, not to the skill: named, not copied
    assert any("file 'skills/skill-creator/SKILL.md' is not a regular file" in w for w in result.warnings)


def test_files_are_copied_into_the_fixture_and_unsafe_ones_are_refused(tmp_path: Path) -> None:
    skill = tmp_path / "skill"
    (skill / "evals" / "files").mkdir(parents=True)
    (skill / "evals" / "files" / "in.csv").write_text("a,b\n")
    (tmp_path / "secret.txt").write_text("no\n")
    (skill / "evals" / "evals.json").write_text(json.dumps({"skill_name": "csv-tool", "evals": [
        {"id": 1, "prompt": "Fix the CSV.", "files": ["evals/files/in.csv", "../secret.txt", "/etc/passwd"],
         "should_trigger": False}]}))
    project = tmp_path / "project"
    result = import_evals(skill / "evals" / "evals.json", project)
    assert (project / "eval/fixtures/csv-tool-1/evals/files/in.csv").read_text() == "a,b\n"
    assert not list((project / "eval/fixtures").rglob("secret.txt")) and not list((project / "eval/fixtures").rglob("passwd"))
    assert sum("is not a path inside the skill" in w for w in result.warnings) == 2
    assert scenario(project, "csv-tool-1")["checks"][0] == {"type": "skill-used", "skill": "csv-tool", "max": 0}
    assert any("\"should_trigger\": false" in w for w in result.warnings)


@pytest.mark.parametrize(("text", "phrase"), [
    ("The skill should NOT trigger.", "should NOT trigger"),
    ("Does not trigger skill-creator for an agent request", "Does not trigger"),
    ("The agent shouldn't use the pdf skill here", "shouldn't use"),
    ("Never invoke it", "Never invoke"),
    ("Uses the skill and writes a report", None),
    ("Reports unused simulators", None),
])
def test_the_phrase_that_decides_should_not(text: str, phrase: str | None) -> None:
    assert negative_phrase(text) == phrase


@pytest.mark.parametrize(("content", "where"), [
    ("[1, 2]", "$.evals"),
    ('{"evals": []}', "$.skill_name"),
    ('{"skill_name": "x", "evals": [{"id": 1}]}', "$.evals[0].prompt"),
    ('{"skill_name": "x", "evals": [{"prompt": "p", "expectations": "one"}]}', "$.evals[0].expectations"),
    ('{"skill_name": "x", "skill_name": "y", "evals": []}', ""),
    ("{not json", ""),
])
def test_a_bad_file_is_a_diagnostic_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       content: str, where: str) -> None:
    path = tmp_path / "evals.json"
    path.write_text(content)
    assert main(["import", "evals", str(path), "--project", str(tmp_path / "project")]) == 2
    err = capsys.readouterr().err
    assert "import-evals-invalid" in err and where in err and "Traceback" not in err
    assert not (tmp_path / "project" / "eval" / "scenarios").exists()


def test_init_imports_the_evals_of_a_skill_it_adopts(tmp_path: Path) -> None:
    skill = tmp_path / ".claude" / "skills" / "xcode-disk-cleanup"
    (skill / "evals").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: xcode-disk-cleanup\ndescription: Audits Xcode disk use.\n---\nAudit first.\n")
    for name in ("evals.json", "trigger-evals.json"):
        (skill / "evals" / name).write_bytes((XCODE.parent / name).read_bytes())
    result = init_project(tmp_path)
    assert "24 scenario(s) from .claude/skills/xcode-disk-cleanup/evals/evals.json" in result.adopted
    assert "eval/scenarios/low-space-audit.eval.json" in result.created
    assert not any("declares no skill" in w for w in result.warnings)   # init adopted it in atlante.jsonc
    assert scenario(tmp_path, "xcode-disk-cleanup-trigger-20")["checks"][0]["max"] == 0
