"""Shared helpers for the sandbox tests: providers that can run here, programs on disk, and the
checks that a run left nothing behind."""

from __future__ import annotations

import functools
import os
import textwrap
import uuid
from pathlib import Path

import pytest

from datafarm.harness import sandbox
from datafarm.harness.sandbox import SandboxLimits, SandboxProvider

SMALL_LIMITS = SandboxLimits(cpu_seconds=5, wall_seconds=20, processes=32, memory_bytes=1 << 30)
"""Limits for well-behaved test programs: roomy enough, but nothing can run away."""


@functools.lru_cache(maxsize=1)
def statuses() -> dict[str, sandbox.Availability]:
    """Every registered provider's availability, asked once per test session."""
    return sandbox.available()


def provider_or_skip(name: str) -> SandboxProvider:
    """The provider `name`, or skip the test with the provider's own reason."""
    status = statuses()[name]
    if not status.available:
        pytest.skip(f"sandbox provider {name!r} unavailable here: {status.reason}")
    return sandbox.get(name, **({"unsafe": True} if name == "none" else {}))


def write_program(folder: Path, source: str) -> str:
    """Write `source` to a uniquely named file in `folder`; returns its path inside the sandbox.
    The unique name lets a test find any process of that run still alive on the host."""
    folder.mkdir(parents=True, exist_ok=True)
    name = f"prog_{uuid.uuid4().hex[:12]}.py"
    (folder / name).write_text(textwrap.dedent(source))
    return f"/in/{name}"


def processes_running(marker: str) -> list[int]:
    """Host pids whose command line mentions `marker` (e.g. a program's unique file name)."""
    found = []
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if needle in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found
