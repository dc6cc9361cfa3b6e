"""Tests for pytest_atlante.sandbox.machine: what a ``model-only`` trial sees of the machine.

The last test runs real bubblewrap: a listening pathname socket of the machine in a place the
root keeps (a project shown to the trial) is covered, one in a hidden place is gone, and the
program trees still run the command.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

from conftest import bind_unix
from pytest_atlante.sandbox import machine
from pytest_atlante.sandbox.isolation import Confinement, hidden_roots
from pytest_atlante.sandbox.process import run

TABLE = """Num       RefCount Protocol Flags    Type St Inode Path
0000000000000000: 00000002 00000000 00010000 0001 01 19425 /run/dbus/system_bus_socket
0000000000000000: 00000002 00000000 00010000 0001 01 19426 @/containerd-shim/abc.sock@
0000000000000000: 00000003 00000000 00000000 0001 03 19427
0000000000000000: 00000002 00000000 00010000 0001 01 19428 relative.sock
0000000000000000: 00000002 00000000 00010000 0001 01 19429 /var/run/postgresql/.s.PGSQL.5432
"""


def test_listening_sockets_are_the_pathname_ones_of_the_table(tmp_path: Path) -> None:
    table = tmp_path / "unix"
    table.write_text(TABLE)
    assert list(machine.listening_sockets(table)) == [Path("/run/dbus/system_bus_socket"),
                                                      Path("/var/run/postgresql/.s.PGSQL.5432")]
    assert list(machine.listening_sockets(tmp_path / "missing")) == []


def test_hidden_tops_are_every_real_top_directory_but_the_program_trees(tmp_path: Path) -> None:
    for name in ("usr", "etc", "run", "var", "srv", "home", "work"):
        (tmp_path / name).mkdir()
    (tmp_path / "bin").symlink_to("usr")
    (tmp_path / "elsewhere").symlink_to("var")
    (tmp_path / "file").write_text("")
    assert machine.hidden_tops(tmp_path) == tuple(tmp_path / n for n in ("home", "run", "srv", "var", "work"))


def test_only_visible_sockets_still_at_their_path_are_covered(tmp_path: Path) -> None:
    shown, hidden = tmp_path / "shown", tmp_path / "hidden"
    shown.mkdir()
    hidden.mkdir()
    listeners = []
    for path in (shown / "a.sock", hidden / "b.sock"):
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        bind_unix(listener, path)  # tmp_path can be too deep for a socket address
        listeners.append(listener)
    (shown / "plain").write_text("")
    link = tmp_path / "link"
    link.symlink_to(shown)
    listed = [shown / "a.sock", hidden / "b.sock", shown / "plain", shown / "gone.sock", link / "a.sock"]
    try:
        covers = machine.socket_covers(lambda path: not path.is_relative_to(hidden), iter(listed))
    finally:
        for listener in listeners:
            listener.close()
    assert covers == [Path(os.path.realpath(shown)) / "a.sock"]  # once, at its real path


def test_a_model_only_trial_sees_no_socket_of_the_machine_and_runs_from_the_program_trees(tmp_path: Path) -> None:
    trial = tmp_path / "trial"
    project = tmp_path / "project"
    for path in (trial / "sandbox", trial / "home", project):
        path.mkdir(parents=True)
    # A service of the project's own, bound through a short link (an address holds 108 bytes);
    # /proc/net/unix names it by that absolute path.
    link = Path(f"/tmp/atlante-machine-test-{os.getpid()}")
    link.symlink_to(project)
    service = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    service.bind(str(link / "service.sock"))
    service.listen(1)
    code = f"""
import json, os, socket
os.chdir({str(project)!r})
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect("service.sock"); print("open")
except OSError as exc:
    print("blocked", type(exc).__name__)
print(json.dumps({{top: len(os.listdir("/" + top)) for top in ("run", "var", "srv", "mnt", "media") if os.path.isdir("/" + top)}}))
"""
    confinement = Confinement(writable=(trial / "sandbox", trial / "home"),
                              hidden=hidden_roots(user_home=Path.home(), project_root=project, report_dir=None),
                              trial_dir=trial, cwd=trial / "sandbox", network="model-only", shown=(project,))
    env = {"PATH": os.environ["PATH"], "HOME": str(trial / "home")}
    try:
        result = run([sys.executable, "-c", code], cwd=trial / "sandbox", env=env, timeout_s=60,
                     wrap=confinement.wrapper(env))
    finally:
        service.close()
        link.unlink()
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "blocked ConnectionRefusedError" in output, output
    seen = json.loads(output.splitlines()[-1])
    assert set(seen) >= {"run", "var"} and set(seen.values()) == {0}, seen  # empty mount points
