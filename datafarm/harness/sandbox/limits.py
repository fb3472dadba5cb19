"""Resource limits for one sandboxed run (the expert controller's process and everything it starts)."""

from __future__ import annotations

from pydantic import Field

from datafarm.artifacts.base import Artifact

GIB = 1 << 30
MIB = 1 << 20


class SandboxLimits(Artifact):
    """What one sandboxed run may use. Every provider enforces every field; the defaults fit a
    numpy-importing Python controller that talks to the harness for a few minutes."""

    cpu_seconds: int = Field(default=120, ge=1)
    """CPU time each process of the run may use, in whole seconds (RLIMIT_CPU: SIGXCPU at this
    value, SIGKILL one second later). A sleeping process uses none, hence `wall_seconds`."""

    memory_bytes: int = Field(default=4 * GIB, ge=64 * MIB)
    """Address space each process may map, in bytes (RLIMIT_AS; Docker: the container's memory
    limit). A larger allocation fails at once with MemoryError instead of swapping the machine.
    512 MiB is too small for numpy-heavy imports on many-core machines; 4 GiB is the default."""

    open_files: int = Field(default=256, ge=16)
    """Open file descriptors per process (RLIMIT_NOFILE), pipes and sockets included."""

    file_size_bytes: int = Field(default=1 * GIB, ge=0)
    """Largest file a process may write, in bytes (RLIMIT_FSIZE: SIGXFSZ beyond it). Also caps the
    size of the run's private /tmp."""

    processes: int = Field(default=64, ge=4)
    """Tasks (processes and threads) the whole run may hold at once, the sandbox's own init
    included (a pids cgroup; Docker: pids_limit). Reaching it ends the run: "killed: process limit"."""

    wall_seconds: float = Field(default=600.0, gt=0)
    """Wall-clock deadline for the whole run, in seconds, measured by the harness from launch;
    when it passes, every process of the run is killed."""
