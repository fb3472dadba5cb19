"""Checking and executing the expert's commands on a `SimSession`.

Every command is checked completely before the simulation moves (arguments, finiteness, joint and
gripper limits, IK along the whole path, joint velocity limits), so a refused command changes
nothing. Motions are executed one control step at a time: joint targets follow a smooth cubic
profile (3s^2 - 2s^3, peak speed 1.5x the mean) from the targets the arm holds now, so the recorded
actions are continuous and within the velocity limits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from datafarm.harness.protocol import (
    OPS,
    PROTOCOL_VERSION,
    CommandRefused,
    Refusal,
    find_non_finite,
)
from datafarm.harness.session import ArmInfo, SimSession

LIMIT_TOLERANCE = 1e-6
"""Targets this far outside a joint limit still count as inside (float noise of IK and JSON)."""
AUTO_SPEED_FRACTION = 0.5
"""An automatic duration keeps every joint's peak speed at this fraction of its velocity limit."""
LINEAR_SPEED = 0.1
"""Mean TCP speed (m/s) of an automatic-duration straight-line move."""
ANGULAR_SPEED = 0.5
"""Mean TCP rotation speed (rad/s) of an automatic-duration straight-line move."""
MIN_AUTO_SECONDS = 0.1
"""Shortest automatic motion duration."""
DEFAULT_GRIPPER_SECONDS = 0.5
"""How long a gripper command simulates unless told otherwise."""
IK_RESTARTS = 16
"""Random restarts for a point-to-point IK target."""
IK_LINEAR_MAX_JUMP = 0.35
"""Largest joint change (rad) between consecutive waypoints of a straight-line path, 1 cm or
one control step apart, before the path counts as crossing a singularity."""

ARGS: dict[str, tuple[set[str], set[str]]] = {
    # op: (required argument names, optional argument names); the plural forms are checked apart
    "hello": ({"protocol"}, set()),
    "observe": (set(), set()),
    "move_joints": (set(), {"arm", "q", "targets", "duration"}),
    "move_ee": (set(), {"arm", "pose", "poses", "duration", "path"}),
    "gripper": (set(), {"arm", "width", "state", "duration"}),
    "wait": ({"seconds"}, set()),
    "done": ({"success"}, {"note"}),
}
assert set(ARGS) == set(OPS)


class SimTimeLimit(Exception):
    """The command would run the episode past its simulated-time limit; the rollout ends."""


class Done(Exception):
    """The controller claimed done; the rollout ends after the reply."""

    def __init__(self, success: bool, note: str) -> None:
        super().__init__(f"done (success={success})")
        self.success = success
        self.note = note


def smoothstep(s: np.ndarray) -> np.ndarray:
    """3 s^2 - 2 s^3: 0 -> 1 with zero speed at both ends."""
    return s * s * (3.0 - 2.0 * s)


