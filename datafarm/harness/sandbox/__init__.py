"""Sandbox providers the expert controller runs in: one interface (`SandboxProvider`), a registry
(`get`, `available`), resource limits (`SandboxLimits`) and a live process with pipes
(`SandboxedProcess`) whose `SandboxResult` says precisely how the run ended.

Providers: `bwrap` (default), `docker` (production), `none` (no isolation, only with unsafe=True).
"""

from __future__ import annotations

from .bwrap import BwrapProvider
from .docker_provider import DockerProvider
from .limits import SandboxLimits
from .process import SandboxedProcess
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
from .registry import DEFAULT_PROVIDER, available, get, names, register
from .result import EndCause, SandboxResult
from .unsafe import UnsafeNoSandbox

register("bwrap", BwrapProvider)
register("docker", DockerProvider)
register("none", UnsafeNoSandbox)

__all__ = [
    "DEFAULT_PROVIDER",
    "PYTHON",
    "SANDBOX_IN",
    "SANDBOX_OUT",
    "SANDBOX_UID",
    "Availability",
    "BwrapProvider",
    "DockerProvider",
    "EndCause",
    "SandboxError",
    "SandboxLimits",
    "SandboxProvider",
    "SandboxResult",
    "SandboxedProcess",
    "UnsafeNoSandbox",
    "available",
    "base_environment",
    "get",
    "names",
    "register",
]
