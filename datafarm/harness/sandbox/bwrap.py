"""The default sandbox: bubblewrap (`bwrap`), an unprivileged-namespace sandbox.

The program gets an empty root file system (read-only) holding only: /usr (and the merged-/usr
links /bin, /lib, /lib64, /sbin), the Python interpreter's prefix and the virtual environment
(read-only, at their host paths so the venv's links resolve), a private /proc, a minimal read-only
/dev with a small /dev/shm, a small private /tmp, the program folder read-only at /in and the
run's folder writable at /out. No /etc, no /home, no /root or /work beyond the interpreter folders.
It runs as uid/gid 65534 in fresh user, pid, network (only `lo`), IPC, UTS and cgroup namespaces,
with every capability dropped, no new user namespaces, a new session (no terminal injection) and
a cleared environment. Resource limits: rlimits set between fork and exec (CPU, address space,
open files, file size, no core files), a per-run pids cgroup for the process count (see
`pids_cgroup` for why not RLIMIT_NPROC), and the wall-clock deadline enforced by the monitor.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path

from .cgroups import RunCgroups, find_parent
from .launcher import on_launcher_thread
from .limits import SandboxLimits
from .process import PopenSandboxedProcess, SandboxedProcess
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

DEV_SHM_BYTES = 16 << 20
"""Size of the private /dev/shm (RAM-backed, so it must be small)."""
MERGED_USR_LINKS = ("bin", "lib", "lib64", "sbin")


def rlimits_for(limits: SandboxLimits) -> list[tuple[int, int, int]]:
    """(resource, soft, hard) rlimits that implement `limits` for one process."""
    cpu = limits.cpu_seconds
    return [
        # SIGXCPU at the soft limit; SIGKILL one second later if the program ignores SIGXCPU.
        (resource.RLIMIT_CPU, cpu, cpu + 1),
        (resource.RLIMIT_AS, limits.memory_bytes, limits.memory_bytes),
        (resource.RLIMIT_NOFILE, limits.open_files, limits.open_files),
        (resource.RLIMIT_FSIZE, limits.file_size_bytes, limits.file_size_bytes),
        (resource.RLIMIT_CORE, 0, 0),
    ]


def interpreter_folders(python: Path) -> tuple[Path, list[Path]]:
    """The interpreter to call and the folders it needs (its prefix and base prefix)."""
    return Path(python), [Path(p) for p in _prefixes(str(python))]


@lru_cache(maxsize=16)
def _prefixes(python: str) -> tuple[str, ...]:
    if Path(python) == Path(sys.executable):
        prefixes = {sys.prefix, sys.base_prefix}
    else:
        out = subprocess.run(
            [python, "-I", "-c", "import sys, json; print(json.dumps([sys.prefix, sys.base_prefix]))"],
            capture_output=True, text=True, timeout=30, check=True,
        )
        prefixes = set(json.loads(out.stdout))
    return tuple(sorted({str(Path(p).resolve()) for p in prefixes}))


@lru_cache(maxsize=4)
def probe_bwrap(bwrap: str) -> str | None:
    """Start an empty sandbox with the namespaces and uid the real ones use; None when it works,
    else bwrap's complaint (e.g. user namespaces disabled on this kernel or in this container)."""
    command = [bwrap, "--ro-bind", "/usr", "/usr"]
    for name in MERGED_USR_LINKS:
        host = Path("/") / name
        if host.is_symlink():
            command += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            command += ["--ro-bind", str(host), str(host)]
    command += [
        "--unshare-all", "--unshare-user", "--disable-userns", "--uid", str(SANDBOX_UID),
        "--gid", str(SANDBOX_UID), "--cap-drop", "ALL", "--clearenv", "--die-with-parent",
        "--", "/usr/bin/true",
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as error:
        return str(error)
    if done.returncode != 0:
        return done.stderr.strip() or f"bwrap exited with code {done.returncode}"
    return None


class BwrapProvider(SandboxProvider):
    """bubblewrap sandbox (the default). `python` is the interpreter the program runs with
    (default: the harness's own, i.e. the project venv)."""

    name = "bwrap"
    isolated = True

    def __init__(self, python: Path | str | None = None, bwrap: str | None = None) -> None:
        self.python = Path(python) if python is not None else Path(sys.executable)
        self._bwrap = bwrap

    def _bwrap_path(self) -> str | None:
        return self._bwrap or shutil.which("bwrap") or shutil.which("bwrap", path="/usr/bin:/bin")

    def availability(self) -> Availability:
        """Available when bwrap is installed, a per-run pids cgroup can be made, and the
        interpreter lies inside the folders that will be mounted."""

        def status(ok: bool, reason: str) -> Availability:
            return Availability(name=self.name, available=ok, isolated=True, reason=reason)

        if not sys.platform.startswith("linux"):
            return status(False, f"bwrap needs Linux (this is {sys.platform})")
        bwrap = self._bwrap_path()
        if bwrap is None:
            return status(False, "bwrap not installed: run scripts/setup-system.sh")
        if (complaint := probe_bwrap(bwrap)) is not None:
            return status(False, f"bwrap cannot create a sandbox here: {complaint}")
        parent, why = find_parent()
        if parent is None:
            return status(False, f"cannot limit the process count, so a fork bomb would not be contained: {why}")
        try:
            python, folders = interpreter_folders(self.python)
        except (OSError, subprocess.SubprocessError, ValueError) as error:
            return status(False, f"cannot inspect the interpreter {self.python}: {error}")
        real = python.resolve()
        roots = [Path("/usr"), *folders]
        if not any(real == r or r in real.parents for r in roots):
            return status(False, f"the interpreter {real} lies outside the mounted folders {roots}")
        return status(True, f"bubblewrap, {why}")

    def command(
        self,
        program_dir: Path,
        argv: Sequence[str],
        out_dir: Path,
        limits: SandboxLimits,
        env: Mapping[str, str],
        status_fd: int,
    ) -> list[str]:
        """The full bwrap command line for one run (exposed for inspection and tests)."""
        bwrap = self._bwrap_path()
        if bwrap is None:
            raise SandboxError("bwrap not installed: run scripts/setup-system.sh")
        python, folders = interpreter_folders(self.python)
        tmp_bytes = max(limits.file_size_bytes, 1 << 20)  # tmpfs size 0 would mean "unlimited"
        args = [
            bwrap,
            "--unshare-all",  # user, pid, net (only lo), ipc, uts, cgroup namespaces
            "--unshare-user",
            "--disable-userns",  # no nested user namespaces: less kernel surface for the program
            "--uid", str(SANDBOX_UID),
            "--gid", str(SANDBOX_UID),
            "--hostname", "sandbox",
            "--die-with-parent",
            "--new-session",
            "--cap-drop", "ALL",
            "--clearenv",
            "--ro-bind", "/usr", "/usr",
        ]
        for name in MERGED_USR_LINKS:
            host = Path("/") / name
            if host.is_symlink():
                args += ["--symlink", os.readlink(host), str(host)]
            elif host.is_dir():
                args += ["--ro-bind", str(host), str(host)]
        args += [
            "--proc", "/proc",
            "--dev", "/dev",
            "--size", str(DEV_SHM_BYTES), "--tmpfs", "/dev/shm",
            "--remount-ro", "/dev",  # bwrap's /dev is a RAM tmpfs: no files there
            # /tmp before any bind that could lie below it, or the tmpfs would hide it.
            "--size", str(tmp_bytes), "--tmpfs", "/tmp",
        ]
        for folder in folders:
            if folder != Path("/usr") and Path("/usr") not in folder.parents:
                args += ["--ro-bind", str(folder), str(folder)]
        args += [
            "--ro-bind", str(program_dir), SANDBOX_IN,
            "--bind", str(out_dir), SANDBOX_OUT,
            "--remount-ro", "/",
            "--chdir", SANDBOX_OUT,
            "--json-status-fd", str(status_fd),
        ]
        for key, value in env.items():
            args += ["--setenv", key, value]
        program = [str(python) if i == 0 and a == PYTHON else a for i, a in enumerate(argv)]
        return [*args, "--", *program]

    def _launch(
        self,
        program_dir: Path,
        argv: Sequence[str],
        *,
        out_dir: Path,
        limits: SandboxLimits,
        env: Mapping[str, str] | None,
    ) -> SandboxedProcess:
        """Launch `argv` under bwrap; see `SandboxProvider.start`."""
        parent, why = find_parent()
        if parent is None:
            raise SandboxError(f"bwrap sandbox unavailable: cannot limit the process count: {why}")
        environment = {**base_environment(), **(env or {})}
        try:
            group = RunCgroups(limits.processes)
        except OSError as error:
            raise SandboxError(f"bwrap sandbox: cannot create the run's cgroups: {error}") from error
        status_read, status_write = os.pipe()
        try:
            command = self.command(program_dir, argv, out_dir, limits, environment, status_write)
            rlimits = rlimits_for(limits)

            def before_exec() -> None:
                # Runs in the child between fork and exec: join the run's cgroup first, so every
                # process bwrap and the program start is counted, then set the rlimits.
                group.join_self()
                for which, soft, hard in rlimits:
                    resource.setrlimit(which, (soft, hard))

            def launch() -> subprocess.Popen[bytes]:
                return subprocess.Popen(
                    command,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    bufsize=0,
                    close_fds=True,
                    pass_fds=(status_write,),
                    env={},
                    start_new_session=True,
                    preexec_fn=before_exec,
                )

            popen = on_launcher_thread(launch)
        except BaseException:
            os.close(status_read)
            group.remove(timeout=0.5)
            raise
        finally:
            os.close(status_write)
        os.set_blocking(status_read, False)

        def setup_error() -> str | None:
            # bwrap writes {"child-pid": N} once the sandbox is set up and the program started;
            # without it, the non-zero exit is bwrap's own failure, explained on stderr.
            data = b""
            try:
                while chunk := os.read(status_read, 65536):
                    data += chunk
            except BlockingIOError:
                pass
            if b'"child-pid"' in data:
                return None
            return process._stderr.text().strip() or "bwrap exited before starting the program"

        def finish() -> None:
            os.close(status_read)
            group.remove()

        process = PopenSandboxedProcess(
            popen,
            provider=self.name,
            isolated=True,
            limits=limits,
            shell_signal_codes=True,
            kill_extra=group.kill,
            process_limit_reached=group.limit_reached,
            cpu_seconds=group.cpu_seconds,
            setup_error=setup_error,
            finish=finish,
        )
        return process
