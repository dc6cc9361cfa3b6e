"""OS-level isolation of a trial's host session and command checks with bubblewrap (docs/design.md §8).

Containment has independent layers: the reference's tool-level policy (identical for every compared
variant, always on) and, where it works, this one.  Under ``namespace`` isolation every command of a
trial after its setup runs as ``bwrap <mounts> -- argv`` and sees:

- the root file system read-only (``--ro-bind / /``), a minimal ``/dev``;
- the sandbox (at its own path), the trial HOME and the host's temp dir writable;
- a private, empty ``/tmp``, and the same over ``$TMPDIR`` and the invoking user's HOME: other
  trials, the baseline repository beside the sandbox and the user's files (logins included) are
  hidden; so are the project's ``.atlante`` (build tree, reports) and the report directory;
- the project directory itself read-only, not hidden, even when it lies in HOME (put back by itself,
  ``Confinement.shown``): a project's virtualenv and tools usually live in it and checks run them
  (``python -m pytest`` from ``.venv/bin`` on PATH);
- whatever the command needs put back read-only where a hidden directory would cover it, each by
  itself and never its parent (``~/.local/bin`` does not bring back ``~/.local/share/opencode``,
  ``~/.claude/local`` not ``~/.claude/projects``): every absolute path its environment names (PATH
  entries, CA bundles, …) and its executable, real path included; for every symlink in such a PATH
  directory (``~/.local/bin/claude``, ``~/.npm-global/bin/claude``, nvm's ``bin/npm``), its target,
  as the npm package holding it (the nearest directory with a ``package.json``) or else the file
  itself; and for a virtualenv's ``bin`` (``pyvenv.cfg`` beside it) or a ``node_modules/.bin``,
  that virtualenv or ``node_modules`` (what their programs import; they hold no login), with the
  directories its ``.pth`` files add to ``sys.path`` (an editable install kept elsewhere, a venv
  layered on another's packages: each by itself, as the interpreter would import from it); and the
  interpreter a script's ``#!`` line names (a virtualenv's Python whose installation is under HOME);
- its own PID namespace and ``/proc`` (the run's processes and environments are invisible), and
  ``--die-with-parent``: when the runner dies, even by SIGKILL, every process of the trial dies;
- the network shared: the model API and the scripted server on 127.0.0.1 keep working; or, with
  ``eval.network: "model-only"``, a network namespace of its own (only ``lo``) whose one way out
  is the metering proxy's unix socket, relayed to the host's model address by a relay the agent
  can neither signal nor trace (docs/design.md §11), and nothing of the machine's services: an
  empty root with only the program trees and what the command needs put back, and the machine's
  listening pathname sockets still in sight covered (``sandbox/machine.py``).

When the runner is root, capabilities are cut to file ownership and permission ones, so the agent
cannot remount what is read-only.  ``--new-session`` is not used: commands run without a
controlling terminal (``process.run`` starts a new session), so there is no terminal to inject
into, and the interrupt a host needs (Claude Code's SIGINT) must reach it through the group.

Setup commands stay outside: the reference runs them with the full environment before the
baseline.  Availability is probed once per run on the controller (``probe``); workers get the
outcome.  ``auto`` falls back to tool-level containment with a warning; ``namespace`` refuses to run.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pytest_atlante.diagnostics import Diagnostic
from pytest_atlante.fsutil import UnreadableFile, read_capped
from pytest_atlante.records import Record
from pytest_atlante.sandbox import machine
from pytest_atlante.sandbox.reaper import ensure_child_subreaper, reap_session

__all__ = ["Confinement", "IsolationRecord", "IsolationSetting", "ModelRelay", "NetworkSetting", "decide", "probe"]

IsolationSetting = Literal["auto", "namespace", "off"]
#: ``shared``: the trial uses the machine's network; ``model-only``: a network namespace of its own
#: whose only way out is the metering proxy (docs/design.md §11).
NetworkSetting = Literal["shared", "model-only"]
#: Where the metering proxy's unix socket appears inside a ``model-only`` trial (its private /tmp).
RELAY_SOCKET = Path("/tmp/atlante-model.sock")
BWRAP = "bwrap"
_PROBE_TIMEOUT_S = 20.0
_OWN_DIRECTORIES = frozenset({"HOME", "TMPDIR"})
# What root keeps inside the sandbox: owning and permission bits of its own files, signals to its
# own processes, switching user.  Not CAP_SYS_ADMIN (mounts), CAP_NET_ADMIN, CAP_SYS_MODULE, …
_ROOT_CAPABILITIES = (
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
    "CAP_SETGID", "CAP_SETUID",
)  # fmt: skip


class IsolationRecord(Record):
    """``isolation`` in the report: how this run's trials were contained."""

    mode: Literal["namespace", "none"]
    reason: str | None = None  # why not "namespace"
    network: NetworkSetting = "shared"


