"""Serving one sandboxed expert controller: `run_expert` stages the controller with K's harness
API next to it, launches it in a sandbox, answers its requests over the pipe protocol
(`datafarm.harness.protocol`) against a `SimSession`, and returns a `RolloutOutcome` that says
precisely how the rollout ended.

The harness never trusts the controller: every read is bounded (one message at a time, at most the
message size limit) and has a deadline, every write has a timeout, and whatever the controller does
(dies, hangs, floods, writes garbage) ends as an outcome, never as an exception or a hang here.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from enum import Enum
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import Field

from datafarm.artifacts.base import Artifact
from datafarm.capability.bundle import BUNDLES_DIR, latest_with
from datafarm.errors import input_error
from datafarm.harness import sandbox as sandbox_registry
from datafarm.harness.commands import CommandExecutor, CommandLimits, Done, SimTimeLimit
from datafarm.harness.protocol import (
    DEFAULT_MAX_MESSAGE_BYTES,
    PROTOCOL_VERSION,
    CommandRefused,
    EndOfStream,
    FrameReader,
    ProtocolViolation,
    Violation,
    encode,
    error_reply,
    ok_reply,
    parse_request,
    write_all,
)
from datafarm.harness.sandbox import (
    PYTHON,
    EndCause,
    SandboxedProcess,
    SandboxLimits,
    SandboxProvider,
    SandboxResult,
)
from datafarm.harness.sandbox.result import LIMIT_CAUSES
from datafarm.harness.session import SimSession
from datafarm.hashing import sha256_tree

API_MODULE = "datafarm_expert.py"
"""The module experts import (`from datafarm_expert import Harness`)."""
FATAL_GRACE_SECONDS = 0.2
"""After a fatal error reply, how long the controller may take to read it and exit by itself
before the harness kills it."""
READ_GRACE_SECONDS = 5.0
"""How long past the sandbox's wall deadline the harness still waits for the pipe to close
(the sandbox monitor kills the run at the deadline, which closes it)."""


def harness_api_dir(k_version: str | None = None) -> Path:
    """The folder of K `k_version`'s harness API (copied next to every controller); by default that
    of the newest release that ships one."""
    if k_version is None:
        return latest_with(f"harness_api/{API_MODULE}").root / "harness_api"
    return BUNDLES_DIR / k_version / "harness_api"


class RolloutLimits(Artifact):
    """Bounds on one rollout's conversation and episode (the sandbox's own limits come apart, in
    `SandboxLimits`: CPU, memory, processes, wall-clock deadline)."""

    max_message_bytes: int = Field(DEFAULT_MAX_MESSAGE_BYTES, ge=1024, le=1 << 24)
    """Largest message either side may send, in bytes (the 4-byte header excluded)."""
    message_burst: int = Field(1000, ge=10)
    """Requests allowed before any simulated time has passed."""
    messages_per_sim_second: float = Field(200.0, ge=0)
    """Further requests allowed per simulated second; beyond burst + rate x sim time: `flood`."""
    max_sim_seconds: float = Field(120.0, gt=0)
    """Simulated-time limit of the episode; a command that would pass it ends the rollout."""
    max_command_seconds: float = Field(30.0, gt=0)
    """Longest duration a single command (move, gripper, wait) may ask for."""
    reply_timeout_seconds: float = Field(5.0, gt=0)
    """How long a reply may wait for room in a full pipe before the rollout ends (`not_reading`)."""
    exit_grace_seconds: float = Field(2.0, ge=0)
    """How long the controller may take to exit after `done` (or after closing its stdout)."""
    max_refusals_kept: int = Field(100, ge=0)
    """How many refused commands are kept in the outcome (all are counted)."""


class RolloutEnd(str, Enum):
    """How a rollout ended."""

    DONE = "done"
    """The controller sent `done` (its success claim; the judge decides)."""
    CONTROLLER_EXITED = "controller_exited"
    """The controller's process ended (exit, exception, signal) without `done`."""
    PROTOCOL_VIOLATION = "protocol_violation"
    """The controller broke the protocol; the harness ended the rollout and killed it."""
    SANDBOX_LIMIT = "sandbox_limit"
    """A sandbox limit (wall-clock deadline, CPU, memory, file size, processes) ended the controller."""
    SIM_TIME_LIMIT = "sim_time_limit"
    """A command would have run the episode past its simulated-time limit."""
    SANDBOX_ERROR = "sandbox_error"
    """The sandbox failed before the controller started."""
    HARNESS_ERROR = "harness_error"
    """The harness or the simulator failed (not the controller's fault)."""


