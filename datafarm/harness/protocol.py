"""The expert pipe protocol: how a sandboxed expert controller talks to the trusted harness.

Transport
    The controller's stdin and stdout (the sandbox's pipes). Each message is a 4-byte big-endian
    unsigned length followed by that many bytes of UTF-8 JSON (one object). The controller writes
    requests on its stdout and reads replies on its stdin; its stderr is only logged. A message
    may be at most `DEFAULT_MAX_MESSAGE_BYTES` (64 KiB) long, in both directions.

Request
    ``{"seq": 1, "op": "observe", "args": {}}``. `seq` is an integer: 1 for the first request,
    and exactly the previous request's seq + 1 after that. `op` is one of `OPS`. `args` is an
    object (may be omitted when empty). The first request must be ``hello``.

Reply
    ``{"seq": 1, "ok": true, "result": {...}}`` or
    ``{"seq": 1, "ok": false, "error": {"code": "out_of_limits", "message": "..."}}``.
    An error with ``"fatal": true`` means the harness has ended the rollout; nothing more will be
    read. Replies come in request order, one per request.

Ops (arguments; see the harness API documentation in K's `skills/expert.md` for details)
    hello        {"protocol": 1} -> robot description, control period, limits
    observe      {} -> time, per-arm joint state and TCP pose, object poses by id, scale readings,
                 drawer values
    move_joints  {"arm", "q", "duration"?} or {"targets": {arm: q}, "duration"?}
    move_ee      {"arm", "pose": {"position", "quaternion"}, "duration"?, "path"?: "joint"|"linear"}
                 or {"poses": {arm: pose}, ...}; IK runs in the harness
    gripper      {"arm", "width" | "state": "open"|"close", "duration"?}
    wait         {"seconds"}
    done         {"success": bool, "note"?: str}: the controller's success claim; ends the rollout
No op sets an object's pose or any other simulator state: the only way to move an object is to
move the robot.

What the harness does with a bad request
    Protocol violations END the rollout (the harness records the reason, sends a fatal error
    reply when it can, and kills the sandbox): a declared length over the limit (`oversized`), a
    zero length, bytes that are not UTF-8 JSON objects or lack a proper `seq`/`op`/`args`
    (`malformed`), a seq other than the next one (`out_of_order`), a first request that is not a
    valid hello (`handshake`), more requests than the message budget allows (`flood`), or replies
    left unread until the pipe stays full (`not_reading`).
    Command refusals are answered with an error and recorded, and the rollout goes on: an unknown
    op (`unknown_op`, e.g. `set_pose`), badly typed or missing arguments (`bad_args`), a NaN or
    infinite number anywhere in the arguments (`non_finite`), a target outside the joint or
    gripper limits or a duration outside its bounds (`out_of_limits`), a motion faster than the
    joint velocity limits (`too_fast`), a pose the IK cannot reach (`ik_failed`), an arm that
    does not exist (`unknown_arm`) or has no gripper (`no_gripper`).
"""

from __future__ import annotations

import json
import math
import os
import select
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

PROTOCOL_VERSION = 1
"""The protocol version the harness speaks; a hello asking for another is a handshake violation."""
HEADER_BYTES = 4
"""Length prefix: unsigned 32-bit big-endian."""
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024
"""Largest payload (after the header) either side may send."""

OPS: tuple[str, ...] = ("hello", "observe", "move_joints", "move_ee", "gripper", "wait", "done")
"""Every op the harness serves. Nothing else exists; in particular nothing that sets state."""


class Violation(str, Enum):
    """Protocol violations: each ends the rollout."""

    OVERSIZED = "oversized"
    """The declared length exceeds the message size limit."""
    MALFORMED = "malformed"
    """Empty, not UTF-8, not a JSON object, or a bad `seq`/`op`/`args` envelope."""
    OUT_OF_ORDER = "out_of_order"
    """`seq` is not exactly the previous seq + 1 (1 for the first request)."""
    HANDSHAKE = "handshake"
    """The first request is not `hello`, or asks for a protocol version the harness lacks."""
    FLOOD = "flood"
    """More requests than the message budget allows for the simulated time so far."""
    NOT_READING = "not_reading"
    """The controller left the harness's replies unread until the reply timeout passed."""


