"""The exit status of an atlante eval run: one pure decision, worst outcome wins.

| status | when |
|---|---|
| 3 | a run-level infrastructure error (unauthenticated host, worker crash, report write failure, guard timeout, internal error) |
| 2 | validation failed (configuration, scenarios, pack selection, native outputs) |
| 1 | at least one requested trial did not pass, ``skipped-budget`` included |
| 0 | every requested trial passed |
| 5 | nothing was selected (``-k``, ``-m``, ``--deselect``, a splitter or a shard left no trial): pytest's own "no tests collected", which the report states |

Ordinary pytest runs (without ``--atlante-eval``) keep pytest's own codes; this table is only for
runs where atlante took over.
"""

from __future__ import annotations

from collections.abc import Iterable

from pytest_atlante.records import Verdict

EXIT_PASS = 0
EXIT_TRIAL_NOT_PASSED = 1
EXIT_VALIDATION = 2
EXIT_RUN_ERROR = 3
EXIT_NOTHING_SELECTED = 5  # pytest.ExitCode.NO_TESTS_COLLECTED, kept when no trial was selected


def decide(*, validation_failed: bool, run_level_error: bool, verdicts: Iterable[Verdict]) -> int:
    """The exit status for a run; a run-level error outranks validation, which outranks verdicts.

    A run-level error can follow a validation failure (the error envelope itself could not be
    written), which is why both flags are checked rather than assumed exclusive.
    """
    if run_level_error:
        return EXIT_RUN_ERROR
    if validation_failed:
        return EXIT_VALIDATION
    if any(verdict != "pass" for verdict in verdicts):
        return EXIT_TRIAL_NOT_PASSED
    return EXIT_PASS
