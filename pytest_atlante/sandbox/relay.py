"""The model relay of a ``model-only`` trial (docs/design.md §11).

Inside the trial's own network namespace there is only ``lo``: no route out, no abstract socket of
the machine.  The host was given ``http://127.0.0.1:<port>`` for its model (the metering proxy's
address outside); this program, run inside the namespace as the first process of the host
session, listens on that same address and carries every connection to the proxy's unix socket,
bound read-only into the sandbox.  It binds before the host starts (then forks: the child relays,
the parent becomes the host CLI), so the host's first request finds it listening.

It runs with the standard library only, from its source text (``python -I -S -c``), so no package
directory has to be visible inside the sandbox and nothing the agent wrote can be imported.
"""

from __future__ import annotations

import contextlib
import os
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


def main(args: list[str]) -> None:
    socket_path, port, command = args[0], int(args[1]), args[2:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    if os.fork() == 0:
        # The relay: off the session's pipes (the runner reads the host's stdout to its end); it
        # dies with the namespace when the host session ends.
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        _serve(listener, socket_path)
        os._exit(0)
    listener.close()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
