"""The base class every user-document model derives from: strict about unknown keys."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Unknown keys are errors, instances are immutable, field names match the JSON exactly."""

    # Built on first use (records.Record says why): a worker never validates most documents.
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=False, defer_build=True)