def _refuse(code: Refusal, message: str) -> CommandRefused:
    return CommandRefused(code, message)


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _refuse(Refusal.BAD_ARGS, f"`{name}` must be a number, got {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise _refuse(Refusal.NON_FINITE, f"`{name}` is not a finite number")
    return number


def _vector(value: Any, size: int, name: str) -> np.ndarray:
    if not isinstance(value, list) or len(value) != size:
        got = f"a list of {len(value)}" if isinstance(value, list) else type(value).__name__
        raise _refuse(Refusal.BAD_ARGS, f"`{name}` must be a list of {size} numbers, got {got}")
    return np.array([_number(v, f"{name}[{i}]") for i, v in enumerate(value)], dtype=np.float64)


def _normalized_quaternion(value: Any, name: str) -> np.ndarray:
    q = _vector(value, 4, name)
    norm = float(np.linalg.norm(q))
    if norm < 1e-9:
        raise _refuse(Refusal.BAD_ARGS, f"`{name}` must be a non-zero quaternion (w, x, y, z)")
    return q / norm


def _slerp(q0: np.ndarray, q1: np.ndarray, t: float) -> np.ndarray:
    dot = float(np.dot(q0, q1))
    if dot < 0:
        q1, dot = -q1, -dot
    if dot > 0.9995:
        q = q0 + t * (q1 - q0)
        return q / np.linalg.norm(q)
    theta = math.acos(dot)
    return (math.sin((1 - t) * theta) * q0 + math.sin(t * theta) * q1) / math.sin(theta)


def _at_limits(info: ArmInfo, q: np.ndarray) -> str:
    """`, joint5 at its limit` for the joints of `q` sitting on a limit, else empty."""
    names = [n for i, n in enumerate(info.joint_names)
             if min(abs(q[i] - info.lower[i]), abs(q[i] - info.upper[i])) < 1e-3]
    return f", {', '.join(names)} at {'its limit' if len(names) == 1 else 'their limits'}" if names else ""


def _quat_angle(q0: np.ndarray, q1: np.ndarray) -> float:
    return 2.0 * math.acos(min(1.0, abs(float(np.dot(q0, q1)))))


@dataclass(frozen=True)
class CommandLimits:
    """The bounds the executor enforces (a subset of the rollout limits)."""

    max_sim_seconds: float
    """Simulated-time limit of the whole episode."""
    max_command_seconds: float
    """Longest duration one command may ask for."""


class CommandExecutor:
    """Checks and executes one request at a time on `session`; `handle(op, args)` returns the
    reply's result or raises CommandRefused, Done or SimTimeLimit."""

    def __init__(self, session: SimSession, limits: CommandLimits, hello_extra: Mapping[str, Any]) -> None:
        self.session = session
        self.limits = limits
        self._hello_extra = dict(hello_extra)
        self._handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "hello": self._hello,
            "observe": lambda args: self.session.observe(),
            "move_joints": self._move_joints,
            "move_ee": self._move_ee,
            "gripper": self._gripper,
            "wait": self._wait,
            "done": self._done,
        }
        self.commands_executed = 0

    def handle(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        """Check and run one request."""
        if op not in self._handlers:
            raise _refuse(Refusal.UNKNOWN_OP, f"unknown op {op!r}; the harness serves {', '.join(OPS)}")
        required, optional = ARGS[op]
        missing = sorted(required - set(args))
        unexpected = sorted(set(args) - required - optional)
        if missing or unexpected:
            parts = ([f"missing {missing}"] if missing else []) + ([f"unexpected {unexpected}"] if unexpected else [])
            raise _refuse(Refusal.BAD_ARGS, f"{op}: " + ", ".join(parts))
        if (path := find_non_finite(args)) is not None:
            raise _refuse(Refusal.NON_FINITE, f"{op}: {path} is not a finite number")
        return self._handlers[op](args)

    # --- helpers --------------------------------------------------------------------------------
    def _arm(self, value: Any) -> ArmInfo:
        arms = self.session.arms()
        if value is None and len(arms) == 1:
            value = arms[0]
        if not isinstance(value, str):
            raise _refuse(Refusal.BAD_ARGS, f"`arm` must be one of {list(arms)}")
        if value not in arms:
            raise _refuse(Refusal.UNKNOWN_ARM, f"no arm called {value!r}; this robot has {list(arms)}")
        return self.session.arm_info(value)

    def _duration(self, value: Any, name: str = "duration", allow_zero: bool = False) -> float:
        seconds = _number(value, name)
        low_ok = seconds >= 0 if allow_zero else seconds > 0
        if not low_ok or seconds > self.limits.max_command_seconds:
            low = "0 <=" if allow_zero else "0 <"
            raise _refuse(Refusal.OUT_OF_LIMITS,
                          f"`{name}` {seconds:g} s outside {low} {name} <= {self.limits.max_command_seconds:g} s")
        return seconds

    def _steps(self, seconds: float) -> int:
        return max(1, math.ceil(seconds / self.session.control_dt - 1e-9))

    def _check_time(self, steps: int) -> None:
        end = self.session.time + steps * self.session.control_dt
        if end > self.limits.max_sim_seconds + 1e-9:
            raise SimTimeLimit(
                f"episode sim time limit ({self.limits.max_sim_seconds:g} s) reached: at "
                f"{self.session.time:.3f} s a command asked for {steps * self.session.control_dt:.3f} s more")

    @staticmethod
    def _check_joint_limits(info: ArmInfo, q: np.ndarray, what: str) -> None:
        for i, name in enumerate(info.joint_names):
            if q[i] < info.lower[i] - LIMIT_TOLERANCE or q[i] > info.upper[i] + LIMIT_TOLERANCE:
                raise _refuse(Refusal.OUT_OF_LIMITS,
                              f"{what}: {info.name}.{name} target {q[i]:.4f} outside its limits "
                              f"[{info.lower[i]:.4f}, {info.upper[i]:.4f}]")

    def _arm_targets(self, args: dict[str, Any], single: str, plural: str) -> dict[str, Any]:
        """{arm name: raw target} from either (`arm`, single) or the plural mapping."""
        if plural in args:
            if "arm" in args or single in args:
                raise _refuse(Refusal.BAD_ARGS, f"give either `{plural}` or `arm` + `{single}`, not both")
            mapping = args[plural]
            if not isinstance(mapping, dict) or not mapping:
                raise _refuse(Refusal.BAD_ARGS, f"`{plural}` must be a non-empty object {{arm: target}}")
            return {self._arm(arm).name: target for arm, target in mapping.items()}
        if single not in args:
            raise _refuse(Refusal.BAD_ARGS, f"missing `{single}` (or `{plural}`)")
        return {self._arm(args.get("arm")).name: args[single]}

    # --- motion ---------------------------------------------------------------------------------
    def _profile_steps(self, deltas: Mapping[str, np.ndarray], duration: float | None) -> int:
        """Control steps for a smooth joint move: the given duration, or the shortest one keeping
        every joint's peak speed at AUTO_SPEED_FRACTION of its limit."""
        if duration is not None:
            return self._steps(duration)
        seconds = MIN_AUTO_SECONDS
        for arm, delta in deltas.items():
            vmax = self.session.arm_info(arm).velocity
            finite = np.isfinite(vmax) & (vmax > 0)
            if np.any(finite):
                need = 1.5 * np.abs(delta[finite]) / (AUTO_SPEED_FRACTION * vmax[finite])
                seconds = max(seconds, float(need.max()))
        return self._steps(seconds)

    def _joint_speeds(self, path: np.ndarray, start: np.ndarray) -> np.ndarray:
        """Peak speed of each joint along a path (steps x dof) that starts after `start`."""
        return np.abs(np.diff(np.vstack([start, path]), axis=0)).max(axis=0) / self.session.control_dt

    def _speed_ratio(self, info: ArmInfo, path: np.ndarray, start: np.ndarray) -> float:
        """The largest peak joint speed as a fraction of that joint's velocity limit."""
        limited = np.isfinite(info.velocity) & (info.velocity > 0)
        if not np.any(limited):
            return 0.0
        return float((self._joint_speeds(path, start)[limited] / info.velocity[limited]).max())

    def _check_speed(self, info: ArmInfo, path: np.ndarray, start: np.ndarray) -> None:
        """Refuse a joint path (steps x dof, starting after `start`) faster than the limits."""
        speed = self._joint_speeds(path, start)
        over = np.isfinite(info.velocity) & (speed > info.velocity * (1 + 1e-6))
        if np.any(over):
            i = int(np.flatnonzero(over)[0])
            raise _refuse(Refusal.TOO_FAST,
                          f"{info.name}.{info.joint_names[i]} would move at {speed[i]:.2f} (limit "
                          f"{info.velocity[i]:.2f}) per second; give a longer duration")

    def _execute(self, paths: Mapping[str, np.ndarray]) -> dict[str, Any]:
        """Run joint paths (each steps x dof, equal lengths) one control step per row."""
        steps = len(next(iter(paths.values())))
        for k in range(steps):
            for arm, path in paths.items():
                self.session.set_joint_targets(arm, path[k])
            self.session.step_control()
        self.commands_executed += 1
        return self._motion_result(paths)

    def _motion_result(self, arms: Mapping[str, Any]) -> dict[str, Any]:
        state = self.session.observe()
        return {"time": state["time"], "arms": {arm: {k: state["arms"][arm][k] for k in ("q", "target", "tcp")}
                                                for arm in arms}}

    def _joint_paths(self, goals: Mapping[str, np.ndarray], duration: float | None) -> dict[str, np.ndarray]:
        starts = {arm: self.session.joint_targets(arm) for arm in goals}
        deltas = {arm: goals[arm] - starts[arm] for arm in goals}
        steps = self._profile_steps(deltas, duration)
        s = smoothstep(np.arange(1, steps + 1) / steps)[:, None]
        paths = {arm: starts[arm] + s * deltas[arm] for arm in goals}
        for arm, path in paths.items():
            self._check_speed(self.session.arm_info(arm), path, starts[arm])
        return paths

    def _move_joints(self, args: dict[str, Any]) -> dict[str, Any]:
        raw = self._arm_targets(args, "q", "targets")
        goals: dict[str, np.ndarray] = {}
        for arm, value in raw.items():
            info = self.session.arm_info(arm)
            q = _vector(value, len(info.joint_names), f"q ({arm})")
            self._check_joint_limits(info, q, "move_joints")
            goals[arm] = q
        duration = self._duration(args["duration"]) if args.get("duration") is not None else None
        paths = self._joint_paths(goals, duration)
        self._check_time(len(next(iter(paths.values()))))
        return self._execute(paths)

    def _pose(self, value: Any, arm: str) -> tuple[np.ndarray, np.ndarray]:
        if not isinstance(value, dict) or set(value) - {"position", "quaternion"} or "position" not in value:
            raise _refuse(Refusal.BAD_ARGS, f"pose ({arm}) must be {{\"position\": [x, y, z], \"quaternion\": [w, x, y, z]}}")
        position = _vector(value["position"], 3, f"pose.position ({arm})")
        if "quaternion" in value:
            quaternion = _normalized_quaternion(value["quaternion"], f"pose.quaternion ({arm})")
        else:  # keep the current orientation
            quaternion = self.session.fk(arm, self.session.joint_targets(arm))[1]
        return position, quaternion

    def _move_ee(self, args: dict[str, Any]) -> dict[str, Any]:
        raw = self._arm_targets(args, "pose", "poses")
        path_kind = args.get("path", "joint")
        if path_kind not in ("joint", "linear"):
            raise _refuse(Refusal.BAD_ARGS, f"`path` must be \"joint\" or \"linear\", got {path_kind!r}")
        poses = {arm: self._pose(value, arm) for arm, value in raw.items()}
        duration = self._duration(args["duration"]) if args.get("duration") is not None else None
        if path_kind == "joint":
            goals = {}
            for arm, (position, quaternion) in poses.items():
                solution = self.session.ik(arm, position, quaternion, self.session.joint_targets(arm), IK_RESTARTS)
                if not solution.success:
                    raise _refuse(Refusal.IK_FAILED,
                                  f"move_ee: no joint configuration of {arm} within its limits reaches position "
                                  f"{np.round(position, 4).tolist()} (closest: {solution.error_m * 1000:.1f} mm away"
                                  f"{_at_limits(self.session.arm_info(arm), solution.q)})")
                goals[arm] = solution.q
            paths = self._joint_paths(goals, duration)
        else:
            paths = self._linear_paths(poses, duration)
        self._check_time(len(next(iter(paths.values()))))
        return self._execute(paths)

    def _linear_paths(self, poses: Mapping[str, tuple[np.ndarray, np.ndarray]],
                      duration: float | None) -> dict[str, np.ndarray]:
        """Straight-line TCP paths (orientation slerped), IK at every control step from the
        previous waypoint's solution. An automatic duration follows LINEAR_SPEED and
        ANGULAR_SPEED, lengthened where a joint would pass AUTO_SPEED_FRACTION of its limit."""
        starts = {arm: self.session.joint_targets(arm) for arm in poses}
        begin = {arm: self.session.fk(arm, starts[arm]) for arm in poses}
        if duration is not None:
            paths = self._plan_linear(poses, starts, begin, self._steps(duration))
        else:
            seconds = MIN_AUTO_SECONDS
            for arm, (position, quaternion) in poses.items():
                p0, q0 = begin[arm]
                seconds = max(seconds, float(np.linalg.norm(position - p0)) / LINEAR_SPEED,
                              _quat_angle(q0, quaternion) / ANGULAR_SPEED)
            steps = self._steps(seconds)
            paths = self._plan_linear(poses, starts, begin, steps)
            ratio = max(self._speed_ratio(self.session.arm_info(arm), path, starts[arm])
                        for arm, path in paths.items())
            if ratio > AUTO_SPEED_FRACTION:  # slow the whole motion down to keep joints in bounds
                paths = self._plan_linear(poses, starts, begin, math.ceil(steps * ratio / AUTO_SPEED_FRACTION))
        for arm, path in paths.items():
            self._check_speed(self.session.arm_info(arm), path, starts[arm])
        return paths

    def _plan_linear(self, poses: Mapping[str, tuple[np.ndarray, np.ndarray]], starts: Mapping[str, np.ndarray],
                     begin: Mapping[str, tuple[np.ndarray, np.ndarray]], steps: int) -> dict[str, np.ndarray]:
        s = smoothstep(np.arange(1, steps + 1) / steps)
        paths: dict[str, np.ndarray] = {}
        for arm, (position, quaternion) in poses.items():
            info = self.session.arm_info(arm)
            p0, q0 = begin[arm]
            q = starts[arm]
            rows = []
            for k, sk in enumerate(s):
                solution = self.session.ik(arm, p0 + sk * (position - p0), _slerp(q0, quaternion, float(sk)), q, 0)
                if not solution.success or np.abs(solution.q - q).max() > IK_LINEAR_MAX_JUMP:
                    raise _refuse(Refusal.IK_FAILED,
                                  f"move_ee (linear): {arm} cannot follow the straight line to "
                                  f"{np.round(position, 4).tolist()}: IK fails {100 * (k + 1) / steps:.0f}% of the way"
                                  f"{_at_limits(info, solution.q)}")
                q = solution.q
                rows.append(q)
            paths[arm] = np.array(rows)
        return paths

    # --- gripper, wait, hello, done ---------------------------------------------------------------
    def _gripper(self, args: dict[str, Any]) -> dict[str, Any]:
        info = self._arm(args.get("arm"))
        if info.gripper_max_width is None:
            raise _refuse(Refusal.NO_GRIPPER, f"arm {info.name!r} has no gripper")
        if ("width" in args) == ("state" in args):
            raise _refuse(Refusal.BAD_ARGS, "gripper: give exactly one of `width` (metres) or `state` (open|close)")
        if "state" in args:
            if args["state"] not in ("open", "close"):
                raise _refuse(Refusal.BAD_ARGS, f"gripper `state` must be \"open\" or \"close\", got {args['state']!r}")
            width = info.gripper_max_width if args["state"] == "open" else 0.0
        else:
            width = _number(args["width"], "width")
            if not 0.0 - LIMIT_TOLERANCE <= width <= info.gripper_max_width + LIMIT_TOLERANCE:
                raise _refuse(Refusal.OUT_OF_LIMITS,
                              f"gripper width {width:.4f} m outside [0, {info.gripper_max_width:.4f}] m")
            width = min(max(width, 0.0), info.gripper_max_width)
        duration = self._duration(args.get("duration", DEFAULT_GRIPPER_SECONDS), allow_zero=True)
        steps = 0 if duration == 0 else self._steps(duration)
        self._check_time(steps)
        self.session.set_gripper(info.name, width)
        for _ in range(steps):
            self.session.step_control()
        self.commands_executed += 1
        state = self.session.observe()["arms"][info.name]
        return {"time": self.session.time, "width": state["gripper_width"], "target": width}

    def _wait(self, args: dict[str, Any]) -> dict[str, Any]:
        steps = self._steps(self._duration(args["seconds"], "seconds"))
        self._check_time(steps)
        for _ in range(steps):
            self.session.step_control()
        self.commands_executed += 1
        return {"time": self.session.time}

    def _hello(self, args: dict[str, Any]) -> dict[str, Any]:
        arms = {}
        for arm in self.session.arms():
            info = self.session.arm_info(arm)
            arms[arm] = {
                "joints": list(info.joint_names),
                "lower": [float(v) for v in info.lower],
                "upper": [float(v) for v in info.upper],
                "velocity": [float(v) if math.isfinite(v) else None for v in info.velocity],
                "gripper_max_width": info.gripper_max_width,
            }
        return {"protocol": PROTOCOL_VERSION, "control_dt": self.session.control_dt, "arms": arms,
                **self.session.describe(), **self._hello_extra}

    def _done(self, args: dict[str, Any]) -> dict[str, Any]:
        success = args["success"]
        if not isinstance(success, bool):
            raise _refuse(Refusal.BAD_ARGS, "`success` must be true or false")
        note = args.get("note", "")
        if not isinstance(note, str):
            raise _refuse(Refusal.BAD_ARGS, "`note` must be a string")
        raise Done(success, note)
