"""Hostile programs in the sandbox: each is contained, ends with a precise reason, leaves no
process behind, changes nothing outside its /out, and the harness (this test process) carries on.

Runs on every isolated provider available here (bwrap; docker where an engine answers). Limits
are small (1 s CPU, 3 s wall, 16 tasks) so the whole file stays fast on two shared cores.
"""

from __future__ import annotations

import errno
import json
import signal
import socket
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from datafarm.hashing import sha256_tree
from datafarm.harness.sandbox import EndCause, SandboxLimits, SandboxProvider, SandboxResult
from tests.harness.sandbox_helpers import SMALL_LIMITS, processes_running, provider_or_skip, write_program

HOSTILE_LIMITS = SandboxLimits(
    cpu_seconds=1, wall_seconds=3, processes=16, memory_bytes=1 << 30, file_size_bytes=64 << 20, open_files=64
)


@pytest.fixture(params=["bwrap", "docker"])
def provider(request) -> SandboxProvider:
    """Each isolated provider, skipped with its reason where it cannot run."""
    return provider_or_skip(request.param)


@dataclass
class Arena:
    """A run's folders next to a fake task folder holding what a hostile expert would like to read."""

    program_dir: Path
    out_dir: Path
    task_dir: Path

    def snapshot(self) -> tuple[str, str]:
        return sha256_tree(self.program_dir), sha256_tree(self.task_dir)


@pytest.fixture
def arena(tmp_path) -> Arena:
    task = tmp_path / "task"
    (task / "judge").mkdir(parents=True)
    (task / "judge" / "spec.yaml").write_text("stages: [grasp, lift]\n")
    (task / "ledger.jsonl").write_text('{"seq": 0}\n')
    (task / "admission_secret").write_text("seed-secret-0xC0FFEE\n")
    program = tmp_path / "program"
    program.mkdir()
    return Arena(program_dir=program, out_dir=tmp_path / "out", task_dir=task)


def run_contained(
    provider: SandboxProvider, arena: Arena, source: str, *, input: bytes | None = None,
    limits: SandboxLimits = HOSTILE_LIMITS,
) -> tuple[bytes, SandboxResult]:
    """Run a hostile program and check it was contained: no process of it left, nothing outside
    /out changed, and the provider still runs a well-behaved program afterwards."""
    script = write_program(arena.program_dir, source)
    before = arena.snapshot()
    stdout, result = provider.run(arena.program_dir, ["python", script], out_dir=arena.out_dir, limits=limits, input=input)
    assert processes_running(script.removeprefix("/in/")) == [], "a process of the run outlived it"
    assert arena.snapshot() == before, "the run changed files outside its /out"
    assert result.provider == provider.name and result.isolated
    check = write_program(arena.program_dir.parent / "check", "print('still fine')")
    out, after = provider.run(arena.program_dir.parent / "check", ["python", check], out_dir=arena.out_dir.parent / "check-out", limits=SMALL_LIMITS)
    assert out == b"still fine\n" and after.ok, after
    return stdout, result


def test_infinite_loop_hits_the_cpu_limit(provider, arena):
    # The wall deadline is generous so that a loaded machine (CPU time accrues slower than wall time)
    # still ends the run at the CPU limit.
    _, result = run_contained(provider, arena, "while True:\n    pass\n",
                              limits=HOSTILE_LIMITS.model_copy(update={"wall_seconds": 20}))
    assert result.ended_by is EndCause.CPU_LIMIT
    assert result.reason == "cpu time limit (1 s) exceeded"
    assert result.cpu_seconds < 2.5
    assert result.signal == signal.SIGXCPU


def test_loop_that_ignores_sigxcpu_is_killed_at_the_hard_limit(provider, arena):
    source = """
    import signal
    signal.signal(signal.SIGXCPU, signal.SIG_IGN)
    while True:
        pass
    """
    # A generous wall deadline: on a loaded machine 2 s of CPU time can take well over 3 s of wall time.
    _, result = run_contained(provider, arena, source, limits=HOSTILE_LIMITS.model_copy(update={"wall_seconds": 20}))
    assert result.ended_by is EndCause.CPU_LIMIT
    assert result.reason == "cpu time limit (1 s) exceeded"
    assert result.signal == signal.SIGKILL


def test_sleep_forever_hits_the_wall_deadline(provider, arena):
    _, result = run_contained(provider, arena, "import time\ntime.sleep(10_000)\n")
    assert result.ended_by is EndCause.WALL_DEADLINE
    assert result.reason == "wall-clock deadline (3 s) exceeded"
    assert 3.0 <= result.wall_seconds < 4.5


