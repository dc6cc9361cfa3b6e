"""The ``skill-used``, ``agent-used``, ``tool-used`` and ``command-used`` checks: how often the
session did something, counted on the trial's host-neutral transcript, so the same check means the
same on every host.

The first three count the main session's ``tool_call`` events (``docs/transcripts.md``, "Skills and
sub-agents"): a skill load is a call of the neutral ``skill`` tool with ``input.name`` (or, on a
host that runs a skill as ``/name``, the prompt's ``command`` event of that skill), a delegation
a call of ``task`` with ``input.agent``, and ``tool-used`` counts calls of one neutral tool,
optionally only those with an input string that ``inputMatches`` (``re.search``, compiled at
validation).  ``command-used`` counts ``command`` events (``docs/transcripts.md``, "Slash
commands"): the host expanded a slash command and its expansion went to the model.

Rules chosen where the scenario reference leaves room:
- only the main session's calls count (``agent: null``): Claude Code streams a sub-agent's own calls
  and OpenCode does not, so counting them would make one check mean two things;
- a skill load or a delegation counts only when its ``tool_result`` is not an error (the host
  refused an unknown skill or agent: nothing was loaded); ``tool-used`` counts every call, refused
  or not, so ``max: 0`` also catches an attempt the policy denied;
- ``min`` defaults to 1, or to 0 when ``max`` is 0 (``{"max": 0}`` reads "must not happen");
- a transcript cut by the stream cap only gives a lower bound, so a count it cannot decide (too
  few for ``min`` or not more than ``max``) is an error check, never a guess;
- the self-test's no-op trial has no session: zero uses, so ``min: 1`` fails there (which is what
  makes such a check count against vacuity) and ``max: 0`` passes;
- a session without a transcript (it could not be built) makes these checks errors;
- an event marked ``unverified`` (no model response the metering proxy served vouches for it: the
  agent wrote it into the host's stream) is not counted.
The evidence is the matched events, one line each, capped like command output; their ``seq``
numbers go in the result's ``events`` for the view's links.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Literal

from pydantic import Field

from pytest_atlante.checks.base import CheckContext, CheckKind, NonEmpty, Rules, SessionView
from pytest_atlante.diagnostics import Diagnostic
from pytest_atlante.hosts.names import NeutralTool
from pytest_atlante.models import StrictModel
from pytest_atlante.records import CheckResult, CountRecord, tail

MATCHED_EVENTS_CAP = 100  # seq numbers kept in a result's ``events``
_SHOWN_INPUT = 120  # characters of a matched call's input shown in the evidence

Count = Annotated[int, Field(ge=0, strict=True)]


class _Counted(StrictModel):
    min: Count | None = None
    max: Count | None = None

    @property
    def least(self) -> int:
        if self.min is not None:
            return self.min
        return 0 if self.max == 0 else 1


class SkillUsedCheck(_Counted):
    type: Literal["skill-used"]
    skill: NonEmpty


class AgentUsedCheck(_Counted):
    type: Literal["agent-used"]
    agent: NonEmpty


class ToolUsedCheck(_Counted):
    type: Literal["tool-used"]
    tool: NeutralTool
    inputMatches: NonEmpty | None = None


class CommandUsedCheck(_Counted):
    type: Literal["command-used"]
    command: NonEmpty


TrajectoryCheck = SkillUsedCheck | AgentUsedCheck | ToolUsedCheck | CommandUsedCheck


def rules(check: TrajectoryCheck, where: str, found: Rules) -> None:
    """``min`` above ``max`` can never pass; ``inputMatches`` must compile."""
    if check.min is not None and check.max is not None and check.min > check.max:
        found.found.append(Diagnostic(found.file, f"{where}.min", "eval-scenario-invalid",
                                      f"{check.type}: min {check.min} is greater than max {check.max}",
                                      "set min at most max (max: 0 alone means it must not happen)"))
    if isinstance(check, ToolUsedCheck) and check.inputMatches is not None:
        found.pattern(check.inputMatches, f"{where}.inputMatches")


def _vouched(event: Mapping[str, Any]) -> bool:
    """Not marked as written into the stream by someone other than the host (``provider/served.py``)."""
    return event.get("unverified") is not True


def _tool_calls(session: SessionView, tool: str) -> Iterator[Mapping[str, Any]]:
    """The main session's calls of ``tool``."""
    for event in session.events or ():
        if event.get("type") == "tool_call" and event.get("tool") == tool and event.get("agent") is None \
                and _vouched(event):
            yield event


