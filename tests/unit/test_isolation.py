"""Tests for pytest_atlante.sandbox.isolation: the decision, the bubblewrap arguments, and real bubblewrap.

The last tests run real bubblewrap through ``process.run``: CI installs it (scripts/setup) and the
suite requires it, as the integration tests do.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from conftest import bind_unix
from pytest_atlante.sandbox.isolation import (
    RELAY_SOCKET,
    Confinement,
    IsolationRecord,
    ModelRelay,
    decide,
    hidden_roots,
    probe,
    warning_text,
)
from pytest_atlante.sandbox.process import run


def test_decide_follows_the_setting_and_the_probe() -> None:
    assert decide("auto", None) == (IsolationRecord(mode="namespace"), None)
    assert decide("namespace", None) == (IsolationRecord(mode="namespace"), None)
    record, problem = decide("auto", "no bwrap")
    assert record == IsolationRecord(mode="none", reason="no bwrap") and problem is None
    record, problem = decide("namespace", "no bwrap")
    assert record.mode == "none" and problem is not None
    assert problem.code == "eval-isolation-unavailable" and "no bwrap" in problem.message and problem.hint
    record, problem = decide("off", None)
    assert record.mode == "none" and record.reason is not None and "off" in record.reason and problem is None


def test_only_an_unintended_fallback_warns() -> None:
    assert warning_text("auto", decide("auto", None)[0]) is None
    assert warning_text("off", decide("off", None)[0]) is None
    warning = warning_text("auto", decide("auto", "bubblewrap (bwrap) is not installed")[0])
    assert warning is not None and "WARNING" in warning and "not installed" in warning


def test_probe_says_why_bubblewrap_cannot_be_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert probe() == "bubblewrap (bwrap) is not installed"
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    reason = probe()
    assert reason is not None and "setting up uid map: Permission denied" in reason


def _mounts(args: list[str]) -> list[tuple[str, str]]:
    """(option, path) of every tmpfs and bind in a bubblewrap argv, in order."""
    found = []
    for index, arg in enumerate(args):
        if arg == "--":
            break
        if arg in ("--tmpfs", "--ro-bind-try", "--bind"):
            found.append((arg, args[index + 1]))
    return found


def test_hidden_directories_are_covered_and_what_the_command_needs_is_put_back(tmp_path: Path) -> None:
    outer, inner = tmp_path / "tmp", tmp_path / "tmp" / "user-tmp"
    trial = inner / "atlante-eval-x" / "t-1"
    for path in (outer / "ci" / "venv" / "bin", inner / "tools" / "bin", trial / "sandbox", trial / "home"):
        path.mkdir(parents=True)
    program = outer / "ci" / "venv" / "bin" / "agent-cli"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    confinement = Confinement(writable=(trial / "sandbox", trial / "home"),
                              hidden=(inner, outer, tmp_path / "does-not-exist"), trial_dir=trial, cwd=trial / "sandbox")
    env = {"PATH": f"{outer / 'ci' / 'venv' / 'bin'}:{inner / 'tools' / 'bin'}:relative/bin",
           "HOME": str(trial / "home"), "TMPDIR": str(inner)}
    args = confinement.arguments(["agent-cli", "--flag"], env)
    assert args[:2] == ["bwrap", "--unshare-all"] and "--die-with-parent" in args and "--share-net" in args
    assert args[args.index("--") + 1:] == ["agent-cli", "--flag"]
    assert args[args.index("--chdir") + 1] == str(trial / "sandbox")
    # Parents first; each needed path is put back by itself, never its parent (issue 26); HOME and
    # TMPDIR put nothing back; the missing directory is not mounted; writable paths last.
    assert _mounts(args) == [
        ("--tmpfs", str(outer)),
        ("--tmpfs", str(inner)),
        ("--ro-bind-try", str(outer / "ci" / "venv" / "bin")),
        ("--ro-bind-try", str(inner / "tools" / "bin")),
        ("--bind", str(trial / "sandbox")),
        ("--bind", str(trial / "home")),
    ]


def test_a_virtualenv_on_path_brings_back_the_directories_its_pth_files_add(tmp_path: Path) -> None:
    # A venv layered on another's packages (a test venv, an editable install kept elsewhere): the
    # interpreter imports from what its .pth files name, each put back by itself.
    hidden = tmp_path / "tmp"
    venv, elsewhere, beside = hidden / "wheel-venv", hidden / "ci" / "site-packages", hidden / "src" / "mylib"
    site = venv / "lib" / "python3.11" / "site-packages"
    for path in (venv / "bin", site, elsewhere, beside, hidden / "ci" / "secret", tmp_path / "trial" / "sandbox"):
        path.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (site / "deps.pth").write_text(f"# test deps\n{elsewhere}\nimport os; os.environ\n../../../../src/mylib\n/nonexistent\n")
    (site / "other.pth").write_text("/usr/lib\n")  # not hidden: nothing to put back
    trial = tmp_path / "trial"
    confinement = Confinement(writable=(trial / "sandbox",), hidden=(hidden,), trial_dir=trial, cwd=trial / "sandbox")
    args = confinement.arguments(["python3", "-m", "pytest"], {"PATH": f"{venv / 'bin'}:/usr/bin:/bin"})
    assert _mounts(args) == [
        ("--tmpfs", str(hidden)),
        ("--ro-bind-try", str(venv)),
        ("--ro-bind-try", str(elsewhere)),
        ("--ro-bind-try", str(beside)),
        ("--bind", str(trial / "sandbox")),
    ]


def test_a_hidden_directory_the_command_needs_whole_stays_visible(tmp_path: Path) -> None:
    trial = tmp_path / "run" / "t-1"
    (trial / "sandbox").mkdir(parents=True)
    confinement = Confinement(writable=(trial / "sandbox",), hidden=(tmp_path,), trial_dir=trial, cwd=trial / "sandbox")
    args = confinement.arguments(["true"], {"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert _mounts(args) == [("--bind", str(trial / "sandbox"))]


def test_hidden_roots_cover_temp_home_and_the_projects_private_directories(tmp_path: Path) -> None:
    roots = hidden_roots(user_home=tmp_path / "home", project_root=tmp_path / "project", report_dir=tmp_path / "out")
    assert Path("/tmp") in roots and tmp_path / "home" in roots and tmp_path / "out" in roots
    assert tmp_path / "project" / ".atlante" in roots and tmp_path / "project" not in roots


# -- real bubblewrap ------------------------------------------------------------------------


@pytest.fixture
def trial(tmp_path: Path) -> Path:
    path = tmp_path / "atlante-eval-x" / "t-1"
    for name in ("sandbox", "home", "baseline.git"):
        (path / name).mkdir(parents=True)
    return path


def _confined(trial: Path, project: Path, code: str) -> tuple[int | None, str]:
    confinement = Confinement(writable=(trial / "sandbox", trial / "home"),
                              hidden=hidden_roots(user_home=Path.home(), project_root=project, report_dir=None),
                              # as the runner confines a trial: the project stays visible, read-only,
                              # also where it lies under /tmp or HOME (a checkout in a private mktemp dir)
                              trial_dir=trial, cwd=trial / "sandbox", shown=(project,))
    env = {"PATH": os.environ["PATH"], "HOME": str(trial / "home")}
    result = run([sys.executable, "-c", code], cwd=trial / "sandbox", env=env, timeout_s=60, wrap=confinement.wrapper(env))
    return result.returncode, result.stdout + result.stderr


def test_inside_the_sandbox_only_the_sandbox_and_home_are_writable(trial: Path, tmp_path: Path) -> None:
    assert probe() is None, "bubblewrap must work here (scripts/setup installs it)"
    project = Path(__file__).resolve().parents[2]  # read-only inside, not hidden
    code = f"""
