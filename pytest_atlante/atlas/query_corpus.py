"""``agent-spec/atlas-eval/query-corpus-v1``: the versioned golden corpus of query cases.

Parsing has two layers.  The pydantic models check shape and types (unknown fields, missing fields,
wrong types, unknown tiers); ``corpus_problems`` then checks the rules that span fields and cases
(duplicates, conflicts, tiers, revisions, fixture links, bounds).  Every rule has its own stable
diagnostic code so a CI log says exactly which rule a corpus broke; the codes are listed in
``docs/atlas-query.md``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import from_json, to_json

from pytest_atlante.atlas.context import ContextExpectation, expectation_problems
from pytest_atlante.atlas.query_loading import parse_model, read_bytes
from pytest_atlante.diagnostics import Diagnostic, DiagnosticError

QUERY_CORPUS_SCHEMA = "agent-spec/atlas-eval/query-corpus-v1"
PREFIX = "atlas-query-corpus"
FIXTURE_TIER = "deterministic-fixture"
PINNED_TIER = "pinned-repository"
DIAGNOSTIC_KINDS: tuple[str, ...] = (
    "capability",
    "stale",
    "worktree-mismatch",
    "truncated",
    "degraded",
    "runtime-boundary",
)
_KNOWN_KINDS = frozenset(DIAGNOSTIC_KINDS)
MAX_AMBIGUITY = 64
_FULL_REVISION = re.compile(r"[0-9a-f]{40}")
_HINT = "fix the field to match agent-spec/atlas-eval/query-corpus-v1 (see docs/atlas-query.md)"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class TypedDiagnostic(_Strict):
    """A ``{kind, code}`` boundary.  ``kind`` is checked against the six kinds by the rules layer
    (not by a Literal) so that an unknown kind gets its own diagnostic code."""

    kind: str
    code: str = Field(min_length=1)


class QueryCase(_Strict):
    id: str = Field(min_length=1)
    tier: Literal["deterministic-fixture", "pinned-repository"]
    repository: str = Field(min_length=1)
    revision: str | None = None
    paired_fixture: str | None = None
    query: str = Field(min_length=1)
    expected_symbols: list[str]
    expected_paths: list[list[str]]
    forbidden_symbols: list[str]
    forbidden_paths: list[list[str]]
    required_evidence: list[str]
    required_diagnostics: list[TypedDiagnostic]
    allowed_ambiguity: int
    rubric: list[str]
    source_ref: str = Field(min_length=1)
    context_expectation: ContextExpectation | None = None


# For the two top-level documents: the JSON parser's string cache pays off for repeated short
# strings, but golden symbols, paths and ids are mostly unique, so caching every value string costs
# more than it saves (measured: ~15% slower validation of a 10^5-case corpus).  Object keys (the
# field names) repeat in every case, so those stay cached.  Values are identical either way.
JSON_STRING_CACHE = ConfigDict(cache_strings="keys")


class QueryCorpus(_Strict):
    model_config = JSON_STRING_CACHE

    schema_: Literal["agent-spec/atlas-eval/query-corpus-v1"] = Field(alias="schema")
    version: str = Field(min_length=1)
    cases: list[QueryCase]


def _under_fixtures(repository: str) -> bool:
    """Whether the first path component (after any root and ``.`` components) is ``fixtures``.

    Plain string splitting with exactly the semantics of ``PurePosixPath(...).parts`` on the
    backslash-normalized string, because this runs once per case: empty and ``.`` components are
    dropped, and a root of exactly two slashes is kept by POSIX as its own ``//`` component (so
    ``//fixtures`` is not under fixtures/), while one or three-plus slashes collapse to ``/``.
    """
    if repository.startswith("fixtures/"):  # the usual spelling: nothing to normalize
        return True
    normalized = repository.replace("\\", "/")
    relative = normalized.lstrip("/")
    if len(normalized) - len(relative) == 2:
        return False
    for part in relative.split("/"):
        if part and part != ".":
            return part == "fixtures"
    return False


def _duplicates(values: Sequence[object]) -> list[str]:
    seen: set[object] = set()
    dups: list[str] = []
    for value in values:
        if value in seen:
            dups.append(" -> ".join(value) if isinstance(value, tuple) else str(value))
        seen.add(value)
    return dups


class _Collector:
    """Accumulates diagnostics for one corpus file; every rule reports, none stops the others."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.found: list[Diagnostic] = []

    def add(self, location: str, code: str, message: str, hint: str) -> None:
        self.found.append(Diagnostic(self.file, location, f"{PREFIX}-{code}", message, hint))


