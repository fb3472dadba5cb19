"""The `none` provider: runs the program as a plain child process, WITHOUT isolation.

It exists for debugging on machines without bwrap or Docker. It still applies the rlimits and the
wall-clock deadline, but the program sees the whole file system, the network and the harness's
user; nothing stops a fork bomb. It can only be constructed with `unsafe=True` (the CLI's
`--unsafe-no-sandbox`), reports `isolated = False`, and the ledger and admission refuse its runs
by default.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from datafarm.errors import input_error

from .bwrap import rlimits_for
from .limits import SandboxLimits
from .process import PopenSandboxedProcess, SandboxedProcess
from .provider import (
    PYTHON,
    SANDBOX_IN,
    SANDBOX_OUT,
    Availability,
    SandboxProvider,
    base_environment,
)


def map_sandbox_path(arg: str, program_dir: Path, out_dir: Path) -> str:
    """Rewrite an argument naming /in or /out (or a path below them) to the real folder, so the
    same argv works with and without a sandbox."""
    for mount, real in ((SANDBOX_IN, program_dir), (SANDBOX_OUT, out_dir)):
        if arg == mount:
            return str(real)
        if arg.startswith(mount + "/"):
            return str(real / arg[len(mount) + 1 :])
    return arg


class UnsafeNoSandbox(SandboxProvider):
    """No isolation at all; refused unless constructed with `unsafe=True`."""

    name = "none"
    isolated = False

    def __init__(self, *, unsafe: bool = False, python: Path | str | None = None) -> None:
        if not unsafe:
            raise input_error(
                "the 'none' sandbox provider runs the expert without any isolation",
                field="sandbox",
                expected="bwrap or docker",
                hint="pass --unsafe-no-sandbox (unsafe=True) if you really mean it; admission refuses such runs",
            )
        self.python = Path(python) if python is not None else Path(sys.executable)

    def availability(self) -> Availability:
        """Always runnable, never isolated."""
        return Availability(
            name=self.name,
            available=True,
            isolated=False,
            reason="no isolation: a plain child process (only with --unsafe-no-sandbox; admission refuses it)",
        )

    def _launch(
        self,
        program_dir: Path,
        argv: Sequence[str],
        *,
        out_dir: Path,
        limits: SandboxLimits,
        env: Mapping[str, str] | None,
    ) -> SandboxedProcess:
        """Launch `argv` as a plain child in `out_dir`, with /in and /out arguments rewritten."""
        command = [map_sandbox_path(a, program_dir, out_dir) for a in argv]
        if command[0] == PYTHON:
            command[0] = str(self.python)
        environment = {**base_environment(str(program_dir), str(out_dir)), **(env or {})}
        rlimits = rlimits_for(limits)

        def before_exec() -> None:
            for which, soft, hard in rlimits:
                resource.setrlimit(which, (soft, hard))

        popen = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
            close_fds=True,
            cwd=out_dir,
            env=environment,
            start_new_session=True,
            preexec_fn=before_exec,
        )
        group = popen.pid  # start_new_session: the child leads its own process group

        def kill_group() -> None:
            try:
                os.killpg(group, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

        return PopenSandboxedProcess(
            popen,
            provider=self.name,
            isolated=False,
            limits=limits,
            shell_signal_codes=False,
            kill_extra=kill_group,
        )