import os, pathlib
for target in ("inside.txt", {str(trial / 'home' / 'h.txt')!r}, {str(project / 'escape.txt')!r}, "/etc/escape.txt"):
    try:
        pathlib.Path(target).write_text("x")
        print("wrote", target)
    except OSError as exc:
        print("refused", target, exc.strerror)
print("trial", sorted(os.listdir({str(trial)!r})))
print("pids", len([p for p in os.listdir("/proc") if p.isdigit()]))
print("readable project", pathlib.Path({str(project / 'pyproject.toml')!r}).is_file())
"""
    status, output = _confined(trial, project, code)
    assert status == 0, output
    assert "wrote inside.txt" in output and f"wrote {trial / 'home' / 'h.txt'}" in output
    assert f"refused {project / 'escape.txt'} Read-only file system" in output
    assert "refused /etc/escape.txt Read-only file system" in output
    assert "trial ['home', 'sandbox']" in output  # the baseline beside the sandbox is hidden
    assert "readable project True" in output
    pids = int(output.split("pids ", 1)[1].split()[0])
    assert pids <= 3  # bubblewrap's init, this Python: the runner's processes are invisible
    assert (trial / "sandbox" / "inside.txt").read_text() == "x"
    assert not (project / "escape.txt").exists()


def test_may_write_agrees_with_what_real_bubblewrap_lets_a_trial_write(trial: Path, tmp_path: Path) -> None:
    """The audit leaves out, under namespace isolation, the places ``may_write`` proves unwritable
    (issue 27): real bubblewrap with the trial's mounts must refuse or discard a write to each of
    them, and keep one to a place ``may_write`` calls writable."""
    project = tmp_path / "project"
    (project / ".atlante" / "eval").mkdir(parents=True)
    report = project / ".atlante" / "eval" / "run"
    confinement = Confinement(writable=(trial / "sandbox", trial / "home"),
                              hidden=hidden_roots(user_home=Path.home(), project_root=project, report_dir=report),
                              trial_dir=trial, cwd=trial / "sandbox")
    places = {"project": project, "report": report, "user home": Path.home(),
              "sandbox": trial / "sandbox", "trial home": trial / "home"}
    env = {"PATH": os.environ["PATH"], "HOME": str(trial / "home")}
    targets = {name: root / f"written-by-trial-{index}.txt" for index, (name, root) in enumerate(places.items())}
    code = f"""
