"""Run one command in its own session with a wall-clock timeout, capped capture and whole-tree kill.

Every trial runs the host CLI, setup commands and command checks through ``run``. The contract:

- argv only, never a shell; the child gets its own session and process group
  (``start_new_session=True``) and stdin from ``stdin_data`` or ``/dev/null``.
- One selector loop in the caller's thread multiplexes stdout, stderr, stdin and a pidfd of the
  child. stdout is split into lines and handed to ``on_stdout_line`` while the stream flows;
  stderr is drained at the same time, so a full pipe never blocks the child. Because the callback
  runs in the caller's thread, an exception it raises (KeyboardInterrupt included) propagates
  normally — and still ends the whole process tree first.
- Stopping (timeout, abort, or an exception such as KeyboardInterrupt while we wait): send
  ``interrupt_signal`` to the process group (SIGINT by default: Claude Code then kills its tool
  tree and emits a final ``result`` event, host-facts §6), keep reading output for ``grace_s``, then
  SIGKILL the group.
- Always, once the main process has ended: kill and reap every process of the run's tree — the
  live descendants of the children this process (a child subreaper) gained during the run: tool
  shells that left the group with ``setsid``, and descendants that also dropped the environment
  with ``env -i`` (see ``reaper`` for the mechanism, its ``/proc``-scan fallback and trade-offs) —
  and reap the run's processes that became our children and died unseen in the run's session
  (``reaper.reap_session``: bubblewrap's sandbox init), so no zombie outlives the run.
  The main process is left unreaped (a zombie) until then, so its process-group id cannot be
  recycled while we signal it.
- ``wrap`` (namespace isolation, see ``isolation``) turns the argv into a sandboxed one, e.g.
  ``bwrap … -- argv``. The executable is still resolved here first, so a missing program stays a
  start error rather than the wrapper's exit status; the interrupt then goes to every member of
  the group but the wrapper itself (``reaper.signal_group_except_leader``), and only SIGKILL
  reaches the wrapper.
- Linux >= 5.4 only (pidfds, ``/proc``, ``prctl``).
- Several runs may be in flight at once, from threads of one process (several trials per worker):
  each is started and registered in ``reaper.RUNS_IN_FLIGHT`` in one hold of its lock, and leaves it
  after its sweep, before its leader is reaped, so a run's sweep kills only that run's processes
  (the one ambiguity, a process that dropped every mark of its run, is ``reaper``'s point 1).  That
  registry is the only state this module shares, process-wide like the children it describes.
- Never SIGALRM, no signal handlers installed (but ``_children_take_interrupts`` in the main
  thread): safe to call from the main thread of a pytest(-xdist) worker or from other threads.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import selectors
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_atlante.sandbox.reaper import (
    RUNS_IN_FLIGHT,
    TOKEN_VARIABLE,
    current_children,
    ensure_child_subreaper,
    kill_processes_with_token,
    live_processes_with_token,
    reap_session,
    signal_group_except_leader,
)

__all__ = [
    "ENVIRONMENT_ALLOWLIST",
    "RunResult",
    "allowlisted_environment",
    "live_processes_with_token",
    "run",
]

# The only parent variables the host CLI and command checks may see (docs/design.md §4), plus the
# ``LC_*`` family and the credential names a host adds through ``extra_names``. Everything else —
# tokens, cloud keys, CI secrets — is dropped. HOME is never taken from the parent: it is replaced
# by the trial's private home.
ENVIRONMENT_ALLOWLIST: tuple[str, ...] = (
    # the basics a CLI and a shell need
    "PATH", "LANG", "TERM", "TZ", "TMPDIR", "USER", "LOGNAME", "SHELL",
    # proxies, both spellings (curl and node read the lower case, others the upper case)
    "http_proxy", "https_proxy", "no_proxy", "all_proxy",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
    # private CA bundles (corporate TLS interception)
    "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    # provider endpoints: users behind an API gateway depend on them (host-facts "Gateways")
    "ANTHROPIC_BASE_URL", "ANTHROPIC_BEDROCK_BASE_URL", "ANTHROPIC_VERTEX_BASE_URL",
    "ANTHROPIC_FOUNDRY_BASE_URL", "OPENAI_BASE_URL",
)  # fmt: skip
_LOCALE_PREFIX = "LC_"

# Grace after an exception (KeyboardInterrupt) interrupted the wait: the user wants out now.
_INTERRUPTED_GRACE_S = 0.5
# After the tree is dead its pipes close at once; this only bounds a token-less straggler that
# keeps them open.
_DRAIN_S = 2.0
# Any single select waits at most this long, so an infinite timeout_s never reaches epoll.
_MAX_SELECT_S = 60.0
# The longest stdout line handed to ``on_stdout_line``; a longer one only reaches the output tail.
MAX_LINE_BYTES = 16 * 1024 * 1024
_READ_CHUNK = 65536


@dataclass(frozen=True)
class RunResult:
    """What one run produced. ``returncode`` is negative (-N) when a signal N ended the process."""

    returncode: int | None  # None when it could not start
    stdout: str  # the LAST ``capture_limit`` characters
    stderr: str  # same cap
    timed_out: bool  # the wall-clock timeout hit (then the tree was killed)
    aborted: bool  # on_stdout_line asked to stop while the process ran (then the tree was killed)
    start_error: str | None  # e.g. "executable not found: foo"
    duration_s: float
    orphans_killed: int  # processes of this run found alive after the main process ended


def allowlisted_environment(
    parent: Mapping[str, str], *, home: Path, extra_names: Iterable[str] = ()
) -> dict[str, str]:
    """The parent's allowlisted variables (plus ``LC_*`` and ``extra_names``), HOME → ``home``."""
    wanted = set(ENVIRONMENT_ALLOWLIST).union(extra_names)
    env = {
        name: value
        for name, value in parent.items()
        if name in wanted or name.startswith(_LOCALE_PREFIX)
    }
    env["HOME"] = str(home)
    return env


