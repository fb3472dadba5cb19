"""A live sandboxed program: pipes to talk to it, a monitor that enforces the wall-clock deadline,
and the precise reason it ended.

One monitor thread per run owns the wait for the program: it kills the whole run when the deadline
passes or a provider reports a limit reached, then classifies how the run ended. Callers talk over
`stdin`/`stdout` (raw binary pipes) and call `wait()`, `kill()` or `communicate()`.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from .limits import SandboxLimits
from .result import EndCause, SandboxResult, format_quantity, signal_name

POLL_SECONDS = 0.02
"""How often the monitor checks the deadline and the provider's limit counters."""
STDERR_TAIL_BYTES = 8192
"""How much of the program's stderr is kept for the result."""
_MEMORY_ERROR = re.compile(r"\w*MemoryError\b")
_FILE_TOO_LARGE = re.compile(r"\[Errno 27\]|File too large")


@dataclass
class ExitStatus:
    """How the provider saw the run's main process end."""

    exit_code: int | None
    """Exit code when the program exited by itself."""
    signal: int | None
    """Signal number when a signal ended it."""
    cpu_seconds: float | None = None
    """CPU time of the run's processes the provider could account for, when it can tell."""
    oom_killed: bool = False
    """True when the provider's memory accounting killed the run (Docker's OOMKilled)."""
    setup_error: str | None = None
    """Set when the sandbox failed before the program started; the provider's message."""


