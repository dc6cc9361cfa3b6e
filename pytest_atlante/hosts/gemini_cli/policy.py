"""The containment policy (``hosts/policy.py``) rendered for Gemini CLI's policy engine.

Gemini CLI reads TOML policy files from ``~/.gemini/policies/`` (the user tier; workspace policies
are ignored, host-facts-gemini §13).  What the rendering relies on, measured on 0.61.0:
- a global ``deny`` of a tool removes it from the request's ``tools``: the web tools are not
  offered at all, and a call to one anyway is ``tool_not_registered``;
- a ``commandPrefix`` rule is checked against every sub-command the CLI's shell parser finds
  (chains, pipes, subshells, ``$(…)``, ``bash -c '…'``), but it matches the literal prefix only:
  ``/bin/rm -r x`` and ``rm  -r x`` (two spaces) slipped past it.  So each denied command also
  gets a ``commandRegex`` rule: the engine tests ``"command":"<regex>`` against the JSON of each
  sub-command's arguments, and the regex allows a directory before the command word and any run
  of whitespace between the words;
- the engine refuses a regex with a quantified group (its guard against catastrophic
  backtracking, ``isSafeRegExp``), so the regex is written with classes and lookarounds only;
- without ``allowRedirection`` an allowed command with ``>`` needs a confirmation a headless run
  cannot give; without the catch-all allow, headless mode offers no mutating tools at all.
"""

from __future__ import annotations

import json
import re

from pytest_atlante.hosts.policy import POLICY, ContainmentPolicy

#: Gemini CLI's names for the policy's web tools.
WEB_TOOLS = {"web_fetch": "web_fetch", "web_search": "google_web_search"}
SHELL_TOOL = "run_shell_command"
DENY_MESSAGE = "denied by the eval's containment policy (destructive command)"
# Priorities: denials above the catch-all allow (the engine takes the highest matching rule).
DENY_PRIORITY = 900
ALLOW_PRIORITY = 100

# A denied command word starts a sub-command or follows a directory ("/bin/rm"): the character
# before it is the JSON string's opening quote or a slash.  It ends at a space, a shell operator,
# a quote or the end of the JSON string.
_BEFORE = r'[^\s"]*(?<=["/])'
_AFTER = r"""(?![^\s"\\;&|)'`])"""
# Between the words: whitespace, which the JSON the regex reads spells as itself or as ``\t``.  A
# class, not ``(?:\s|\\t)+``: the guard refuses quantified groups.  (It also lets a name ending
# in "t" through as a separator, as in "gitt push": a false denial of no real command.)
_BETWEEN = r"[\s\\t]+"


def command_regex(command: str) -> str:
    """The regex for one denied command prefix (``rm -rf`` → ``…rm\\s+-rf…``)."""
    words = [re.escape(word) for word in command.split()]
    return _BEFORE + _BETWEEN.join(words) + _AFTER


def toml_string(value: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, but not JSON's ``\\uD83D`` surrogate pairs
    (so the characters stay as they are) and DEL, which TOML wants escaped."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml_list(values: list[str]) -> str:
    return "[" + ", ".join(toml_string(v) for v in values) + "]"


def gemini_policy_toml(policy: ContainmentPolicy = POLICY) -> str:
    """The policy file a trial's Gemini CLI loads from ``<home>/.gemini/policies/``."""
    rules = [
        "# Written by pytest-atlante for one trial: the eval's containment policy (docs/hosts.md).",
        "",
        "[[rule]]",
        f"toolName = {_toml_list([WEB_TOOLS[tool] for tool in policy.denied_tools])}",
        'decision = "deny"',
        f"priority = {DENY_PRIORITY}",
        "",
        "[[rule]]",
        f"toolName = {toml_string(SHELL_TOOL)}",
        f"commandPrefix = {_toml_list(list(policy.denied_commands))}",
        'decision = "deny"',
        f"priority = {DENY_PRIORITY}",
        f"denyMessage = {toml_string(DENY_MESSAGE)}",
    ]
    for command in policy.denied_commands:
        rules += [
            "",
            "[[rule]]",
            f"toolName = {toml_string(SHELL_TOOL)}",
            f"commandRegex = {toml_string(command_regex(command))}",
            'decision = "deny"',
            f"priority = {DENY_PRIORITY}",
            f"denyMessage = {toml_string(DENY_MESSAGE)}",
        ]
    rules += [
        "",
        "[[rule]]",
        'toolName = "*"',
        'decision = "allow"',
        f"priority = {ALLOW_PRIORITY}",
        "allowRedirection = true",
        "",
    ]
    return "\n".join(rules)


def gemini_denials(toml_text: str) -> tuple[frozenset[str], frozenset[str]]:
    """(denied web tools, denied command prefixes) a rendering expresses, host-neutral."""
    import tomllib

    document = tomllib.loads(toml_text)
    web_by_name = {name: neutral for neutral, name in WEB_TOOLS.items()}
    tools: set[str] = set()
    commands: set[str] = set()
    for rule in document.get("rule", []):
        if rule.get("decision") != "deny":
            continue
        names = rule.get("toolName")
        names = names if isinstance(names, list) else [names]
        tools |= {web_by_name[name] for name in names if name in web_by_name}
        prefixes = rule.get("commandPrefix")
        if SHELL_TOOL in names and isinstance(prefixes, list):
            commands |= {str(p) for p in prefixes}
    return frozenset(tools), frozenset(commands)
