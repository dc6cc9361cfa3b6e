"""``eval.network: "model-only"`` on both real CLIs (docs/design.md §11).

The scripted agent tries to leave: a TCP connection to a listener of the machine (on its
loopback: the same network a real exfiltration would use, without leaving this machine) and a
connection to an abstract unix socket of the machine.  Under ``model-only`` both fail while the
model still answers through the metering proxy; under ``shared`` (the control) both succeed, so
the probe can tell.

``model-only`` runs on ``EVERY_HOST``: each host reaches the model through its own base-URL wiring
inside the namespace.  The ``shared`` control proves the probe itself can connect; what it proves
does not depend on the host, so it runs once, on ``ONE_HOST``.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conftest import Project, config_doc, per_host_then_once, scenario_doc
from pytest_atlante.report.model import EvalReport

pytestmark = pytest.mark.hosts

PROBE = '''import socket, sys
def attempt(family, address):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(address)
        s.sendall(b"exfiltrated")
        return "open"
    except OSError as exc:
        return "blocked " + type(exc).__name__
    finally:
        s.close()
print("tcp", attempt(socket.AF_INET, ("127.0.0.1", int(sys.argv[1]))))
print("abstract", attempt(socket.AF_UNIX, "\\0" + sys.argv[2]))
'''


class Listeners:
    """A TCP listener on the machine's loopback and an abstract unix socket; what reached them."""

    def __init__(self) -> None:
        self.received: list[bytes] = []
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.abstract_name = f"atlante-test-{uuid.uuid4().hex}"
        self.abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.abstract.bind("\0" + self.abstract_name)
        self.abstract.listen(4)
        for listener in (self.tcp, self.abstract):
            threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.tcp.getsockname()[1])

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            client.settimeout(5)
            with contextlib.suppress(OSError):
                self.received.append(client.recv(100))
            client.close()

    def close(self) -> None:
        self.tcp.close()
        self.abstract.close()


@pytest.fixture
def listeners() -> Iterator[Listeners]:
    found = Listeners()
    yield found
    found.close()


def run(pytester: pytest.Pytester, project: Project, *args: str) -> tuple[int, EvalReport, str]:
    out = pytester.path / "out"
    result = pytester.runpytest_subprocess("--atlante-eval", "--atlante-scripted", "--atlante-project", str(project.root),
                                           "--atlante-out", str(out), "--rootdir", str(project.root),
                                           "-p", "no:cacheprovider", *args, timeout=600)
    text = result.stdout.str() + result.stderr.str()
    assert (out / "report.json").exists(), text
    return int(result.ret), EvalReport.model_validate_json((out / "report.json").read_text()), text


@pytest.mark.parametrize(("host", "network"), per_host_then_once(["model-only"], once=["shared"]))
def test_model_only_blocks_the_network_and_abstract_sockets_while_the_model_answers(
        pytester: pytest.Pytester, atlante_project: Project, hosts_path: Callable[[], str],
        monkeypatch: pytest.MonkeyPatch, listeners: Listeners, host: str, network: str) -> None:
    monkeypatch.setenv("PATH", hosts_path())
    atlante_project.config(config_doc(host=host, isolation="namespace", budget={"trials": 1}))
    atlante_project.scenario(scenario_doc(checks=[{"type": "file-contains", "path": "net.txt", "pattern": "abstract"}]))
    atlante_project.script("writes-hello", [
        {"text": "probe", "actions": [{"type": "write", "path": "probe.py", "content": PROBE}],
         "usage": {"input": 10, "output": 1}},
        {"text": "run", "actions": [{"type": "bash",
                                     "command": f"python3 probe.py {listeners.port} {listeners.abstract_name} > net.txt"}],
         "usage": {"input": 10, "output": 1}},
        {"text": "done", "usage": {"input": 10, "output": 1}},
    ])
    atlante_project.build()
    status, report, text = run(pytester, atlante_project, "--atlante-network", network)
    [trial] = report.scenarios[0].trials
    assert report.isolation is not None and report.isolation.network == network, text
    assert (trial.verdict, status) == ("pass", 0), text  # the model answered every turn
    assert trial.scriptedTurns == 3 and trial.meteredBy == "proxy"
    diff = trial.diff or ""
    if network == "model-only":
        assert "+tcp blocked" in diff and "+abstract blocked" in diff, diff
        assert listeners.received == []
    else:
        assert "+tcp open" in diff and "+abstract open" in diff, diff
        assert b"exfiltrated" in listeners.received


def test_model_only_without_namespace_isolation_is_refused(pytester: pytest.Pytester, atlante_project: Project,
                                                           hosts_path: Callable[[], str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", hosts_path())
    atlante_project.config(config_doc(isolation="off", network="model-only"))
    atlante_project.build()
    out = pytester.path / "out"
    result = pytester.runpytest_subprocess("--atlante-eval", "--atlante-scripted", "--atlante-project",
                                           str(atlante_project.root), "--atlante-out", str(out),
                                           "--rootdir", str(atlante_project.root), "-p", "no:cacheprovider")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == 3, text
    assert "eval-network-unavailable" in text
    assert not list(Path(pytester.path).glob("**/trials/*"))