class RefusedCommand(Artifact):
    """One command the harness refused."""

    seq: int
    """The request's seq."""
    op: str
    """The op asked for (may be one that does not exist, e.g. `set_pose`)."""
    code: str
    """Refusal code (see `protocol.Refusal`)."""
    message: str
    """Why, in one sentence."""
    sim_time: float
    """Simulated seconds at the refusal."""


class RolloutOutcome(Artifact):
    """What happened in one rollout, for the ledger and the judge."""

    ended_by: RolloutEnd
    """How the rollout ended."""
    reason: str
    """One precise sentence: the violation, the limit, the exit, or the done claim."""
    violation: str | None = None
    """The protocol violation code (see `protocol.Violation`) when one ended the rollout."""
    claimed_done: bool = False
    """True when the controller sent `done`."""
    claimed_success: bool | None = None
    """The controller's success claim from `done` (None without `done`)."""
    done_note: str = ""
    """The free-text note the controller sent with `done`."""
    messages: int = 0
    """Requests received (every one, refused ones included)."""
    commands: int = 0
    """Commands executed (motions, gripper, wait)."""
    refusals: int = 0
    """Commands refused."""
    refused: list[RefusedCommand] = Field(default_factory=list)
    """The first refused commands (up to `RolloutLimits.max_refusals_kept`)."""
    sim_time: float = 0.0
    """Simulated seconds of the episode when it ended."""
    wall_seconds: float = 0.0
    """Wall-clock seconds from launch to the end of the rollout."""
    program_sha256: str = ""
    """sha256_tree of the staged program folder (controller + harness API) that ran."""
    skipped_files: list[str] = Field(default_factory=list)
    """Entries of the controller folder not staged (symbolic links, devices, pipes)."""
    sandbox: SandboxResult | None = None
    """How the sandboxed process ended (None if it never started)."""

    @property
    def completed(self) -> bool:
        """True when the controller finished by claiming done (success or not)."""
        return self.ended_by is RolloutEnd.DONE


# --- staging -------------------------------------------------------------------------------------

def stage_program(program_dir: Path, staging: Path, api_dir: Path | None = None) -> list[str]:
    """Copy the controller folder's regular files and folders into the fresh folder `staging`,
    then K's harness API module(s) over them, and make everything read-only. Symbolic links and
    special files are not copied (a link could make the harness read a file for the controller);
    their relative paths are returned."""
    program_dir = Path(program_dir)
    if not program_dir.is_dir():
        raise input_error(f"controller folder {program_dir} does not exist", field="program_dir")
    api_dir = Path(api_dir) if api_dir is not None else harness_api_dir()
    api_files = sorted(api_dir.glob("*.py"))
    if not api_files:
        raise input_error(f"no harness API module in {api_dir}", field="api_dir")
    staging.mkdir(parents=True, exist_ok=False)
    skipped: list[str] = []
    for root, dirs, files in os.walk(program_dir, followlinks=False):
        rel_root = Path(root).relative_to(program_dir)
        for name in list(dirs):
            source = Path(root) / name
            if name == "__pycache__" or source.is_symlink():
                if source.is_symlink():
                    skipped.append((rel_root / name).as_posix())
                dirs.remove(name)
                continue
            (staging / rel_root / name).mkdir()
        for name in files:
            source = Path(root) / name
            mode = os.lstat(source).st_mode
            if not stat.S_ISREG(mode):
                skipped.append((rel_root / name).as_posix())
                continue
            shutil.copyfile(source, staging / rel_root / name)
    for api in api_files:
        shutil.copyfile(api, staging / api.name)  # K's module wins over a same-named controller file
    _set_read_only(staging)
    return sorted(skipped)