def _conflict(out: _Collector, at: str, kind: str, both: set[str] | set[tuple[str, ...]]) -> None:
    shown = sorted(" -> ".join(b) if isinstance(b, tuple) else str(b) for b in both)
    out.add(f"{at}.forbidden_{kind}s", "conflict",
            f"{', '.join(shown)} is both expected and forbidden",
            f"a {kind} cannot be a required answer and a known wrong answer")


def _entry_problems(out: _Collector, at: str, name: str, values: Sequence[object]) -> None:
    """Report empty entries (index by index) and then repeated entries of one golden list."""
    for index, value in enumerate(values):
        if value == "" or value == () or (isinstance(value, tuple) and "" in value):
            out.add(f"{at}.{name}[{index}]", "empty-entry", f"{name}[{index}] is empty",
                    "remove the empty entry or fill it in")
    if len(set(values)) != len(values):
        out.add(f"{at}.{name}", "duplicate-entry",
                f"{name} lists {', '.join(map(repr, _duplicates(values)))} more than once",
                "golden entries must be unique; remove the repeated entry")


def _case_list_rules(out: _Collector, at: str, case: QueryCase) -> None:
    """Rules inside one case: required lists, empty items, duplicates, conflicts, bounds, kinds."""
    if not (case.expected_symbols and case.required_evidence and case.rubric):
        for name, required in (
            ("expected_symbols", case.expected_symbols),
            ("required_evidence", case.required_evidence),
            ("rubric", case.rubric),
        ):
            if not required:
                out.add(f"{at}.{name}", "empty-list", f"{name} must not be empty",
                        "list at least one entry; a case without it cannot detect a regression")
    # These checks run for every case of corpora with 10^5 cases, so each list gets a cheap test
    # in C first (membership, set size; a list of one entry cannot repeat) and is only walked item
    # by item when it has a problem.  Lists are checked in the order their diagnostics are reported.
    for name, strings in (
        ("expected_symbols", case.expected_symbols),
        ("forbidden_symbols", case.forbidden_symbols),
        ("required_evidence", case.required_evidence),
        ("rubric", case.rubric),
    ):
        if "" in strings or (len(strings) > 1 and len(set(strings)) != len(strings)):
            _entry_problems(out, at, name, strings)
    # Paths and diagnostics are compared as tuples; an empty tuple or one with an empty member is
    # an empty entry.  Most cases have none of them, so the tuples are only built when needed.
    diagnostics = [(d.kind, d.code) for d in case.required_diagnostics] if case.required_diagnostics else []
    expected_paths = [tuple(p) for p in case.expected_paths] if case.expected_paths else []
    forbidden_paths = [tuple(p) for p in case.forbidden_paths] if case.forbidden_paths else []
    for name, tuples in (
        ("required_diagnostics", diagnostics),
        ("expected_paths", expected_paths),
        ("forbidden_paths", forbidden_paths),
    ):
        if tuples and (len(set(tuples)) != len(tuples) or not all(t and "" not in t for t in tuples)):
            _entry_problems(out, at, name, tuples)
    if case.forbidden_symbols and not set(case.forbidden_symbols).isdisjoint(case.expected_symbols):
        _conflict(out, at, "symbol", set(case.expected_symbols) & set(case.forbidden_symbols))
    if forbidden_paths and not set(forbidden_paths).isdisjoint(expected_paths):
        _conflict(out, at, "path", set(expected_paths) & set(forbidden_paths))
    if not 0 <= case.allowed_ambiguity <= MAX_AMBIGUITY:
        out.add(f"{at}.allowed_ambiguity", "ambiguity-range",
                f"allowed_ambiguity {case.allowed_ambiguity} is outside 0..={MAX_AMBIGUITY}",
                f"use an integer from 0 to {MAX_AMBIGUITY}")
    for index, diag in enumerate(case.required_diagnostics):
        if diag.kind not in _KNOWN_KINDS:
            out.add(f"{at}.required_diagnostics[{index}].kind", "diagnostic-kind",
                    f"unknown diagnostic kind {diag.kind!r}",
                    "use one of: " + ", ".join(DIAGNOSTIC_KINDS))
    if case.context_expectation is not None:
        for suffix, message in expectation_problems(case.context_expectation):
            out.add(f"{at}.context_expectation{suffix}", "context-expectation", message,
                    "make the expected loss behaviour and omission classes agree")


