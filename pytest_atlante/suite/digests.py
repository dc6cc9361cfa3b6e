"""Comparability digests: what defines a scenario, and which harness its trials ran with.

Two runs measure the same thing only when the scenario is the same (its document — task, setup,
checks, budget — the fixture tree it starts from, and in scripted mode the script standing in for
the model) and when we know which harness each ran.  ``scenarioDigest`` and ``harnessDigest``
fingerprint exactly that, so ``atlante compare`` can refuse a scenario that changed between two
runs and name the harness as the difference it is meant to measure.

Computed once per run on the controller, after validation: discovery has checked every fixture
(no symlinks, readable) and ``build.verify`` has checked the native outputs against the manifest,
so the digests describe what every trial of the run then copies into its sandbox.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from pytest_atlante.fsutil import (
    DIGEST_PREFIX,
    MAX_DOCUMENT_BYTES,
    UnreadableFile,
    fingerprint,
    read_capped,
    sha256_file,
)
from pytest_atlante.hosts.names import HostName
from pytest_atlante.suite.build import build_dir
from pytest_atlante.suite.discovery import ScenarioEntry

PREFIX = DIGEST_PREFIX


def tree_listing(root: Path) -> list[list[str]]:
    """``[path, mode, sha256]`` for every file under ``root``, sorted; mode is ``x`` or ``-``.

    The executable bit is part of a fixture (a script the task runs); timestamps and owners are not.
    Empty directories count too, as the sandbox copy keeps them.
    """
    entries: list[list[str]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        base = Path(dirpath)
        if not dirnames and not filenames and base != root:
            entries.append([base.relative_to(root).as_posix() + "/", "d", ""])
        for name in sorted(filenames):
            path = base / name
            executable = bool(os.stat(path).st_mode & stat.S_IXUSR)
            entries.append([path.relative_to(root).as_posix(), "x" if executable else "-", sha256_file(path)])
    return sorted(entries)


def scenario_digest(entry: ScenarioEntry) -> str:
    """Fingerprint of the scenario's document, fixture tree and (scripted runs) script.

    The document is digested as parsed, not as bytes, so comments and formatting do not change
    it; ``description`` is left out for the same reason — it documents, it does not define.
    """
    document = entry.scenario.model_dump(mode="json", by_alias=True, exclude={"description"})
    return fingerprint({
        "document": document,
        "fixture": tree_listing(entry.fixture),
        "script": sha256_file(entry.script) if entry.script is not None else None,
    })


def harness_digest(project_root: Path, host: HostName, variant: str | None = None) -> str | None:
    """Fingerprint of the verified native outputs for ``host`` (paths and content digests).

    Read from the build manifest, which ``build.verify`` has just matched against the tree; only
    the outputs count — the same outputs from different sources run the same harness.
    """
    try:
        manifest = json.loads(read_capped(build_dir(project_root, host, variant) / "manifest.json", MAX_DOCUMENT_BYTES))
        # An executable output (a skill's script) counts with its mode; the rest as before it was recorded.
        outputs = sorted([o["path"], o["sha256"], *(["x"] if o.get("mode") == "x" else [])] for o in manifest["outputs"])
    except (UnreadableFile, ValueError, KeyError, TypeError):
        return None
    return fingerprint({"host": host, "outputs": outputs})


def suite_digests(entries: list[ScenarioEntry], project_root: Path, host: HostName) -> dict[str, tuple[str, str | None]]:
    """``{scenario name: (scenarioDigest, harnessDigest)}`` for every scenario of the run."""
    harness = harness_digest(project_root, host)
    return {e.scenario.name: (scenario_digest(e), harness) for e in entries}
