"""``atlante benchmark validate | plan | summarize``: the E0 A/B harness commands.

Each command builds its whole result before writing anything, so a schema or parsing error raises
``DiagnosticError`` (the CLI prints it on stderr and exits 2) while stdout stays empty.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pytest_atlante.atlas.corpus import corpus_summary, load_corpus
from pytest_atlante.atlas.output import emit
from pytest_atlante.atlas.plan import compile_plan
from pytest_atlante.atlas.summarize import summarize_file


def cmd_validate(corpus: Path) -> int:
    """Validate a corpus and print exactly ``{"valid":true,"cases":N}`` plus a newline.

    Compact on purpose: the reference fixes this form, and ``validate`` has no ``--out``.
    """
    result = corpus_summary(load_corpus(corpus))
    sys.stdout.write(json.dumps(result, separators=(",", ":")) + "\n")
    sys.stdout.flush()
    return 0


def cmd_plan(corpus: Path, out: Path | None) -> int:
    emit(compile_plan(load_corpus(corpus)), out)
    return 0


def cmd_summarize(receipts: Path, out: Path | None) -> int:
    emit(summarize_file(receipts), out)
    return 0
