"""Tests for pytest_atlante.sandbox.process: real processes, real signals, real /proc scans.

Wall time is never asserted except as a generous upper bound proving a kill happened
(a 300 s sleep that ended within 60 s was killed).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pytest_atlante.sandbox import reaper
from pytest_atlante.sandbox.process import (
    ENVIRONMENT_ALLOWLIST,
    Bounds,
    RunResult,
    allowlisted_environment,
    live_processes_with_token,
    run,
)

HELPERS = Path(__file__).parent / "process_helpers"
PY = sys.executable
KILLED_WITHIN_S = 60.0  # the helpers sleep 300 s; ending sooner proves they were killed
# Every process these tests start carries this mark, so a failing test cannot leave 300 s sleepers
# behind: the autouse fixture below SIGKILLs whatever still carries it (after the assertions ran).
TEST_MARK = ("ATLANTE_PROCESS_TEST", os.urandom(8).hex())


def _env() -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONUNBUFFERED": "1",
        TEST_MARK[0]: TEST_MARK[1],
    }


@pytest.fixture(autouse=True)
def _kill_leftovers() -> Iterator[None]:
    yield
    name, value = TEST_MARK
    entry = f"\0{name}={value}\0".encode()
    for proc_dir in Path("/proc").iterdir():
        try:
            if not proc_dir.name.isdigit():
                continue
            if entry in b"\0" + (proc_dir / "environ").read_bytes():
                os.kill(int(proc_dir.name), signal.SIGKILL)
        except OSError:
            continue


def _run(args: list[str], tmp_path: Path, **kwargs: object) -> RunResult:
    """``run`` with test defaults; ``interrupt_signal``, ``grace_s`` and ``capture_limit`` go into its ``Bounds``."""
    bounds = {key: kwargs.pop(key) for key in ("interrupt_signal", "grace_s", "capture_limit") if key in kwargs}
    options: dict[str, object] = {"cwd": tmp_path, "env": _env(), "timeout_s": 60.0, "bounds": Bounds(**bounds)}  # type: ignore[arg-type]
    options.update(kwargs)
    return run(args, **options)  # type: ignore[arg-type]


def _helper(name: str, *args: str) -> list[str]:
    return [PY, str(HELPERS / name), *args]


def _field(stdout: str, name: str) -> str:
    """The value of a `name value` line the tree helper printed."""
    for line in stdout.splitlines():
        if line.startswith(name + " "):
            return line.split(" ", 1)[1]
    raise AssertionError(f"no {name!r} line in {stdout!r}")


def _assert_tree_gone(stdout: str) -> None:
    """Nothing carrying the run token is alive, and the setsid grandchild is gone — not even a
    zombie (os.kill(pid, 0) succeeds on a zombie), so it was killed *and* reaped."""
    token = _field(stdout, "token")
    assert token, "the run token did not reach the child environment"
    assert live_processes_with_token(token) == []
    with pytest.raises(ProcessLookupError):
        os.kill(int(_field(stdout, "grandchild")), 0)


def _collect(seen: list[str]) -> Callable[[str], bool]:
    """A callback that records every line and never aborts."""

    def callback(line: str) -> bool:
        seen.append(line)
        return False

    return callback


def _on(trigger: str, action: Callable[[], bool]) -> Callable[[str], bool]:
    def callback(line: str) -> bool:
        return action() if line == trigger else False

    return callback


# -- capture --------------------------------------------------------------------------------


def test_captures_stdout_stderr_and_exit_code(tmp_path: Path) -> None:
    result = _run(_helper("streams.py", "3"), tmp_path)
    assert result.returncode == 3
    assert result.stdout == "out-line\n"
    assert result.stderr == "err-line\n"
    assert (result.timed_out, result.aborted, result.start_error) == (False, False, None)
    assert result.orphans_killed == 0
    assert result.duration_s > 0


def test_capture_cap_keeps_the_tail_and_callback_sees_every_line(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "for i in range(5000): print(f'line-{i:05d}')\n"
        "sys.stderr.write('x' * 300 + 'END')"
    )
    seen: list[str] = []
    result = _run([PY, "-c", code], tmp_path, capture_limit=100, on_stdout_line=_collect(seen))
    full = "".join(f"line-{i:05d}\n" for i in range(5000))
    assert result.stdout == full[-100:]
    assert result.stderr == ("x" * 300 + "END")[-100:]
    assert seen == [f"line-{i:05d}" for i in range(5000)]


def test_last_line_without_newline_is_delivered_and_kept(tmp_path: Path) -> None:
    seen: list[str] = []
    code = "import sys; sys.stdout.write('a\\nb')"
    result = _run([PY, "-c", code], tmp_path, on_stdout_line=_collect(seen))
    assert seen == ["a", "b"]
    assert result.stdout == "a\nb"


def test_a_flooded_stderr_never_blocks_the_child(tmp_path: Path) -> None:
    # 4 MiB on stderr before the first stdout byte: without concurrent draining, the child blocks
    # on a full stderr pipe and the run ends by timeout instead of exit.
    flood = str(4 * 1024 * 1024)
    result = _run(_helper("streams.py", "0", flood), tmp_path, capture_limit=50, timeout_s=60.0)
    assert not result.timed_out
    assert result.returncode == 0
    assert result.stdout == "out-line\n"
    assert result.stderr == ("e" * 50 + "err-line\n")[-50:]


def test_invalid_utf8_is_replaced_not_fatal(tmp_path: Path) -> None:
    code = (
        "import sys; sys.stdout.buffer.write(b'ok \\xff\\n'); sys.stderr.buffer.write(b'\\xfe')"
    )
    result = _run([PY, "-c", code], tmp_path)
    assert result.stdout == "ok \ufffd\n"
    assert result.stderr == "\ufffd"


# -- stdin ----------------------------------------------------------------------------------


def test_stdin_is_dev_null_by_default(tmp_path: Path) -> None:
    code = "import os; print(os.readlink('/proc/self/fd/0'))"
    assert _run([PY, "-c", code], tmp_path).stdout == "/dev/null\n"


def test_stdin_data_is_fed_without_deadlock(tmp_path: Path) -> None:
    # 2 MiB of input while the child echoes a digest only at the end: needs non-blocking writes.
    data = "".join(f"{i}\n" for i in range(300_000))
    code = (
        "import hashlib, sys; b = sys.stdin.buffer.read(); "
        "print(len(b), hashlib.sha256(b).hexdigest())"
    )
    result = _run([PY, "-c", code], tmp_path, stdin_data=data)
    encoded = data.encode()
    assert result.stdout == f"{len(encoded)} {hashlib.sha256(encoded).hexdigest()}\n"


def test_child_closing_stdin_early_is_fine(tmp_path: Path) -> None:
    code = "import sys, os; os.close(0); print('closed')"
    result = _run([PY, "-c", code], tmp_path, stdin_data="x" * 3_000_000)
    assert (result.returncode, result.stdout, result.start_error) == (0, "closed\n", None)


# -- streaming and abort --------------------------------------------------------------------


def test_callback_sees_lines_while_the_process_runs(tmp_path: Path) -> None:
    marker = tmp_path / "saw-first"
    seen: list[str] = []

    def callback(line: str) -> bool:
        seen.append(line)
        if line == "first":
            marker.touch()  # the child only prints "second" after this
        return False

    result = _run(_helper("handshake.py", str(marker)), tmp_path, on_stdout_line=callback)
    assert seen == ["first", "second"]
    assert (result.returncode, result.timed_out, result.aborted) == (0, False, False)


def test_abort_from_callback_kills_the_tree(tmp_path: Path) -> None:
    abort_on_ready = _on("ready", lambda: True)
    result = _run(_helper("tree.py"), tmp_path, on_stdout_line=abort_on_ready, grace_s=5.0)
    assert result.aborted and not result.timed_out
    assert result.duration_s < KILLED_WITHIN_S
    assert result.returncode is not None and result.returncode != 0
    assert result.orphans_killed >= 1  # the setsid grandchild survived SIGINT to the group
    _assert_tree_gone(result.stdout)


def test_grace_period_lets_a_sigint_handler_print_its_final_line(tmp_path: Path) -> None:
    seen: list[str] = []

    def callback(line: str) -> bool:
        seen.append(line)
        return line == "ready"

    result = _run(_helper("graceful.py"), tmp_path, on_stdout_line=callback, grace_s=30.0)
    assert result.aborted
    assert result.returncode == 0  # it exited by itself, not by SIGKILL
    assert seen == ["ready", "final line after SIGINT"]  # the callback still sees the last event
    assert result.stdout.endswith("final line after SIGINT\n")


def test_interrupt_signal_is_configurable(tmp_path: Path) -> None:
    result = _run(
        _helper("graceful.py"),
        tmp_path,
        on_stdout_line=_on("ready", lambda: True),
        interrupt_signal=signal.SIGTERM,
        grace_s=30.0,
    )
    assert result.returncode == -signal.SIGTERM  # SIGTERM, not the SIGINT handler, ended it
    assert "final line" not in result.stdout


# -- wrapped runs (namespace isolation) ------------------------------------------------------

# A wrapper like bubblewrap: runs the command as its child and exits with its status; Python's
# default SIGINT handling makes it kill the child at once if it is interrupted itself.
WRAPPER = "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))"


def _wrap(argv: list[str]) -> list[str]:
    return [PY, "-c", WRAPPER, *argv]


def test_a_wrapped_run_interrupts_the_command_but_not_its_wrapper(tmp_path: Path) -> None:
    seen: list[str] = []

    def callback(line: str) -> bool:
        seen.append(line)
        return line == "ready"

    result = _run(_helper("graceful.py"), tmp_path, on_stdout_line=callback, grace_s=30.0, wrap=_wrap)
    assert result.aborted and result.returncode == 0
    assert seen == ["ready", "final line after SIGINT"]  # the wrapper did not kill it first


def test_a_wrapped_run_reports_a_missing_program_as_a_start_error(tmp_path: Path) -> None:
    called: list[list[str]] = []

    def wrap(argv: list[str]) -> list[str]:
        called.append(argv)
        return _wrap(argv)

    result = _run(["atlante-no-such-program-4711"], tmp_path, wrap=wrap)
    assert result.start_error == "executable not found: atlante-no-such-program-4711"
    assert called == []
    script = tmp_path / "not-executable.sh"
    script.write_text("echo hi\n")
    assert _run(["./not-executable.sh"], tmp_path, wrap=wrap).start_error == "permission denied: ./not-executable.sh"
    ran = _run([PY, "-c", "print('wrapped')"], tmp_path, wrap=wrap)
    assert ran.returncode == 0 and ran.stdout == "wrapped\n" and len(called) == 1


# -- timeout --------------------------------------------------------------------------------


def test_timeout_kills_a_tree_that_ignores_sigint_and_sigterm(tmp_path: Path) -> None:
    seen: list[str] = []
    result = _run(
        _helper("tree.py", "--ignore-signals"),
        tmp_path,
        timeout_s=10.0,
        grace_s=1.0,
        on_stdout_line=_collect(seen),
    )
    assert "ready" in seen, "the tree was not fully started before the timeout"
    assert result.timed_out and not result.aborted
    assert result.returncode == -signal.SIGKILL  # SIGINT was ignored, so the grace ran out
    assert result.duration_s < KILLED_WITHIN_S
    assert result.orphans_killed >= 1
    _assert_tree_gone(result.stdout)


def test_orphans_are_killed_after_a_normal_exit(tmp_path: Path) -> None:
    # The grandchild keeps the runner's stderr pipe open: run() must not wait for EOF on it.
    result = _run(_helper("tree.py", "--exit-after-spawn"), tmp_path, timeout_s=60.0)
    assert result.returncode == 0
    assert not result.timed_out
    assert result.orphans_killed == 1
    assert result.duration_s < KILLED_WITHIN_S
    _assert_tree_gone(result.stdout)


def test_token_less_members_of_the_process_group_are_killed_too(tmp_path: Path) -> None:
    # A child that exec'd with an empty environment has no token, but it stayed in the group.
    tree = _helper("tree.py", "--exit-after-spawn", "--tokenless-sibling")
    result = _run(tree, tmp_path)
    assert result.returncode == 0
    assert result.orphans_killed == 2  # the setsid grandchild and the token-less sibling
    _assert_tree_gone(result.stdout)
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left as a zombie
        os.kill(int(_field(result.stdout, "tokenless")), 0)


def test_a_descendant_without_token_or_group_is_killed_once_adopted(tmp_path: Path) -> None:
    # `setsid env -i …`: neither the token nor the group finds it; it becomes our child (we are a
    # child subreaper) when its parent exits, and a child we did not have before the run is the run's.
    result = _run(_helper("tree.py", "--exit-after-spawn", "--escaped"), tmp_path)
    assert result.returncode == 0
    assert result.orphans_killed == 2  # the setsid grandchild and the escaped sleeper
    _assert_tree_gone(result.stdout)
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(int(_field(result.stdout, "escaped")), 0)


ALL_ESCAPES = ("--exit-after-spawn", "--tokenless-sibling", "--escaped")


def test_the_sweep_reads_the_runs_own_tree_not_the_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every escape (setsid, a token-less group member, `setsid env -i`) is found from this
    # process's child lists alone: listing the machine's processes would fail the run.
    def no_scan() -> list[int]:
        raise AssertionError("the sweep scanned /proc")

    monkeypatch.setattr(reaper, "_proc_pids", no_scan)
    result = _run(_helper("tree.py", *ALL_ESCAPES), tmp_path)
    monkeypatch.undo()
    assert result.returncode == 0
    assert result.orphans_killed == 3  # the setsid grandchild, the token-less sibling, the escaped sleeper
    _assert_tree_gone(result.stdout)
    for name in ("tokenless", "escaped"):
        with pytest.raises(ProcessLookupError):  # killed and reaped
            os.kill(int(_field(result.stdout, name)), 0)


def test_without_child_lists_the_proc_scan_still_kills_every_escape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A kernel built without CONFIG_PROC_CHILDREN: token, group and adoption, by a scan of /proc.
    monkeypatch.setattr(reaper, "_children_of", lambda pid: None)
    result = _run(_helper("tree.py", *ALL_ESCAPES), tmp_path)
    assert result.returncode == 0
    assert result.orphans_killed == 3
    _assert_tree_gone(result.stdout)
    for name in ("tokenless", "escaped"):
        with pytest.raises(ProcessLookupError):
            os.kill(int(_field(result.stdout, name)), 0)


def test_children_this_process_had_before_the_run_are_left_alone(tmp_path: Path) -> None:
    older = subprocess.Popen([PY, "-c", "import time; time.sleep(300)"], env=_env())
    try:
        result = _run(_helper("tree.py", "--exit-after-spawn", "--escaped"), tmp_path)
        assert result.orphans_killed == 2
        assert older.poll() is None  # still running
    finally:
        older.kill()
        older.wait()


def test_reaping_orphans_never_steals_an_unrelated_childs_status(tmp_path: Path) -> None:
    unrelated = subprocess.Popen([PY, "-c", "raise SystemExit(7)"])
    while os.waitid(os.P_PID, unrelated.pid, os.WEXITED | os.WNOWAIT) is None:
        pass  # blocking waitid without WNOHANG: returns once it is a zombie
    result = _run(_helper("tree.py", "--exit-after-spawn"), tmp_path)
    assert result.orphans_killed == 1
    assert unrelated.wait(timeout=10) == 7  # a stolen status would read 0


# The main process forks a child that exits at once and is never waited for, prints its pid, and
# exits: the child, a zombie already, is handed to the runner (a child subreaper) with no sweep ever
# seeing it alive.  Bubblewrap does the same with its sandbox init on nearly every run.
_LEAVES_A_DEAD_CHILD = (
    "import os, time\n"
    "if os.fork() == 0:\n"
    "    os._exit(0)\n"
    "time.sleep(0.2)\n"
    "print(os.getpid(), flush=True)\n"
)


def _children_in_session(session: int) -> list[str]:
    """This process's children, zombies included, in ``session``: "pid state" each."""
    found = []
    for name in os.listdir("/proc"):
        try:
            stat = Path("/proc", name, "stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if int(fields[1]) == os.getpid() and int(fields[3]) == session:
            found.append(f"{name} {fields[0].decode()}")
    return found


def test_a_process_of_the_run_that_died_unseen_is_reaped(tmp_path: Path) -> None:
    result = _run([PY, "-c", _LEAVES_A_DEAD_CHILD], tmp_path)
    assert result.returncode == 0, result.stderr
    assert _children_in_session(int(result.stdout)) == []  # no zombie left behind


# -- KeyboardInterrupt ----------------------------------------------------------------------


def _raise_keyboard_interrupt() -> bool:
    raise KeyboardInterrupt


def _signal_self() -> bool:
    os.kill(os.getpid(), signal.SIGINT)  # Python's default handler raises KeyboardInterrupt
    time.sleep(5)  # the handler fires in this thread before this returns
    return False


@pytest.mark.parametrize(
    "interrupt", [_raise_keyboard_interrupt, _signal_self], ids=["raised", "sigint"]
)
def test_keyboard_interrupt_kills_the_tree_and_propagates(
    tmp_path: Path, interrupt: Callable[[], bool]
) -> None:
    seen: list[str] = []

    def callback(line: str) -> bool:
        seen.append(line)
        return interrupt() if line == "ready" else False

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        tree = _helper("tree.py", "--ignore-signals")
        _run(tree, tmp_path, on_stdout_line=callback, grace_s=30.0)
    assert time.monotonic() - started < KILLED_WITHIN_S
    assert seen.count("ready") == 1  # the callback is not called again during cleanup
    _assert_tree_gone("\n".join(seen))


def test_an_exception_from_the_callback_also_kills_the_tree(tmp_path: Path) -> None:
    seen: list[str] = []

    def callback(line: str) -> bool:
        seen.append(line)
        if line == "ready":
            raise ValueError("bad event")
        return False

    with pytest.raises(ValueError, match="bad event"):
        _run(_helper("tree.py", "--ignore-signals"), tmp_path, on_stdout_line=callback)
    _assert_tree_gone("\n".join(seen))


# -- start errors ---------------------------------------------------------------------------


def test_missing_executable_is_a_start_error(tmp_path: Path) -> None:
    result = _run(["atlante-no-such-program-4711"], tmp_path)
    assert result.start_error == "executable not found: atlante-no-such-program-4711"
    assert result.returncode is None
    assert (result.stdout, result.stderr, result.orphans_killed) == ("", "", 0)
    assert not result.timed_out


def test_non_executable_file_is_a_start_error(tmp_path: Path) -> None:
    script = tmp_path / "not-executable.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    result = _run([str(script)], tmp_path)
    assert result.start_error == f"permission denied: {script}"
    assert result.returncode is None


def test_missing_working_directory_is_a_start_error(tmp_path: Path) -> None:
    missing = tmp_path / "gone"
    result = _run([PY, "-c", "pass"], tmp_path, cwd=missing)
    assert result.start_error == f"working directory not found: {missing}"


def test_empty_argv_is_a_start_error(tmp_path: Path) -> None:
    assert _run([], tmp_path).start_error == "empty command"


# -- environment ----------------------------------------------------------------------------


PARENT = {
    "PATH": "/opt/bin:/usr/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "LC_CTYPE": "C.UTF-8",
    "ANTHROPIC_BASE_URL": "http://gateway.internal:8080",
    "OPENAI_BASE_URL": "http://gateway.internal:8081/v1",
    "HTTPS_PROXY": "http://proxy:3128",
    "no_proxy": "localhost",
    "NODE_EXTRA_CA_CERTS": "/etc/ca.pem",
    "ANTHROPIC_API_KEY": "sk-credential",
    "AWS_SECRET_ACCESS_KEY": "secret",
    "GITHUB_TOKEN": "ghp_secret",
    "ATLANTE_RUN_TOKEN": "outer-run",
}


def test_allowlist_keeps_the_named_variables_and_replaces_home(tmp_path: Path) -> None:
    env = allowlisted_environment(PARENT, home=tmp_path / "home")
    assert env == {
        "PATH": "/opt/bin:/usr/bin",
        "HOME": str(tmp_path / "home"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "LC_CTYPE": "C.UTF-8",
        "ANTHROPIC_BASE_URL": "http://gateway.internal:8080",
        "OPENAI_BASE_URL": "http://gateway.internal:8081/v1",
        "HTTPS_PROXY": "http://proxy:3128",
        "no_proxy": "localhost",
        "NODE_EXTRA_CA_CERTS": "/etc/ca.pem",
    }


def test_allowlist_adds_only_the_extra_names_given(tmp_path: Path) -> None:
    extra = ["ANTHROPIC_API_KEY", "UNSET_NAME"]
    env = allowlisted_environment(PARENT, home=tmp_path, extra_names=extra)
    assert env["ANTHROPIC_API_KEY"] == "sk-credential"
    assert "UNSET_NAME" not in env
    assert "AWS_SECRET_ACCESS_KEY" not in env and "GITHUB_TOKEN" not in env


def test_allowlist_is_one_tuple_without_secrets_or_home() -> None:
    assert isinstance(ENVIRONMENT_ALLOWLIST, tuple)
    assert len(set(ENVIRONMENT_ALLOWLIST)) == len(ENVIRONMENT_ALLOWLIST)
    assert "HOME" not in ENVIRONMENT_ALLOWLIST
    secret_words = ("KEY", "TOKEN", "SECRET", "PASSWORD")
    assert not [n for n in ENVIRONMENT_ALLOWLIST if any(w in n for w in secret_words)]


def test_child_sees_the_allowlisted_environment_plus_the_run_token(tmp_path: Path) -> None:
    parent = {**PARENT, "PATH": os.environ["PATH"], TEST_MARK[0]: TEST_MARK[1]}
    env = allowlisted_environment(parent, home=tmp_path, extra_names=[TEST_MARK[0]])
    code = "import json, os; print(json.dumps(dict(os.environ)))"
    result = run([PY, "-c", code], cwd=tmp_path, env=env, timeout_s=60.0)
    child = json.loads(result.stdout)
    assert child["ANTHROPIC_BASE_URL"] == "http://gateway.internal:8080"
    assert child["PATH"] == os.environ["PATH"]
    assert child["HOME"] == str(tmp_path)
    assert "GITHUB_TOKEN" not in child and "ANTHROPIC_API_KEY" not in child
    assert child["ATLANTE_RUN_TOKEN"] not in ("", "outer-run")  # a fresh token per run


# -- the token scan itself ------------------------------------------------------------------


def test_live_processes_with_token_finds_exactly_the_carriers(tmp_path: Path) -> None:
    token = "test-scan-" + os.urandom(8).hex()
    carrier = subprocess.Popen(
        [PY, "-c", "import time; print('up', flush=True); time.sleep(300)"],
        env={**_env(), "ATLANTE_RUN_TOKEN": token},
        stdout=subprocess.PIPE,
    )
    other = subprocess.Popen(
        [PY, "-c", "import time; print('up', flush=True); time.sleep(300)"],
        env={**_env(), "ATLANTE_RUN_TOKEN": token + "-other"},
        stdout=subprocess.PIPE,
    )
    try:
        for proc in (carrier, other):
            assert proc.stdout is not None and proc.stdout.readline() == b"up\n"
        assert live_processes_with_token(token) == [carrier.pid]
    finally:
        for proc in (carrier, other):
            proc.kill()
            proc.wait()
    assert live_processes_with_token(token) == []


def test_a_command_takes_sigint_even_when_the_runner_was_started_ignoring_it(tmp_path: Path) -> None:
    # A background job of a shell without job control (`cmd &` in a CI script) starts with SIGINT and
    # SIGQUIT ignored, and an ignored signal stays ignored across exec: a host would never see the
    # SIGINT that stops it at maxTokens, a timeout or Ctrl-C.
    mask = "print(next(l for l in open('/proc/self/status') if l.startswith('SigIgn')).split()[1])"
    saved = signal.signal(signal.SIGINT, signal.SIG_IGN), signal.signal(signal.SIGQUIT, signal.SIG_IGN)
    try:
        result = _run([sys.executable, "-c", mask], tmp_path)
    finally:
        signal.signal(signal.SIGINT, saved[0])
        signal.signal(signal.SIGQUIT, saved[1])
    ignored = int(result.stdout.strip(), 16)
    assert not ignored & (1 << (signal.SIGINT - 1)) and not ignored & (1 << (signal.SIGQUIT - 1)), result.stdout
