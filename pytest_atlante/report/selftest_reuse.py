"""Which reference runs a self-test may take from an earlier, sealed self-test instead of running again.

The reference trial is the slow half of a scenario's self-test (a real host session; the no-op
trial runs no host).  On a pull request that leaves most scenarios alone, their reference trials
would prove again what they proved last time.  The rule (docs/reference.md, "Reusing reference
runs"): a scenario's reference result is reused when

- the newest *sealed* ``selftest.json`` under ``.atlante/eval/`` holding the scenario
  (``report/seal.py``: a file this user's runs wrote, byte for byte) recorded the same
  **inputs digest** — the scenario's document, fixture tree and script (``scenarioDigest``), the
  built harness (``harnessDigest``), the host and its version, the atlante version, the eval section
  of the configuration and the isolation and network chosen on the command line; and
- that reference trial had no problem at all (no ``unsolvable``, ``reference-tool-error``,
  ``check-error`` or ``infra-error`` on the reference side): only a clean pass is carried forward.

Anything else runs again: a changed input, an unsealed or tampered file, an earlier failure, or
``--atlante-selftest-full`` (``atlante selftest --full``).  The no-op trial always runs: it needs no
host and it is what tells a vacuous scenario.  Plain code, no pytest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pytest_atlante import __version__
from pytest_atlante.fsutil import MAX_DOCUMENT_BYTES, UnreadableFile, fingerprint, read_capped
from pytest_atlante.report.seal import is_sealed
from pytest_atlante.report.selftest import SELFTEST_FILE, SelftestReport, SelftestScenario, SelftestTrial

__all__ = ["MAX_EARLIER_RUNS", "Reusable", "earlier_references", "inputs_digest"]

# How many run folders (newest first) are searched for earlier self-tests: a bounded look back.
MAX_EARLIER_RUNS = 50


@dataclass(frozen=True)
class Reusable:
    """A clean reference result of an earlier sealed self-test, with the run that ran it."""

    trial: SelftestTrial
    run_id: str

    def to_json(self) -> dict[str, Any]:
        return {"trial": self.trial.model_dump(mode="json"), "runId": self.run_id}

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Reusable:
        return cls(SelftestTrial.model_validate(value["trial"]), str(value["runId"]))


def inputs_digest(scenario_digest: str, harness_digest: str | None, host: str, host_version: str | None,
                  eval_section: Any, overrides: Mapping[str, Any]) -> str:
    """Everything a reference trial's result depends on, as one digest (module docstring)."""
    return fingerprint({"scenario": scenario_digest, "harness": harness_digest, "host": host,
                        "hostVersion": host_version, "atlante": __version__, "eval": eval_section,
                        "overrides": dict(overrides)})


def _clean(scenario: SelftestScenario) -> bool:
    """The scenario's reference trial ran and nothing was wrong with it."""
    return (scenario.reference is not None and scenario.reference.error is None
            and bool(scenario.reference.checks) and all(c.passed for c in scenario.reference.checks)
            and not any(p.trial == "reference" for p in scenario.problems))


def _sealed_selftest(directory: Path) -> SelftestReport | None:
    """The directory's ``selftest.json`` when a run of this user's sealed these very bytes."""
    path = directory / SELFTEST_FILE
    try:
        data = read_capped(path, MAX_DOCUMENT_BYTES, follow_symlinks=False)
    except UnreadableFile:
        return None
    if not is_sealed(path, data):
        return None
    try:
        return SelftestReport.model_validate_json(data)
    except ValidationError:
        return None


def earlier_references(run_dirs: list[Path], wanted: Mapping[str, str]) -> dict[str, Reusable]:
    """``{scenario name: reusable reference}`` for each scenario of ``wanted`` (name: inputs digest)
    whose newest sealed self-test among ``run_dirs`` (newest first) recorded the same digest and a
    clean reference; a reused result keeps the run that really ran it."""
    found: dict[str, Reusable] = {}
    decided: set[str] = set()
    for directory in run_dirs[:MAX_EARLIER_RUNS]:
        report = _sealed_selftest(directory)
        if report is None:
            continue
        for scenario in report.scenarios:
            if scenario.name not in wanted or scenario.name in decided:
                continue
            decided.add(scenario.name)   # the newest sealed record of a scenario decides
            if scenario.inputsDigest == wanted[scenario.name] and _clean(scenario):
                assert scenario.reference is not None
                found[scenario.name] = Reusable(scenario.reference, scenario.reusedFrom or report.runId)
        if decided >= set(wanted):
            break
    return found