import os, pathlib
for target in {[str(t) for t in targets.values()]!r}:
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        pathlib.Path(target).write_text("x")
    except OSError:
        pass
"""
    try:
        result = run([sys.executable, "-c", code], cwd=trial / "sandbox", env=env, timeout_s=60,
                     wrap=confinement.wrapper(env))
        assert result.returncode == 0, result.stdout + result.stderr
        kept = {name for name, target in targets.items() if target.exists()}
        assert kept == {name for name, root in places.items() if confinement.may_write(root)}
        assert kept == {"sandbox", "trial home"}
        # A place holding a writable bind can be written, unless the bind lies in what it skips.
        assert confinement.may_write(trial) and confinement.may_write(tmp_path)
        assert not confinement.may_write(trial, except_under=[trial / "sandbox", trial / "home"])
    finally:
        for target in targets.values():
            target.unlink(missing_ok=True)


# -- model-only network (docs/design.md §11) ------------------------------------------------


def test_model_only_needs_namespace_isolation() -> None:
    record, problem = decide("namespace", None, "model-only")
    assert (record.mode, record.network, problem) == ("namespace", "model-only", None)
    for setting, reason in (("off", None), ("auto", "bwrap missing")):
        record, problem = decide(setting, reason, "model-only")  # type: ignore[arg-type]
        assert record.mode == "none" and problem is not None and problem.code == "eval-network-unavailable"
    assert decide("namespace", None)[0].network == "shared"


def test_model_only_arguments_drop_the_shared_network_and_relay_the_model(trial: Path, tmp_path: Path) -> None:
    socket_path = trial / "model.sock"
    confinement = Confinement(writable=(trial / "sandbox",), hidden=(), trial_dir=trial, cwd=trial / "sandbox",
                              network="model-only", model_relay=ModelRelay(socket_path, 4242))
    argv = confinement.arguments(["/bin/echo", "hi"], {"PATH": "/usr/bin:/bin"})
    assert "--share-net" not in argv and "--unshare-all" in argv
    bind = argv.index(str(socket_path))
    assert argv[bind - 1:bind + 2] == ["--ro-bind", str(socket_path), str(RELAY_SOCKET)]
    command = argv[argv.index("--") + 1:]
    assert command[:4] == [sys.executable, "-I", "-S", "-c"]
    assert command[5:] == [str(RELAY_SOCKET), "4242", "/bin/echo", "hi"]
    shared = Confinement(writable=(trial / "sandbox",), hidden=(), trial_dir=trial, cwd=trial / "sandbox")
    assert "--share-net" in shared.arguments(["/bin/echo"], {"PATH": "/usr/bin"})


def test_the_relay_carries_the_model_address_to_the_proxy_socket_and_nothing_else(trial: Path) -> None:
    """Real bubblewrap: inside, 127.0.0.1:<port> reaches a unix-socket server outside; the machine's
    own loopback listeners and abstract sockets do not answer."""
    import socket
    import threading

    socket_path = trial / "model.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    bind_unix(server, socket_path)  # the trial directory can be too deep for a socket address
    server.listen(4)
    outside = socket.create_server(("127.0.0.1", 0))
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind("\0atlante-isolation-test-" + trial.parent.name)
    abstract.listen(4)

    def answer() -> None:
        client, _ = server.accept()
        client.sendall(b"model says hi:" + client.recv(100))
        client.close()

    threading.Thread(target=answer, daemon=True).start()
    port = outside.getsockname()[1]  # the same port number inside is the relay's, not this listener
    code = f"""
