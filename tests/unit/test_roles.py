"""The role objects without a whole run: what a worker starts from, and where it may start.

A worker gets the validated suite, run id and probe result from the controller's ``workerinput``:
it never discovers or validates again.  Workers on a socket gateway may not run in the main
thread, where Python refuses to install a signal handler: the worker must still start.
"""

from __future__ import annotations

import ast
import base64
import pickle
import signal
import sys
import threading
from dataclasses import asdict

import pytest

from conftest import Project
from pytest_atlante.hosts.base import HostInfo
from pytest_atlante.run import evalrun
from pytest_atlante.run.items import RUNNER_KEY
from pytest_atlante.run.roles import Options, Worker, role_for
from pytest_atlante.suite import discovery

INFO = HostInfo("claude-code", "2.1.197", "claude-code", "/usr/bin/claude")


def shared_input(project: Project) -> dict[str, object]:
    suite = discovery.discover(project.root)
    assert not suite.diagnostics
    return {"runId": "20261201T000000Z-abcdef", "host": asdict(INFO),
            "suite": base64.b64encode(pickle.dumps(suite)).decode("ascii"),
            "sources": {"copies": {}, "record": {}}}


def no_discovery(*args: object, **kwargs: object) -> None:
    raise AssertionError("a worker discovered the suite again")


