"""Every hint names a flag the command that printed it takes, and every command a hint names runs.

Two sweeps: each `atlante …` / `pytest …` command quoted in the package's messages is parsed by that
command's own parser (``atlante``'s argparse, or pytest's options as ``pytest --help`` lists them);
and the hints the commands print in the situations a newcomer meets first (no project, a broken
configuration, no build, no run yet) name only flags the printing command accepts.  ``atlante
build``'s hint named ``--atlante-project``, which ``build`` rejects.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from pytest_atlante.cli import build_parser, main
from pytest_atlante.run.evalcmd import pytest_args

PACKAGE = REPO_ROOT / "pytest_atlante"
QUOTED = re.compile(r"`((?:atlante|pytest) [^`]*)`")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


@cache
def pytest_flags() -> frozenset[str]:
    """The options pytest takes here (its own, its plugins', ours), as its own --help lists them."""
    shown = subprocess.run([sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"], capture_output=True,
                           text=True, timeout=120, check=True, cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    return frozenset(FLAG.findall(shown.stdout))


def placeholders(words: list[str]) -> list[str]:
    """``NAME``, ``BASE.json``, ``[--json]`` → something a parser takes."""
    return ["x" if re.fullmatch(r"[A-Z][A-Z_.]*(json)?", w) else w for w in words if not w.startswith("[")]


def accepts(command: str) -> str | None:
    """None when the command's own parser takes ``command``; else why not."""
    words = placeholders(shlex.split(command))
    if words[0] == "pytest" or words[1:2] in (["eval"], ["selftest"]):
        args = words[1:] if words[0] == "pytest" else pytest_args(words[2:], selftest=words[1] == "selftest")
        unknown = [w.split("=")[0] for w in args if w.startswith("--") and w.split("=")[0] not in pytest_flags()]
        return f"pytest takes no {unknown}" if unknown else None
    try:
        build_parser().parse_args(words[1:])
    except SystemExit:
        # A command named without its arguments ("as `atlante compare` does"): it must exist.
        if all(re.fullmatch(r"[a-z]+", w) for w in words[1:]):
            with contextlib.redirect_stdout(io.StringIO()), pytest.raises(SystemExit) as shown:
                build_parser().parse_args([*words[1:], "--help"])
            return None if shown.value.code == 0 else "no such command"
        return "atlante's parser refused it"
    return None


def message_strings() -> list[tuple[str, str]]:
    """Every string constant of the package but docstrings, with its file."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                      and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
        found += [(path.relative_to(REPO_ROOT).as_posix(), node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]
    return found


def test_every_command_a_message_quotes_is_one_its_parser_takes() -> None:
    quoted = {(file, command) for file, text in message_strings() for command in QUOTED.findall(text)}
    assert len(quoted) >= 15  # the sweep sees the messages
    refused = {f"{file}: `{command}`: {why}" for file, command in sorted(quoted) if (why := accepts(command))}
    assert not refused, "\n".join(sorted(refused))


def hints(text: str) -> list[str]:
    return [line.split("hint:", 1)[1] for line in text.splitlines() if "hint:" in line]


def flags_refused(command: str, text: str) -> list[str]:
    """The flags the printed hints name that ``command`` does not take, and quoted commands that do not parse."""
    base = command.split()
    problems = []
    for hint in hints(text):
        problems += [f"{c!r} in {hint!r}: {why}" for c in QUOTED.findall(hint) if (why := accepts(c))]
        for flag in FLAG.findall(QUOTED.sub("", hint)):
            if accepts(" ".join([*base, flag] if flag not in ("--help",) else base)):
                problems.append(f"{command} takes no {flag} (hint: {hint.strip()})")
    return problems


@pytest.fixture
def situations(tmp_path: Path) -> dict[str, Path]:
    """Directories as a newcomer meets them: none is a project, a broken configuration, no build."""
    empty = tmp_path / "empty"
    empty.mkdir()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "atlante.jsonc").write_text(json.dumps({"version": "0.3", "eval": {"host": "claude-code"}}))
    unbuilt = tmp_path / "unbuilt"
    assert main(["init", str(unbuilt)]) == 0
    return {"empty": empty, "broken": broken, "unbuilt": unbuilt}


@pytest.mark.parametrize("command", ["atlante build", "atlante view", "atlante runs", "atlante history"])
def test_the_hints_an_atlante_command_prints_name_its_own_flags(situations: dict[str, Path], command: str,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    printed = []
    for where in situations.values():
        monkeypatch.chdir(where)
        main(command.split()[1:])
        captured = capsys.readouterr()
        printed.append(captured.out + captured.err)
    text = "\n".join(printed)
    assert command != "atlante build" or len(hints(text)) >= 2, text
    assert not flags_refused(command, text), flags_refused(command, text)


@pytest.mark.parametrize("command", ["atlante eval", "atlante selftest", "pytest --atlante-eval"])
def test_the_hints_an_eval_run_prints_name_its_own_flags(situations: dict[str, Path], command: str) -> None:
    argv = ([sys.executable, "-m", "pytest_atlante.cli", *command.split()[1:]] if command.startswith("atlante")
            else [sys.executable, "-m", "pytest", "--atlante-eval"])
    printed = []
    for where in situations.values():
        done = subprocess.run([*argv, "-p", "no:cacheprovider"], cwd=where, capture_output=True, text=True, timeout=120,
                              check=False, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
        assert done.returncode == 2, done.stdout + done.stderr
        printed.append(done.stdout + done.stderr)
    text = "\n".join(printed)
    assert len(hints(text)) >= 3, text
    assert not flags_refused(command, text), flags_refused(command, text)


@pytest.mark.parametrize("command", ["init", "schema", "build", "eval", "selftest", "runs", "view", "history",
                                     "compare", "report merge", "report md", "pack report"])
def test_help_lists_what_each_command_accepts(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([*command.split(), "--help"])
    shown = capsys.readouterr().out
    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices[command.split(maxsplit=1)[0]]  # type: ignore[union-attr]
    for word in command.split()[1:]:
        sub = sub._subparsers._group_actions[0].choices[word]  # type: ignore[union-attr]
    for action in sub._actions:
        for option in action.option_strings:
            assert option in shown, (command, option)
    if command in ("eval", "selftest"):
        for flag in ("--host", "--scripted", "--scenario", "--out", "--keep", "--atlante-*"):
            assert flag in shown, (command, flag)


def hint_strings() -> list[tuple[str, str]]:
    """The string pieces of every ``Diagnostic(...)``'s hint in the package (5th argument or ``hint=``)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Diagnostic"):
                continue
            hint = node.args[4] if len(node.args) > 4 else next((k.value for k in node.keywords if k.arg == "hint"), None)
            if hint is not None:
                found += [(path.relative_to(REPO_ROOT).as_posix(), piece.value) for piece in ast.walk(hint)
                          if isinstance(piece, ast.Constant) and isinstance(piece.value, str)]
    return found


def test_every_atlante_option_a_hint_names_exists() -> None:
    """A bare ``--atlante-*`` option in a hint ("or pass --atlante-out") is one pytest takes:
    ``pytest --atlante-eval`` and ``atlante eval`` accept every one of them."""
    named = {(file, flag) for file, text in hint_strings() for flag in re.findall(r"--atlante-[a-z][a-z-]*[a-z]", text)}
    assert len(named) >= 8  # the sweep sees the hints
    unknown = sorted(f"{file}: {flag}" for file, flag in named if flag not in pytest_flags())
    assert not unknown, unknown