class StderrTail:
    """Drains a pipe on a background thread, keeping only the last `limit` bytes, so a program that
    floods stderr neither blocks nor fills the harness's memory."""

    def __init__(self, limit: int = STDERR_TAIL_BYTES) -> None:
        self._limit = limit
        self._data = bytearray()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def feed(self, data: bytes) -> None:
        """Append bytes, dropping the oldest beyond the limit."""
        with self._lock:
            self._data += data
            if len(self._data) > self._limit:
                del self._data[: len(self._data) - self._limit]

    def drain(self, stream: BinaryIO) -> None:
        """Start reading `stream` to its end on a daemon thread."""

        def pump() -> None:
            try:
                while chunk := stream.read(65536):
                    self.feed(chunk)
            except (OSError, ValueError):
                pass
            finally:
                try:
                    stream.close()
                except OSError:
                    pass

        self._thread = threading.Thread(target=pump, name="sandbox-stderr", daemon=True)
        self._thread.start()

    def join(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for the stream's end."""
        if self._thread is not None:
            self._thread.join(timeout)

    def text(self) -> str:
        """The kept bytes as text (invalid UTF-8 replaced)."""
        with self._lock:
            return self._data.decode("utf-8", "replace")


def last_line(text: str, limit: int = 240) -> str:
    """The last non-blank line of `text`, shortened to `limit` characters."""
    for line in reversed(text.splitlines()):
        if line.strip():
            line = line.strip()
            return line if len(line) <= limit else line[: limit - 3] + "..."
    return ""


class SandboxedProcess(ABC):
    """A program running in a sandbox. Talk to it over `stdin` and `stdout` (raw binary pipes);
    `wait()` returns its `SandboxResult`; `kill()` ends every process of the run at once.

    Use it as a context manager so the run is killed and reaped even when the caller fails.
    """

    stdin: BinaryIO
    """Write end of the program's stdin."""
    stdout: BinaryIO
    """Read end of the program's stdout."""

    def __init__(self, *, provider: str, isolated: bool, limits: SandboxLimits) -> None:
        self.provider = provider
        self.isolated = isolated
        self.limits = limits
        self.started = time.monotonic()
        self.deadline = self.started + limits.wall_seconds
        self._kill_request: tuple[EndCause, str] | None = None
        self._kill_lock = threading.Lock()
        self._result: SandboxResult | None = None
        self._done = threading.Event()
        self._stderr = StderrTail()
        self._monitor_thread: threading.Thread | None = None

    # -- what each provider implements -------------------------------------------------------------

    @abstractmethod
    def _reap(self, timeout: float) -> ExitStatus | None:
        """Wait up to `timeout` seconds for the run's main process; its status once it is gone."""

    @abstractmethod
    def _kill_all(self) -> None:
        """Kill every process of the run, now. Must be safe to call repeatedly and after the end."""

    def _process_limit_reached(self) -> bool:
        """True once the run has hit its process limit (providers that can tell override this)."""
        return False

    def _finish(self) -> None:
        """Release what the provider holds for the run (cgroups, containers); called once, last."""

    # -- monitor -----------------------------------------------------------------------------------

    def _start_monitor(self) -> None:
        self._monitor_thread = threading.Thread(
            target=self._monitor, name=f"sandbox-{self.provider}-monitor", daemon=True
        )
        self._monitor_thread.start()

    def _monitor(self) -> None:
        result: SandboxResult | None = None
        try:
            status = None
            while status is None:
                status = self._reap(POLL_SECONDS)
                if status is not None or self._kill_request is not None:
                    continue
                if time.monotonic() >= self.deadline:
                    wall = format_quantity(self.limits.wall_seconds, "s")
                    self._request_kill(EndCause.WALL_DEADLINE, f"wall-clock deadline ({wall}) exceeded")
                elif self._process_limit_reached():
                    n = self.limits.processes
                    self._request_kill(EndCause.PROCESS_LIMIT, f"killed: process limit ({n}) reached")
            wall_seconds = time.monotonic() - self.started
            self._kill_all()  # whatever the main process left behind
            self._stderr.join(timeout=2.0)
            cause, reason = self._classify(status)
            result = SandboxResult(
                provider=self.provider,
                isolated=self.isolated,
                ended_by=cause,
                reason=reason,
                exit_code=status.exit_code if cause is not EndCause.SANDBOX_ERROR else None,
                signal=status.signal,
                wall_seconds=round(wall_seconds, 3),
                cpu_seconds=round(status.cpu_seconds, 3) if status.cpu_seconds is not None else None,
                stderr_tail=self._stderr.text(),
            )
        except BaseException as error:  # noqa: BLE001 - a waiter must never hang on a dead monitor
            try:
                self._kill_all()
            finally:
                result = SandboxResult(
                    provider=self.provider,
                    isolated=self.isolated,
                    ended_by=EndCause.SANDBOX_ERROR,
                    reason=f"harness error while monitoring the run: {error!r}",
                    wall_seconds=round(time.monotonic() - self.started, 3),
                    stderr_tail=self._stderr.text(),
                )
        finally:
            try:
                self._finish()
            finally:
                self._result = result
                self._done.set()

    def _request_kill(self, cause: EndCause, reason: str) -> None:
        with self._kill_lock:
            if self._kill_request is None and not self._done.is_set():
                self._kill_request = (cause, reason)
        self._kill_all()

    def _classify(self, status: ExitStatus) -> tuple[EndCause, str]:
        """Turn what was observed into one cause and one precise sentence."""
        limits = self.limits
        if self._kill_request is not None:
            return self._kill_request
        if status.setup_error is not None:
            return EndCause.SANDBOX_ERROR, f"sandbox setup failed: {status.setup_error}"
        if self._process_limit_reached():
            return EndCause.PROCESS_LIMIT, f"process limit ({limits.processes}) reached"
        if status.oom_killed:
            return EndCause.MEMORY_LIMIT, f"memory limit ({format_quantity(limits.memory_bytes, 'bytes')}) exceeded"
        sig = status.signal
        cpu_text = format_quantity(limits.cpu_seconds, "s")
        if sig is not None:
            # The kernel sends SIGXCPU at the soft CPU limit and SIGKILL at the hard one; the CPU
            # time (when the provider measures it) tells the latter from any other SIGKILL.
            used = status.cpu_seconds
            if sig == signal.SIGXCPU or (
                sig == signal.SIGKILL and used is not None and used >= 0.9 * limits.cpu_seconds
            ):
                return EndCause.CPU_LIMIT, f"cpu time limit ({cpu_text}) exceeded"
            if sig == signal.SIGXFSZ:
                size = format_quantity(limits.file_size_bytes, "bytes")
                return EndCause.FILE_SIZE_LIMIT, f"file size limit ({size}) exceeded"
            description = signal.strsignal(sig) or ""
            suffix = f" ({description})" if description else ""
            return EndCause.SIGNAL, f"killed by signal {signal_name(sig)}{suffix}"
        code = status.exit_code
        last = last_line(self._stderr.text())
        if code:
            if _MEMORY_ERROR.search(last):
                memory = format_quantity(limits.memory_bytes, "bytes")
                return EndCause.MEMORY_LIMIT, f"memory limit ({memory}) exceeded: {last}"
            if _FILE_TOO_LARGE.search(last):
                size = format_quantity(limits.file_size_bytes, "bytes")
                return EndCause.FILE_SIZE_LIMIT, f"file size limit ({size}) exceeded: {last}"
            return EndCause.EXITED, f"exited with code {code}" + (f": {last}" if last else "")
        return EndCause.EXITED, "exited normally (code 0)"

    # -- public API --------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """True until every process of the run is gone and the result is known."""
        return not self._done.is_set()

    def poll(self) -> SandboxResult | None:
        """The result if the run has ended, else None."""
        return self._result if self._done.is_set() else None

    def wait(self, timeout: float | None = None) -> SandboxResult:
        """Block until the run has ended (at most until its wall deadline plus a moment) and
        return the result; TimeoutError if `timeout` seconds pass first."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"sandboxed run still going after {timeout} s")
        assert self._result is not None
        return self._result

    def kill(self, reason: str = "killed by the harness") -> None:
        """End every process of the run now; the result's reason will be `reason`
        (unless the run had already ended)."""
        self._request_kill(EndCause.KILLED, reason)

    def remaining_seconds(self) -> float:
        """Seconds left before the wall-clock deadline (negative once passed)."""
        return self.deadline - time.monotonic()

    def communicate(
        self, input: bytes | None = None, *, max_output_bytes: int = 16 << 20
    ) -> tuple[bytes, SandboxResult]:
        """Send `input` (then close stdin), read stdout until the run ends, return
        `(stdout, result)`. Output beyond `max_output_bytes` kills the run."""

        def feed() -> None:
            try:
                if input:
                    self.stdin.write(input)
            except (BrokenPipeError, OSError, ValueError):
                pass
            finally:
                try:
                    self.stdin.close()
                except OSError:
                    pass

        writer = threading.Thread(target=feed, name="sandbox-stdin", daemon=True)
        writer.start()
        chunks: list[bytes] = []
        total = 0
        keep = True
        for chunk in self._read_until_end():
            if not keep:
                continue  # past the cap: drain, so a pump feeding the pipe is never stuck
            total += len(chunk)
            if total > max_output_bytes:
                self.kill(f"stdout exceeded {format_quantity(max_output_bytes, 'bytes')}")
                keep = False
                continue
            chunks.append(chunk)
        result = self.wait()
        writer.join(1.0)
        return b"".join(chunks), result

    def _read_until_end(self, linger: float = 0.5):
        """Yield stdout chunks until end of file, or until the run is over and nothing more came
        for `linger` seconds (a descendant that escaped the kill could hold the pipe open)."""
        fd = self.stdout.fileno()
        quiet_since: float | None = None
        while True:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    return
                if not chunk:
                    return
                quiet_since = None
                yield chunk
            elif self._done.is_set():
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= linger:
                    return

    def close(self) -> SandboxResult:
        """Kill the run if it is still going, wait for its end, close the pipes; the result."""
        if self.running:
            self.kill("closed by the harness before the program ended")
        result = self.wait()
        for stream in (self.stdin, self.stdout):
            try:
                stream.close()
            except OSError:
                pass
        return result

    def __enter__(self) -> SandboxedProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PopenSandboxedProcess(SandboxedProcess):
    """A sandboxed run whose main process is a direct child of the harness (bwrap, none).

    The monitor is the only code that reaps the child (`os.wait4`, which also yields the CPU time
    of every process the child reaped), and signals go through a pidfd, so a kill can never reach
    an unrelated process that reused the pid.
    """

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        *,
        provider: str,
        isolated: bool,
        limits: SandboxLimits,
        shell_signal_codes: bool,
        kill_extra: Callable[[], None] | None = None,
        process_limit_reached: Callable[[], bool] | None = None,
        setup_error: Callable[[], str | None] | None = None,
        cpu_seconds: Callable[[], float | None] | None = None,
        finish: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(provider=provider, isolated=isolated, limits=limits)
        assert popen.stdin is not None and popen.stdout is not None and popen.stderr is not None
        self._popen = popen
        self.stdin = popen.stdin
        self.stdout = popen.stdout
        self._shell_signal_codes = shell_signal_codes
        self._kill_extra = kill_extra
        self._limit_probe = process_limit_reached
        self._setup_error = setup_error
        self._cpu_probe = cpu_seconds
        self._finish_hook = finish
        self._reap_lock = threading.Lock()
        self._reaped = False
        try:
            self._pidfd: int | None = os.pidfd_open(popen.pid)
        except (AttributeError, OSError):
            self._pidfd = None
        self._stderr.drain(popen.stderr)
        self._start_monitor()

    def _reap(self, timeout: float) -> ExitStatus | None:
        end = time.monotonic() + timeout
        while True:
            if self._pidfd is not None:
                select.select([self._pidfd], [], [], max(0.0, end - time.monotonic()))
            with self._reap_lock:
                pid, status, usage = os.wait4(self._popen.pid, os.WNOHANG)
                if pid:
                    self._reaped = True
                    self._popen.returncode = os.waitstatus_to_exitcode(status)
            if pid:
                break
            if time.monotonic() >= end:
                return None
            if self._pidfd is None:
                time.sleep(min(0.005, max(0.0, end - time.monotonic())))
        # wait4's CPU time covers only processes the child reaped; a provider with a better
        # source (the run's cgroup) overrides it.
        cpu = usage.ru_utime + usage.ru_stime
        if self._cpu_probe is not None and (measured := self._cpu_probe()) is not None:
            cpu = measured
        if os.WIFSIGNALED(status):
            exit_status = ExitStatus(None, os.WTERMSIG(status), cpu)
        else:
            code = os.WEXITSTATUS(status)
            # bwrap reports a child killed by signal n as exit code 128 + n, like a shell.
            if self._shell_signal_codes and code > 128 and _is_signal(code - 128):
                exit_status = ExitStatus(None, code - 128, cpu)
            else:
                exit_status = ExitStatus(code, None, cpu)
        if self._setup_error is not None:
            exit_status.setup_error = self._setup_error()
        return exit_status

    def _kill_all(self) -> None:
        with self._reap_lock:
            if not self._reaped:
                try:
                    if self._pidfd is not None:
                        signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
                    else:
                        os.kill(self._popen.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if self._kill_extra is not None:
            self._kill_extra()

    def _process_limit_reached(self) -> bool:
        return self._limit_probe() if self._limit_probe is not None else False

    def _finish(self) -> None:
        try:
            if self._finish_hook is not None:
                self._finish_hook()
        finally:
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None


def _is_signal(number: int) -> bool:
    try:
        signal.Signals(number)
    except ValueError:
        return False
    return True
