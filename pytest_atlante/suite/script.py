"""The scripted model's script: one document per scenario (schema ``atlante/scripted-model-v1``).

A script is the list of model turns the scripted model plays to a host CLI (``provider/scripted.py``):
text, host-neutral tool calls (actions) and usage per turn.  Discovery loads and validates each
scenario's script once, in scripted mode, and keeps the parsed :class:`Script` on the scenario's
entry; every trial plays that.  See ``docs/scripted-model.md`` for the format.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from pytest_atlante.checks.base import unsafe_path_reason
from pytest_atlante.diagnostics import Diagnostic, DiagnosticError, json_path
from pytest_atlante.fsutil import MAX_DOCUMENT_BYTES, UnreadableFile, read_capped
from pytest_atlante.suite import jsonc
from pytest_atlante.suite.documents import parse_location

SCRIPT_SCHEMA = "atlante/scripted-model-v1"
SCRIPT_INVALID = "eval-script-invalid"


class ScriptError(DiagnosticError):
    """A script file could not be loaded; every problem is a ``Diagnostic`` with a JSON path."""


class _Strict(BaseModel):
    # defer_build: the controller validates the scripts (discovery) and hands the parsed ones to
    # xdist workers, which then never need these validators; built at import, they cost every
    # worker start-up CPU (about 15 ms) for nothing.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)


def _safe_relative(value: str) -> str:
    reason = unsafe_path_reason(value)
    if reason:
        raise ValueError(f"{reason}; action paths are relative to the sandbox root")
    return value


SandboxPath = Annotated[str, Field(min_length=1), AfterValidator(_safe_relative)]


class WriteAction(_Strict):
    """Create or overwrite a file (Claude Code ``Write``, OpenCode ``write``)."""

    type: Literal["write"]
    path: SandboxPath
    content: str


class EditAction(_Strict):
    """Replace ``old`` by ``new`` in a file (``Edit`` / ``edit``); the host requires a prior read
    or write of that file in the same session."""

    type: Literal["edit"]
    path: SandboxPath
    old: Annotated[str, Field(min_length=1)]
    new: str
    replace_all: bool = False


class ReadAction(_Strict):
    """Read a file (``Read`` / ``read``); needed before editing a file the session has not seen."""

    type: Literal["read"]
    path: SandboxPath


class BashAction(_Strict):
    """Run a shell command in the sandbox (``Bash`` / ``bash``)."""

    type: Literal["bash"]
    command: Annotated[str, Field(min_length=1)]
    description: Annotated[str, Field(min_length=1)] | None = None
    timeout_ms: Annotated[int, Field(gt=0, le=600_000)] | None = None


class SkillAction(_Strict):
    """Load a harness skill through the host's skill tool (Claude Code ``Skill``, OpenCode ``skill``);
    the host answers with the skill's SKILL.md body, which the next request carries."""

    type: Literal["skill"]
    name: Annotated[str, Field(min_length=1)]


class TaskAction(_Strict):
    """Delegate to a harness sub-agent through the host's task tool (Claude Code ``Agent``, OpenCode
    ``task``).  ``turns`` are the sub-agent's own scripted turns: the server recognises the
    sub-agent's requests by ``prompt`` (docs/scripted-model.md "Sub-agents")."""

    type: Literal["task"]
    agent: Annotated[str, Field(min_length=1)]
    prompt: Annotated[str, Field(min_length=1)]
    description: Annotated[str, Field(min_length=1)] | None = None
    turns: Annotated[list[Turn], Field(min_length=1)]

    @model_validator(mode="after")
    def _no_nested_delegation(self) -> TaskAction:
        # Neither host gives a sub-agent a task tool (Claude Code drops it, OpenCode's
        # subagent_depth is 1), so a nested task could never run.
        if any(isinstance(action, TaskAction) for turn in self.turns for action in turn.actions):
            raise ValueError("a sub-agent's turns cannot delegate again: neither host lets a sub-agent start one")
        return self


Action = Annotated[
    WriteAction | EditAction | ReadAction | BashAction | SkillAction | TaskAction, Field(discriminator="type")
]
ACTION_TYPES = frozenset({"write", "edit", "read", "bash", "skill", "task"})


class Usage(_Strict):
    """Token figures the host reports for a turn; ``input`` excludes cached tokens."""

    input: Annotated[int, Field(ge=0)]
    output: Annotated[int, Field(ge=0)]
    cache_read: Annotated[int, Field(ge=0)] = 0
    cache_write: Annotated[int, Field(ge=0)] = 0


#: The longest a turn may keep the host waiting (``think_ms``): a benchmark's "model", not a hang.
MAX_THINK_MS = 60_000