import socket
s = socket.create_connection(("127.0.0.1", {port}), timeout=10); s.sendall(b"ping"); print(s.recv(100).decode())
for family, address in ((socket.AF_INET, ("10.255.255.1", 80)), (socket.AF_UNIX, "\\0atlante-isolation-test-{trial.parent.name}")):
    t = socket.socket(family, socket.SOCK_STREAM); t.settimeout(3)
    try:
        t.connect(address); print("open", address)
    except OSError as exc:
        print("blocked", type(exc).__name__)
"""
    confinement = Confinement(writable=(trial / "sandbox", trial / "home"),
                              hidden=hidden_roots(user_home=Path.home(), project_root=trial, report_dir=None),
                              trial_dir=trial, cwd=trial / "sandbox", network="model-only",
                              model_relay=ModelRelay(socket_path, port))
    env = {"PATH": os.environ["PATH"], "HOME": str(trial / "home")}
    try:
        result = run([sys.executable, "-c", code], cwd=trial / "sandbox", env=env, timeout_s=60,
                     wrap=confinement.wrapper(env))
    finally:
        for end in (server, outside, abstract):
            end.close()
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "model says hi:ping" in output
    assert "open" not in output.replace("model says", "") and output.count("blocked") == 2, output


# -- the planted-logins matrix (issue 26) ----------------------------------------------------

LOGINS = [".local/share/opencode/auth.json", ".claude/projects/-home-me-app/history.jsonl", ".claude/.credentials.json",
          ".config/gh/hosts.yml", ".aws/credentials", ".ssh/id_ed25519", ".netrc", ".docker/config.json"]


def _program(path: Path, says: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho {says}\n")
    path.chmod(0o755)


def _link(link: Path, target: str) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)


def _installs(home: Path) -> dict[str, tuple[Path, str]]:
    """Every PATH layout a real install of the CLIs has: ``{layout: (PATH directory, program)}``."""
    _program(home / ".local/share/claude/versions/2.1.197", "native-ok")          # Claude Code's installer
    _link(home / ".local/bin/claude", str(home / ".local/share/claude/versions/2.1.197"))
    _program(home / ".claude/local/node_modules/@anthropic-ai/claude-code/cli.js", "local-ok")  # `claude migrate-installer`
    (home / ".claude/local/node_modules/@anthropic-ai/claude-code/package.json").write_text("{}")
    _link(home / ".claude/local/node_modules/.bin/claude", "../@anthropic-ai/claude-code/cli.js")
    _program(home / ".claude/local/claude", "wrapper-ok")
    _program(home / ".npm-global/lib/node_modules/opencode-ai/bin/opencode", "npm-global-ok")  # npm -g with a prefix
    (home / ".npm-global/lib/node_modules/opencode-ai/package.json").write_text("{}")
    _link(home / ".npm-global/bin/opencode", "../lib/node_modules/opencode-ai/bin/opencode")
    nvm = home / ".nvm/versions/node/v20.11.1"                                      # nvm
    _program(nvm / "bin/node", "node-ok")
    _program(nvm / "lib/node_modules/@anthropic-ai/claude-code/cli.js", "nvm-ok")
    (nvm / "lib/node_modules/@anthropic-ai/claude-code/package.json").write_text("{}")
    _link(nvm / "bin/claude", "../lib/node_modules/@anthropic-ai/claude-code/cli.js")
    app = home / "code/app/node_modules"                                            # a project's own install
    _program(app / "opencode-ai/bin/opencode", "project-ok")
    (app / "opencode-ai/package.json").write_text("{}")
    _link(app / ".bin/opencode", "../opencode-ai/bin/opencode")
    pyenv = home / ".pyenv"                                                         # pyenv's shims
    _program(pyenv / "versions/3.11.7/bin/python3", "pyenv-ok")
    (pyenv / "libexec").mkdir(parents=True)
    (pyenv / "libexec/pyenv").write_text(f'#!/bin/sh\nshift\nexec "{pyenv}/versions/3.11.7/bin/$1"\n')
    (pyenv / "libexec/pyenv").chmod(0o755)
    (pyenv / "shims").mkdir()
    (pyenv / "shims/python3").write_text(f'#!/bin/sh\nexec "{pyenv}/libexec/pyenv" exec "${{0##*/}}" "$@"\n')
    (pyenv / "shims/python3").chmod(0o755)
    return {"~/.pyenv/shims": (pyenv / "shims", "python3"),"~/.local/bin": (home / ".local/bin", "claude"), "~/.claude/local": (home / ".claude/local", "claude"),
            "~/.claude/local/node_modules/.bin": (home / ".claude/local/node_modules/.bin", "claude"),
            "~/.npm-global/bin": (home / ".npm-global/bin", "opencode"), "nvm": (nvm / "bin", "claude"),
            "project node_modules/.bin": (app / ".bin", "opencode")}


def test_no_login_under_home_is_readable_whatever_path_a_real_install_puts_on_path(trial: Path, tmp_path: Path) -> None:
    """Issue 26: ``~/.local/bin`` on PATH put all of ``~/.local`` back, and a trial read OpenCode's
    refresh token in ``~/.local/share/opencode/auth.json``.  Each PATH directory comes back by itself
    (plus the package its links point into), so every program runs and no login is readable."""
    home = tmp_path / "home"  # a fake user HOME: hidden like the real one
    installs = _installs(home)
    for login in LOGINS:
        (home / login).parent.mkdir(parents=True, exist_ok=True)
        (home / login).write_text("SECRET-LOGIN\n")
    confinement = Confinement(writable=(trial / "sandbox", trial / "home"),
                              hidden=hidden_roots(user_home=home, project_root=tmp_path / "project", report_dir=None),
                              trial_dir=trial, cwd=trial / "sandbox")
    path = ":".join(str(directory) for directory, _ in installs.values())
    env = {"PATH": f"{path}:{os.environ['PATH']}", "HOME": str(trial / "home")}
    logins = [str(home / login) for login in LOGINS]
    code = f"""
