"""``eval.network: "model-only"`` on every real CLI (docs/design.md §11).

The scripted agent tries to leave: a TCP connection to a listener of the machine (on its
loopback: the same network a real exfiltration would use, without leaving this machine), a
connection to an abstract unix socket of the machine, and to **pathname** unix sockets of the
machine — services listening in ``/run``, ``/var/run``, ``/var/tmp``, ``/tmp``, ``/dev/shm`` and
inside the project itself, as the system bus, a container runtime or a database would.  Then it
goes for the model relay inside its namespace: reads its environment, ptraces it and sends it
SIGTERM, SIGINT, SIGHUP and SIGKILL.  Under ``model-only`` every connection fails, the relay is
untouched and the model still answers the next turn through the metering proxy; under ``shared``
(the control) the TCP, abstract and visible pathname sockets answer, so the probe can tell.

``model-only`` runs on ``EVERY_HOST``: each host reaches the model through its own base-URL wiring
inside the namespace, and runs from the empty root a ``model-only`` trial gets
(``sandbox/machine.py``).  The ``shared`` control proves the probe itself can connect; what it
proves does not depend on the host, so it runs once, on ``ONE_HOST``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conftest import ONE_HOST, Project, config_doc, per_host_then_once, scenario_doc
from pytest_atlante.provider.loopback import new_trial_key
from pytest_atlante.provider.proxy import MeteringProxy, Upstream
from pytest_atlante.provider.scripted import ScriptedModelServer
from pytest_atlante.suite.script import load_script
from trial_helpers import run_scripted_eval

pytestmark = pytest.mark.hosts

PROBE = '''import ctypes, json, os, signal, socket, sys, time
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
here = os.getcwd()
for name, path in json.loads(sys.argv[3]).items():
    try:  # from its directory: a socket address holds at most 108 bytes
        os.chdir(os.path.dirname(path))
        print("socket", name, attempt(socket.AF_UNIX, os.path.basename(path)))
    except OSError as exc:
        print("socket", name, "blocked", type(exc).__name__)
    os.chdir(here)
def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""
relays = [int(p) for p in os.listdir("/proc") if p.isdigit() and b"def relay_command" in cmdline(p)]
print("relays", len(relays))
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
for pid in relays:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            print("relay environ readable", len(f.read()))
    except OSError as exc:
        print("relay environ blocked", type(exc).__name__)
    if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
        print("relay traced")
        os.waitpid(pid, 0x40000000)
        libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
    else:
        print("relay trace blocked", ctypes.get_errno())
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except OSError as exc:
            print("relay kill refused", type(exc).__name__)
    time.sleep(1)
    with open(f"/proc/{pid}/stat") as f:
        state = f.read().rsplit(")", 1)[1].split()[0]
    print("relay", "dead" if state in "ZX" else "alive")
'''


class Listeners:
    """A TCP listener on the machine's loopback, an abstract unix socket and pathname unix sockets
    where a machine's services keep theirs; what reached them."""

    def __init__(self, project: Path) -> None:
        self.received: list[bytes] = []
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.abstract_name = f"atlante-test-{uuid.uuid4().hex}"
        self.abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.abstract.bind("\0" + self.abstract_name)
        self.abstract.listen(4)
        self.listening = [self.tcp, self.abstract]
        self.paths: dict[str, str] = {}
        self._made: list[Path] = []
        tag = uuid.uuid4().hex[:12]
        # A service of the project's own (a dev server's socket in the tree): bound through a short
        # link, as socket addresses are at most 108 bytes.
        link = Path(f"/tmp/atlante-project-{tag}")
        link.symlink_to(project)
        self._made.append(link)
        places = {"run": Path("/run"), "var-run": Path("/var/run"), "var-tmp": Path("/var/tmp"), "tmp": Path("/tmp"),
                  "dev-shm": Path("/dev/shm"), "project": link}
        for name, place in places.items():
            directory = place if name == "project" else place / f"atlante-test-{tag}-{name}"
            if name != "project":
                directory.mkdir()
                self._made.append(directory)
            path = directory / "service.sock"
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(path))  # a place this machine does not let the test bind in fails the test
            listener.listen(4)
            self.listening.append(listener)
            self.paths[name] = str(project / path.name if name == "project" else path)
        for listener in self.listening:
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
        for listener in self.listening:
            listener.close()
        for path in self.paths.values():
            with contextlib.suppress(OSError):
                os.unlink(path)
        for made in reversed(self._made):
            with contextlib.suppress(OSError):
                made.unlink() if made.is_symlink() else made.rmdir()


@pytest.fixture
def listeners(atlante_project: Project) -> Iterator[Listeners]:
    found = Listeners(atlante_project.root)
    yield found
    found.close()


run = run_scripted_eval


def probe_lines(diff: str) -> set[str]:
    """What the probe printed: the lines ``net.txt`` gained in the trial's diff."""
    section = diff.split("+++ b/net.txt\n", 1)[-1].split("diff --git", 1)[0] if "+++ b/net.txt" in diff else ""
    return {line[1:] for line in section.splitlines() if line.startswith("+")}