class TurnError(_Strict):
    """Answer this turn with an HTTP error instead of a model response."""

    status: Annotated[int, Field(ge=400, le=599)]
    message: Annotated[str, Field(min_length=1)] = "scripted error"


class Turn(_Strict):
    """One model response: text, then one tool call per action. No actions ends the session.

    ``empty``: the response says nothing at all (no text, no tool calls; its usage is reported), as
    a provider sometimes answers — Gemini CLI reports it as an error, the other hosts end the turn.
    ``think_ms``: the server waits this long before it answers the turn, as a real model does."""

    text: str = ""
    actions: list[Action] = Field(default_factory=list)
    usage: Usage | None = None
    error: TurnError | None = None
    empty: bool = False
    # A real model keeps the host waiting for most of a session; the benchmarks of many trials at
    # once (benchmarks/concurrency.py) need that wait, or every trial is CPU-bound start-up.
    think_ms: Annotated[int, Field(ge=0, le=MAX_THINK_MS)] = 0

    @model_validator(mode="after")
    def _one_kind_of_answer(self) -> Turn:
        if self.error is not None and (self.text or self.actions or self.usage or self.empty):
            raise ValueError("a turn with 'error' answers with an HTTP error only: drop text, actions, usage and empty")
        if self.empty and (self.text or self.actions):
            raise ValueError("a turn with 'empty' answers with no text and no tool calls: drop text and actions")
        if self.error is None and not self.empty and not self.text and not self.actions:
            raise ValueError("a turn needs 'text', 'actions', 'error' or 'empty'")
        return self


class Script(_Strict):
    """A scripted-model document (schema ``atlante/scripted-model-v1``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, populate_by_name=False)

    schema_id: Literal["atlante/scripted-model-v1"] = Field(alias="schema")
    description: str | None = None
    turns: Annotated[list[Turn], Field(min_length=1)]

    @model_validator(mode="after")
    def _distinct_task_prompts(self) -> Script:
        prompts = [task.prompt for task in self.tasks()]
        repeated = sorted({prompt for prompt in prompts if prompts.count(prompt) > 1})
        if repeated:
            raise ValueError(
                f"task prompts must differ (the server tells sub-agents apart by their prompt): {repeated[0]!r} repeats"
            )
        return self

    def tasks(self) -> list[TaskAction]:
        """Every ``task`` action of the script, in order."""
        return [action for turn in self.turns for action in turn.actions if isinstance(action, TaskAction)]


def _error_location(loc: tuple[int | str, ...]) -> str:
    # A discriminated union puts the tag in the path ($.turns[0].actions[1].write.path); users
    # wrote no such key, so drop it.
    parts = [
        part
        for index, part in enumerate(loc)
        if not (part in ACTION_TYPES and index >= 2 and loc[index - 2] == "actions")
    ]
    return json_path(parts)


def _hint(error_type: str) -> str:
    if error_type == "union_tag_invalid":
        return "action 'type' is one of: " + ", ".join(sorted(ACTION_TYPES))
    if error_type == "extra_forbidden":
        return "remove the key; docs/scripted-model.md lists the allowed keys"
    if error_type == "missing":
        return "add the field; docs/scripted-model.md shows every action's fields"
    return "see docs/scripted-model.md for the script format"


def load_script(path: Path) -> Script:
    """Load and validate a script (JSON or JSONC); raise :class:`ScriptError` listing every problem."""
    where = str(path)

    def fail(location: str, message: str, hint: str) -> ScriptError:
        return ScriptError(diagnostics=[Diagnostic(where, location, SCRIPT_INVALID, message, hint)])

    try:
        text = read_capped(path, MAX_DOCUMENT_BYTES).decode("utf-8")
    except UnreadableFile as exc:
        raise fail("", f"cannot read the script: it {exc.reason}", "check the scenario's script path") from None
    except UnicodeDecodeError as exc:
        raise fail("", f"cannot read the script: {exc}", "save the script as UTF-8") from None
    try:
        document = jsonc.loads(text)  # plain JSON at json.loads speed, JSONC close to it
    except jsonc.JsoncError as exc:
        if exc.duplicate_key is not None:
            raise fail(parse_location(exc), f"duplicate key {exc.duplicate_key!r}",
                       "remove one of the two entries; JSON keys must be unique") from None
        raise fail(parse_location(exc), f"not valid JSON/JSONC: {exc.message}",
                   "fix the syntax; comments and trailing commas are allowed") from None
    try:
        return Script.model_validate(document)
    except ValidationError as exc:
        raise ScriptError(
            diagnostics=[
                Diagnostic(
                    where,
                    _error_location(tuple(err["loc"])),
                    SCRIPT_INVALID,
                    err["msg"].removeprefix("Value error, "),
                    _hint(err["type"]),
                )
                for err in exc.errors()
            ]
        ) from None