def _succeeded(session: SessionView, calls: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The calls whose result came back without an error (the host did what was asked)."""
    ok = {e.get("id") for e in session.events or ()
          if e.get("type") == "tool_result" and e.get("isError") is False and e.get("id") is not None and _vouched(e)}
    return [call for call in calls if call.get("id") in ok]


def _input(event: Mapping[str, Any]) -> Mapping[str, Any]:
    if event.get("type") == "command":
        return {"arguments": event.get("arguments")} if event.get("arguments") else {}
    value = event.get("input")
    return value if isinstance(value, Mapping) else {}


def _strings(value: object) -> Iterator[str]:
    """Every string in a tool call's input, at any depth."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def same_part(used: object, named: str) -> bool:
    """A skill or agent name a session used is the one a check names: equal, or equal but for a
    plugin namespace one side lacks (``review:lint`` and ``lint``, never ``a:lint`` and ``b:lint``):
    a plugin's part loads as ``plugin:name`` where the host namespaces plugins and as ``name``
    elsewhere (``suite/plugins.py``), and a check may name it either way."""
    if not isinstance(used, str):
        return False
    if used == named:
        return True
    used_plugin, _, used_name = used.rpartition(":")
    named_plugin, _, named_name = named.rpartition(":")
    return used_name == named_name and not (used_plugin and named_plugin)


def skill_matches(check: SkillUsedCheck, session: SessionView) -> list[Mapping[str, Any]]:
    """The skill's successful loads through the skill tool and, where the host runs a skill as
    ``/name`` (no skill tool called: its SKILL.md is the expansion), the prompt's ``command`` event
    of that name, first in the transcript: each use once, in transcript order."""
    loads = _succeeded(session, [e for e in _tool_calls(session, "skill") if same_part(_input(e).get("name"), check.skill)])
    run_as_command = _commands(session, check.skill) if session.skills_run_as_commands else []
    return run_as_command + loads


def agent_matches(check: AgentUsedCheck, session: SessionView) -> list[Mapping[str, Any]]:
    names = {check.agent, session.agent_names.get(check.agent, check.agent)}
    return _succeeded(session, [e for e in _tool_calls(session, "task")
                                if any(same_part(_input(e).get("agent"), name) for name in names)])


def tool_matches(check: ToolUsedCheck, session: SessionView) -> list[Mapping[str, Any]]:
    if check.inputMatches is None:
        return list(_tool_calls(session, check.tool))
    pattern = re.compile(check.inputMatches)
    return [e for e in _tool_calls(session, check.tool) if any(pattern.search(s) for s in _strings(_input(e)))]


def command_matches(check: CommandUsedCheck, session: SessionView) -> list[Mapping[str, Any]]:
    """The main session's expansions of the command (a leading ``/`` in the check's name is the
    prompt's spelling of the same command; a plugin's command is ``plugin:name`` or ``name``)."""
    return _commands(session, check.command.removeprefix("/"))


def _commands(session: SessionView, name: str) -> list[Mapping[str, Any]]:
    """The main session's vouched ``command`` events of the command or skill ``name``."""
    return [e for e in session.events or () if e.get("type") == "command" and same_part(e.get("name"), name)
            and e.get("agent") is None and _vouched(e)]


def evidence(events: list[Mapping[str, Any]]) -> str:
    """One line per matched event (``#seq turn N: tool input``), capped like command output.  No
    times: two runs of the same session give the same evidence (the view links to the event)."""
    lines = []
    for event in events:
        shown = ", ".join(f"{k}={v!r}" for k, v in _input(event).items())
        if len(shown) > _SHOWN_INPUT:
            shown = shown[:_SHOWN_INPUT] + "…"
        what = event.get("tool") if event.get("type") == "tool_call" else f"/{event.get('name')}"
        lines.append(f"#{event.get('seq')} turn {event.get('turn')}: {what} {shown}")
    return tail("\n".join(lines))


def counted(index: int, check: TrajectoryCheck, counting: tuple[Literal["skill", "agent", "tool", "command"], str],
            ctx: CheckContext, matches: list[Mapping[str, Any]]) -> CheckResult:
    """The verdict of a count against ``min``/``max``, shared by the three check types;
    ``counting`` is what is counted (kind and name), as the result's ``count`` records it."""
    session = ctx.session
    kind, name = counting
    label = f"{check.type} {name!r}" if kind != "tool" else f"{check.type} {name}"
    if isinstance(check, ToolUsedCheck) and check.inputMatches:
        label += f" matching {check.inputMatches!r}"
    if session.had_session and session.events is None:
        return CheckResult(index=index, type=check.type, passed=False, error=True,
                           message=f"{label}: the trial has no transcript to count on")
    count, least, most = len(matches), check.least, check.max
    wanted = _wanted(least, most)
    found = f"{count} time{'s' if count != 1 else ''}" + ("" if session.had_session else " (no host session)")
    passed = count >= least and (most is None or count <= most)
    certain = (passed and most is None) or (most is not None and count > most)
    if session.truncated and not certain:
        return CheckResult(index=index, type=check.type, passed=False, error=True,
                           message=f"{label}: {found} in a transcript cut by the stream cap; wanted {wanted}, "
                                   "which the kept part cannot decide",
                           output=evidence(matches) or None, events=_seqs(matches))
    return CheckResult(index=index, type=check.type, passed=passed,
                       message=f"{label}: {found}; wanted {wanted}",
                       output=evidence(matches) or None, events=_seqs(matches),
                       count=CountRecord(kind=kind, name=name, uses=count, min=least, max=most))


def _wanted(least: int, most: int | None) -> str:
    if most == 0:
        return "none"
    if most == least:
        return f"exactly {least}"
    return f"at least {least}" + (f" and at most {most}" if most is not None else "")


def _seqs(matches: list[Mapping[str, Any]]) -> list[int]:
    return [e["seq"] for e in matches[:MATCHED_EVENTS_CAP] if isinstance(e.get("seq"), int)]


def run_skill(index: int, check: SkillUsedCheck, ctx: CheckContext) -> CheckResult:
    return counted(index, check, ("skill", check.skill), ctx, skill_matches(check, ctx.session))


def run_agent(index: int, check: AgentUsedCheck, ctx: CheckContext) -> CheckResult:
    return counted(index, check, ("agent", check.agent), ctx, agent_matches(check, ctx.session))


def run_tool(index: int, check: ToolUsedCheck, ctx: CheckContext) -> CheckResult:
    return counted(index, check, ("tool", check.tool), ctx, tool_matches(check, ctx.session))


def run_command(index: int, check: CommandUsedCheck, ctx: CheckContext) -> CheckResult:
    return counted(index, check, ("command", check.command.removeprefix("/")), ctx, command_matches(check, ctx.session))


SKILL: CheckKind[SkillUsedCheck] = CheckKind(SkillUsedCheck, run_skill, rules)
AGENT: CheckKind[AgentUsedCheck] = CheckKind(AgentUsedCheck, run_agent, rules)
TOOL: CheckKind[ToolUsedCheck] = CheckKind(ToolUsedCheck, run_tool, rules)
COMMAND: CheckKind[CommandUsedCheck] = CheckKind(CommandUsedCheck, run_command, rules)