@pytest.mark.parametrize(("host", "network"), per_host_then_once(["model-only"], once=["shared"]))
def test_model_only_blocks_the_network_and_the_machine_s_sockets_and_spares_the_relay(
        pytester: pytest.Pytester, atlante_project: Project, hosts_path: Callable[[], str],
        monkeypatch: pytest.MonkeyPatch, listeners: Listeners, host: str, network: str) -> None:
    monkeypatch.setenv("PATH", hosts_path())
    atlante_project.config(config_doc(host=host, isolation="namespace", budget={"trials": 1}))
    atlante_project.scenario(scenario_doc(checks=[{"type": "file-contains", "path": "net.txt", "pattern": "relays"}]))
    atlante_project.script("writes-hello", [
        {"text": "probe", "actions": [{"type": "write", "path": "probe.py", "content": PROBE}],
         "usage": {"input": 10, "output": 1}},
        {"text": "run", "actions": [{"type": "bash",
                                     "command": f"python3 probe.py {listeners.port} {listeners.abstract_name} "
                                                f"'{json.dumps(listeners.paths)}' > net.txt 2>&1"}],
         "usage": {"input": 10, "output": 1}},
        {"text": "done", "usage": {"input": 10, "output": 1}},
    ])
    atlante_project.build()
    status, report, text = run(pytester, atlante_project, "--atlante-network", network)
    [trial] = report.scenarios[0].trials
    assert report.isolation is not None and report.isolation.network == network, text
    assert (trial.verdict, status) == ("pass", 0), text  # the model answered every turn
    assert trial.scriptedTurns == 3 and trial.meteredBy == "proxy"
    said = probe_lines(trial.diff or "")
    if network == "model-only":
        assert {"tcp blocked ConnectionRefusedError", "abstract blocked ConnectionRefusedError"} <= said, said
        opened = [line for line in said if line.startswith("socket") and not line.endswith("blocked ConnectionRefusedError")
                  and "blocked FileNotFoundError" not in line]
        assert opened == [] and len([line for line in said if line.startswith("socket")]) == 6, said
        assert listeners.received == []
        # The relay: one, its environment and memory closed, every signal lost on it, and the
        # model answered the turn after the attack (scriptedTurns above).
        assert {"relays 1", "relay environ blocked PermissionError", "relay trace blocked 1", "relay alive"} <= said, said
    else:
        assert {"tcp open", "abstract open", "relays 0"} <= said, said
        for name in ("run", "var-run", "var-tmp", "project"):  # visible through the read-only root
            assert f"socket {name} open" in said, said
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


# --------------------------------------------------------------------------- another trial's proxy

CROSSING = '''import json, socket, sys
body = json.dumps({"model": "m", "max_tokens": 64, "stream": False,
                   "messages": [{"role": "user", "content": "spend"}]}).encode()
for name, port in (("proxy", int(sys.argv[1])), ("model", int(sys.argv[2]))):
    for path in ("/v1/messages", "/v1/chat/completions", "/v1/responses", "/v1beta/models/m:generateContent"):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"POST %s HTTP/1.1\\r\\nHost: x\\r\\nContent-Type: application/json\\r\\nContent-Length: %d\\r\\n"
                  b"Connection: close\\r\\n\\r\\n%s" % (path.encode(), len(body), body))
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
        s.close()
        print(name, path, answer.split(b" ", 2)[1].decode())
'''


@pytest.mark.parametrize("host", [ONE_HOST])
def test_an_agent_cannot_spend_another_trial_s_tokens_on_the_shared_network(
        pytester: pytest.Pytester, atlante_project: Project, hosts_path: Callable[[], str],
        monkeypatch: pytest.MonkeyPatch, host: str) -> None:
    """Another trial, built as the runner builds it (its scripted model under a key of its own,
    its metering proxy in front), listens on the machine's loopback; the agent of this trial,
    under namespace isolation with the network shared, is handed both ports (as it would read them
    from ``/proc/net/tcp``) and asks each for an answer on every model route."""
    victim_model = ScriptedModelServer(load_script(atlante_project.script("victim", [
        {"text": "victim's answer", "usage": {"input": 5000, "output": 5000}}])),
        sandbox_root=atlante_project.root, trial_key=new_trial_key())
    with victim_model, MeteringProxy(Upstream(victim_model.anthropic_base_url), 10**9) as victim:
        monkeypatch.setenv("PATH", hosts_path())
        atlante_project.config(config_doc(host=host, isolation="namespace", budget={"trials": 1}))
        atlante_project.scenario(scenario_doc(checks=[{"type": "file-contains", "path": "net.txt", "pattern": "proxy"}]))
        atlante_project.script("writes-hello", [
            {"text": "probe", "actions": [{"type": "write", "path": "probe.py", "content": CROSSING}]},
            {"text": "run", "actions": [{"type": "bash", "command":
                f"python3 probe.py {victim.port} {victim_model.port} > net.txt 2>&1"}]},
            {"text": "done"},
        ])
        atlante_project.build()
        status, report, text = run(pytester, atlante_project, "--atlante-network", "shared")
        seen = victim.metering(settle_s=0)
    [trial] = report.scenarios[0].trials
    said = probe_lines(trial.diff or "")
    assert (trial.verdict, status) == ("pass", 0), text
    assert len(said) == 8 and all(line.endswith(" 404") for line in said), said
    assert (seen.served, seen.usage.total, seen.foreign) == (0, 0, 4), seen
    assert victim_model.requests == []  # nothing reached the other trial's model
