"""How a sandboxed run ended, in words precise enough for the ledger."""

from __future__ import annotations

import signal as _signal
from enum import Enum

from datafarm.artifacts.base import Artifact


class EndCause(str, Enum):
    """What ended a sandboxed run."""

    EXITED = "exited"
    """The program exited by itself (any exit code)."""
    SIGNAL = "signal"
    """A signal the program did not catch ended it (e.g. SIGSEGV, SIGABRT)."""
    CPU_LIMIT = "cpu_limit"
    """A process used more CPU time than `SandboxLimits.cpu_seconds`."""
    MEMORY_LIMIT = "memory_limit"
    """An allocation failed against `SandboxLimits.memory_bytes`."""
    FILE_SIZE_LIMIT = "file_size_limit"
    """A write went past `SandboxLimits.file_size_bytes`."""
    PROCESS_LIMIT = "process_limit"
    """The run reached `SandboxLimits.processes` tasks."""
    WALL_DEADLINE = "wall_deadline"
    """`SandboxLimits.wall_seconds` passed and the harness killed the run."""
    KILLED = "killed"
    """The harness killed the run for a reason of its own (e.g. a protocol violation)."""
    SANDBOX_ERROR = "sandbox_error"
    """The sandbox failed before the program started (e.g. a mount could not be set up)."""


LIMIT_CAUSES = frozenset(
    {
        EndCause.CPU_LIMIT,
        EndCause.MEMORY_LIMIT,
        EndCause.FILE_SIZE_LIMIT,
        EndCause.PROCESS_LIMIT,
        EndCause.WALL_DEADLINE,
    }
)


class SandboxResult(Artifact):
    """The outcome of one sandboxed run, as recorded in the ledger."""

    provider: str
    """Name of the sandbox provider that ran the program (bwrap, docker, none)."""
    isolated: bool
    """False only for the `none` provider: the program ran without any isolation."""
    ended_by: EndCause
    """What ended the run."""
    reason: str
    """One precise sentence, e.g. "cpu time limit (2 s) exceeded" or "exited with code 3"."""
    exit_code: int | None = None
    """The program's exit code when it exited by itself, else None."""
    signal: int | None = None
    """The number of the signal that ended the program, when one did, else None."""
    wall_seconds: float
    """Seconds from launch until the run's main process was gone."""
    cpu_seconds: float | None = None
    """CPU time used by all the run's processes together, when the provider can measure it."""
    stderr_tail: str = ""
    """The last few KiB of what the program wrote to stderr (decoded, invalid bytes replaced)."""

    @property
    def ok(self) -> bool:
        """True when the program exited by itself with code 0."""
        return self.ended_by is EndCause.EXITED and self.exit_code == 0

    @property
    def limit_exceeded(self) -> bool:
        """True when a resource limit or the wall deadline ended the run."""
        return self.ended_by in LIMIT_CAUSES


def signal_name(number: int) -> str:
    """`SIGSEGV` for 11; `signal 99` for a number without a name."""
    try:
        return _signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def format_quantity(value: float, unit: str) -> str:
    """`2 s`, `1.5 s`, `512 MiB`: the limit as a person would write it in a reason."""
    if unit == "bytes":
        for size, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
            if value >= size and value % size == 0:
                return f"{int(value // size)} {name}"
        return f"{int(value)} bytes"
    if float(value).is_integer():
        return f"{int(value)} {unit}"
    return f"{value:g} {unit}"