def test_allocating_20_gb_fails_fast_at_the_memory_limit(provider, arena):
    # Guard: never try 20 GB on a shared machine unless a per-process memory limit is in force.
    source = """
    import resource
    limits = [resource.getrlimit(r)[0] for r in (resource.RLIMIT_AS, resource.RLIMIT_DATA)]
    if not any(0 < limit <= 2 << 30 for limit in limits):
        print("NO MEMORY LIMIT: not allocating")
        raise SystemExit(0)
    block = bytearray(20 * 10**9)
    print("allocated")
    """
    stdout, result = run_contained(provider, arena, source)
    assert stdout == b""
    assert result.ended_by is EndCause.MEMORY_LIMIT
    assert result.reason.startswith("memory limit (1 GiB) exceeded")
    assert result.wall_seconds < 2.0  # refused at once, nothing swapped


BOUNDED_FORKS = """
import os, time
for n in range(1, 51):
    if os.fork() == 0:
        time.sleep(30)
        os._exit(0)
    with open("/out/forks", "w") as f:
        f.write(str(n))
"""


def forks_allowed(provider: SandboxProvider, arena: Arena) -> tuple[int, SandboxResult]:
    """Run a bounded program that tries 50 forks, recording each success in /out before the next
    (so the count survives the kill); how many succeeded."""
    _, result = run_contained(provider, arena, BOUNDED_FORKS)
    return int((arena.out_dir / "forks").read_text()), result


def test_process_limit_is_enforced_by_the_kernel(provider, arena):
    forks, result = forks_allowed(provider, arena)
    # The sandbox's own processes (bwrap's two, or docker-init) and the program take their share.
    assert 1 <= forks <= HOSTILE_LIMITS.processes - 2
    assert result.ended_by is EndCause.PROCESS_LIMIT


def test_fork_bomb_is_stopped_at_the_process_limit(provider, arena):
    # First prove, with the bounded program, that the limit holds: an unbounded bomb on a shared
    # two-core machine without it would hurt everyone.
    forks, _ = forks_allowed(provider, arena)
    assert forks < HOSTILE_LIMITS.processes, "process limit not in force: not running the fork bomb"
    # The worst kind: every process retries forever when a fork is refused (and still gives up
    # after 10 s on its own, should everything else fail).
    source = """
    import os, time
    end = time.monotonic() + 10
    while time.monotonic() < end:
        try:
            os.fork()
        except OSError:
            pass
    """
    _, result = run_contained(provider, arena, source)
    assert result.ended_by is EndCause.PROCESS_LIMIT
    assert "process limit (16) reached" in result.reason
    if provider.name == "bwrap":
        assert result.reason == "killed: process limit (16) reached"
        assert result.wall_seconds < 1.0


def test_thread_bomb_is_stopped_at_the_process_limit(provider, arena):
    source = """
    import threading, time
    while True:
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
    """
    _, result = run_contained(provider, arena, source)
    assert result.ended_by is EndCause.PROCESS_LIMIT
    assert "process limit (16) reached" in result.reason


def test_writing_a_5_gb_file_stops_at_the_file_size_limit(provider, arena):
    # A sparse write at 5 GB first: if no file size limit were in force it would succeed without
    # using disk, and the program stops instead of filling the shared disk.
    source = """
    try:
        with open("/out/probe.bin", "wb") as f:
            f.seek(5 << 30)
            f.write(b"x")
    except OSError:
        pass
    else:
        print("NO FILE SIZE LIMIT: not writing")
        raise SystemExit(0)
    block = b"\\0" * (1 << 20)
    with open("/out/big.bin", "wb") as f:
        for _ in range(5 * 1024):
            f.write(block)
    """
    stdout, result = run_contained(provider, arena, source)
    assert stdout == b""
    assert result.ended_by is EndCause.FILE_SIZE_LIMIT
    assert result.reason.startswith("file size limit (64 MiB) exceeded")
    assert sorted(p.name for p in arena.out_dir.iterdir()) == ["big.bin", "probe.bin"]
    assert (arena.out_dir / "big.bin").stat().st_size == 64 << 20


def test_reading_secrets_by_path_finds_nothing(provider, arena):
    targets = ["/etc/shadow", *(str(p) for p in sorted(arena.task_dir.rglob("*")) if p.is_file())]
    source = """
    import errno, json, sys
    seen = {}
    for path in json.loads(sys.stdin.readline()):
        try:
            seen[path] = open(path).read()
        except OSError as error:
            seen[path] = errno.errorcode[error.errno]
    print(json.dumps(seen))
    """
    stdout, result = run_contained(provider, arena, source, input=json.dumps(targets).encode() + b"\n")
    assert result.ok and result.reason == "exited normally (code 0)"
    seen = json.loads(stdout)
    assert seen.pop("/etc/shadow") in ("ENOENT", "EACCES")
    assert seen == {path: "ENOENT" for path in targets[1:]}


def test_loopback_listener_of_the_harness_is_unreachable(provider, arena):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        source = f"""
        import errno, socket
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2)
        try:
            s.connect(("127.0.0.1", {port}))
            print("CONNECTED")
        except OSError as error:
            print(errno.errorcode.get(error.errno, repr(error)))
        """
        stdout, result = run_contained(provider, arena, source)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing ever reached the harness's listener
    assert result.ok
    assert stdout.strip() == b"ECONNREFUSED"