def test_a_worker_runs_the_controllers_suite_without_discovering_it(pytester: pytest.Pytester, atlante_project: Project,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    shared = shared_input(atlante_project)
    monkeypatch.setattr(discovery, "discover", no_discovery)
    monkeypatch.setattr(evalrun, "discover", no_discovery)
    config = pytester.parseconfig("--atlante-project", str(atlante_project.root))
    worker = Worker(config, Options.from_config(config), shared)
    worker.pytest_sessionstart(pytest.Session.from_config(config))
    assert worker.run_id == shared["runId"]
    assert worker.host_info == INFO  # typed again, not a dict
    assert worker.sources == shared["sources"]  # the controller's copies of fixtures and build tree
    assert worker.suite is not None and [e.scenario.name for e in worker.suite.scenarios] == ["writes-hello"]
    assert config.stash[RUNNER_KEY] is worker
    assert config.args == [str(atlante_project.root / "eval/scenarios")]  # the directory holding the scenarios


def test_role_for_picks_the_worker_only_with_workerinput(pytester: pytest.Pytester, atlante_project: Project) -> None:
    config = pytester.parseconfig("--atlante-project", str(atlante_project.root))
    assert type(role_for(config)).__name__ == "Controller"
    config.workerinput = {"atlante": shared_input(atlante_project)}  # type: ignore[attr-defined]
    assert isinstance(role_for(config), Worker)


def test_a_worker_outside_the_main_thread_starts_and_leaves_sigint_alone(pytester: pytest.Pytester,
                                                                         atlante_project: Project) -> None:
    shared = shared_input(atlante_project)
    config = pytester.parseconfig("--atlante-project", str(atlante_project.root))
    before = signal.getsignal(signal.SIGINT)
    errors: list[BaseException] = []

    def start() -> None:
        try:
            Worker(config, Options.from_config(config), shared)
        except BaseException as exc:  # noqa: BLE001 - reported to the test thread
            errors.append(exc)

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    assert errors == []
    assert signal.getsignal(signal.SIGINT) is before


def test_the_controller_forwards_ctrl_c_only_to_workers_on_its_own_machine(pytester: pytest.Pytester, atlante_project: Project,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A remote worker's pid means nothing here: signalling it could hit an unrelated local process."""
    import socket

    from pytest_atlante.run.roles import Controller

    config = pytester.parseconfig("--atlante-project", str(atlante_project.root))
    controller = Controller(config, Options.from_config(config))
    for pid, host in ((1111, socket.gethostname()), (2222, "another-machine")):
        report = pytest.TestReport("x::t", ("x", 0, "t"), {}, "passed", None, "call")
        report.atlante_worker_pid = pid  # type: ignore[attr-defined]
        report.atlante_worker_host = host  # type: ignore[attr-defined]
        controller.pytest_runtest_logreport(report)
    killed: list[int] = []
    monkeypatch.setattr("os.kill", lambda pid, sig: killed.append(pid))
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        controller.pytest_keyboard_interrupt(pytest.ExceptionInfo.from_current())
    assert killed == [1111]


def test_the_selftest_controller_forwards_ctrl_c_only_to_workers_on_its_own_machine(
        pytester: pytest.Pytester, atlante_project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    """The self-test is the same controller: a remote worker's pid is never signalled there either."""
    import socket

    config = pytester.parseconfig("--atlante-eval", "--atlante-selftest", "--atlante-project", str(atlante_project.root))
    controller = role_for(config)
    for pid, host in ((1111, socket.gethostname()), (2222, "another-machine")):
        report = pytest.TestReport("x::t", ("x", 0, "t"), {}, "passed", None, "call")
        report.atlante_worker_pid = pid  # type: ignore[attr-defined]
        report.atlante_worker_host = host  # type: ignore[attr-defined]
        controller.pytest_runtest_logreport(report)  # type: ignore[attr-defined]
    killed: list[int] = []
    monkeypatch.setattr("os.kill", lambda pid, sig: killed.append(pid))
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        controller.pytest_keyboard_interrupt(pytest.ExceptionInfo.from_current())  # type: ignore[attr-defined]
    assert killed == [1111]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
@pytest.mark.parametrize(("stop", "status", "reason"), [
    ("forecast", 0, "atlante: forecast only (--atlante-forecast); no trial was run"),
    ("validation", 2, "atlante: 1 validation problem(s); no trial was run"),
])
def test_an_ordinary_stop_ends_the_session_without_an_exit_banner_or_workers(
        pytester: pytest.Pytester, atlante_project: Project, workers: list[str], stop: str, status: int,
        reason: str) -> None:
    """A forecast or a validation stop is an answer, not a crash: no ``Exit`` banner, the status it
    decided, every plugin's sessionfinish run (it sees that status), and no xdist worker started."""
    if stop == "validation":
        (atlante_project.root / "eval/fixtures/app").rename(atlante_project.root / "eval/fixtures/gone")
    pytester.makeconftest("""
        def pytest_sessionfinish(session):
            print("sessionfinish saw", int(session.exitstatus))
    """)
    result = pytester.runpytest_subprocess("--atlante-eval", "--atlante-scripted", f"--atlante-{stop}" if stop == "forecast" else "-q",
                                           "--atlante-project", str(atlante_project.root), "-p", "no:cacheprovider", *workers)
    text = "\n".join(result.outlines + result.errlines)
    assert result.ret == status, text
    assert "Exit" not in text and "!!!" not in text and "Traceback" not in text
    assert text.count(reason) == 1
    assert "workers [" not in text and "[gw0]" not in text and "created:" not in text   # xdist started none
    # tryfirst: our status is set before other plugins' sessionfinish reads it
    assert f"sessionfinish saw {status}" in text


# The controller's modules: a worker never needs them, and each costs every worker CPU at start-up.
CONTROLLER_ONLY = ["pytest_atlante.run.roles", "pytest_atlante.run.terminal", "pytest_atlante.run.liveline",
                   "pytest_atlante.run.startup", "pytest_atlante.suite.digests", "pytest_atlante.report.model",
                   "pytest_atlante.report.statrecords", "pytest_atlante.report.selftest", "pytest_atlante.report.reader"]


def test_a_worker_registers_its_role_without_the_controllers_modules(pytester: pytest.Pytester,
                                                                       atlante_project: Project) -> None:
    """What ``pytest_configure`` imports in an xdist worker (a fresh interpreter, as the worker is)."""
    code = ("import sys\n"
            "from pytest_atlante.run.trialrole import register_worker\n"  # what plugin.py imports in a worker
            "from pytest_atlante.run.gcpause import CollectionGcPause\n"
            "from pytest_atlante.suite import script\n"
            "print(sorted(m for m in sys.modules if m.startswith('pytest_atlante')))\n"
            "print(sorted(n for n, c in vars(script).items() if getattr(c, '__pydantic_complete__', False)))\n")
    result = pytester.run(sys.executable, "-c", code)
    assert result.ret == 0, result.stderr.str()
    loaded = ast.literal_eval(result.stdout.lines[-2])
    assert "pytest_atlante.trial.runner" in loaded  # the trial path itself is there
    assert [m for m in CONTROLLER_ONLY if m in loaded] == []
    # The script models' validators are built where a script is validated (the controller's
    # discovery), not at import: a worker receives the parsed scripts.
    assert ast.literal_eval(result.stdout.lines[-1]) == []


def test_plugin_configure_registers_a_worker_where_xdist_gave_workerinput(pytester: pytest.Pytester,
                                                                            atlante_project: Project) -> None:
    from pytest_atlante import plugin

    config = pytester.parseconfig("--atlante-eval", "--atlante-project", str(atlante_project.root))
    config.workerinput = {"atlante": shared_input(atlante_project)}  # type: ignore[attr-defined]
    plugin.pytest_configure(config)
    try:
        assert isinstance(config.pluginmanager.get_plugin("atlante-eval"), Worker)
        assert config.pluginmanager.get_plugin("atlante-eval-terminal") is None  # the controller's output only
    finally:
        config.pluginmanager.unregister(name="atlante-eval")
        config.pluginmanager.unregister(name="atlante-gc-pause")
