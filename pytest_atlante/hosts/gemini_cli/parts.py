"""How ``atlante build`` writes a harness for Gemini CLI: its tool names and the frontmatter of its
agent, skill and command files (host-facts-gemini §15).

Gemini CLI loads skills from ``.gemini/skills/<name>/SKILL.md`` (the Agent Skills format), sub-agents
from ``.gemini/agents/<name>.md`` (YAML frontmatter ``name, description, kind, tools, model,
max_turns``; project agents only once acknowledged, which the adapter's ``prepare`` does for the
built ones) and the context file named by ``context.fileName`` (the trial's settings name
``AGENTS.md`` and ``GEMINI.md``).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping

from pytest_atlante.hosts.base import (
    AgentSpec,
    PartSpec,
    RenderedFields,
    carried_fields,
    listed_tools,
    model_dropped,
    ordered_fields,
    part_frontmatter,
    source_name,
    tool_dropped,
)
from pytest_atlante.hosts.gemini_cli.policy import toml_string

HOST = "gemini-cli"
# Harness tool names → Gemini CLI's tool names in an agent's ``tools`` list.
TOOL_NAMES = {"read": "read_file", "write": "write_file", "edit": "replace", "bash": "run_shell_command",
              "glob": "glob", "grep": "grep_search", "skill": "activate_skill", "task": "invoke_agent"}
_NEUTRAL_OF = {name: neutral for neutral, name in TOOL_NAMES.items()}
#: Gemini CLI's own tool names (0.61.0's request ``tools`` with every mode, §11).
OWN_TOOLS = frozenset({
    "update_topic", "list_directory", "read_file", "read_many_files", "grep_search", "glob", "replace",
    "write_file", "web_fetch", "google_web_search", "run_shell_command", "list_background_processes",
    "read_background_output", "write_todos", "enter_plan_mode", "exit_plan_mode", "invoke_agent",
    "activate_skill", "save_memory",
})
AGENT_FIELDS = frozenset({"name", "description", "kind", "tools", "model", "max_turns", "temperature",
                          "timeout_mins", "display_name"})
SKILL_FIELDS = frozenset({"name", "description", "license", "compatibility", "metadata", "allowed-tools"})
COMMAND_FIELDS = frozenset({"description"})
_POSITIONAL = re.compile(r"\$[1-9]")


class GeminiParts:
    """The build-facing half of the Gemini CLI adapter."""

    def knows_tool(self, name: str) -> bool:
        return name in OWN_TOOLS or name.startswith("mcp_")

    def model_fits(self, model: str) -> bool:
        return model.startswith(("gemini-", "gemma-"))  # Gemini's model ids; aliases are other hosts'

    def frontmatter_tools(self, fields: Mapping[str, object]) -> tuple[tuple[str, ...] | None, list[str]]:
        return listed_tools(fields, _NEUTRAL_OF)

    def agent_frontmatter(self, name: str, agent: AgentSpec) -> RenderedFields:
        fields, dropped = carried_fields(HOST, AGENT_FIELDS, agent.native,
                                         frozenset({"name", "description", "model", "tools", "permission"}))
        own = agent.native is not None and agent.native.host == HOST
        fields.setdefault("name", name)
        if agent.description is not None:
            fields.setdefault("description", agent.description)
        fields.setdefault("kind", "local")
        if agent.tools is not None and not (own and "tools" in fields):
            kept = [TOOL_NAMES.get(t, t) for t in agent.tools if t in TOOL_NAMES or self.knows_tool(t)]
            fields["tools"] = list(dict.fromkeys(kept))
            dropped += [tool_dropped(HOST, agent.native, name, t) for t in agent.tools
                        if t not in TOOL_NAMES and not self.knows_tool(t)]
        if agent.model is not None:
            fields.setdefault("model", agent.model)
        elif agent.dropped_model is not None and not own:
            dropped.append(model_dropped(HOST, agent.native, name, agent.dropped_model))
        return RenderedFields(ordered_fields(fields, ("name", "description", "kind", "tools", "model")), tuple(dropped))

    def skill_frontmatter(self, name: str, skill: PartSpec) -> RenderedFields:
        return part_frontmatter(HOST, SKILL_FIELDS, name, skill, command=False)

    def command_frontmatter(self, name: str, command: PartSpec) -> RenderedFields:
        rendered = part_frontmatter(HOST, COMMAND_FIELDS, name, command, command=True)
        fields, dropped = dict(rendered.fields), list(rendered.dropped)
        if "model" in fields:  # a Gemini command has no model of its own
            dropped.append(f"{source_name(command.native, name)}: model {fields.pop('model')!r} dropped for "
                           f"{HOST} (its commands have no model field)")
        return RenderedFields(fields, tuple(dropped))

    #: Gemini CLI's commands are TOML files (``.gemini/commands/**/*.toml``, host-facts-gemini §15):
    #: the build reads a harness command in this format with ``read_command``.
    command_suffix = ".toml"

    def read_command(self, text: str) -> tuple[dict[str, object], str, list[str]]:
        """A TOML command read as what it is: (its fields as frontmatter, its prompt as a Markdown
        command's body — ``{{args}}`` as ``$ARGUMENTS`` —, what another host would not run of it).
        Raises ``ValueError`` naming what is wrong when the text is no Gemini CLI command."""
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"is not TOML ({exc})") from None
        prompt = document.get("prompt")
        if not isinstance(prompt, str):
            raise ValueError("is a TOML file with no 'prompt' string: no Gemini CLI command")
        fields: dict[str, object] = {}
        if isinstance(document.get("description"), str):
            fields["description"] = document["description"]
        elsewhere = [f"field {key!r} (Gemini CLI's commands have description and prompt only)"
                     for key in document if key not in ("description", "prompt")]
        if "!{" in prompt:
            elsewhere.append("its shell injections !{…} are Gemini CLI's and run nowhere else")
        if "@{" in prompt:
            elsewhere.append("its file injections @{…} are Gemini CLI's and are read nowhere else")
        return fields, prompt.lstrip("\n").replace("{{args}}", "$ARGUMENTS"), elsewhere

    def command_document(self, name: str, fields: Mapping[str, object], body: str) -> tuple[str, str, list[str]]:
        """A command as Gemini CLI loads it: ``.gemini/commands/<name>.toml`` with ``description``
        and ``prompt`` (host-facts-gemini §15); Claude Code's ``$ARGUMENTS`` is ``{{args}}`` there.
        Returns the file suffix, the text and a note per part Gemini has no place for."""
        notes = [f"field {key!r} dropped for {HOST} (its commands have description and prompt only)"
                 for key in fields if key not in COMMAND_FIELDS]
        prompt = body.replace("$ARGUMENTS", "{{args}}")
        if _POSITIONAL.search(prompt):
            notes.append(f"positional arguments ($1, $2, …) are not expanded by {HOST}; only {{{{args}}}} is")
        lines = []
        description = fields.get("description")
        if isinstance(description, str):
            lines.append(f"description = {toml_string(description)}")
        lines.append(f"prompt = {toml_string(prompt)}")
        return ".toml", "\n".join(lines) + "\n", notes