def _base_arguments(*, share_net: bool = True) -> list[str]:
    args = [BWRAP, "--unshare-all", *(["--share-net"] if share_net else []), "--die-with-parent",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]  # fmt: skip
    if os.geteuid() == 0:
        args += ["--cap-drop", "ALL"]
        for capability in _ROOT_CAPABILITIES:
            args += ["--cap-add", capability]
    return args


def probe() -> str | None:
    """None when bubblewrap can build the sandbox here; otherwise why not (one line)."""
    executable = shutil.which(BWRAP)
    if executable is None:
        return "bubblewrap (bwrap) is not installed"
    argv = [*_base_arguments(), "--tmpfs", "/tmp", "--", "true"]
    # bubblewrap's outer process exits before the sandbox's init does; as a child subreaper (what
    # every trial makes this process anyway) we get that init, and reap it by the probe's session
    # instead of leaving a zombie here or handing it to whichever ancestor is a subreaper.
    ensure_child_subreaper()
    try:
        with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, start_new_session=True) as proc:
            try:
                _, stderr = proc.communicate(timeout=_PROBE_TIMEOUT_S)
            except subprocess.TimeoutExpired as exc:
                proc.kill()
                proc.communicate()
                return f"bubblewrap could not run: {exc}"
            finally:
                reap_session(proc.pid)
    except OSError as exc:
        return f"bubblewrap could not run: {exc}"
    if proc.returncode != 0:
        detail = (stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return f"bubblewrap cannot create namespaces here (user namespaces disabled?): {detail}"
    return None


def decide(setting: IsolationSetting, reason_unavailable: str | None,
           network: NetworkSetting = "shared") -> tuple[IsolationRecord, Diagnostic | None]:
    """The run's isolation from the setting and the probe's outcome; a Diagnostic when the run must
    not start (``namespace`` required but unavailable, or ``model-only`` without namespace isolation
    → exit 3 before any trial)."""
    record, problem = _decide_mode(setting, reason_unavailable)
    if network == "shared" or problem is not None:
        return record, problem
    if record.mode != "namespace":
        return record, Diagnostic(
            "", "", "eval-network-unavailable",
            f"eval.network \"model-only\" needs namespace isolation, which this run does not have: {record.reason}",
            "install bubblewrap and enable unprivileged user namespaces, set eval.isolation to \"namespace\" "
            "or \"auto\", or set eval.network (--atlante-network) to \"shared\"",
        )
    return record.model_copy(update={"network": network}), None


def _decide_mode(setting: IsolationSetting, reason_unavailable: str | None) -> tuple[IsolationRecord, Diagnostic | None]:
    if setting == "off":
        return IsolationRecord(mode="none", reason="isolation is off (eval.isolation or --atlante-isolation)"), None
    if reason_unavailable is None:
        return IsolationRecord(mode="namespace"), None
    record = IsolationRecord(mode="none", reason=reason_unavailable)
    if setting == "auto":
        return record, None
    return record, Diagnostic(
        "", "", "eval-isolation-unavailable",
        f"namespace isolation was required but is unavailable: {reason_unavailable}",
        "install bubblewrap (apt-get install bubblewrap) and enable unprivileged user namespaces, "
        "or set eval.isolation to \"auto\" or \"off\"",
    )


def warning_text(setting: IsolationSetting, record: IsolationRecord) -> str | None:
    """The terminal warning for an ``auto`` run that fell back to tool-level containment."""
    if setting != "auto" or record.mode == "namespace":
        return None
    return (f"atlante: WARNING: trials run without OS-level isolation ({record.reason}); "
            "only the tool-level policy contains the agent")


@dataclass(frozen=True)
class Confinement:
    """The mounts of one trial's sandbox; ``wrapper(env)`` is ``process.run``'s ``wrap``.

    ``writable`` are bound read-write at their own paths; ``hidden`` directories are covered by an
    empty tmpfs (those that do not exist are skipped: the read-only root keeps them from being
    created); nothing under ``trial_dir`` is ever put back other than the writable paths.
    """

    writable: tuple[Path, ...]
    hidden: tuple[Path, ...]
    trial_dir: Path
    cwd: Path
    network: NetworkSetting = "shared"
    model_relay: ModelRelay | None = None  # model-only host sessions: the way to the metering proxy
    # Kept visible, read-only, even inside a hidden directory (the project, when it lies in HOME
    # or under /tmp): by itself, as every put-back is.
    shown: tuple[Path, ...] = ()

    def may_write(self, root: Path, *, except_under: Iterable[Path] = ()) -> bool:
        """Whether a command run under this confinement can change anything under ``root`` that is
        not under one of ``except_under``.

        The proof is the mount table :meth:`arguments` builds: ``/`` is bound read-only (bubblewrap
        remounts every submount read-only too, and the capabilities that could remount are gone),
        a hidden directory is a private tmpfs that vanishes with the command, a put-back path is
        read-only, so the only places a trial's processes can write outside memory are the
        ``writable`` binds.  ``root`` can be written when it lies in one of them, or one of them
        lies in it outside ``except_under``.  What the trial's processes ask a process outside the
        namespace to do (a service on a socket or the shared network) is not covered.
        """
        real_root = _real(root)
        excepted = [_real(p) for p in except_under]
        for path in self.writable:
            bound = _real(path)
            if real_root.is_relative_to(bound):
                return True
            if bound.is_relative_to(real_root) and not any(bound.is_relative_to(e) for e in excepted):
                return True
        return False

    def wrapper(self, env: Mapping[str, str]) -> Callable[[list[str]], list[str]]:
        return functools.partial(self.arguments, env=env)

    def arguments(self, argv: list[str], env: Mapping[str, str]) -> list[str]:
        relay = self.model_relay
        named = _needed_paths(argv, env) | (_needed_paths([sys.executable], env) if relay is not None else set())
        needed = {p for p in named if not p.is_relative_to(self.trial_dir)}
        # model-only: an empty root with the program trees put back (sandbox/machine.py says why).
        hiding = (*self.hidden, *machine.hidden_tops()) if self.network == "model-only" else self.hidden
        # A hidden directory that is itself needed (PATH=/tmp) stays visible, read-only.
        hidden = sorted({p for p in hiding if p.is_dir() and p != Path("/") and p not in needed})
        covered = [path for path in needed if any(path.is_relative_to(root) and path != root for root in hidden)]
        wanted = {put for path in covered for put in _put_backs(path, hidden)}
        wanted |= {path for path in map(_real, self.shown) if path.is_dir()
                   and any(path.is_relative_to(root) and path != root for root in hidden)}
        # Each by itself; one inside another put back already needs no mount of its own.
        exposed = {path for path in wanted
                   if not any(path != other and path.is_relative_to(other) for other in wanted)}
        # Parents before children: a tmpfs mounted over a directory would cover mounts made inside
        # it earlier, and a put-back parent would uncover a hidden child mounted before it.
        mounts = sorted([(p, "--tmpfs") for p in hidden] + [(p, "--ro-bind-try") for p in exposed],
                        key=lambda mount: (len(mount[0].parts), str(mount[0])))
        args = _base_arguments(share_net=self.network == "shared")
        for path, kind in mounts:
            args += [kind, str(path)] if kind == "--tmpfs" else [kind, str(path), str(path)]
        writable_mounts = [(path, "--bind") for path in self.writable]
        for path in self.writable:
            args += ["--bind", str(path), str(path)]
        if self.network == "model-only":
            # What is still visible of the machine's listening sockets (the project's own, one in a
            # program tree) is covered: a socket is connectable whatever the network namespace.
            for path in machine.socket_covers(functools.partial(_visible, mounts=[*mounts, *writable_mounts])):
                args += ["--ro-bind", os.devnull, str(path)]
        if relay is not None:
            # A unix socket in a read-only bind can still be connected to (the read-only flag
            # guards file contents); the agent cannot replace it.  The relay is the namespace's
            # init (``--as-pid-1``): the agent's signals do not reach it (sandbox/relay.py).
            args += ["--ro-bind", str(relay.socket), str(RELAY_SOCKET), "--as-pid-1"]
            argv = relay.command(argv)
        return [*args, "--chdir", str(self.cwd), "--", *argv]


@dataclass(frozen=True)
class ModelRelay:
    """Inside a ``model-only`` trial: ``127.0.0.1:port`` (the address the host was given) relayed to
    the metering proxy's unix socket, by ``sandbox/relay.py`` run before the host starts."""

    socket: Path  # the proxy's unix socket outside the namespace
    port: int

    def command(self, argv: list[str]) -> list[str]:
        from pytest_atlante.sandbox.relay import relay_command

        return relay_command(RELAY_SOCKET, self.port, argv)


def hidden_roots(*, user_home: Path, project_root: Path, report_dir: Path | None) -> tuple[Path, ...]:
    """What a trial must not see: temp dirs, the user's HOME, the project's ``.atlante``, the report."""
    roots = [Path("/tmp"), Path(os.environ.get("TMPDIR") or "/tmp"), user_home, project_root / ".atlante"]
    if report_dir is not None:
        roots.append(report_dir)
    return tuple(_real(p) for p in roots)


def _visible(path: Path, mounts: list[tuple[Path, str]]) -> bool:
    """Whether ``path`` is seen inside, given the mounts in the order bubblewrap makes them over the
    read-only root: the last one holding it decides (an empty tmpfs hides, a bind shows)."""
    seen = True
    for root, kind in mounts:
        if path.is_relative_to(root):
            seen = kind != "--tmpfs"
    return seen


def _needed_paths(argv: list[str], env: Mapping[str, str]) -> set[Path]:
    """Absolute existing paths the command names: its environment's values and its executable."""
    found: set[Path] = set()
    candidates: list[str] = []
    for name, value in env.items():
        # HOME and TMPDIR are the command's own (the trial HOME, or a private tmpfs): never put a
        # directory back because of them.
        if name not in _OWN_DIRECTORIES:
            candidates.extend(value.split(os.pathsep))
    program = shutil.which(argv[0], path=env.get("PATH", os.defpath)) if argv else None
    if program is not None:
        candidates.append(program)
        # A script's interpreter (``#!/path/to/.venv/bin/python`` whose Python lives under HOME)
        interpreter = _interpreter(Path(program), env)
        if interpreter is not None:
            candidates.append(interpreter)
    for candidate in candidates:
        if not candidate.startswith("/") or "\0" in candidate:
            continue
        path = Path(candidate)
        for form in (Path(os.path.normpath(path)), _real(path)):
            if form.exists():
                found.add(form)
    return found


def _interpreter(program: Path, env: Mapping[str, str]) -> str | None:
    """The interpreter a ``#!`` line names (through ``/usr/bin/env``, looked up on the command's PATH)."""
    try:
        with open(program, "rb") as handle:
            first = handle.read(256).split(b"\n", 1)[0]
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    if words and os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
        return shutil.which(words[0], path=env.get("PATH", os.defpath)) if words else None
    return words[0] if words else None


def _put_backs(path: Path, hidden: Iterable[Path]) -> set[Path]:
    """What makes ``path`` (a needed path under a hidden directory) work, and nothing beside it."""
    if not path.is_dir():
        tops = [root for root in hidden if path.is_relative_to(root)]
        return {_package_of(path, tops) if tops else path}
    found = {path}
    if (path.parent / "pyvenv.cfg").is_file():
        found.add(path.parent)  # a virtualenv: what the programs in it import
        found |= _pth_directories(path.parent, hidden)
    elif path.name == ".bin" and path.parent.name == "node_modules":
        found.add(path.parent)
    pyenv = _pyenv_root(path)
    if pyenv is not None:
        found.add(pyenv)  # its shims exec <root>/libexec/pyenv, which runs <root>/versions/…
    try:
        entries = list(os.scandir(path))
    except OSError:
        return found
    for entry in entries:
        if not entry.is_symlink():
            continue
        target = _real(Path(entry.path))
        tops = [root for root in hidden if target.is_relative_to(root)]
        if tops and target.exists():  # a target nothing hides needs no put-back
            found.add(_package_of(target, tops))
    return found


#: A virtualenv's ``.pth`` files read for the directories they add (bounded: they are one-line
#: path lists, and a put-back must not cost a trial more than a glance).
_PTH_FILES, _PTH_BYTES, _PTH_LINES = 64, 64 * 1024, 256


def _pth_directories(venv: Path, hidden: Iterable[Path]) -> set[Path]:
    """The directories the ``.pth`` files of ``venv``'s site-packages add to ``sys.path`` that a
    hidden directory covers, read as ``site`` reads them: one path per line, relative to the site
    directory; comments and ``import`` lines add none."""
    roots = list(hidden)
    found: set[Path] = set()
    for site_dir in sorted(venv.glob("lib*/python*/site-packages"))[:4]:
        for pth in sorted(site_dir.glob("*.pth"))[:_PTH_FILES]:
            try:
                text = read_capped(pth, _PTH_BYTES).decode("utf-8", "replace")
            except UnreadableFile:
                continue
            for line in text.splitlines()[:_PTH_LINES]:
                entry = line.strip()
                if not entry or entry.startswith(("#", "import ", "import\t")):
                    continue
                target = Path(os.path.normpath(site_dir / entry))  # an absolute entry stays as it is
                if any(target.is_relative_to(root) for root in roots) and target.is_dir():
                    found.add(target)
    return found


def _pyenv_root(path: Path) -> Path | None:
    """The pyenv installation a ``shims`` directory on PATH belongs to (``~/.pyenv/shims``, a plugin's
    ``plugins/NAME/shims``): the root holding ``libexec/pyenv``; it holds interpreters, never a login."""
    if path.name != "shims":
        return None
    for root in (path.parent, *path.parents[1:3]):
        if (root / "libexec" / "pyenv").is_file():
            return root
    return None


def _package_of(target: Path, tops: list[Path]) -> Path:
    """What an executable ``target`` under the hidden ``tops`` needs beside itself: the npm package
    holding it (the nearest directory with a ``package.json``); else, for ``PREFIX/bin/program``
    at least two levels below the innermost top (a uv or pyenv Python, an nvm Node), its
    installation ``PREFIX`` with the libraries in it; else the file alone.  ``~/.local`` is one
    level below HOME, so a program in ``~/.local/bin`` never brings ``~/.local`` back."""
    innermost = max(tops, key=lambda top: len(top.parts))
    for directory in target.parents:
        if directory == innermost or not directory.is_relative_to(innermost):
            break
        if directory.name != "node_modules" and (directory / "package.json").is_file():
            return directory
    prefix = target.parent.parent
    if target.parent.name == "bin" and len(prefix.relative_to(innermost).parts) >= 2 and (prefix / "lib").is_dir():
        return prefix
    return target


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))