class Refusal(str, Enum):
    """Command refusals: answered with an error and recorded; the rollout goes on."""

    UNKNOWN_OP = "unknown_op"
    """The op is not one of `OPS` (e.g. `set_pose`)."""
    BAD_ARGS = "bad_args"
    """Missing, extra or wrongly typed arguments."""
    NON_FINITE = "non_finite"
    """A NaN or infinite number somewhere in the arguments."""
    OUT_OF_LIMITS = "out_of_limits"
    """A joint or gripper target outside the robot's limits, or a duration outside its bounds."""
    TOO_FAST = "too_fast"
    """The motion would need a joint velocity above the joint's limit."""
    IK_FAILED = "ik_failed"
    """No joint configuration within the limits puts the TCP at the requested pose (or path)."""
    UNKNOWN_ARM = "unknown_arm"
    """The robot has no arm with that name."""
    NO_GRIPPER = "no_gripper"
    """The arm has no gripper."""


class ProtocolViolation(Exception):
    """A violation: the rollout must end. `seq` is the offending request's seq when known."""

    def __init__(self, code: Violation, message: str, seq: int | None = None) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.message = message
        self.seq = seq


class CommandRefused(Exception):
    """A refused command: the harness answers with an error and carries on."""

    def __init__(self, code: Refusal, message: str) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Request:
    """One request that passed the envelope checks."""

    seq: int
    """Its sequence number."""
    op: str
    """The op name (not yet checked against `OPS`)."""
    args: dict[str, Any] = field(default_factory=dict)
    """Its arguments, as decoded (numbers may be NaN or infinite: checked per command)."""


# --- encoding ------------------------------------------------------------------------------------

