"""The `docker` provider (production): one fresh container per run, through the Docker SDK.

The container has no network (`network_mode="none"`), a read-only root file system, a small
private /tmp, the program folder read-only at /in and the run folder at /out, runs as uid/gid
65534 with every capability dropped and no-new-privileges, under Docker's default seccomp profile.
Limits: the cgroup memory limit (no swap) plus RLIMIT_DATA so a huge allocation fails at once,
`nano_cpus`, `pids_limit`, rlimits for CPU time, open files, file size and core files, and the
wall-clock deadline enforced by the monitor (the container is killed, then removed). The image
must already be on the engine (datafarm never pulls at run time) and hold the Python the program
needs. The environment is cleared with `env -i`, so not even the image's variables reach it.
The program talks over the container's attached stdin/stdout, demultiplexed here into plain pipes.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from .limits import SandboxLimits
from .process import ExitStatus, SandboxedProcess, last_line
from .provider import (
    PYTHON,
    SANDBOX_IN,
    SANDBOX_OUT,
    SANDBOX_UID,
    Availability,
    SandboxError,
    SandboxProvider,
    base_environment,
)

DEFAULT_IMAGE = "python:3.11-slim"
"""Image used when none is configured; it must already be present on the engine."""
DEFAULT_ENGINE = "unix:///var/run/docker.sock"
STDOUT_STREAM, STDERR_STREAM = 1, 2
STATS_INTERVAL_SECONDS = 0.25
"""How often the monitor asks the engine for the container's task count."""