def _set_read_only(root: Path) -> None:
    for path in sorted(root.rglob("*"), reverse=True):
        path.chmod(0o555 if path.is_dir() else 0o444)
    root.chmod(0o555)


def _remove_tree(root: Path) -> None:
    def make_writable(func: Any, path: str, _exc: Any) -> None:
        os.chmod(os.path.dirname(path), 0o755)
        if os.path.isdir(path) and not os.path.islink(path):
            os.chmod(path, 0o755)
        func(path)

    if root.exists():
        shutil.rmtree(root, onerror=make_writable)


@contextmanager
def _run_folder(run_dir: Path | None) -> Iterator[Path]:
    if run_dir is not None:
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        yield run_dir
        return
    folder = Path(tempfile.mkdtemp(prefix="datafarm-rollout-"))
    try:
        yield folder
    finally:
        _remove_tree(folder)


def _entry_path(entry: str) -> str:
    path = PurePosixPath(entry)
    if path.is_absolute() or ".." in path.parts or not entry.endswith(".py"):
        raise input_error(f"controller entry {entry!r} must be a relative .py path inside its folder",
                          field="entry", expected="e.g. controller.py")
    return path.as_posix()


# --- serving -------------------------------------------------------------------------------------

class _Server:
    """Serves one controller process until the rollout ends."""

    def __init__(self, process: SandboxedProcess, session: SimSession, limits: RolloutLimits) -> None:
        self.process = process
        self.session = session
        self.limits = limits
        hello_extra = {
            "limits": {
                "max_message_bytes": limits.max_message_bytes,
                "message_burst": limits.message_burst,
                "messages_per_sim_second": limits.messages_per_sim_second,
                "max_sim_seconds": limits.max_sim_seconds,
                "max_command_seconds": limits.max_command_seconds,
            },
        }
        self.executor = CommandExecutor(
            session, CommandLimits(limits.max_sim_seconds, limits.max_command_seconds), hello_extra)
        self.reader = FrameReader(process.stdout.fileno(), limits.max_message_bytes,
                                  finished=lambda: process.poll() is not None)
        self.stdin_fd = process.stdin.fileno()
        os.set_blocking(self.stdin_fd, False)
        self.messages = 0
        self.refusals: list[RefusedCommand] = []
        self.refusal_count = 0
        self.stdin_open = True

    # -- outcome helpers --------------------------------------------------------------------------
    def _outcome(self, ended_by: RolloutEnd, reason: str, result: SandboxResult, **extra: Any) -> RolloutOutcome:
        return RolloutOutcome(
            ended_by=ended_by,
            reason=reason,
            messages=self.messages,
            commands=self.executor.commands_executed,
            refusals=self.refusal_count,
            refused=self.refusals,
            sim_time=round(self.session.time, 9),
            wall_seconds=round(time.monotonic() - self.process.started, 3),
            sandbox=result,
            **extra,
        )

    def _send(self, reply: dict[str, Any]) -> None:
        """Send a reply; a controller that stopped reading is a violation, one that is gone is
        noticed by the next read (end of stream)."""
        if not self.stdin_open:
            return
        try:
            write_all(self.stdin_fd, encode(reply, self.limits.max_message_bytes), self.limits.reply_timeout_seconds)
        except TimeoutError:
            raise ProtocolViolation(
                Violation.NOT_READING,
                f"the controller left the harness's replies unread for {self.limits.reply_timeout_seconds:g} s "
                "(pipe full)", reply.get("seq")) from None
        except (BrokenPipeError, OSError):
            self.stdin_open = False

    def _send_final(self, reply: dict[str, Any]) -> None:
        # Best effort, short: the controller may not be reading at all.
        if not self.stdin_open:
            return
        try:
            write_all(self.stdin_fd, encode(reply, self.limits.max_message_bytes), 0.2)
        except (TimeoutError, OSError, ValueError):
            pass

    def _close_stdin(self) -> None:
        self.stdin_open = False
        try:
            self.process.stdin.close()
        except OSError:
            pass

    def _wait_exit(self, why_kill: str) -> SandboxResult:
        """Give the controller `exit_grace_seconds` to end by itself, then kill it with `why_kill`."""
        try:
            return self.process.wait(self.limits.exit_grace_seconds)
        except TimeoutError:
            self.process.kill(why_kill)
            return self.process.wait()

    def _end_after_fatal(self, reason: str) -> SandboxResult:
        """End the run after a fatal reply: a moment to read it and exit, then a kill for `reason`."""
        self._close_stdin()
        try:
            return self.process.wait(FATAL_GRACE_SECONDS)
        except TimeoutError:
            self.process.kill(reason)
            return self.process.wait()

    def _refused(self, seq: int, op: str, refusal: CommandRefused) -> None:
        self.refusal_count += 1
        if len(self.refusals) < self.limits.max_refusals_kept:
            self.refusals.append(RefusedCommand(seq=seq, op=op[:100], code=refusal.code.value,
                                                message=refusal.message, sim_time=round(self.session.time, 9)))

    # -- the loop ---------------------------------------------------------------------------------
    def serve(self) -> RolloutOutcome:
        """Answer requests until the rollout ends; never raises for anything the controller does."""
        try:
            return self._serve()
        except ProtocolViolation as violation:
            reason = f"protocol violation ({violation.code.value}): {violation.message}"
            self._send_final(error_reply(violation.seq, "protocol_violation", reason, fatal=True))
            return self._outcome(RolloutEnd.PROTOCOL_VIOLATION, reason, self._end_after_fatal(reason),
                                 violation=violation.code.value)
        except Exception as error:  # noqa: BLE001 - the harness must report, not crash
            reason = f"harness error: {type(error).__name__}: {error}"
            self.process.kill(reason)
            return self._outcome(RolloutEnd.HARNESS_ERROR, reason, self.process.wait())

    def _serve(self) -> RolloutOutcome:
        expected_seq = 1
        while True:
            try:
                payload = self.reader.read(self.process.deadline + READ_GRACE_SECONDS)
            except EndOfStream as end:
                return self._stream_ended(end.partial)
            except TimeoutError:
                reason = "the controller's pipe stayed open past the wall-clock deadline"
                self.process.kill(reason)
                return self._outcome(RolloutEnd.SANDBOX_LIMIT, reason, self.process.wait())
            ended = self.process.poll()
            if ended is not None and ended.ended_by is not EndCause.EXITED:
                # killed (deadline, limit): nobody is left to answer; requests still in the pipe
                # are not served
                return self._stream_ended(0)
            request = parse_request(payload, expected_seq)
            expected_seq += 1
            self.messages += 1
            self._check_budget(request.seq)
            if request.seq == 1:
                self._check_handshake(request.op, request.args)
            try:
                result = self.executor.handle(request.op, request.args)
            except CommandRefused as refusal:
                self._refused(request.seq, request.op, refusal)
                self._send(error_reply(request.seq, refusal.code.value, refusal.message))
                continue
            except Done as done:
                self._send(ok_reply(request.seq, {"time": self.session.time, "ended": True}))
                self._close_stdin()
                result_ = self._wait_exit(f"controller still running {self.limits.exit_grace_seconds:g} s after done")
                return self._outcome(RolloutEnd.DONE, f"controller claimed done (success={str(done.success).lower()})",
                                     result_, claimed_done=True, claimed_success=done.success,
                                     done_note=done.note[:2000])
            except SimTimeLimit as limit:
                reason = str(limit)
                self._send_final(error_reply(request.seq, "sim_time_limit", reason, fatal=True))
                return self._outcome(RolloutEnd.SIM_TIME_LIMIT, reason, self._end_after_fatal(reason))
            self._send(ok_reply(request.seq, result))

    def _check_budget(self, seq: int) -> None:
        allowed = self.limits.message_burst + self.limits.messages_per_sim_second * self.session.time
        if self.messages > allowed:
            raise ProtocolViolation(
                Violation.FLOOD,
                f"{self.messages} requests by sim time {self.session.time:.2f} s exceed the budget of "
                f"{self.limits.message_burst} + {self.limits.messages_per_sim_second:g} per sim second", seq)

    @staticmethod
    def _check_handshake(op: str, args: Mapping[str, Any]) -> None:
        if op != "hello":
            raise ProtocolViolation(Violation.HANDSHAKE, f"the first request must be hello, got {op[:100]!r}", 1)
        version = args.get("protocol")
        if type(version) is not int or version != PROTOCOL_VERSION:
            raise ProtocolViolation(
                Violation.HANDSHAKE,
                f"hello asks for protocol {str(version)[:40]!r}; the harness speaks {PROTOCOL_VERSION}", 1)

    def _stream_ended(self, partial: int) -> RolloutOutcome:
        """The controller closed its stdout (normally: it exited or died)."""
        result = self._wait_exit("controller closed its stdout but kept running")
        if result.ended_by is EndCause.SANDBOX_ERROR:
            return self._outcome(RolloutEnd.SANDBOX_ERROR, result.reason, result)
        if result.ended_by in LIMIT_CAUSES:
            return self._outcome(RolloutEnd.SANDBOX_LIMIT, result.reason, result)
        reason = f"controller ended without claiming done: {result.reason}"
        if partial:
            reason += f" (it left a message unfinished after {partial} bytes)"
        return self._outcome(RolloutEnd.CONTROLLER_EXITED, reason, result)


