"""B5 context models: what a case expects of context projection, and what an observation reports.

The reference names the contents without shapes, so the shapes here are our design (documented in
``docs/atlas-query.md``, versioned by their ``schema`` field):

* ``ContextExpectation`` (``agent-spec/atlas-eval/context-expectation-v1``) sits on a corpus case:
  the profile and limits the query must run with, whether graph retrieval loss and context
  projection loss are forbidden, allowed or required, the read-back behaviour, the omission classes
  the receipt must report, and optionally the load profile.
* ``ContextReceipt`` (``agent-spec/atlas-eval/context-receipt-v1``) sits on an observation: the
  limits actually used, retrieval totals with the items dropped at the hard cap, projection totals
  with the items dropped as irrelevant and the relevant items dropped to fit the byte budget,
  serialized bytes, per-stage omission counts by class, graph fingerprint, read-back calls,
  follow-up queries and the load profile.

Two kinds of check follow the reference's split.  ``receipt_inconsistencies`` finds receipts that
could not have been produced (counts that do not add up, bytes or follow-ups disagreeing with the
observation): the observation is malformed and scoring stops before any receipt.
``behaviour_failures`` compares a consistent receipt with the case's expectation: a mismatch is a
correctness failure of that case, recorded in the regression receipt.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

CONTEXT_EXPECTATION_SCHEMA = "agent-spec/atlas-eval/context-expectation-v1"
CONTEXT_RECEIPT_SCHEMA = "agent-spec/atlas-eval/context-receipt-v1"

# The four B5 load profiles; the D4 concurrency matrix must cover all of them.
LoadProfile = Literal["idle", "steady", "burst", "saturated"]
LOAD_PROFILES: tuple[str, ...] = ("idle", "steady", "burst", "saturated")

# Loss behaviour: `none` forbids loss at that stage, `required` demands it (the case exists to
# exercise the limit), `allowed` accepts either.
LossBehaviour = Literal["none", "allowed", "required"]
ReadBackBehaviour = Literal["forbidden", "allowed", "required"]
OmissionStage = Literal["retrieval-hard-cap", "projection-relevance", "projection-retention"]

Slug = Field(min_length=1, max_length=128, pattern=r"^[a-z0-9][a-z0-9._-]*$")
Count = Field(ge=0)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ContextLimits(_Strict):
    """The limits a context query runs with: items kept from retrieval, bytes after projection."""

    retrieval_hard_cap: int = Field(ge=1)
    max_serialized_bytes: int = Field(ge=1)


class ContextExpectation(_Strict):
    schema_: Literal["agent-spec/atlas-eval/context-expectation-v1"] = Field(alias="schema")
    profile: str = Slug
    limits: ContextLimits
    retrieval_loss: LossBehaviour
    projection_loss: LossBehaviour
    read_back: ReadBackBehaviour
    omission_classes: list[str]
    load_profile: LoadProfile | None = None


class RetrievalTotals(_Strict):
    """Graph retrieval: ``candidates`` matched, ``returned`` kept, ``hard_cap_dropped`` lost."""

    candidates: int = Count
    returned: int = Count
    hard_cap_dropped: int = Count


class ProjectionTotals(_Strict):
    """Context projection of the returned items: relevance filtering, then byte-budget retention."""

    input: int = Count
    relevant: int = Count
    relevance_dropped: int = Count
    retained: int = Count
    retention_dropped: int = Count


class Omission(_Strict):
    stage: OmissionStage
    class_: str = Field(alias="class", min_length=1, max_length=128, pattern=r"^[a-z0-9][a-z0-9._-]*$")
    count: int = Field(ge=1)


class ContextReceipt(_Strict):
    schema_: Literal["agent-spec/atlas-eval/context-receipt-v1"] = Field(alias="schema")
    profile: str = Slug
    limits: ContextLimits
    retrieval: RetrievalTotals
    projection: ProjectionTotals
    serialized_bytes: int = Count
    omissions: list[Omission]
    graph_fingerprint: str = Field(pattern=r"^[0-9a-f]{64}$")
    read_back_calls: int = Count
    follow_up_queries: int = Count
    load_profile: LoadProfile


def expectation_problems(expectation: ContextExpectation) -> list[tuple[str, str]]:
    """Self-contradictions of an expectation, as ``(json path suffix, message)`` pairs."""
    problems: list[tuple[str, str]] = []
    classes = expectation.omission_classes
    if len(set(classes)) != len(classes):
        problems.append((".omission_classes", "omission classes are listed more than once"))
    if any(not c for c in classes):
        problems.append((".omission_classes", "an omission class is empty"))
    no_loss = expectation.retrieval_loss == "none" and expectation.projection_loss == "none"
    if no_loss and classes:
        problems.append(
            (
                ".omission_classes",
                "omission classes are expected although retrieval and projection loss are both 'none'",
            )
        )
    return problems


def receipt_inconsistencies(
    receipt: ContextReceipt, response_bytes: int, follow_up_queries: int, read_back_calls: int
) -> list[tuple[str, str]]:
    """Counts that could not have been produced, as ``(json path suffix, message)`` pairs."""
    problems: list[tuple[str, str]] = []
    r, p, lim = receipt.retrieval, receipt.projection, receipt.limits
    if r.returned + r.hard_cap_dropped != r.candidates:
        problems.append((".retrieval", "returned + hard_cap_dropped must equal candidates"))
    if r.returned > lim.retrieval_hard_cap:
        problems.append((".retrieval.returned", "more items returned than the retrieval hard cap"))
    if r.hard_cap_dropped and r.returned != lim.retrieval_hard_cap:
        problems.append(
            (".retrieval.hard_cap_dropped", "items were dropped at the hard cap before it was reached")
        )
    if p.input != r.returned:
        problems.append((".projection.input", "projection input must equal retrieval.returned"))
    if p.relevant + p.relevance_dropped != p.input:
        problems.append((".projection", "relevant + relevance_dropped must equal input"))
    if p.retained + p.retention_dropped != p.relevant:
        problems.append((".projection", "retained + retention_dropped must equal relevant"))
    if receipt.serialized_bytes > lim.max_serialized_bytes:
        problems.append((".serialized_bytes", "serialized bytes exceed max_serialized_bytes"))
    stage_totals = {
        "retrieval-hard-cap": r.hard_cap_dropped,
        "projection-relevance": p.relevance_dropped,
        "projection-retention": p.retention_dropped,
    }
    seen: set[tuple[str, str]] = set()
    reported = dict.fromkeys(stage_totals, 0)
    for omission in receipt.omissions:
        key = (omission.stage, omission.class_)
        if key in seen:
            problems.append((".omissions", f"omission {key[0]}/{key[1]} is listed more than once"))
        seen.add(key)
        reported[omission.stage] += omission.count
    for stage, total in stage_totals.items():
        if reported[stage] != total:
            problems.append(
                (".omissions", f"{stage} omissions count {reported[stage]} but the totals drop {total}")
            )
    if receipt.serialized_bytes != response_bytes:
        problems.append(
            (".serialized_bytes", f"serialized bytes disagree with the observation's response_bytes {response_bytes}")
        )
    if receipt.follow_up_queries != follow_up_queries:
        problems.append(
            (".follow_up_queries", f"follow-up queries disagree with the observation's {follow_up_queries}")
        )
    if receipt.read_back_calls != read_back_calls:
        problems.append(
            (".read_back_calls", f"read-back calls disagree with the observation's {read_back_calls}")
        )
    return problems


def _loss_failure(stage: str, behaviour: str, lost: int) -> str | None:
    if behaviour == "none" and lost:
        return f"context {stage} loss forbidden but {lost} item(s) were lost"
    if behaviour == "required" and not lost:
        return f"context {stage} loss required but nothing was lost"
    return None


def behaviour_failures(expectation: ContextExpectation, receipt: ContextReceipt) -> list[str]:
    """Ways a consistent receipt fails the case's expected context behaviour (empty = passes)."""
    failures: list[str] = []
    if receipt.profile != expectation.profile:
        failures.append(f"context profile {receipt.profile!r} is not the expected {expectation.profile!r}")
    if receipt.limits != expectation.limits:
        failures.append("context limits differ from the expected limits")
    retrieval = _loss_failure("retrieval", expectation.retrieval_loss, receipt.retrieval.hard_cap_dropped)
    projection = _loss_failure(
        "projection",
        expectation.projection_loss,
        receipt.projection.relevance_dropped + receipt.projection.retention_dropped,
    )
    failures.extend(f for f in (retrieval, projection) if f)
    calls = receipt.read_back_calls
    if expectation.read_back == "forbidden" and calls:
        failures.append(f"context read-back forbidden but {calls} read-back call(s) were made")
    if expectation.read_back == "required" and not calls:
        failures.append("context read-back required but none was made")
    observed = {o.class_ for o in receipt.omissions}
    expected = set(expectation.omission_classes)
    if missing := sorted(expected - observed):
        failures.append("missing context omission classes: " + ", ".join(missing))
    if extra := sorted(observed - expected):
        failures.append("unexpected context omission classes: " + ", ".join(extra))
    if expectation.load_profile is not None and receipt.load_profile != expectation.load_profile:
        failures.append(
            f"load profile {receipt.load_profile!r} is not the expected {expectation.load_profile!r}"
        )
    return failures