def demux_stream(read: Callable[[int], bytes], on_stdout: Callable[[bytes], None], on_stderr: Callable[[bytes], None]) -> None:
    """Split Docker's multiplexed attach stream (8-byte header: stream id, 3 zero bytes, big-endian
    payload length; then the payload) until it ends. `read(n)` returns up to n bytes, b"" at end."""

    def exactly(n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = read(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    while (header := exactly(8)) is not None:
        stream, length = header[0], struct.unpack(">I", header[4:8])[0]
        payload = exactly(length) if length else b""
        if payload is None:
            return
        if stream == STDOUT_STREAM:
            on_stdout(payload)
        elif stream == STDERR_STREAM:
            on_stderr(payload)


def _process_limit_message(text: str) -> bool:
    line = last_line(text)
    return "BlockingIOError" in line or "Resource temporarily unavailable" in line or "can't start new thread" in line


class DockerSandboxedProcess(SandboxedProcess):
    """A run in a Docker container, its attach socket bridged to ordinary pipes."""

    def __init__(self, container, attach_socket: socket.socket, *, limits: SandboxLimits) -> None:
        super().__init__(provider="docker", isolated=True, limits=limits)
        self._container = container
        self._limit_seen = False
        self._next_stats = 0.0
        self._cpu_seen: float | None = None
        self._socket = attach_socket
        stdin_read, stdin_write = os.pipe()
        stdout_read, stdout_write = os.pipe()
        self.stdin = open(stdin_write, "wb", buffering=0)
        self.stdout = open(stdout_read, "rb", buffering=0)
        self._exit: dict | None = None
        self._exited = threading.Event()
        threading.Thread(target=self._pump_stdin, args=(stdin_read,), name="docker-stdin", daemon=True).start()
        threading.Thread(target=self._pump_output, args=(stdout_write,), name="docker-output", daemon=True).start()
        threading.Thread(target=self._wait_container, name="docker-wait", daemon=True).start()
        self._start_monitor()

    def _pump_stdin(self, fd: int) -> None:
        try:
            while chunk := os.read(fd, 65536):
                self._socket.sendall(chunk)
        except OSError:
            pass
        finally:
            os.close(fd)
            try:
                self._socket.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def _pump_output(self, fd: int) -> None:
        def to_stdout(data: bytes) -> None:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]

        try:
            demux_stream(self._socket.recv, to_stdout, self._stderr.feed)
        except OSError:
            pass
        finally:
            os.close(fd)

    def _wait_container(self) -> None:
        import requests

        while True:
            try:
                self._container.wait(timeout=5)
                break
            except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
                continue
            except Exception:  # noqa: BLE001 - the container is gone; report what reload() finds
                break
        try:
            self._container.reload()
            self._exit = self._container.attrs.get("State", {})
        except Exception:  # noqa: BLE001
            self._exit = {}
        self._exited.set()

    def _reap(self, timeout: float) -> ExitStatus | None:
        if not self._exited.wait(timeout):
            return None
        state = self._exit or {}
        code = int(state.get("ExitCode", -1))
        error = state.get("Error") or None
        if error:
            return ExitStatus(None, None, setup_error=str(error))
        # docker-init reports a child killed by signal n as exit code 128 + n.
        oom = bool(state.get("OOMKilled"))
        if code > 128:
            return ExitStatus(None, code - 128, cpu_seconds=self._cpu_seen, oom_killed=oom)
        return ExitStatus(code, None, cpu_seconds=self._cpu_seen, oom_killed=oom)

    def _kill_all(self) -> None:
        try:
            self._container.kill()
        except Exception:  # noqa: BLE001 - already stopped or removed
            pass

    def _process_limit_reached(self) -> bool:
        # Docker exposes no "limit hit" counter: look at the task count (one-shot stats, a few
        # times a second) and at a fork/thread failure the program reported.
        if self._limit_seen or _process_limit_message(self._stderr.text()):
            self._limit_seen = True
            return True
        now = time.monotonic()
        if now >= self._next_stats and self._exit is None:
            self._next_stats = now + STATS_INTERVAL_SECONDS
            try:
                stats = self._container.client.api.stats(self._container.id, stream=False, one_shot=True)
                current = int((stats.get("pids_stats") or {}).get("current", 0))
                usage = ((stats.get("cpu_stats") or {}).get("cpu_usage") or {}).get("total_usage")
                if usage:
                    # The last reading before the end: enough to tell a CPU hard-limit SIGKILL.
                    self._cpu_seen = int(usage) / 1e9
            except Exception:  # noqa: BLE001 - the container may be gone already
                current = 0
            self._limit_seen = current >= self.limits.processes
        return self._limit_seen

    def _finish(self) -> None:
        try:
            self._container.remove(force=True)
        except Exception:  # noqa: BLE001
            pass
        try:
            self._socket.close()
        except OSError:
            pass


class DockerProvider(SandboxProvider):
    """Docker sandbox. `image` must be present on the engine and provide `python` (the interpreter
    `PYTHON` maps to); `cpus` is the CPU share (`nano_cpus`); `base_url` overrides DOCKER_HOST."""

    name = "docker"
    isolated = True

    def __init__(self, image: str = DEFAULT_IMAGE, *, python: str = "python", cpus: float = 1.0, base_url: str | None = None) -> None:
        self.image = image
        self.python = python
        self.cpus = cpus
        self.base_url = base_url

    def engine_address(self) -> str:
        """Where the engine is expected to answer."""
        return self.base_url or os.environ.get("DOCKER_HOST") or DEFAULT_ENGINE

    def _client(self, timeout: int = 10):
        import docker

        if self.base_url:
            return docker.DockerClient(base_url=self.base_url, timeout=timeout)
        return docker.from_env(timeout=timeout)

    def availability(self) -> Availability:
        """Available when an engine answers a ping and the image is present."""

        def status(ok: bool, reason: str) -> Availability:
            return Availability(name=self.name, available=ok, isolated=True, reason=reason)

        try:
            import docker
        except ImportError:
            return status(False, "the docker SDK is not installed (pip install docker)")
        try:
            client = self._client(timeout=3)
            client.ping()
        except Exception as error:  # noqa: BLE001 - any failure means "no engine here"
            return status(False, f"no Docker engine answers at {self.engine_address()} ({type(error).__name__})")
        try:
            client.images.get(self.image)
        except docker.errors.ImageNotFound:
            return status(False, f"image {self.image} is not on the engine; run `docker pull {self.image}` (datafarm never pulls at run time)")
        except Exception as error:  # noqa: BLE001
            return status(False, f"the engine at {self.engine_address()} failed to list image {self.image}: {error}")
        finally:
            client.close()
        return status(True, f"Docker engine at {self.engine_address()}, image {self.image}")

    def _launch(
        self,
        program_dir: Path,
        argv: Sequence[str],
        *,
        out_dir: Path,
        limits: SandboxLimits,
        env: Mapping[str, str] | None,
    ) -> SandboxedProcess:
        """Launch `argv` in a fresh container; see `SandboxProvider.start`."""
        import docker

        if os.geteuid() == 0:
            os.chown(out_dir, SANDBOX_UID, SANDBOX_UID)
        else:
            os.chmod(out_dir, 0o777)
        environment = {**base_environment(), **(env or {})}
        program = [self.python if i == 0 and a == PYTHON else a for i, a in enumerate(argv)]
        command = ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in environment.items()), *program]
        cpu = limits.cpu_seconds
        Ulimit = docker.types.Ulimit
        container = None
        try:
            client = self._client(timeout=30)
            container = client.containers.create(
                self.image,
                command,
                stdin_open=True,
                stdin_once=True,
                tty=False,
                init=True,  # docker-init as pid 1, so kernel signals (SIGXCPU...) reach the program
                network_mode="none",
                read_only=True,
                mem_limit=limits.memory_bytes,
                memswap_limit=limits.memory_bytes,  # no swap
                nano_cpus=int(self.cpus * 1e9),
                pids_limit=limits.processes,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                user=f"{SANDBOX_UID}:{SANDBOX_UID}",
                hostname="sandbox",
                tmpfs={"/tmp": f"size={max(limits.file_size_bytes, 1 << 20)},mode=1777"},
                volumes={
                    str(program_dir): {"bind": SANDBOX_IN, "mode": "ro"},
                    str(out_dir): {"bind": SANDBOX_OUT, "mode": "rw"},
                },
                working_dir=SANDBOX_OUT,
                ulimits=[
                    Ulimit(name="cpu", soft=cpu, hard=cpu + 1),
                    Ulimit(name="data", soft=limits.memory_bytes, hard=limits.memory_bytes),
                    Ulimit(name="nofile", soft=limits.open_files, hard=limits.open_files),
                    Ulimit(name="fsize", soft=limits.file_size_bytes, hard=limits.file_size_bytes),
                    Ulimit(name="core", soft=0, hard=0),
                ],
                labels={"datafarm.sandbox": "1"},
            )
            attached = client.api.attach_socket(
                container.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            raw = getattr(attached, "_sock", attached)
            container.start()
        except docker.errors.DockerException as error:
            if container is not None:
                try:
                    container.remove(force=True)
                except docker.errors.DockerException:
                    pass
            raise SandboxError(f"docker could not start the sandbox container: {error}") from error
        return DockerSandboxedProcess(container, raw, limits=limits)
