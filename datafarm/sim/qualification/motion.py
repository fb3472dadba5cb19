"""Scripted arm motions for the qualification probes: the harness moves one arm through TCP waypoints
(IK in the harness, joint targets interpolated per control step) while a `Recorder` logs states and
contact events, exactly as it does for an expert's rollout.

Nothing here sets an object's pose: a probe moves objects only through the robot, so a probe that
passes shows the simulator can do what the task will ask of the expert.
"""

from __future__ import annotations

import math

import numpy as np
import sapien

from datafarm.sim.recording import Recorder
from datafarm.sim.world import World

LINEAR_WAYPOINT_M = 0.005
"""Spacing of IK waypoints along a straight TCP path, metres (joint targets are interpolated between them)."""
MAX_WAYPOINT_JUMP = 0.35
"""Largest change of any joint (rad) between consecutive straight-line waypoints: more means the IK
jumped to another branch, and the path is refused rather than swept through."""


class MotionError(Exception):
    """A scripted motion cannot be executed (no IK solution inside the joint limits)."""


def smoothstep(s: float) -> float:
    """3 s^2 - 2 s^3: 0 -> 1 with zero speed at both ends."""
    return s * s * (3.0 - 2.0 * s)


class ScriptedArm:
    """Drives one arm of a `Recorder`'s world: point-to-point moves (IK once, joint interpolation),
    straight-line TCP moves (IK every few millimetres), gripper commands and holds. Every control
    step goes through the recorder, so the probe's evidence is a recorded episode."""

    def __init__(self, recorder: Recorder, arm: str, seed: int = 0) -> None:
        self.recorder = recorder
        self.world: World = recorder.world
        self.robot = self.world.robot
        self.arm = arm
        self.seed = seed
        self.targets = self.robot.qpos(arm)
        self.width = self.robot.gripper_width(arm) if self.robot.gripper(arm) is not None else 0.0
        self.dt = 1.0 / recorder.control_hz

    @property
    def max_width(self) -> float:
        """Widest gripper opening, metres."""
        gripper = self.robot.gripper(self.arm)
        return float(gripper.max_width) if gripper is not None else 0.0

    def steps(self, seconds: float) -> int:
        """Control steps in `seconds` (at least one)."""
        return max(1, round(seconds / self.dt))

    def _solve(self, position: np.ndarray, quaternion: np.ndarray, q_init: np.ndarray, restarts: int) -> np.ndarray:
        result = self.robot.ik(self.arm, sapien.Pose(np.asarray(position, dtype=np.float64), np.asarray(quaternion)),
                               q_init=q_init, restarts=restarts, seed=self.seed)
        if not result.success:
            raise MotionError(f"{self.arm} cannot reach TCP position {np.round(position, 3).tolist()} "
                              f"(closest IK solution {result.error_m * 1000:.1f} mm away)")
        return np.asarray(result.q, dtype=np.float64)

    def _run(self, path: list[np.ndarray], width_from: float, width_to: float) -> None:
        n = len(path)
        for k, q in enumerate(path):
            width = width_from + (width_to - width_from) * (k + 1) / n
            self.recorder.step({self.arm: q}, {self.arm: width})
        self.targets, self.width = path[-1], width_to

    def move(self, position: np.ndarray | tuple[float, ...], quaternion: np.ndarray | tuple[float, ...],
             seconds: float, *, width: float | None = None) -> None:
        """Point-to-point: IK for the goal, joint targets along a smoothstep from where they are."""
        goal = self._solve(np.asarray(position, dtype=np.float64), np.asarray(quaternion), self.targets, 16)
        start, n = self.targets, self.steps(seconds)
        path = [start + smoothstep((k + 1) / n) * (goal - start) for k in range(n)]
        self._run(path, self.width, self.width if width is None else width)

    def line(self, position: np.ndarray | tuple[float, ...], seconds: float, *,
             quaternion: np.ndarray | tuple[float, ...] | None = None, width: float | None = None) -> None:
        """Straight-line TCP motion to `position` (orientation kept, or turned to `quaternion`)."""
        start_pose = self.robot.fk(self.arm, self.targets)
        p0 = np.asarray(start_pose.p, dtype=np.float64)
        q0 = np.asarray(start_pose.q, dtype=np.float64)
        q1 = q0 if quaternion is None else np.asarray(quaternion, dtype=np.float64)
        p1 = np.asarray(position, dtype=np.float64)
        waypoints = max(1, math.ceil(float(np.linalg.norm(p1 - p0)) / LINEAR_WAYPOINT_M))
        joints = [self.targets]
        for k in range(1, waypoints + 1):
            s = k / waypoints
            target, turn = p0 + s * (p1 - p0), slerp(q0, q1, s)
            try:
                q = self._solve(target, turn, joints[-1], 0)
            except MotionError:  # the local solve can stall near a limit: retry with seeded restarts
                q = self._solve(target, turn, joints[-1], 8)
            if np.abs(q - joints[-1]).max() > MAX_WAYPOINT_JUMP:
                raise MotionError(f"{self.arm} cannot follow a straight line to {np.round(p1, 3).tolist()} "
                                  f"(the joints would jump {np.abs(q - joints[-1]).max():.2f} rad at {100 * s:.0f}%)")
            joints.append(q)
        # resample the waypoint chain in time along a smoothstep (zero speed at both ends)
        n = self.steps(seconds)
        chain = np.array(joints)
        path = []
        for k in range(n):
            u = smoothstep((k + 1) / n) * waypoints
            i = min(int(u), waypoints - 1)
            path.append(chain[i] + (u - i) * (chain[i + 1] - chain[i]))
        self._run(path, self.width, self.width if width is None else width)

    def grip(self, width: float, seconds: float) -> None:
        """Drive the gripper to `width` metres over `seconds`, the arm holding still."""
        n = self.steps(seconds)
        self._run([self.targets] * n, self.width, width)

    def hold(self, seconds: float) -> None:
        """Hold every target for `seconds`."""
        n = self.steps(seconds)
        for _ in range(n):
            self.recorder.step({self.arm: self.targets}, {self.arm: self.width})

    def tcp(self) -> np.ndarray:
        """Measured TCP position now."""
        return np.asarray(self.robot.ee_pose(self.arm).p, dtype=np.float64)


def slerp(q0: np.ndarray, q1: np.ndarray, t: float) -> np.ndarray:
    """Spherical interpolation between unit quaternions (the shorter way round)."""
    dot = float(np.dot(q0, q1))
    if dot < 0:
        q1, dot = -q1, -dot
    if dot > 0.9995:
        q = q0 + t * (q1 - q0)
        return q / np.linalg.norm(q)
    theta = math.acos(dot)
    return (math.sin((1 - t) * theta) * q0 + math.sin(t * theta) * q1) / math.sin(theta)