def _tier_rules(out: _Collector, at: str, case: QueryCase) -> None:
    if case.tier == FIXTURE_TIER:
        if not _under_fixtures(case.repository):
            out.add(f"{at}.repository", "fixture-location",
                    f"deterministic-fixture case points at {case.repository!r}, outside fixtures/",
                    "deterministic-fixture cases must point under fixtures/")
        if case.paired_fixture is not None:
            out.add(f"{at}.paired_fixture", "paired-fixture",
                    "only pinned-repository cases link a paired_fixture",
                    "remove paired_fixture from the deterministic-fixture case")
        if case.revision is not None and not case.revision:
            out.add(f"{at}.revision", "empty-entry", "revision is empty", "omit it or fill it in")
        return
    if case.revision is None or not _FULL_REVISION.fullmatch(case.revision):
        shown = "missing" if case.revision is None else repr(case.revision)
        out.add(f"{at}.revision", "mutable-revision",
                f"pinned-repository revision is {shown}, not a full 40-hex commit",
                "pin the exact commit: `git rev-parse <ref>` (lowercase, 40 hex digits)")
    if _under_fixtures(case.repository):
        out.add(f"{at}.repository", "pinned-in-fixtures",
                f"pinned-repository case points back into fixtures/ ({case.repository!r})",
                "name the real repository; reduce it to a fixture in a separate case")
    if case.paired_fixture is None:
        out.add(f"{at}.paired_fixture", "paired-fixture",
                "pinned-repository case has no paired_fixture",
                "link the deterministic-fixture case that reproduces it")


def corpus_problems(corpus: QueryCorpus, file: str) -> list[Diagnostic]:
    """Every rule violation of an already shape-valid corpus (empty list = valid)."""
    return _rule_problems(list(enumerate(corpus.cases)), file, complete=True)


def _rule_problems(cases: list[tuple[int, QueryCase]], file: str, *, complete: bool) -> list[Diagnostic]:
    """Rule violations of ``cases`` (index in the file, case).

    ``complete`` is false when some cases had shape errors and are missing here: the rules that
    need every case (both tiers present, a link's target exists) are then not judged.
    """
    out = _Collector(file)
    first_index: dict[str, int] = {}
    by_index = dict(cases)
    links: list[tuple[int, str]] = []
    for index, case in cases:
        at = f"$.cases[{index}]"
        if case.id in first_index:
            out.add(f"{at}.id", "duplicate-id",
                    f"case id {case.id!r} is already used by $.cases[{first_index[case.id]}]",
                    "give every case a unique id")
        else:
            first_index[case.id] = index
        _case_list_rules(out, at, case)
        _tier_rules(out, at, case)
        if case.tier == PINNED_TIER and case.paired_fixture is not None:
            links.append((index, case.paired_fixture))
    tiers = {case.tier for _, case in cases}
    for tier in (FIXTURE_TIER, PINNED_TIER):
        if complete and tier not in tiers:
            out.add("$.cases", "tier-missing", f"the corpus has no {tier} case",
                    "both tiers are required: deterministic-fixture and pinned-repository")
    # Links are resolved after the pass that indexes every id, because they may point forward.
    for index, link in links:
        target = first_index.get(link)
        if target is None and not complete:
            continue
        if target is None or by_index[target].tier != FIXTURE_TIER:
            why = "no case has that id" if target is None else "that case is not a deterministic-fixture case"
            out.add(f"$.cases[{index}].paired_fixture", "paired-fixture",
                    f"paired_fixture {link!r} is invalid: {why}",
                    "link the id of a deterministic-fixture case in this corpus")
    return out.found


def parse_corpus(data: bytes, file: str) -> QueryCorpus:
    """Shape and rule validation of corpus bytes; raises ``DiagnosticError`` with every problem."""
    try:
        corpus = parse_model(data, QueryCorpus, file, PREFIX, _HINT)
    except DiagnosticError as exc:
        # The docs promise every problem of a file at once: the cases that do have a valid shape
        # still get their rule checks, reported beside the shape errors.
        exc.diagnostics.extend(_rule_problems(_valid_cases(data), file, complete=False))
        raise
    if problems := corpus_problems(corpus, file):
        raise DiagnosticError(problems)
    return corpus


def _valid_cases(data: bytes) -> list[tuple[int, QueryCase]]:
    """The shape-valid cases of a corpus whose whole document did not validate."""
    try:
        document = from_json(data)
    except ValueError:
        return []  # not JSON at all: the syntax error is the only problem to report
    cases = document.get("cases") if isinstance(document, dict) else None
    if not isinstance(cases, list):
        return []
    valid: list[tuple[int, QueryCase]] = []
    for index, item in enumerate(cases):
        try:  # through JSON again, so the case is judged exactly as in the whole-document parse
            valid.append((index, QueryCase.model_validate_json(to_json(item))))
        except ValidationError:
            continue
    return valid


def load_corpus(path: Path) -> QueryCorpus:
    """Read and validate a corpus file."""
    return parse_corpus(read_bytes(path, PREFIX), str(path))
