"""datafarm harness API: the module an expert controller imports inside the sandbox.

    from datafarm_expert import Harness, DOWN

    robot = Harness()                       # connects and says hello
    box = robot.object_position("box")
    robot.grasp(box)                        # open, approach from above, descend, close
    robot.lift(0.10)
    robot.done(success=True)

The simulator runs in the trusted harness, not here. This module only sends requests over the
pipe (stdout) and reads replies (stdin), using the protocol described in datafarm's
`harness/protocol.py`: 4-byte big-endian length + UTF-8 JSON, requests `{"seq", "op", "args"}`,
replies `{"seq", "ok", "result" | "error"}`. There is no call that sets an object's pose or any
other state: the only way to move an object is to move the robot.

Conventions: metres, radians, seconds; world frame z up; quaternions (w, x, y, z); a pose is a
position plus a quaternion of the TCP (the point between the finger pads). `print()` goes to the
log (stderr): importing this module hands stdout to the protocol, so never write to stdout before
the import. Standard library and numpy only.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

PROTOCOL_VERSION = 1
"""The pipe protocol version this module speaks."""
MAX_MESSAGE_BYTES = 64 * 1024
"""Largest message either side may send (the harness ends the rollout for a larger one)."""
DOWN = (0.0, 1.0, 0.0, 0.0)
"""TCP orientation with the gripper pointing straight down (180 degrees about world x)."""

__all__ = [
    "DOWN",
    "Harness",
    "HarnessError",
    "Robot",
    "RolloutEnded",
    "down_with_yaw",
    "quat_from_axis_angle",
    "quat_multiply",
]


def _take_over_stdio() -> tuple[Any, Any]:
    """Keep private copies of the pipe ends and point fd 1 at stderr and fd 0 at /dev/null, so
    print(), input() and stray writes after this import cannot corrupt the protocol."""
    sys.stdout.flush()
    reader = os.fdopen(os.dup(0), "rb", buffering=0)
    writer = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
    except OSError:
        pass
    return reader, writer


_PIPES: tuple[Any, Any] | None = _take_over_stdio()


class HarnessError(Exception):
    """The harness refused a request. `code` says why (`out_of_limits`, `ik_failed`, `too_fast`,
    `non_finite`, `bad_args`, `unknown_op`, `unknown_arm`, `no_gripper`); the rollout goes on."""

    def __init__(self, code: str, message: str, seq: int | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.seq = seq


class RolloutEnded(HarnessError):
    """The harness has ended the rollout (protocol violation, sim time limit) or is gone; no
    further request will be answered. Let it propagate and exit."""


def quat_multiply(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float, float]:
    """Hamilton product a * b of two (w, x, y, z) quaternions (apply b, then a)."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return (
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    )


def quat_from_axis_angle(axis: Sequence[float], angle: float) -> tuple[float, float, float, float]:
    """The (w, x, y, z) rotation of `angle` radians about `axis`."""
    v = np.asarray(axis, dtype=float)
    v = v / np.linalg.norm(v)
    s = math.sin(angle / 2)
    return (math.cos(angle / 2), float(v[0] * s), float(v[1] * s), float(v[2] * s))


def down_with_yaw(yaw: float) -> tuple[float, float, float, float]:
    """Gripper pointing down, turned by `yaw` radians about world z (to align the fingers)."""
    return quat_multiply(quat_from_axis_angle((0, 0, 1), yaw), DOWN)


def _vec(values: Sequence[float], n: int, name: str) -> list[float]:
    out = [float(v) for v in values]
    if len(out) != n:
        raise ValueError(f"{name} must have {n} numbers, got {len(out)}")
    return out