def test_public_address_is_unreachable(provider, arena):
    # The program first proves it has no route out; only then does it try TEST-NET-1 (192.0.2.1,
    # reserved for documentation), which must fail at once with ENETUNREACH.
    source = """
    import errno, json, socket
    routes = [l for l in open("/proc/net/route").read().splitlines()[1:] if l.strip()]
    interfaces = sorted(name for _, name in socket.if_nameindex())
    report = {"routes": routes, "interfaces": interfaces}
    if routes or interfaces != ["lo"]:
        report["connect"] = "NOT TRIED: a route or interface exists"
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2)
        try:
            s.connect(("192.0.2.1", 9))
            report["connect"] = "CONNECTED"
        except OSError as error:
            report["connect"] = errno.errorcode.get(error.errno, repr(error))
    print(json.dumps(report))
    """
    stdout, result = run_contained(provider, arena, source)
    report = json.loads(stdout)
    assert report["routes"] == [] and report["interfaces"] == ["lo"]
    assert report["connect"] == errno.errorcode[errno.ENETUNREACH]
    assert result.ok and result.wall_seconds < 2.0


def test_ctypes_write_to_a_bad_address_is_a_contained_segfault(provider, arena):
    _, result = run_contained(provider, arena, "import ctypes\nctypes.memset(8, 0xFF, 4096)\n")
    assert result.ended_by is EndCause.SIGNAL
    assert result.signal == signal.SIGSEGV
    assert result.reason == "killed by signal SIGSEGV (Segmentation fault)"


def test_exception_mid_run_is_reported_with_its_message(provider, arena):
    source = """
    import sys
    sys.stdin.readline()
    print("ack", flush=True)
    raise RuntimeError("boom mid-episode")
    """
    stdout, result = run_contained(provider, arena, source, input=b"step\n")
    assert stdout == b"ack\n"
    assert result.ended_by is EndCause.EXITED and result.exit_code == 1
    assert result.reason == "exited with code 1: RuntimeError: boom mid-episode"


def test_exit_mid_run_reports_the_code(provider, arena):
    script = write_program(arena.program_dir, """
    import sys
    print("step 1", flush=True)
    sys.stdin.readline()
    sys.exit(3)
    """)
    with provider.start(arena.program_dir, ["python", script], out_dir=arena.out_dir, limits=HOSTILE_LIMITS) as process:
        assert process.stdout.readline() == b"step 1\n"
        process.stdin.write(b"next\n")
        result = process.wait(timeout=5)
    assert result.ended_by is EndCause.EXITED and result.exit_code == 3
    assert result.reason == "exited with code 3"


def test_harness_kill_ends_the_run_with_its_reason(provider, arena):
    script = write_program(arena.program_dir, "import time\nprint('ready', flush=True)\ntime.sleep(60)\n")
    with provider.start(arena.program_dir, ["python", script], out_dir=arena.out_dir, limits=HOSTILE_LIMITS) as process:
        assert process.stdout.readline() == b"ready\n"
        process.kill("protocol violation: garbage on the pipe")
        result = process.wait(timeout=5)
    assert result.ended_by is EndCause.KILLED
    assert result.reason == "protocol violation: garbage on the pipe"
    assert result.wall_seconds < 2.0
    assert processes_running(script.removeprefix("/in/")) == []


def test_kill_during_sandbox_setup_leaves_nothing(provider, arena):
    script = write_program(arena.program_dir, "import time\ntime.sleep(60)\n")
    for _ in range(5):
        process = provider.start(arena.program_dir, ["python", script], out_dir=arena.out_dir, limits=HOSTILE_LIMITS)
        process.kill("stopped at once")
        result = process.wait(timeout=5)
        assert result.ended_by is EndCause.KILLED and result.reason == "stopped at once"
    assert processes_running(script.removeprefix("/in/")) == []


def test_run_outlives_the_thread_that_started_it(provider, arena):
    script = write_program(arena.program_dir, "import time\ntime.sleep(0.5)\nprint('done')\n")
    started = {}
    worker = threading.Thread(
        target=lambda: started.update(process=provider.start(
            arena.program_dir, ["python", script], out_dir=arena.out_dir, limits=HOSTILE_LIMITS
        ))
    )
    worker.start()
    worker.join()
    stdout, result = started["process"].communicate()
    assert stdout == b"done\n" and result.ok, result


def test_stdout_flood_is_cut_off(provider, arena):
    source = """
    import sys
    chunk = b"x" * 65536
    while True:
        sys.stdout.buffer.write(chunk)
    """
    script = write_program(arena.program_dir, source)
    stdout, result = provider.run(
        arena.program_dir, ["python", script], out_dir=arena.out_dir, limits=HOSTILE_LIMITS, max_output_bytes=1 << 20
    )
    assert len(stdout) <= 1 << 20
    assert result.ended_by is EndCause.KILLED
    assert result.reason == "stdout exceeded 1 MiB"
    assert processes_running(script.removeprefix("/in/")) == []
