"""Per-trial records: what one trial produced, as it travels from a worker to the report.

These models are the contract between the trial engine (which fills them), the xdist transport
(which serialises them on the ``TestReport``) and the report writer (which aggregates them).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

Verdict = Literal["pass", "fail", "timeout", "budget-exceeded", "infra-error", "skipped-budget"]

# Precedence when several outcomes apply to one trial (docs/design.md §4.6), strongest first.
VERDICT_PRECEDENCE: tuple[Verdict, ...] = (
    "skipped-budget",
    "infra-error",
    "timeout",
    "budget-exceeded",
    "fail",
    "pass",
)

DIFF_CAP_CHARS = 20_000
OUTPUT_TAIL_CHARS = 2_000
# An agent can create any number of files; the report and the terminal list this many of them.
CHANGED_PATHS_CAP = 1_000


# The error of a trial that was running when the run was stopped (Ctrl-C, SIGTERM).
INTERRUPTED_ERROR = "interrupted (Ctrl-C or SIGTERM) while the trial ran"


class Record(BaseModel):
    # Schemas are built on first use, not at import: an xdist worker imports every report model
    # (the engine's modules import each other) but validates only its trials' records, and the
    # build of the rest was a third of each worker's start-up CPU (benchmarks/concurrency.py).
    model_config = ConfigDict(extra="forbid", defer_build=True)


class OmitsUnsetArm(Record):
    """A record whose arm fields (``variant``, and the report's ``arms``, ``lift``, ``noiseFloor``)
    are left out while unset: a run without variants writes the report it wrote before they existed,
    byte for byte."""

    omitted_when_none: ClassVar[frozenset[str]] = frozenset({"variant"})

    @model_serializer(mode="wrap")
    def _omit_unset_arm(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for key in self.omitted_when_none:
                if data.get(key, 0) is None:
                    del data[key]
        return data


class Usage(Record):
    inputTokens: int = 0
    outputTokens: int = 0
    cacheReadTokens: int = 0
    cacheWriteTokens: int = 0

    @property
    def total(self) -> int:
        return self.inputTokens + self.outputTokens + self.cacheReadTokens + self.cacheWriteTokens


class CountRecord(Record):
    """What a counting check (skill-used, agent-used, tool-used, command-used) counted, and the
    bounds it held the count to: the report's trigger rates are computed from these (skills and
    agents only)."""

    kind: Literal["skill", "agent", "tool", "command"]
    name: str
    uses: int = Field(ge=0)
    min: int = Field(ge=0)
    max: int | None = Field(default=None, ge=0)


class CheckResult(Record):
    index: int
    type: str
    passed: bool
    error: bool = False
    timedOut: bool = False
    message: str
    exitCode: int | None = None
    output: str | None = Field(default=None, description="last 2,000 characters of combined output")
    # file-unchanged: the regular file's SHA-256 before and after; null for a missing or non-file path
    digestBefore: str | None = None
    digestAfter: str | None = None
    # Trajectory checks: the ``seq`` of the transcript events that matched (the first
    # MATCHED_EVENTS_CAP), so the view can link the check to them; null for every other check.
    events: list[int] | None = None
    # Counting checks whose count was decided (not an error): what was counted.
    count: CountRecord | None = None


class TrialRecord(OmitsUnsetArm):
    scenario: str
    trial: int
    nodeId: str
    verdict: Verdict
    # The arm of a variant run (``control`` or a variant's name); absent otherwise.
    variant: str | None = None
    durationMs: int = 0
    hostDurationMs: int = 0
    checks: list[CheckResult] = Field(default_factory=list)
    diff: str | None = None
    diffTruncated: bool = False
    changedPaths: list[str] = Field(default_factory=list)
    # Set only when ``changedPaths`` was cut at CHANGED_PATHS_CAP: how many paths really changed.
    changedPathsTotal: int | None = None
    usage: Usage | None = None
    costUsd: float | None = None
    # Set when ``costUsd`` is an estimate from the shipped price table (its label), not the host's figure.
    costBasis: str | None = None
    # The model that answered, as the host's stream names it; in a scripted run the scripted model's id
    # (``scripted-model``), the name the host asked for being ``requestedModel`` (null otherwise).
    modelIdentity: str | None = None
    requestedModel: str | None = None
    budgetUnmonitored: bool = False
    # Values of the host's stream that were ignored (no valid count or cost, a second result): the
    # stream is untrusted input (docs/design.md §10).
    streamNotes: list[str] = Field(default_factory=list)
    # Where usage was metered: "proxy" (the model API boundary, docs/design.md §10) or "stream" (the
    # host's own stream, for a provider mode that cannot go through the proxy); and where the
    # host's stream disagreed with the proxy, in words.
    meteredBy: Literal["proxy", "stream"] | None = None
    meteringDisagreement: str | None = None
    # Requests the metering proxy refused without forwarding them: no model route of any wire format
    # (batches, files, a Gemini JSON-array stream), or not under the trial's key (another trial's
    # agent); the first few named ("METHOD /path: why").
    proxyRefused: int | None = None
    # The agent under test could read a real credential of the evaluator in this trial: a login
    # copied into its HOME, or a key in its environment with no stand-in (docs/integrity.md).
    credentialExposed: bool | None = None
    proxyRefusedRequests: list[str] = Field(default_factory=list)
    scriptedTurns: int | None = Field(default=None, description="turns the scripted model served (scripted runs)")
    error: str | None = None
    interrupted: bool = False
    # Paths outside the sandbox the trial changed (hermeticity audit): project-relative, ``~/`` for
    # the user's HOME, absolute otherwise.  A trial with escapes is never ``pass``.
    escapes: list[str] = Field(default_factory=list)
    # Host-neutral transcript and raw host stream, relative to the report's directory (transcript.py)
    transcript: str | None = None
    hostStream: str | None = None
    transcriptTruncated: bool = False


def strongest(verdicts: list[Verdict]) -> Verdict:
    """The verdict that wins when several apply (``pass`` when none do)."""
    for verdict in VERDICT_PRECEDENCE:
        if verdict in verdicts:
            return verdict
    return "pass"


def tail(text: str, limit: int = OUTPUT_TAIL_CHARS) -> str:
    return text[-limit:] if len(text) > limit else text


def cap_paths(paths: list[str]) -> tuple[list[str], int | None]:
    """``paths`` cut to CHANGED_PATHS_CAP, and the full count when something was cut."""
    if len(paths) <= CHANGED_PATHS_CAP:
        return paths, None
    return paths[:CHANGED_PATHS_CAP], len(paths)


def cap_diff(text: str) -> tuple[str, bool]:
    if len(text) <= DIFF_CAP_CHARS:
        return text, False
    return text[:DIFF_CAP_CHARS], True


def iso_utc(moment: datetime) -> str:
    """``2026-11-30T08:36:55.123Z``; a naive datetime is taken to be UTC already."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"