class _TailBuffer:
    """Keeps at least the last ``limit`` characters appended, without holding the rest."""

    def __init__(self, limit: int) -> None:
        self._limit = max(limit, 0)
        self._chunks: deque[str] = deque()
        self._size = 0

    def append(self, text: str) -> None:
        self._chunks.append(text)
        self._size += len(text)
        while self._chunks and self._size - len(self._chunks[0]) >= self._limit:
            self._size -= len(self._chunks.popleft())

    def text(self) -> str:
        joined = "".join(self._chunks)
        return joined[max(len(joined) - self._limit, 0) :]


class _Interrupts:
    """Ctrl-C for the runs of other threads (``run/inflight.py`` runs several trials at once).

    A signal interrupts only the main thread; a run supervised in another thread would go on until
    its timeout.  ``interrupt_runs`` makes every run in flight, in any thread, stop its tree with the
    short grace and raise ``KeyboardInterrupt`` in its own thread, as the main thread's run does on
    Ctrl-C, and every run started before ``resume_runs`` raise it at once.  A pipe, so that each
    supervisor's select wakes on it (level-triggered: it stays readable until resumed).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.fd, self._write_fd = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self.active = False

    def interrupt(self) -> None:
        with self._lock:
            if not self.active:
                self.active = True
                os.write(self._write_fd, b"!")

    def resume(self) -> None:
        with self._lock:
            if self.active:
                with contextlib.suppress(BlockingIOError):
                    os.read(self.fd, 64)
            self.active = False


_INTERRUPTS = _Interrupts()   # process-wide, as signals are


def interrupt_runs() -> None:
    """Interrupt every run in flight in this process, whichever thread supervises it (see ``_Interrupts``)."""
    _INTERRUPTS.interrupt()


def resume_runs() -> None:
    """Let runs start again after ``interrupt_runs`` (the interrupted ones have ended)."""
    _INTERRUPTS.resume()


def let_children_take_interrupts() -> None:
    """Let the commands this process starts be interrupted.

    A signal ignored here stays ignored in every child across ``exec``, and a shell without job
    control starts a background job (``cmd &`` in a CI script, a nohup'd run) with SIGINT and
    SIGQUIT ignored.  Then the SIGINT that stops a host at ``maxTokens``, a timeout or Ctrl-C never
    arrives, and each stop waits out the grace period while the host goes on (measured: twice the
    tokens past the crossing event).  A handled signal is reset to its default in the child, so the
    ignored ones get handlers here.  Only the main thread may set them; pytest runs trials there, and ``run/inflight.py`` calls this
    before it starts trials in other threads.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) is signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def _describe_start_error(exc: OSError, program: str, cwd: Path) -> str:
    if isinstance(exc, FileNotFoundError):
        if not cwd.is_dir():
            return f"working directory not found: {cwd}"
        return f"executable not found: {program}"
    if isinstance(exc, PermissionError):
        return f"permission denied: {program}"
    return f"cannot start {program}: {exc.strerror or exc}"