class Harness:
    """A connection to the harness: observation, robot commands and K's motion skills.

    Create one per controller (it takes over stdin/stdout). `info` is the hello reply: arms with
    joint names and limits (`lower`, `upper`, `velocity`, `gripper_max_width`), `control_dt`,
    object/scale/drawer ids and the rollout `limits`. Every command blocks until the harness has
    simulated it and returns the harness's result; a refused command raises HarnessError.
    `arm` may be omitted on a one-arm robot."""

    def __init__(self) -> None:
        global _PIPES
        if _PIPES is None:
            raise RuntimeError("only one Harness per controller: the first one owns the pipe")
        self._in, self._out = _PIPES
        _PIPES = None
        self._seq = 0
        self._closed = False
        self.info: dict[str, Any] = self.request("hello", protocol=PROTOCOL_VERSION)
        self.arms: tuple[str, ...] = tuple(self.info["arms"])
        self.control_dt: float = float(self.info["control_dt"])

    # --- transport --------------------------------------------------------------------------------
    def _read_exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self._in.read(n - len(data))
            if not chunk:
                self._closed = True
                raise RolloutEnded("closed", "the harness closed the pipe")
            data += chunk
        return data

    def request(self, op: str, **args: Any) -> dict[str, Any]:
        """Send one raw request and return its result (the typed methods below wrap this)."""
        if self._closed:
            raise RolloutEnded("closed", "the rollout has ended")
        self._seq += 1
        payload = json.dumps({"seq": self._seq, "op": op, "args": args}, separators=(",", ":")).encode()
        if len(payload) > MAX_MESSAGE_BYTES:
            raise ValueError(f"request of {len(payload)} bytes exceeds {MAX_MESSAGE_BYTES}")
        try:
            self._out.write(len(payload).to_bytes(4, "big") + payload)
        except (BrokenPipeError, OSError):
            self._closed = True
            raise RolloutEnded("closed", "the harness closed the pipe") from None
        length = int.from_bytes(self._read_exactly(4), "big")
        reply = json.loads(self._read_exactly(length))
        if reply.get("ok"):
            return reply["result"]
        error = reply.get("error", {})
        if reply.get("fatal"):
            self._closed = True
            raise RolloutEnded(error.get("code", "fatal"), error.get("message", ""), reply.get("seq"))
        raise HarnessError(error.get("code", "error"), error.get("message", ""), reply.get("seq"))

    # --- primitives -------------------------------------------------------------------------------
    def observe(self) -> dict[str, Any]:
        """The state now: `time`, `step`; `arms[arm]`: `q`, `qd`, `target`, `effort`,
        `gripper_width`, `gripper_target`, `tcp` {position, quaternion}; `objects[id]`: position,
        quaternion, linear/angular velocity; `scales[id]` (grams); `drawers[id]` (joint value)."""
        return self.request("observe")

    def move_joints(self, q: Sequence[float] | None = None, *, arm: str | None = None,
                    targets: Mapping[str, Sequence[float]] | None = None,
                    duration: float | None = None) -> dict[str, Any]:
        """Move the arm's joints to `q` (or several arms at once: `targets={arm: q}`) along a smooth
        profile; `duration` None lets the harness pick one within the velocity limits."""
        args: dict[str, Any] = {}
        if targets is not None:
            args["targets"] = {a: [float(v) for v in t] for a, t in targets.items()}
        else:
            args["q"] = [float(v) for v in q]  # type: ignore[union-attr]
            if arm is not None:
                args["arm"] = arm
        if duration is not None:
            args["duration"] = float(duration)
        return self.request("move_joints", **args)

    def move_ee(self, position: Sequence[float], quaternion: Sequence[float] | None = None, *,
                arm: str | None = None, duration: float | None = None, linear: bool = False) -> dict[str, Any]:
        """Move the TCP to a world pose (IK in the harness). `quaternion` None keeps the current
        orientation. `linear` moves in a straight line (for descents and insertions); otherwise the
        joints move smoothly and the TCP path is curved."""
        pose: dict[str, Any] = {"position": _vec(position, 3, "position")}
        if quaternion is not None:
            pose["quaternion"] = _vec(quaternion, 4, "quaternion")
        args: dict[str, Any] = {"pose": pose, "path": "linear" if linear else "joint"}
        if arm is not None:
            args["arm"] = arm
        if duration is not None:
            args["duration"] = float(duration)
        return self.request("move_ee", **args)

    def gripper(self, width: float | None = None, *, state: str | None = None, arm: str | None = None,
                duration: float = 0.5) -> dict[str, Any]:
        """Drive the gripper to `width` metres (0 .. gripper_max_width) or `state` "open"/"close",
        simulating `duration` seconds (0: set the target and return at once)."""
        args: dict[str, Any] = {"duration": float(duration)}
        if state is not None:
            args["state"] = state
        else:
            args["width"] = float(width)  # type: ignore[arg-type]
        if arm is not None:
            args["arm"] = arm
        return self.request("gripper", **args)

    def open_gripper(self, arm: str | None = None, width: float | None = None, duration: float = 0.5) -> dict[str, Any]:
        """Open fully (or to `width`)."""
        if width is not None:
            return self.gripper(width, arm=arm, duration=duration)
        return self.gripper(state="open", arm=arm, duration=duration)

    def close_gripper(self, arm: str | None = None, duration: float = 0.8) -> dict[str, Any]:
        """Close; the fingers stop on whatever they hold. The result's `width` is the gap reached
        (about the object's width when something is held, about 0 when nothing is)."""
        return self.gripper(state="close", arm=arm, duration=duration)

    def wait(self, seconds: float) -> dict[str, Any]:
        """Let `seconds` of simulated time pass holding the current targets."""
        return self.request("wait", seconds=float(seconds))

    def done(self, success: bool = True, note: str = "") -> dict[str, Any]:
        """Claim the task finished (`success`) and end the rollout; the judge decides."""
        result = self.request("done", success=bool(success), note=str(note))
        self._closed = True
        return result

    # --- convenience reads ------------------------------------------------------------------------
    def _arm(self, arm: str | None) -> str:
        if arm is not None:
            return arm
        if len(self.arms) != 1:
            raise ValueError(f"this robot has several arms {list(self.arms)}: name one")
        return self.arms[0]

    def tcp_pose(self, arm: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The arm's measured TCP (position, quaternion)."""
        tcp = self.observe()["arms"][self._arm(arm)]["tcp"]
        return np.array(tcp["position"]), np.array(tcp["quaternion"])

    def object_pose(self, object_id: str) -> tuple[np.ndarray, np.ndarray]:
        """An object's (position, quaternion)."""
        obj = self.observe()["objects"][object_id]
        return np.array(obj["position"]), np.array(obj["quaternion"])

    def object_position(self, object_id: str) -> np.ndarray:
        """An object's position (its frame origin, usually its centre)."""
        return self.object_pose(object_id)[0]

    # --- K's motion skills ------------------------------------------------------------------------
    def approach(self, position: Sequence[float], *, height: float = 0.06, quaternion: Sequence[float] = DOWN,
                 arm: str | None = None, duration: float | None = None) -> dict[str, Any]:
        """Pre-grasp: put the TCP `height` metres above `position`, oriented `quaternion`."""
        above = np.asarray(position, dtype=float) + (0.0, 0.0, height)
        return self.move_ee(above, quaternion, arm=arm, duration=duration)

    def grasp(self, position: Sequence[float], *, quaternion: Sequence[float] = DOWN, arm: str | None = None,
              height: float = 0.06, width: float | None = None, descend_seconds: float | None = None,
              close_seconds: float = 0.8) -> float:
        """Open (fully, or to `width`), approach `height` above `position`, descend straight down to
        it, close. Returns the gripper gap reached: near 0 means nothing was caught."""
        self.open_gripper(arm, width)
        self.approach(position, height=height, quaternion=quaternion, arm=arm)
        self.move_ee(position, quaternion, arm=arm, linear=True, duration=descend_seconds)
        return float(self.close_gripper(arm, close_seconds)["width"])

    def lift(self, height: float = 0.06, *, arm: str | None = None, duration: float | None = None) -> dict[str, Any]:
        """Raise the TCP straight up by `height` metres from where it is now."""
        return self.translate((0.0, 0.0, height), arm=arm, duration=duration)

    def translate(self, offset: Sequence[float], *, arm: str | None = None,
                  duration: float | None = None) -> dict[str, Any]:
        """Move the TCP in a straight line by `offset` (world frame), keeping its orientation."""
        arm_name = self._arm(arm)
        tcp = self.observe()["arms"][arm_name]["tcp"]
        goal = np.asarray(tcp["position"]) + np.asarray(offset, dtype=float)
        return self.move_ee(goal, tcp["quaternion"], arm=arm, linear=True, duration=duration)

    def place(self, position: Sequence[float], *, quaternion: Sequence[float] = DOWN, arm: str | None = None,
              height: float = 0.06, release_width: float | None = None, retreat: bool = True) -> dict[str, Any]:
        """Carry what is held to `height` above `position`, descend straight to it, open (fully or
        to `release_width`) and, with `retreat`, go back up."""
        self.approach(position, height=height, quaternion=quaternion, arm=arm)
        self.move_ee(position, quaternion, arm=arm, linear=True)
        result = self.open_gripper(arm, release_width)
        if retreat:
            result = self.lift(height, arm=arm)
        return result

    def insert(self, opening: Sequence[float], depth: float, *, quaternion: Sequence[float] = DOWN,
               arm: str | None = None, height: float = 0.06, release: bool = True,
               duration: float | None = None) -> dict[str, Any]:
        """Put what is held into a container: approach `height` above the container's `opening`,
        descend straight down through it by `depth` metres below the opening, then (with
        `release`) open and go back up."""
        opening = np.asarray(opening, dtype=float)
        self.approach(opening, height=height, quaternion=quaternion, arm=arm)
        result = self.move_ee(opening - (0.0, 0.0, depth), quaternion, arm=arm, linear=True, duration=duration)
        if release:
            self.open_gripper(arm)
            result = self.lift(height + depth, arm=arm)
        return result

    def pull_handle(self, handle: Sequence[float], direction: Sequence[float], distance: float, *,
                    quaternion: Sequence[float] = DOWN, arm: str | None = None, height: float = 0.06,
                    duration: float | None = None) -> dict[str, Any]:
        """Grasp the handle at `handle` (from `height` above), pull it `distance` metres along the
        unit vector `direction` in a straight line, release it and move up."""
        self.grasp(handle, quaternion=quaternion, arm=arm, height=height)
        unit = np.asarray(direction, dtype=float)
        unit = unit / np.linalg.norm(unit)
        result = self.translate(unit * distance, arm=arm, duration=duration)
        self.open_gripper(arm)
        self.lift(height, arm=arm)
        return result

    def push_handle(self, contact: Sequence[float], direction: Sequence[float], distance: float, *,
                    quaternion: Sequence[float] = DOWN, arm: str | None = None, height: float = 0.06,
                    duration: float | None = None) -> dict[str, Any]:
        """With the gripper closed, come down from `height` above `contact` to it, push
        `distance` metres along the unit vector `direction` in a straight line, then move up."""
        self.close_gripper(arm, 0.3)
        self.approach(contact, height=height, quaternion=quaternion, arm=arm)
        self.move_ee(contact, quaternion, arm=arm, linear=True)
        unit = np.asarray(direction, dtype=float)
        unit = unit / np.linalg.norm(unit)
        result = self.translate(unit * distance, arm=arm, duration=duration)
        self.lift(height, arm=arm)
        return result

    def strike(self, position: Sequence[float], times: int = 3, *, height: float = 0.06,
               quaternion: Sequence[float] = DOWN, arm: str | None = None, down_seconds: float = 0.3,
               up_seconds: float = 0.3, pause: float = 0.1) -> list[float]:
        """Strike `position` (e.g. a drum head) `times` times: from `height` above it, straight down
        to it in `down_seconds` and back up in `up_seconds`, pausing `pause` seconds on top.
        Returns the simulated time of each hit."""
        target = np.asarray(position, dtype=float)
        above = target + (0.0, 0.0, height)
        self.approach(target, height=height, quaternion=quaternion, arm=arm)
        hits = []
        for _ in range(int(times)):
            hits.append(float(self.move_ee(target, quaternion, arm=arm, linear=True, duration=down_seconds)["time"]))
            self.move_ee(above, quaternion, arm=arm, linear=True, duration=up_seconds)
            if pause > 0:
                self.wait(pause)
        return hits


Robot = Harness
"""Alias: `Robot()` is the same connection."""