def encode(message: dict[str, Any], max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> bytes:
    """One framed message (header + compact JSON). The harness never sends NaN or infinity
    (`allow_nan=False`); ValueError if the payload would exceed `max_bytes`."""
    payload = json.dumps(message, separators=(",", ":"), allow_nan=False).encode("utf-8")
    if len(payload) > max_bytes:
        raise ValueError(f"message of {len(payload)} bytes exceeds the {max_bytes}-byte limit")
    return len(payload).to_bytes(HEADER_BYTES, "big") + payload


def ok_reply(seq: int, result: dict[str, Any]) -> dict[str, Any]:
    """A success reply."""
    return {"seq": seq, "ok": True, "result": result}


def error_reply(seq: int | None, code: str, message: str, *, fatal: bool = False) -> dict[str, Any]:
    """An error reply; `fatal` when the harness has ended the rollout."""
    reply: dict[str, Any] = {"seq": seq, "ok": False, "error": {"code": code, "message": message}}
    if fatal:
        reply["fatal"] = True
    return reply


# --- decoding ------------------------------------------------------------------------------------

def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # A duplicated key would let a message mean two things; refuse the whole message.
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def parse_request(payload: bytes, expected_seq: int) -> Request:
    """Decode and check one request's envelope; ProtocolViolation when it is malformed or out of
    order. NaN/Infinity literals are accepted here and refused per command (`non_finite`)."""
    if not payload:
        raise ProtocolViolation(Violation.MALFORMED, "empty message (length 0)")
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ProtocolViolation(Violation.MALFORMED, f"message is not UTF-8 ({error.reason} at byte {error.start})") from None
    try:
        message = json.loads(text, object_pairs_hook=_reject_duplicate_keys)
    except (ValueError, RecursionError) as error:
        raise ProtocolViolation(Violation.MALFORMED, f"message is not valid JSON: {_short(str(error))}") from None
    if not isinstance(message, dict):
        raise ProtocolViolation(Violation.MALFORMED, f"message is a JSON {type(message).__name__}, not an object")
    seq = message.get("seq")
    if type(seq) is not int:  # bool is an int subclass: refuse it too
        raise ProtocolViolation(Violation.MALFORMED, f"`seq` must be an integer, got {_short(json.dumps(seq, default=str))}")
    extra = sorted(set(message) - {"seq", "op", "args"})
    if extra:
        raise ProtocolViolation(Violation.MALFORMED, f"unexpected envelope keys {extra} (only seq, op, args)", seq)
    op = message.get("op")
    if not isinstance(op, str) or not op:
        raise ProtocolViolation(Violation.MALFORMED, "`op` must be a non-empty string", seq)
    args = message.get("args", {})
    if not isinstance(args, dict):
        raise ProtocolViolation(Violation.MALFORMED, "`args` must be an object", seq)
    if seq != expected_seq:
        raise ProtocolViolation(Violation.OUT_OF_ORDER, f"expected seq {expected_seq}, got {seq}", seq)
    return Request(seq=seq, op=op, args=args)


def find_non_finite(value: Any, path: str = "args") -> str | None:
    """The path (e.g. `args.q[2]`) of the first NaN or infinite number in `value`, else None.
    Iterative, so a deeply nested message cannot exhaust the harness's stack."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return where
        elif isinstance(item, dict):
            stack.extend((v, f"{where}.{k}") for k, v in reversed(list(item.items())))
        elif isinstance(item, list):
            stack.extend((v, f"{where}[{i}]") for i, v in reversed(list(enumerate(item))))
    return None


def _as_text(data: bytes) -> str:
    """`, text "hell"` when the bytes are printable ASCII (a print() to stdout, usually)."""
    if all(32 <= b < 127 or b in (9, 10, 13) for b in data):
        return f", text {data.decode('ascii')!r}: did the controller print to stdout?"
    return ""


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- bounded, deadline-aware pipe I/O ------------------------------------------------------------

class EndOfStream(Exception):
    """The controller's stdout closed (it exited or died). `partial` bytes of an unfinished
    message were pending, if any."""

    def __init__(self, partial: int = 0) -> None:
        super().__init__("end of stream" + (f" inside a message ({partial} bytes of it received)" if partial else ""))
        self.partial = partial


class FrameReader:
    """Reads framed messages from a pipe without ever buffering more than one message (at most
    `max_bytes` + 4 bytes) and without blocking past a deadline.

    `finished()` tells the reader the writer is gone (its process ended): then a quiet pipe for
    `linger` seconds counts as the end of the stream, even if a stray descendant still holds it."""

    POLL_SECONDS = 0.05

    def __init__(self, fd: int, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, *,
                 finished: Callable[[], bool] = lambda: False, linger: float = 0.5) -> None:
        self.fd = fd
        self.max_bytes = max_bytes
        self._finished = finished
        self._linger = linger
        self._buffer = bytearray()

    def _read_exactly(self, n: int, deadline: float, pending: int) -> bytes:
        quiet_since: float | None = None
        while len(self._buffer) < n:
            now = time.monotonic()
            if now >= deadline:
                raise TimeoutError("no complete message before the deadline")
            ready, _, _ = select.select([self.fd], [], [], min(self.POLL_SECONDS, deadline - now))
            if ready:
                try:
                    chunk = os.read(self.fd, n - len(self._buffer))
                except OSError:
                    chunk = b""
                if not chunk:
                    raise EndOfStream(pending + len(self._buffer))
                self._buffer += chunk
                quiet_since = None
            elif self._finished():
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= self._linger:
                    raise EndOfStream(pending + len(self._buffer))
        data = bytes(self._buffer[:n])
        del self._buffer[:n]
        return data

    def read(self, deadline: float) -> bytes:
        """The next message's payload. Raises EndOfStream, TimeoutError (deadline passed) or
        ProtocolViolation (`oversized`) when the header declares more than `max_bytes`."""
        header = self._read_exactly(HEADER_BYTES, deadline, 0)
        length = int.from_bytes(header, "big")
        if length > self.max_bytes:
            raise ProtocolViolation(
                Violation.OVERSIZED,
                f"declared message length {length} bytes exceeds the {self.max_bytes}-byte limit "
                f"(header bytes {header.hex()}{_as_text(header)})",
            )
        if length == 0:
            return b""
        return self._read_exactly(length, deadline, HEADER_BYTES)


def write_all(fd: int, data: bytes, timeout: float) -> None:
    """Write `data` to a non-blocking pipe within `timeout` seconds. TimeoutError when the reader
    leaves the pipe full that long; BrokenPipeError when it is gone."""
    deadline = time.monotonic() + timeout
    view = memoryview(data)
    while view:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"pipe stayed full for {timeout:g} s")
        _, ready, _ = select.select([], [fd], [], min(0.1, remaining))
        if not ready:
            continue
        try:
            written = os.write(fd, view)
        except BlockingIOError:
            continue
        view = view[written:]
