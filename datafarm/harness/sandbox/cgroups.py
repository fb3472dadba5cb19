"""Per-run cgroups: a pids group (the kernel refuses a run's fork/clone beyond
`SandboxLimits.processes`) and, where the kernel offers it, CPU accounting for the whole run.

Why a pids cgroup and not RLIMIT_NPROC: the harness runs as root, and with bwrap the sandboxed
program is uid 65534 *inside* its user namespace but kernel uid 0 outside, and the kernel never
enforces RLIMIT_NPROC for root's user (INIT_USER), not even through a user namespace. Measured
here: with RLIMIT_NPROC=10 set before a root bwrap, the program forked freely; with a pids cgroup
(pids.max=10) the 11th task failed with EAGAIN. The alternative that also contains a bomb here
(starting bwrap as a spare unprivileged uid so RLIMIT_NPROC applies; measured: also stops at 10)
needs every bound folder to be traversable by that uid, which the pyenv interpreter under /root
(mode 0700) and pytest's 0700 temp folders are not, and it shares one count between runs that
get the same uid. A pids cgroup counts every task of the run (threads included), is independent
per run, and its `pids.events` counter tells the harness the limit was hit, so the reason is
precise. Watching a pid namespace from outside and killing it is not enough: a bomb exhausts the
machine's pids (pid_max is 32768 here) in milliseconds, before any watchdog looks.

CPU accounting: bwrap's pid namespace init does not pass its children's CPU time up to bwrap, so
`wait4` cannot tell a CPU-limit SIGKILL from any other; the cgroup's counter can.

cgroup v1 (separate `pids` and `cpuacct` hierarchies, as here) and v2 (a writable subtree with the
pids controller enabled; `cpu.stat` is always there) are supported; each kind of group goes to the
first place where a probe child gets the expected file.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from functools import lru_cache
from pathlib import Path

GROUP_PREFIX = "datafarm-sandbox-"

# kind -> (v1 mount option, file a child group must have on v1, on v2)
_KINDS = {
    "pids": ("pids", "pids.max", "pids.max"),
    "cpu": ("cpuacct", "cpuacct.usage", "cpu.stat"),
}


def _mounts() -> list[tuple[str, str, str, str]]:
    """(mount point, root inside the hierarchy, fs type, super options) of every cgroup mount."""
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            found.append((fields[4], fields[3], tail[0], tail[2]))
    return found


def _own_groups() -> dict[str, str]:
    """Controller name ('' for v2) -> this process's group path, from /proc/self/cgroup."""
    groups: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return groups
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                groups[controller] = parts[2]
    return groups


def _candidates(kind: str) -> list[tuple[Path, str]]:
    """(folder, file a child must have) where a run group of `kind` could go, most specific first."""
    option, v1_file, v2_file = _KINDS[kind]
    own = _own_groups()
    found: list[tuple[Path, str]] = []
    for mount_point, root, fstype, options in _mounts():
        if fstype == "cgroup" and option in options.split(","):
            relative, probe_file = own.get(option, "/"), v1_file
        elif fstype == "cgroup2":
            relative, probe_file = own.get("", "/"), v2_file
        else:
            continue
        base = Path(mount_point)
        if root != "/" and relative.startswith(root):
            relative = relative[len(root):]
        own_dir = base / relative.lstrip("/")
        for folder in ([own_dir, base] if own_dir != base else [base]):
            found.append((folder, probe_file))
    return found


def _probe(parent: Path, needed: str) -> bool:
    probe = parent / f"{GROUP_PREFIX}probe-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
    except OSError:
        return False
    try:
        return (probe / needed).exists()
    finally:
        try:
            probe.rmdir()
        except OSError:
            pass


@lru_cache(maxsize=None)
def find_parent(kind: str = "pids") -> tuple[Path | None, str]:
    """Where run groups of `kind` ("pids" or "cpu") can be made here, or None and why not
    (probed once per process)."""
    candidates = _candidates(kind)
    for parent, needed in candidates:
        if _probe(parent, needed):
            return parent, f"{kind} cgroup under {parent}"
    if not candidates:
        return None, f"no cgroup hierarchy offers {kind} here (/proc/self/mountinfo lists none)"
    tried = ", ".join(str(c) for c, _ in candidates)
    return None, (
        f"no writable {kind} cgroup (tried {tried}); run as root with the cgroup v1 {_KINDS[kind][0]} "
        "hierarchy, or in a delegated cgroup v2 subtree with the pids controller enabled"
    )


class RunCgroups:
    """One run's groups: created with the process limit, joined by the launched process before
    exec, read for limit hits and CPU time, emptied and removed at the end."""

    def __init__(self, max_tasks: int) -> None:
        pids_parent, why = find_parent("pids")
        if pids_parent is None:
            raise OSError(why)
        cpu_parent, _ = find_parent("cpu")
        name = f"{GROUP_PREFIX}{uuid.uuid4().hex}"
        self.pids = pids_parent / name
        self.cpu = cpu_parent / name if cpu_parent is not None else None
        self._made: list[Path] = []
        try:
            for folder in dict.fromkeys(p for p in (self.pids, self.cpu) if p is not None):
                folder.mkdir()
                self._made.append(folder)
            (self.pids / "pids.max").write_text(str(max_tasks))
        except OSError:
            self.remove(timeout=0.0)
            raise
        self._procs_files = [os.fsencode(folder / "cgroup.procs") for folder in self._made]
        self._hits_at_start = self._max_events()

    def join_self(self) -> None:
        """Move the calling process into the run's groups. Runs in the child between fork and
        exec (a `preexec_fn`), so only raw system calls."""
        for path in self._procs_files:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)

    def _max_events(self) -> int:
        try:
            for line in (self.pids / "pids.events").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "max":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def limit_reached(self) -> bool:
        """True once a fork or clone in the run was refused because of `pids.max`."""
        return self._max_events() > self._hits_at_start

    def cpu_seconds(self) -> float | None:
        """CPU time used by every process the run has had, or None without CPU accounting."""
        if self.cpu is None:
            return None
        try:
            usage = self.cpu / "cpuacct.usage"
            if usage.exists():
                return int(usage.read_text()) / 1e9
            for line in (self.cpu / "cpu.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value) / 1e6
        except (OSError, ValueError):
            pass
        return None

    def tasks(self) -> list[int]:
        """Pids (in the harness's pid namespace) of the run's processes still alive."""
        try:
            return [int(p) for p in (self.pids / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def kill(self) -> None:
        """SIGKILL every process of the run: at once with cgroup v2's `cgroup.kill`, else pid by
        pid from the group's member list. A member's pid cannot be recycled while it is listed,
        and the pid counter would have to wrap (32768 here) between the read and the kill, so no
        stranger is hit."""
        kill_file = self.pids / "cgroup.kill"
        if kill_file.exists():
            try:
                kill_file.write_text("1")
                return
            except OSError:
                pass
        for pid in self.tasks():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def remove(self, timeout: float = 2.0) -> bool:
        """Kill whatever of the run is still alive, wait (bounded) until the group is empty, then
        remove the groups; False if something could not be removed."""
        end = time.monotonic() + timeout
        while self.tasks():
            self.kill()
            if time.monotonic() >= end:
                break
            time.sleep(0.005)
        removed = True
        for folder in reversed(self._made):
            for _ in range(100):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
            else:
                removed = False
        return removed
