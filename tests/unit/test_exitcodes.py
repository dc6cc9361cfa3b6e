"""The exit-status table: worst outcome wins (3 › 2 › 1 › 0)."""

from __future__ import annotations

import pytest

from pytest_atlante.records import Verdict
from pytest_atlante.report.exitcodes import decide

ALL_NOT_PASS: list[Verdict] = ["fail", "timeout", "budget-exceeded", "infra-error", "skipped-budget"]

CASES: list[tuple[str, bool, bool, list[Verdict], int]] = [
    ("every trial passed", False, False, ["pass", "pass"], 0),
    ("no trial requested", False, False, [], 0),
    *[(f"one {v}", False, False, ["pass", v], 1) for v in ALL_NOT_PASS],
    ("only skipped by the session cap", False, False, ["skipped-budget"], 1),
    ("validation failed, nothing ran", True, False, [], 2),
    ("validation failure outranks verdicts", True, False, ["fail"], 2),
    ("run-level error with all passing", False, True, ["pass"], 3),
    ("run-level error outranks failures", False, True, ["fail", "timeout"], 3),
    ("run-level error outranks validation", True, True, [], 3),
]


@pytest.mark.parametrize(
    ("validation_failed", "run_level_error", "verdicts", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_decide(validation_failed: bool, run_level_error: bool, verdicts: list[Verdict], expected: int) -> None:
    assert (
        decide(validation_failed=validation_failed, run_level_error=run_level_error, verdicts=verdicts)
        == expected
    )


def test_decide_consumes_any_iterable_once() -> None:
    verdicts: list[Verdict] = ["pass", "fail"]
    assert decide(validation_failed=False, run_level_error=False, verdicts=iter(verdicts)) == 1
