"""Codex's tool names and how a shell command reads as a host-neutral action: read by the
transcript (``codex_rollout``), and handed to the scripted model's Responses dialect
(``provider/wire/openai_responses``) as ``CODEX_TOOLS`` through ``CodexHost.shell_tools``."""

from __future__ import annotations

import shlex
from pathlib import Path

from pytest_atlante.hosts.base import ShellTools

#: Codex's tool names (host-facts-codex §3: ``-m gpt-5.5``, a catalog model).
SHELL_TOOL = "exec_command"
PATCH_TOOL = "apply_patch"
#: Where Codex loads a project's skills from (host-facts-codex §6): ``atlante build`` puts a
#: harness's skills in the first, and leaves one kept in the second where it is.
SKILLS_DIRS = (".codex/skills", ".agents/skills")


def skill_file(sandbox_root: Path, name: str) -> Path:
    """The SKILL.md of skill ``name`` in the sandbox: in the first of Codex's skill folders that
    has it (the first one when none does, so the read fails as Codex's own would)."""
    found = (sandbox_root / folder / name / "SKILL.md" for folder in SKILLS_DIRS)
    return next((path for path in found if path.is_file()), sandbox_root / SKILLS_DIRS[0] / name / "SKILL.md")


def skill_read(command: str) -> str | None:
    """The skill a plain read of ``…/skills/<name>/SKILL.md`` loads (``cat``, ``sed -n``, ``head``)."""
    path = read_path(command)
    if path is None:
        return None
    parts = Path(path).parts
    if len(parts) >= 3 and parts[-1] == "SKILL.md" and parts[-3] == "skills":
        return parts[-2]
    return None


def read_path(command: str) -> str | None:
    """The one file a plain read command prints whole: ``cat F``, ``sed -n '1,Np' F``, ``head -n N F``."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if len(words) == 2 and words[0] == "cat":
        return words[1]
    if len(words) == 4 and words[0] == "sed" and words[1] == "-n":
        return words[3]
    if len(words) == 4 and words[0] == "head" and words[1] == "-n":
        return words[3]
    return None


#: What the scripted model plays file actions with on Codex (``Host.shell_tools``).
CODEX_TOOLS = ShellTools(shell=SHELL_TOOL, patch=PATCH_TOOL, skill_file=skill_file, skill_read=skill_read)
