"""The model relay of a ``model-only`` trial (docs/design.md §11).

Inside the trial's own network namespace there is only ``lo``: no route out, no abstract socket of
the machine.  The host was given ``http://127.0.0.1:<port>`` for its model (the metering proxy's
address outside); this program, run inside the namespace as the first process of the host
session, listens on that same address and carries every connection to the proxy's unix socket,
bound read-only into the sandbox.  It binds before the host starts (then forks: the child relays,
the parent becomes the host CLI), so the host's first request finds it listening.

It runs with the standard library only, from its source text (``python -I -S -c``), so no package
directory has to be visible inside the sandbox and nothing the agent wrote can be imported.

The agent cannot stop or read it.  It is the PID namespace's init (bubblewrap's ``--as-pid-1``):
the kernel delivers no signal from inside the namespace to its init unless the init handles it,
and it handles none (SIGKILL and SIGSTOP included: they never reach an init from its own
namespace), so a ``kill`` of the agent's leaves it relaying.  It makes itself non-dumpable
(``PR_SET_DUMPABLE`` 0) before the host starts, so no process of the trial can ptrace it or read
its ``/proc/1/environ``, ``mem`` or ``fd`` (that needs ``CAP_SYS_PTRACE``, which no process of the
trial has).  As init it reaps every orphan, and it exits with the host's status (128 + the signal
when the host was killed, as bubblewrap reports one) the moment the host ends — the kernel then
ends every other process of the namespace.  The runner's signals (the interrupt that stops a host,
the kill of a timeout) reach the host through its process group; the interrupt is ignored here and
restored to its default in the host.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
from pathlib import Path

_CHUNK = 65536


def relay_command(socket_path: Path, port: int, argv: list[str]) -> list[str]:
    """``argv`` run behind the relay: ``127.0.0.1:port`` inside → ``socket_path``."""
    source = Path(__file__).read_text(encoding="utf-8")
    return [sys.executable, "-I", "-S", "-c", source, str(socket_path), str(port), *argv]


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(_CHUNK):
            sink.sendall(data)
    for end in (sink, source):
        with contextlib.suppress(OSError):
            end.shutdown(socket.SHUT_RDWR)


def _carry(client: socket.socket, socket_path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(socket_path)
    except OSError:
        client.close()
        upstream.close()
        return
    threading.Thread(target=_pipe, args=(upstream, client), daemon=True).start()
    _pipe(client, upstream)
    client.close()
    upstream.close()


def _serve(listener: socket.socket, socket_path: str) -> None:
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_carry, args=(client, socket_path), daemon=True).start()


def _undumpable() -> None:
    """No ptrace of this process and no reading of its ``/proc`` files by the trial's processes."""
    import ctypes

    pr_set_dumpable = 4
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_dumpable, 0, 0, 0, 0)


def _exit_status(status: int) -> int:
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


def main(args: list[str]) -> None:
    socket_path, port, command = args[0], int(args[1]), args[2:]
    _undumpable()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the runner's interrupt is the host's, not the relay's
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    host = os.fork()
    if host == 0:
        listener.close()
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # an ignored signal would stay ignored across exec
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            os.write(2, f"atlante relay: cannot run {command[0]}: {exc}\n".encode())
            os._exit(127)
    # Off the session's pipes: the runner reads the host's stdout to its end.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    threading.Thread(target=_serve, args=(listener, socket_path), daemon=True).start()
    while True:  # init: reap every orphan; the host's end is the namespace's
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(1)
        except InterruptedError:
            continue
        if pid == host:
            os._exit(_exit_status(status))


if __name__ == "__main__":
    main(sys.argv[1:])
