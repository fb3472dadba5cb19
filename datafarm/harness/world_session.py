"""`WorldSession`: the `SimSession` the harness serves an expert controller with on a `World` built
from G, recording the episode as it goes.

The `Recorder` drives the physics: each control step the session hands it the targets the
controller holds (`Recorder.set_targets`), runs the recorder's physics steps one by one
(`Recorder.physics_step`, which reads contacts after every physics step, so a strike of a few
milliseconds is never missed) and closes the step (`Recorder.end_step`). So every control step the
controller causes is one recorded row of a, x and k; nothing else advances the world.

What a controller sees (`observe`): time and step, per arm the joint state, gripper opening and TCP
pose, every G object's pose and measured velocities by G id, every scale's reading in grams (the
unit the recorder and the judge use), every drawer's opening by the cabinet's id. It can set joint
and gripper targets and nothing else.

Clocks: `time` counts control steps simulated (k steps: k x control_dt), as every `SimSession` does;
the recording's row k-1 holds the state after those k steps and is stamped (k-1) x control_dt (the
episode schema's `time_s = step / control_hz`). A scale reads what the last physics step put on its
plate (`World.scale_reading_g`); the recorded row averages the control step's physics steps, which is
the same value once the load rests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import sapien

from datafarm.harness.session import (
    ArmCommand,
    ArmInfo,
    ControlStep,
    IkSolution,
    StepHook,
)
from datafarm.sim.recording import Recorder
from datafarm.sim.world import World


def _floats(values: Any) -> list[float]:
    return [float(v) for v in np.asarray(values, dtype=np.float64).reshape(-1)]


def _pose_json(pose: sapien.Pose) -> dict[str, list[float]]:
    return {"position": _floats(pose.p), "quaternion": _floats(pose.q)}


class WorldSession:
    """A `SimSession` over `world` whose control steps are recorded by `recorder`.

    `control_dt` is 1 / the recorder's control rate. Give either a recorder (already made for this
    world, with no step recorded yet) or `control_hz` (a new recorder is made). `hooks` are called
    once per control step after it was simulated and recorded (they must not change the world)."""

    def __init__(self, world: World, recorder: Recorder | None = None, *, control_hz: float | None = None,
                 hooks: Sequence[StepHook] = ()) -> None:
        if recorder is None:
            if control_hz is None:
                raise ValueError("give a Recorder or control_hz")
            recorder = Recorder(world, control_hz)
        elif recorder.world is not world:
            raise ValueError("the recorder records another world")
        if recorder.steps:
            raise ValueError(f"the recorder has already recorded {recorder.steps} steps; an episode starts fresh")
        self.world = world
        """The simulated world (trusted side only)."""
        self.recorder = recorder
        """Records every control step; `recorder.finish()` is the episode."""
        self.control_dt: float = 1.0 / recorder.control_hz
        """Seconds of simulated time per control step."""
        self.hooks: list[StepHook] = list(hooks)
        """Called after every control step."""
        robot = world.robot
        self._targets = {arm: robot.drive_targets(arm) for arm in robot.arms}
        self._grippers: dict[str, float | None] = {
            arm: (robot.gripper_width(arm) if robot.gripper(arm) is not None else None) for arm in robot.arms}
        # a drawer cabinet's one joint is named by the cabinet's id; several joints by `<id>.<joint>`
        self._drawers = {(oid if len(obj.joints) == 1 else f"{oid}.{joint}"): f"{oid}.{joint}"
                         for oid, obj in world.objects.items() for joint in obj.joints}

    def add_hook(self, hook: StepHook) -> None:
        """Call `hook` after every control step from now on."""
        self.hooks.append(hook)

    # --- description -------------------------------------------------------------------------------
    def arms(self) -> tuple[str, ...]:
        """Arm names."""
        return self.world.robot.arms

    def arm_info(self, arm: str) -> ArmInfo:
        """Joint names and limits of `arm` (KeyError for an unknown arm)."""
        robot = self.world.robot
        lim = robot.limits(arm)
        gripper = robot.gripper(arm)
        return ArmInfo(arm, lim.names, lim.lower, lim.upper, lim.velocity,
                       round(gripper.max_width, 6) if gripper is not None else None)  # PhysX keeps float32

    def describe(self) -> dict[str, Any]:
        """G's object ids, the scale ids and the drawer (cabinet) ids, for the hello reply."""
        return {"objects": list(self.world.objects), "scales": list(self.world.scale_plates),
                "drawers": list(self._drawers)}

    # --- state -------------------------------------------------------------------------------------
    @property
    def time(self) -> float:
        """Simulated seconds since the episode began (recorded control steps x control_dt)."""
        return self.recorder.steps * self.control_dt

    @property
    def steps(self) -> int:
        """Control steps simulated (and recorded) so far."""
        return self.recorder.steps

    def observe(self) -> dict[str, Any]:
        """Time, per-arm joint state, gripper and TCP pose; object poses and measured velocities by G
        id; scale readings (grams, at the last physics step); drawer openings by cabinet id."""
        robot = self.world.robot
        arms: dict[str, Any] = {}
        for arm in robot.arms:
            state: dict[str, Any] = {
                "q": _floats(robot.qpos(arm)),
                "qd": _floats(robot.qvel(arm)),
                "target": _floats(self._targets[arm]),
                "effort": _floats(robot.drive_efforts(arm)),
                "tcp": _pose_json(robot.ee_pose(arm)),
            }
            if self._grippers[arm] is not None:
                state["gripper_width"] = robot.gripper_width(arm)
                state["gripper_target"] = self._grippers[arm]
            arms[arm] = state
        objects: dict[str, Any] = {}
        for oid, obj in self.world.objects.items():
            entry: dict[str, Any] = _pose_json(obj.entity.pose)
            entry["linear_velocity"] = _floats(getattr(obj.body, "linear_velocity", np.zeros(3)))
            entry["angular_velocity"] = _floats(getattr(obj.body, "angular_velocity", np.zeros(3)))
            objects[oid] = entry
        return {
            "time": round(self.time, 9),
            "step": self.recorder.steps,
            "arms": arms,
            "objects": objects,
            "scales": {sid: self.world.scale_reading_g(sid) for sid in self.world.scale_plates},
            "drawers": {oid: self.world.joint_value(ref) for oid, ref in self._drawers.items()},
        }

    def joint_targets(self, arm: str) -> np.ndarray:
        """The arm's current joint position targets (what the next control step applies)."""
        return self._targets[arm].copy()

    # --- commands ----------------------------------------------------------------------------------
    def set_joint_targets(self, arm: str, q: np.ndarray) -> None:
        """Hold `q` (checked by the harness) from the next control step on; the recorder clamps into
        the limits as a last guard and flags what it had to clamp."""
        if arm not in self._targets:
            raise KeyError(f"no arm called {arm!r}; this robot has {list(self._targets)}")
        self._targets[arm] = np.asarray(q, dtype=np.float64).copy()

    def set_gripper(self, arm: str, width: float) -> None:
        """Drive the gripper towards `width` metres (clamped to 0 .. max) from the next control step on."""
        gripper = self.world.robot.gripper(arm)
        if gripper is None:
            raise ValueError(f"arm {arm!r} has no gripper")
        self._grippers[arm] = float(np.clip(float(width), 0.0, gripper.max_width))

    def fk(self, arm: str, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World TCP position and wxyz quaternion at joint positions `q` (pinocchio, not simulated)."""
        pose = self.world.robot.fk(arm, np.asarray(q, dtype=np.float64))
        return np.asarray(pose.p, dtype=np.float64), np.asarray(pose.q, dtype=np.float64)

    def ik(self, arm: str, position: Sequence[float], quaternion: Sequence[float],
           q_init: np.ndarray, restarts: int = 16) -> IkSolution:
        """The robot's IK (SAPIEN pinocchio) from `q_init`, then seeded restarts."""
        target = sapien.Pose(np.asarray(position, dtype=np.float32), np.asarray(quaternion, dtype=np.float32))
        result = self.world.robot.ik(arm, target, q_init=np.asarray(q_init, dtype=np.float64), restarts=restarts)
        return IkSolution(np.asarray(result.q, dtype=np.float64), bool(result.success), float(result.error_m))

    def step_control(self) -> ControlStep:
        """Simulate and record one control step with the held targets, then call the hooks."""
        recorder = self.recorder
        grippers = {arm: w for arm, w in self._grippers.items() if w is not None}
        recorder.set_targets(self._targets, grippers)
        for _ in range(recorder.substeps):
            recorder.physics_step()
        recorder.end_step()
        step = ControlStep(
            index=recorder.steps,
            time=self.time,
            commands={arm: ArmCommand(self._targets[arm].copy(), self._grippers[arm]) for arm in self._targets},
        )
        for hook in self.hooks:
            hook(step)
        return step
