"""The interface every sandbox provider implements, and what a provider promises.

A provider launches a program (normally the expert controller, a Python file) so that:
- the program's folder is visible read-only at `SANDBOX_IN` (/in) and a per-run writable folder at
  `SANDBOX_OUT` (/out), and of the host file system nothing else but what Python needs, read-only;
- the environment is cleared: the program sees exactly `base_environment()` plus what the caller
  passes, never the harness's variables (API keys);
- it runs as an unprivileged user, without capabilities and without network;
- `SandboxLimits` are enforced and the wall-clock deadline kills every process of the run.
The `none` provider keeps none of these promises and says so with `isolated = False`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from datafarm.artifacts.base import Artifact
from datafarm.errors import DatafarmError

from .limits import SandboxLimits
from .process import SandboxedProcess
from .result import SandboxResult

SANDBOX_IN = "/in"
"""Where the program's folder appears inside the sandbox (read-only)."""
SANDBOX_OUT = "/out"
"""Where the run's writable folder appears inside the sandbox; also the working directory."""
PYTHON = "python"
"""`argv[0]` placeholder: each provider replaces it by its own Python interpreter."""

SANDBOX_UID = 65534
"""The unprivileged uid (and gid) the program runs as: `nobody`."""


def base_environment(in_dir: str = SANDBOX_IN, out_dir: str = SANDBOX_OUT) -> dict[str, str]:
    """The complete environment a sandboxed program starts with (before the caller's additions).

    Nothing is inherited from the harness. Math libraries are pinned to one thread so the process
    count and address space of a numpy controller do not grow with the machine's core count.
    """
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "SANDBOX_IN": in_dir,
        "SANDBOX_OUT": out_dir,
    }


class SandboxError(DatafarmError):
    """A sandbox could not be created or launched (provider unavailable, bad folder, setup failure)."""


class Availability(Artifact):
    """Whether a provider can run programs on this machine, and if not, why."""

    name: str
    """The provider's registry name."""
    available: bool
    """True when the provider can launch programs here now."""
    isolated: bool
    """False only for a provider that runs programs without isolation (`none`)."""
    reason: str
    """Why it is unavailable and how to fix it, or a short description of what it uses."""


class SandboxProvider(ABC):
    """Launches programs in a sandbox. Subclasses set `name` and `isolated` and implement
    `availability()` and `start()`."""

    name: ClassVar[str]
    """Registry name, e.g. `bwrap`."""
    isolated: ClassVar[bool] = True
    """False only for providers that give no isolation; the ledger and admission refuse those."""

    @abstractmethod
    def availability(self) -> Availability:
        """Whether this provider can launch programs here; cheap (milliseconds), launches nothing
        that runs user code."""

    def start(
        self,
        program_dir: Path,
        argv: Sequence[str],
        *,
        out_dir: Path,
        limits: SandboxLimits | None = None,
        env: Mapping[str, str] | None = None,
    ) -> SandboxedProcess:
        """Launch `argv` in a fresh sandbox and return the live process with its stdin/stdout pipes.

        `program_dir` appears read-only at /in, `out_dir` (created if missing) writable at /out, the
        working directory. `argv[0]` may be `PYTHON`, replaced by the provider's interpreter; other
        arguments are passed as they are (refer to files as /in/...). `env` is added to
        `base_environment()`. The wall-clock deadline in `limits` starts now. Call this from a thread
        that outlives the run: some providers tie the sandbox's life to the launching thread.
        """
        if not argv:
            raise SandboxError("argv is empty: nothing to run")
        limits = limits or SandboxLimits()
        program_dir = check_program_dir(program_dir)
        out_dir = prepare_out_dir(out_dir, program_dir)
        return self._launch(program_dir, argv, out_dir=out_dir, limits=limits, env=env)

    @abstractmethod
    def _launch(
        self,
        program_dir: Path,
        argv: Sequence[str],
        *,
        out_dir: Path,
        limits: SandboxLimits,
        env: Mapping[str, str] | None,
    ) -> SandboxedProcess:
        """Provider-specific launch, after `start` has checked `argv` and prepared both folders."""

    def run(
        self,
        program_dir: Path,
        argv: Sequence[str],
        *,
        out_dir: Path,
        limits: SandboxLimits | None = None,
        env: Mapping[str, str] | None = None,
        input: bytes | None = None,
        max_output_bytes: int = 16 << 20,
    ) -> tuple[bytes, SandboxResult]:
        """Launch, feed `input` on stdin, collect stdout until the program ends; returns
        `(stdout_bytes, SandboxResult)`. A convenience over `start()` for one-shot programs."""
        process = self.start(program_dir, argv, out_dir=out_dir, limits=limits, env=env)
        return process.communicate(input, max_output_bytes=max_output_bytes)

    def require_available(self) -> None:
        """Raise SandboxError with the provider's reason when it cannot run here."""
        status = self.availability()
        if not status.available:
            raise SandboxError(f"sandbox provider {self.name!r} is unavailable: {status.reason}")


def check_program_dir(program_dir: Path) -> Path:
    """The program folder as an absolute path; SandboxError when it is not a folder."""
    program_dir = Path(program_dir).resolve()
    if not program_dir.is_dir():
        raise SandboxError(f"program folder {program_dir} does not exist or is not a folder")
    return program_dir


def prepare_out_dir(out_dir: Path, program_dir: Path) -> Path:
    """Create the run's writable folder; refuse one that is, contains or lies in the program folder
    (the program's own files must stay read-only)."""
    out_dir = Path(out_dir).resolve()
    if out_dir == program_dir or program_dir in out_dir.parents or out_dir in program_dir.parents:
        raise SandboxError(f"out folder {out_dir} overlaps the program folder {program_dir}")
    out_dir.mkdir(parents=True, exist_ok=True)
    return out_dir