class _Supervisor:
    """Owns one started child: pumps its pipes, stops it, sweeps its tree, reaps it."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        token: str,
        on_stdout_line: Callable[[str], bool] | None,
        capture_limit: int,
        stdin_bytes: bytes | None,
        known_children: frozenset[tuple[int, int]],
        wrapped: bool,
        abort_fd: int | None = None,
    ) -> None:
        self._proc = proc
        self._token = token
        self._known_children = known_children
        self._wrapped = wrapped
        self._on_line = on_stdout_line
        self._stopping = False  # once set, the callback's abort request is moot
        self._stdout = _TailBuffer(capture_limit)
        self._stderr = _TailBuffer(capture_limit)
        self._stderr_decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial_line = bytearray()
        self._overlong = False
        self._stdin_bytes = memoryview(stdin_bytes or b"")
        self._selector = selectors.DefaultSelector()
        assert proc.stdout is not None and proc.stderr is not None
        self._selector.register(proc.stdout.fileno(), selectors.EVENT_READ, "stdout")
        self._selector.register(proc.stderr.fileno(), selectors.EVENT_READ, "stderr")
        if proc.stdin is not None:
            os.set_blocking(proc.stdin.fileno(), False)
            self._selector.register(proc.stdin.fileno(), selectors.EVENT_WRITE, "stdin")
        # Readable once the child exits, so the select loop wakes on exit without polling.
        self._pidfd = os.pidfd_open(proc.pid)
        self._selector.register(self._pidfd, selectors.EVENT_READ, "exit")
        if abort_fd is not None:
            self._selector.register(abort_fd, selectors.EVENT_READ, "abort")
        self._selector.register(_INTERRUPTS.fd, selectors.EVENT_READ, "interrupt")

    # -- lifecycle ---------------------------------------------------------------------------

    def supervise(
        self, deadline: float, interrupt_signal: int, grace_s: float
    ) -> tuple[bool, bool, int]:
        """Wait for exit, timeout or abort; returns (timed_out, aborted, orphans_killed)."""
        timed_out = aborted = False
        while not self._exited():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            if self._pump(remaining):
                aborted = True
                break
        if timed_out or aborted:
            self.stop(interrupt_signal, grace_s)
        return timed_out, aborted, self.finish()

    def stop(self, interrupt_signal: int, grace_s: float) -> None:
        """Interrupt the group, read on for ``grace_s``, then SIGKILL it; return once exited."""
        self._stopping = True
        if self._proc.returncode is not None:  # already reaped: its group id may be recycled
            return
        if self._wrapped:
            signal_group_except_leader(self._proc.pid, interrupt_signal)
        else:
            self._signal_group(interrupt_signal)
        grace_deadline = time.monotonic() + grace_s
        while not self._exited() and (remaining := grace_deadline - time.monotonic()) > 0:
            self._pump(remaining)
        if not self._exited():
            self._signal_group(signal.SIGKILL)
            while not self._exited():
                self._pump(_DRAIN_S)

    def finish(self) -> int:
        """After the main process ended: sweep the tree, reap the main process, drain the pipes."""
        self._stopping = True
        group = self._proc.pid if self._proc.returncode is None else None
        try:
            orphans = kill_processes_with_token(
                self._token, process_group=group, known_children=self._known_children
            )
            if group is not None:
                # What died unseen in the run's session (bubblewrap's sandbox init, nearly every
                # run); before the leader is reaped, so the session id is certainly the run's.
                reap_session(self._proc.pid)
        finally:
            RUNS_IN_FLIGHT.end(self._token)  # before the leader is reaped: its pid is listed
        self._proc.wait()
        drain_deadline = time.monotonic() + _DRAIN_S
        while self._reading() and (remaining := drain_deadline - time.monotonic()) > 0:
            self._pump(remaining)
        self._flush_partial_line()
        self._stderr.append(self._stderr_decoder.decode(b"", final=True))
        return orphans

    def abandon_callback(self) -> None:
        """Stop calling the user's callback (it raised; cleanup must not call it again)."""
        self._on_line = None

    def close(self) -> None:
        self._selector.close()
        os.close(self._pidfd)

    def output(self) -> tuple[str, str]:
        return self._stdout.text(), self._stderr.text()

    # -- internals ---------------------------------------------------------------------------

    def _exited(self) -> bool:
        """Has the main process exited? Does not reap it (WNOWAIT) so its pgid stays reserved."""
        if self._proc.returncode is not None:
            return True
        status = os.waitid(os.P_PID, self._proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        return status is not None

    def _signal_group(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, signum)

    def _reading(self) -> bool:
        return any(key.data in ("stdout", "stderr") for key in self._selector.get_map().values())

    def _pump(self, timeout: float) -> bool:
        """One select round. Returns True when the callback asked to abort (while not stopping)."""
        timeout = min(timeout, _MAX_SELECT_S)
        abort = False
        for key, _ in self._selector.select(timeout):
            fd = int(key.fd)
            if key.data == "stdout":
                abort = self._read_stdout(fd) or abort
            elif key.data == "stderr":
                self._read_stderr(fd)
            elif key.data == "stdin":
                self._write_stdin(fd)
            elif key.data == "abort":
                self._selector.unregister(fd)  # asked once; the descriptor is the caller's
                abort = abort or not self._stopping
            elif key.data == "interrupt":
                self._selector.unregister(fd)  # process-wide: stays readable until resumed
                if not self._stopping:
                    raise KeyboardInterrupt("interrupted by interrupt_runs")
            else:  # "exit": the pidfd stays readable from now on; _exited() takes over
                self._selector.unregister(fd)
        return abort

    def _read_stdout(self, fd: int) -> bool:
        data = os.read(fd, _READ_CHUNK)
        if not data:
            self._selector.unregister(fd)
            return False
        if self._overlong:
            # The rest of a line past MAX_LINE_BYTES: only the output tail keeps it.
            head, newline, data = data.partition(b"\n")
            self._stdout.append(head.decode("utf-8", "replace") + newline.decode())
            if not newline:
                return False
            self._overlong = False
        if b"\n" not in data:
            self._partial_line.extend(data)
            if len(self._partial_line) > MAX_LINE_BYTES:
                # A line this long is no event any host emits; it is not parsed, and holding it
                # whole would let a child that never prints a newline exhaust the runner's memory.
                self._stdout.append(self._partial_line.decode("utf-8", "replace"))
                self._partial_line.clear()
                self._overlong = True
            return False
        lines = (bytes(self._partial_line) + data).split(b"\n")
        self._partial_line = bytearray(lines.pop())
        abort = False
        for line in lines:
            abort = self._deliver(line.decode("utf-8", "replace"), "\n") or abort
        return abort

    def _flush_partial_line(self) -> None:
        if self._partial_line:
            self._deliver(self._partial_line.decode("utf-8", "replace"), "")
            self._partial_line.clear()

    def _deliver(self, line: str, newline: str) -> bool:
        self._stdout.append(line + newline)
        if self._on_line is None:
            return False
        return bool(self._on_line(line)) and not self._stopping

    def _read_stderr(self, fd: int) -> None:
        data = os.read(fd, _READ_CHUNK)
        if not data:
            self._selector.unregister(fd)
            return
        self._stderr.append(self._stderr_decoder.decode(data))

    def _write_stdin(self, fd: int) -> None:
        stdin = self._proc.stdin
        assert stdin is not None
        try:
            written = os.write(fd, self._stdin_bytes[:_READ_CHUNK])
        except BlockingIOError:
            return
        except BrokenPipeError:  # the child closed stdin early: the rest is not wanted
            written = len(self._stdin_bytes)
        self._stdin_bytes = self._stdin_bytes[written:]
        if not self._stdin_bytes:
            self._selector.unregister(fd)
            stdin.close()


@dataclass(frozen=True)
class Bounds:
    """How a run is stopped early and how much of it is kept.

    On a timeout or an abort, ``interrupt_signal`` goes to the process group first (SIGINT: Claude
    Code then kills its tool tree and prints a final ``result`` event), output is read on for
    ``grace_s``, then the group is killed; each stream keeps its last ``capture_limit`` characters.
    """

    interrupt_signal: int = signal.SIGINT
    grace_s: float = 3.0
    capture_limit: int = 1_000_000
    # A descriptor that turns readable when someone outside the stream wants the run stopped (the
    # metering proxy, after the response that crossed maxTokens): an abort like the callback's.
    abort_fd: int | None = None


DEFAULT_BOUNDS = Bounds()


def run(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    on_stdout_line: Callable[[str], bool] | None = None,
    bounds: Bounds = DEFAULT_BOUNDS,
    stdin_data: str | None = None,
    wrap: Callable[[list[str]], list[str]] | None = None,
) -> RunResult:
    """Run ``argv`` to completion, timeout or abort (stopped as ``bounds`` says); nothing it
    started survives the call.

    ``on_stdout_line`` gets each stdout line (without its newline) as it arrives, in the caller's
    thread; returning True stops the run (``aborted``). It keeps being called for lines that
    arrive while the tree is being stopped — so the final event a CLI prints on SIGINT is seen —
    but its return value is then ignored. If it (or a KeyboardInterrupt) raises, the tree is
    stopped with a short grace and the exception propagates.
    """
    started = time.monotonic()
    if not argv:
        return _not_started("empty command", started)
    if wrap is not None:
        missing = _unresolvable(argv[0], cwd, env)
        if missing is not None:
            return _not_started(missing, started)
    if _INTERRUPTS.active:
        raise KeyboardInterrupt("interrupted by interrupt_runs")
    ensure_child_subreaper()
    let_children_take_interrupts()
    token = uuid.uuid4().hex
    known_children = current_children()
    try:
        command = list(argv) if wrap is None else wrap(list(argv))  # not under the registry's lock
        proc = RUNS_IN_FLIGHT.start(token, known_children, lambda: subprocess.Popen(
            command,
            cwd=cwd,
            env={**env, TOKEN_VARIABLE: token},
            stdin=subprocess.DEVNULL if stdin_data is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            bufsize=0,
        ))
    except OSError as exc:
        return _not_started(_describe_start_error(exc, argv[0], cwd), started)
    with proc:
        try:
            supervisor = _Supervisor(
                proc,
                token,
                on_stdout_line,
                bounds.capture_limit,
                None if stdin_data is None else stdin_data.encode(),
                known_children,
                wrap is not None,
                bounds.abort_fd,
            )
        except BaseException:
            RUNS_IN_FLIGHT.end(token)  # before ``with proc`` reaps the leader
            raise
        try:
            timed_out, aborted, orphans = supervisor.supervise(
                started + timeout_s, bounds.interrupt_signal, bounds.grace_s
            )
        except BaseException:
            supervisor.abandon_callback()
            supervisor.stop(bounds.interrupt_signal, min(bounds.grace_s, _INTERRUPTED_GRACE_S))
            supervisor.finish()
            raise
        finally:
            supervisor.close()
        stdout, stderr = supervisor.output()
    return RunResult(
        returncode=proc.returncode,
        stdout=stdout,
        stderr=stderr,
        timed_out=timed_out,
        aborted=aborted,
        start_error=None,
        duration_s=time.monotonic() - started,
        orphans_killed=orphans,
    )


def _unresolvable(program: str, cwd: Path, env: Mapping[str, str]) -> str | None:
    """Why ``program`` could not be started from ``cwd`` with ``env``'s PATH, or None if it can.

    Mirrors what Popen reports without a wrapper (``_describe_start_error``), for wrapped runs whose
    wrapper would otherwise turn a missing program into its own exit status.
    """
    if not cwd.is_dir():
        return f"working directory not found: {cwd}"
    if os.sep in program:
        path = cwd / program
        if not path.exists():
            return f"executable not found: {program}"
        return None if os.access(path, os.X_OK) else f"permission denied: {program}"
    if shutil.which(program, path=env.get("PATH", os.defpath)) is None:
        return f"executable not found: {program}"
    return None


def _not_started(reason: str, started: float) -> RunResult:
    return RunResult(
        returncode=None,
        stdout="",
        stderr="",
        timed_out=False,
        aborted=False,
        start_error=reason,
        duration_s=time.monotonic() - started,
        orphans_killed=0,
    )
