"""The E0 A/B corpus: strict ``agent-spec/atlas-eval/corpus-v1`` models and their loader.

The corpus names the cases an Atlas arm and a baseline arm are compared on.  Every field, enum and
rule of the Atlas reference is enforced here, so ``validate`` and ``plan`` share one definition and
a plan can only ever be compiled from a corpus that ``validate`` would accept.

Besides the reference's rules, two bounds keep a corpus usable: a corpus needs at least one case
(an empty corpus compiles an empty plan, which the opt-in runner rejects) and ``trials_per_arm`` is
capped at ``MAX_TRIALS_PER_ARM`` so a typo cannot compile a plan of billions of runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails, PydanticCustomError

from pytest_atlante.diagnostics import Diagnostic, DiagnosticError, json_path
from pytest_atlante.fsutil import MAX_INPUT_BYTES, UnreadableFile, read_capped

CORPUS_SCHEMA = "agent-spec/atlas-eval/corpus-v1"
MIN_TRIALS_PER_ARM = 3
MAX_TRIALS_PER_ARM = 10_000

CODE_CORPUS_INVALID = "atlas-corpus-invalid"
CODE_INPUT_UNREADABLE = "atlas-input-unreadable"

def _not_blank(value: str) -> str:
    # "Non-empty" in the reference: a whitespace-only id or revision names nothing either.
    if not value.strip():
        raise PydanticCustomError("blank_string", "must be a non-empty string")
    return value


NonEmptyStr = Annotated[str, AfterValidator(_not_blank)]
TaskClass = Literal[
    "symbol",
    "flow",
    "impact",
    "implementation",
    "stale",
    "scip-unavailable",
    "compile-failing",
    "worktree",
]
TASK_CLASSES: tuple[str, ...] = get_args(TaskClass)


class CorpusCase(BaseModel):
    """One evaluation case; both arms run it ``trials_per_arm`` times."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    id: NonEmptyStr
    size: Literal["small", "medium", "large"]
    task_class: TaskClass
    repository: str
    revision: NonEmptyStr
    trials_per_arm: Annotated[int, Field(ge=MIN_TRIALS_PER_ARM, le=MAX_TRIALS_PER_ARM)]
    rubric: Annotated[list[NonEmptyStr], Field(min_length=1)]
    permissions: Literal["read-only", "workspace-write"]
    cache_condition: Literal["cold", "warm"]


class Corpus(BaseModel):
    """The whole corpus: model and prompt are held constant for every compiled run."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    schema_: Literal["agent-spec/atlas-eval/corpus-v1"] = Field(alias="schema")
    model: str
    prompt: str
    cases: Annotated[list[CorpusCase], Field(min_length=1)]


_HINTS = {
    "extra_forbidden": "remove the field; unknown fields are rejected",
    "missing": "add the required field",
    "literal_error": "use one of the listed values",
    "json_invalid": "fix the JSON syntax",
    "greater_than_equal": "raise the value to the minimum",
    "less_than_equal": "lower the value to the maximum",
    "too_short": "add at least one item",
    "blank_string": "give a non-empty value",
}


def pydantic_diagnostics(
    exc: ValidationError, *, file: str, code: str, line: int | None = None
) -> list[Diagnostic]:
    """Turn every pydantic error into a diagnostic located by JSON path (and line, for NDJSON).

    Shared by the corpus and receipt loaders so both speak the same location language.
    """
    return [_one_diagnostic(err, file=file, code=code, line=line) for err in exc.errors()]


def _one_diagnostic(err: ErrorDetails, *, file: str, code: str, line: int | None) -> Diagnostic:
    loc = tuple("schema" if part == "schema_" else part for part in err["loc"])
    location = json_path(loc)
    if line is not None:
        location = f"line {line}, {location}"
    message = err["msg"]
    if err["type"] == "missing":
        message = "required field is missing"
    elif err["type"] == "extra_forbidden":
        message = f"unknown field {loc[-1]!r} is not allowed" if loc else message
    return Diagnostic(
        file=file,
        location=location,
        code=code,
        message=message,
        hint=_HINTS.get(err["type"], "correct the value to match the schema"),
    )


def read_input(path: Path) -> bytes:
    """Read a whole input file, turning OS errors into ``atlas-input-unreadable``."""
    try:
        return read_capped(path, MAX_INPUT_BYTES)
    except UnreadableFile as exc:
        raise DiagnosticError([unreadable(path, exc)]) from None


def unreadable(path: Path, exc: UnreadableFile) -> Diagnostic:
    return Diagnostic(
        file=str(path),
        location="",
        code=CODE_INPUT_UNREADABLE,
        message=f"cannot read input: it {exc.reason}",
        hint="check that the path exists and is a readable file",
    )


def parse_corpus(data: bytes, *, file: str) -> Corpus:
    """Validate corpus bytes; raise ``DiagnosticError`` listing every problem."""
    try:
        corpus = Corpus.model_validate_json(data)
    except ValidationError as exc:
        raise DiagnosticError(
            pydantic_diagnostics(exc, file=file, code=CODE_CORPUS_INVALID)
        ) from None
    duplicates = _duplicate_ids(corpus, file)
    if duplicates:
        raise DiagnosticError(duplicates)
    return corpus


def load_corpus(path: Path) -> Corpus:
    return parse_corpus(read_input(path), file=str(path))


def _duplicate_ids(corpus: Corpus, file: str) -> list[Diagnostic]:
    first_index: dict[str, int] = {}
    problems: list[Diagnostic] = []
    for index, case in enumerate(corpus.cases):
        if case.id in first_index:
            problems.append(
                Diagnostic(
                    file=file,
                    location=json_path(("cases", index, "id")),
                    code=CODE_CORPUS_INVALID,
                    message=(
                        f"duplicate case id {case.id!r} "
                        f"(first used at {json_path(('cases', first_index[case.id], 'id'))})"
                    ),
                    hint="give every case a unique id",
                )
            )
        else:
            first_index[case.id] = index
    return problems


def corpus_summary(corpus: Corpus) -> dict[str, Any]:
    """The ``validate`` result: ``{"valid": true, "cases": N}``."""
    return {"valid": True, "cases": len(corpus.cases)}