def run_expert(
    program_dir: Path,
    session: SimSession,
    sandbox: str | SandboxProvider = sandbox_registry.DEFAULT_PROVIDER,
    limits: RolloutLimits | None = None,
    sandbox_limits: SandboxLimits | None = None,
    *,
    entry: str = "controller.py",
    run_dir: Path | None = None,
    api_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> RolloutOutcome:
    """Run the controller `program_dir/entry` in a sandbox against `session` until it claims done,
    exits, breaks the protocol or hits a limit; return how the rollout ended.

    The controller folder is copied with K's harness API (`api_dir`, default K2's) into a fresh
    read-only staging folder (the sandbox's /in); the controller may write only its /out. Both lie
    in `run_dir` (kept) or in a temporary folder (removed afterwards). `sandbox` is a provider
    name (default bwrap) or a provider instance. Raises only for problems of the call itself (no
    such folder or entry, sandbox provider unavailable); everything the controller does ends up in
    the returned outcome.
    """
    provider = sandbox if isinstance(sandbox, SandboxProvider) else sandbox_registry.get(sandbox)
    limits = limits or RolloutLimits()
    sandbox_limits = sandbox_limits or SandboxLimits()
    entry = _entry_path(entry)
    with _run_folder(run_dir) as folder:
        staged = folder / "program"
        if staged.exists():
            _remove_tree(staged)
        skipped = stage_program(program_dir, staged, api_dir)
        if not (staged / entry).is_file():
            raise input_error(f"controller entry {entry!r} not found in {program_dir}", field="entry")
        program_sha = sha256_tree(staged)
        started = time.monotonic()
        try:
            process = provider.start(staged, [PYTHON, f"/in/{entry}"], out_dir=folder / "out",
                                     limits=sandbox_limits, env=env)
        except sandbox_registry.SandboxError as error:
            return RolloutOutcome(ended_by=RolloutEnd.SANDBOX_ERROR, reason=str(error),
                                  wall_seconds=round(time.monotonic() - started, 3),
                                  program_sha256=program_sha, skipped_files=skipped)
        try:
            outcome = _Server(process, session, limits).serve()
        finally:
            process.close()
        return outcome.model_copy(update={"program_sha256": program_sha, "skipped_files": skipped})
