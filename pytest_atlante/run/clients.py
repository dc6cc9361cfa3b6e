"""What reporters that read more than pytest's test report get from a trial: Allure (allure-pytest).

Allure is optional: nothing here imports it unless its listener is registered (``--alluredir``),
and it is never a dependency of the plugin.  What Allure takes from pytest itself is arranged in
``items.py``: the status (a measured failure is an ``AssertionError``, anything else ``broken``)
and the description (the trial callable's docstring is the scenario's ``description``).  Here, in
the trial's call phase: a ``trial`` parameter (Allure keys a test's history on its parameters, so
without one every trial of a scenario would be filed as a retry of one test), the trial's verdict
and checks as an attachment, and its transcript as an attachment and a link.  docs/reports.md
documents the mapping.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_atlante.run.items import SELFTEST_TRIAL

if TYPE_CHECKING:
    from pytest_atlante.records import TrialRecord
    from pytest_atlante.run.items import TrialItem

ALLURE_LISTENER = "allure_listener"   # the name allure-pytest registers its listener under


def allure_details(item: TrialItem, record: TrialRecord | None, report_dir: Path, summary: str | None) -> None:
    """Give Allure's result for this trial its parameter and, once it ran, its verdict and transcript."""
    if not item.config.pluginmanager.has_plugin(ALLURE_LISTENER):
        return
    allure: Any = importlib.import_module("allure")
    # Allure shows a parameter's repr: the trial's number, as a parametrized test's would be.
    allure.dynamic.parameter("trial", "selftest" if item.trial == SELFTEST_TRIAL else item.trial)
    if record is None:
        return
    text = allure.attachment_type.TEXT
    lines = [summary or f"{record.scenario} trial {record.trial}: {record.verdict}"]
    if record.transcript:
        transcript = report_dir / record.transcript
        lines += ["", f"transcript: {transcript}"]
        if transcript.is_file():
            allure.dynamic.link(transcript.resolve().as_uri(), name="transcript")
            allure.attach.file(str(transcript), name="transcript", attachment_type=text, extension="jsonl")
    allure.attach("\n".join(lines) + "\n", name=f"atlante: {record.verdict}", attachment_type=text)