import os, subprocess
for login in {logins!r}:
    try:
        print("READ" if "SECRET" in open(login).read() else "empty", login)
    except OSError as exc:
        print("hidden", login, exc.strerror)
for directory, program in {[(str(d), p) for d, p in installs.values()]!r}:
    done = subprocess.run([os.path.join(directory, program)], capture_output=True, text=True)
    print("ran", directory, done.stdout.strip() or done.stderr.strip())
print("home", sorted(os.listdir({str(home)!r})))
"""
    result = run([sys.executable, "-c", code], cwd=trial / "sandbox", env=env, timeout_s=60, wrap=confinement.wrapper(env))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "READ" not in output, output
    assert output.count("hidden ") == len(LOGINS), output
    ran = dict(line.split(" ", 2)[1:] for line in output.splitlines() if line.startswith("ran "))
    assert ran == {str(d): says for (d, _), says in zip(installs.values(), ["pyenv-ok", "native-ok", "wrapper-ok", "local-ok",
                                                                            "npm-global-ok", "nvm-ok", "project-ok"],
                                                        strict=True)}, output


def test_a_project_inside_home_stays_visible_by_itself(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = home / "code" / "app"
    (project / ".atlante").mkdir(parents=True)
    (home / ".aws").mkdir()
    trial = tmp_path / "run" / "t-1"
    (trial / "sandbox").mkdir(parents=True)
    confinement = Confinement(writable=(trial / "sandbox",), hidden=hidden_roots(user_home=home, project_root=project,
                                                                                report_dir=None),
                              trial_dir=trial, cwd=trial / "sandbox", shown=(project,))
    mounts = _mounts(confinement.arguments(["true"], {"PATH": "/usr/bin:/bin"}))
    assert ("--ro-bind-try", str(project)) in mounts and ("--tmpfs", str(project / ".atlante")) in mounts
    assert mounts.index(("--ro-bind-try", str(project))) < mounts.index(("--tmpfs", str(project / ".atlante")))
    assert not any(path in (str(home / "code"), str(home / ".aws")) for _, path in mounts)
