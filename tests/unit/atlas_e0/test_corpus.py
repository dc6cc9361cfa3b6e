"""Every corpus-v1 rule has its own rejection test, with the message and location checked."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_atlante.atlas.corpus import TASK_CLASSES, parse_corpus
from pytest_atlante.diagnostics import Diagnostic, DiagnosticError

from ._builders import BASE_CASE, REPO, make_corpus


def problems(doc: Any) -> list[Diagnostic]:
    with pytest.raises(DiagnosticError) as info:
        parse_corpus(json.dumps(doc).encode(), file="corpus.json")
    assert all(d.code == "atlas-corpus-invalid" for d in info.value.diagnostics)
    return info.value.diagnostics


def only(doc: Any) -> Diagnostic:
    found = problems(doc)
    assert len(found) == 1, found
    return found[0]


def case_with(**changes: Any) -> dict[str, Any]:
    case = dict(BASE_CASE)
    case.update(changes)
    return make_corpus(case)


def test_valid_corpus_parses_with_all_fields() -> None:
    corpus = parse_corpus(json.dumps(make_corpus()).encode(), file="c.json")
    assert corpus.model == "offline-fixture-model"
    assert corpus.cases[0].trials_per_arm == 3


def test_example_corpus_covers_every_task_class_with_eight_cases() -> None:
    path = REPO / "example_project/benchmarks/atlas/corpus.json"
    corpus = parse_corpus(path.read_bytes(), file=str(path))
    assert len(corpus.cases) == 8
    assert sorted(c.task_class for c in corpus.cases) == sorted(TASK_CLASSES)


def test_wrong_schema_rejected() -> None:
    doc = make_corpus()
    doc["schema"] = "agent-spec/atlas-eval/corpus-v2"
    diag = only(doc)
    assert diag.location == "$.schema"
    assert "agent-spec/atlas-eval/corpus-v1" in diag.message


@pytest.mark.parametrize("field", ["schema", "model", "prompt", "cases"])
def test_missing_top_level_field_rejected(field: str) -> None:
    doc = make_corpus()
    del doc[field]
    diag = only(doc)
    assert diag.location == f"$.{field}"
    assert diag.message == "required field is missing"


def test_unknown_top_level_field_rejected() -> None:
    doc = make_corpus()
    doc["extra"] = 1
    diag = only(doc)
    assert diag.location == "$.extra"
    assert diag.message == "unknown field 'extra' is not allowed"


def test_unknown_case_field_rejected() -> None:
    diag = only(case_with(notes="x"))
    assert diag.location == "$.cases[0].notes"
    assert "unknown field 'notes'" in diag.message


@pytest.mark.parametrize("field", sorted(BASE_CASE))
def test_missing_case_field_rejected(field: str) -> None:
    case = dict(BASE_CASE)
    del case[field]
    diag = only(make_corpus(case))
    assert diag.location == f"$.cases[0].{field}"
    assert diag.message == "required field is missing"


def test_empty_cases_rejected() -> None:
    doc = make_corpus()
    doc["cases"] = []
    diag = only(doc)
    assert diag.location == "$.cases"
    assert "at least 1 item" in diag.message


@pytest.mark.parametrize("field", ["id", "revision"])
@pytest.mark.parametrize("value", ["", "   "])
def test_empty_id_and_revision_rejected(field: str, value: str) -> None:
    diag = only(case_with(**{field: value}))
    assert diag.location == f"$.cases[0].{field}"
    assert diag.message == "must be a non-empty string"


def test_duplicate_ids_rejected_with_both_locations() -> None:
    second = dict(BASE_CASE, task_class="flow")
    diag = only(make_corpus(BASE_CASE, second))
    assert diag.location == "$.cases[1].id"
    assert diag.message == "duplicate case id 'symbol-lookup' (first used at $.cases[0].id)"


@pytest.mark.parametrize(
    ("field", "bad", "allowed"),
    [
        ("size", "huge", "'small', 'medium' or 'large'"),
        ("task_class", "refactor", "'worktree'"),
        ("permissions", "full-access", "'read-only' or 'workspace-write'"),
        ("cache_condition", "hot", "'cold' or 'warm'"),
    ],
)
def test_enum_fields_reject_other_values(field: str, bad: str, allowed: str) -> None:
    diag = only(case_with(**{field: bad}))
    assert diag.location == f"$.cases[0].{field}"
    assert allowed in diag.message


@pytest.mark.parametrize("task_class", TASK_CLASSES)
def test_every_task_class_accepted(task_class: str) -> None:
    parse_corpus(json.dumps(case_with(task_class=task_class)).encode(), file="c.json")


def test_trials_per_arm_below_three_rejected() -> None:
    diag = only(case_with(trials_per_arm=2))
    assert diag.location == "$.cases[0].trials_per_arm"
    assert diag.message == "Input should be greater than or equal to 3"


def test_trials_per_arm_must_be_an_integer() -> None:
    for bad in (3.0, "3", True):
        diag = only(case_with(trials_per_arm=bad))
        assert diag.location == "$.cases[0].trials_per_arm"
        assert "valid integer" in diag.message


def test_trials_per_arm_has_a_sanity_cap() -> None:
    diag = only(case_with(trials_per_arm=10_001))
    assert diag.message == "Input should be less than or equal to 10000"


def test_empty_rubric_rejected() -> None:
    diag = only(case_with(rubric=[]))
    assert diag.location == "$.cases[0].rubric"
    assert "at least 1 item" in diag.message


def test_empty_rubric_item_rejected() -> None:
    diag = only(case_with(rubric=["ok", ""]))
    assert diag.location == "$.cases[0].rubric[1]"
    assert diag.message == "must be a non-empty string"


def test_string_fields_reject_other_types() -> None:
    diag = only(case_with(repository=7))
    assert diag.location == "$.cases[0].repository"
    assert diag.message == "Input should be a valid string"


def test_invalid_json_reports_line_and_column() -> None:
    with pytest.raises(DiagnosticError) as info:
        parse_corpus(b'{"schema": ', file="c.json")
    (diag,) = info.value.diagnostics
    assert diag.code == "atlas-corpus-invalid"
    assert diag.message.startswith("Invalid JSON: EOF while parsing a value at line 1")


def test_top_level_must_be_an_object() -> None:
    diag = only([make_corpus()])
    assert diag.location == "$"
    assert "valid dictionary" in diag.message or "object" in diag.message


def test_every_problem_reported_at_once() -> None:
    case = dict(BASE_CASE, size="huge", trials_per_arm=1, rubric=[])
    found = problems(make_corpus(case))
    assert {d.location for d in found} == {
        "$.cases[0].size",
        "$.cases[0].trials_per_arm",
        "$.cases[0].rubric",
    }
