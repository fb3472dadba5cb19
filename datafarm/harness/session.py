"""The simulator side of a rollout: the `SimSession` interface the harness server drives, and
`RobotSession`, a concrete session over a SAPIEN scene with a `Robot` and named rigid objects.

A session exposes only what a robot controller may do: read state, set joint and gripper targets
(inside the limits), solve IK, and advance time one control step at a time. It has no way to set
an object's pose; the world outside the robot moves only through physics. Each control step calls
the session's step hooks (the recorder uses one to log actions, states and contacts).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import sapien

from datafarm.sim.robots import Robot


@dataclass(frozen=True)
class ArmInfo:
    """What a controller may know about one arm: joint names and limits, gripper range."""

    name: str
    """Arm name (`arm`, or `left`/`right` for piper-dual)."""
    joint_names: tuple[str, ...]
    """Arm joints, base to wrist (fingers excluded)."""
    lower: np.ndarray
    """Lower position limits (rad or m)."""
    upper: np.ndarray
    """Upper position limits (rad or m)."""
    velocity: np.ndarray
    """Velocity limits (rad/s or m/s); inf where the description gives none."""
    gripper_max_width: float | None
    """Widest gripper opening in metres, or None when the arm has no gripper."""


@dataclass(frozen=True)
class ArmCommand:
    """What was commanded to one arm during a control step (the action label)."""

    q: np.ndarray
    """Joint position targets."""
    gripper: float | None
    """Gripper width target in metres, or None when the arm has no gripper."""


@dataclass(frozen=True)
class ControlStep:
    """Passed to each step hook after a control step has been simulated."""

    index: int
    """1 for the first control step of the episode."""
    time: float
    """Simulated seconds since the episode began, after this step."""
    commands: Mapping[str, ArmCommand]
    """The targets every arm held during this step, by arm name."""


StepHook = Callable[[ControlStep], None]
"""Called once per control step, after the physics steps; must not change the simulation."""


@dataclass(frozen=True)
class IkSolution:
    """An IK answer: joint positions inside the limits, whether the pose was reached, and the
    remaining TCP position error in metres."""

    q: np.ndarray
    success: bool
    error_m: float


@runtime_checkable
class SimSession(Protocol):
    """What the harness server needs from a simulator to serve an expert controller."""

    control_dt: float
    """Seconds of simulated time per control step."""

    def arms(self) -> tuple[str, ...]:
        """Arm names."""
        ...

    def arm_info(self, arm: str) -> ArmInfo:
        """Joint names and limits of `arm`; KeyError for an unknown arm."""
        ...

    def describe(self) -> dict[str, Any]:
        """Static facts for the controller's hello reply (JSON-ready): object, scale and drawer ids."""
        ...

    def observe(self) -> dict[str, Any]:
        """The state a controller may see now (JSON-ready): time, arms, objects, scales, drawers."""
        ...

    @property
    def time(self) -> float:
        """Simulated seconds since the episode began."""
        ...

    def joint_targets(self, arm: str) -> np.ndarray:
        """The arm's current joint position targets."""
        ...

    def set_joint_targets(self, arm: str, q: np.ndarray) -> None:
        """Hold `q` (already checked against the limits) as the arm's targets from now on."""
        ...

    def set_gripper(self, arm: str, width: float) -> None:
        """Drive the arm's gripper towards `width` metres (already checked) from now on."""
        ...

    def fk(self, arm: str, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World TCP position and wxyz quaternion at joint positions `q` (computed, not simulated)."""
        ...

    def ik(self, arm: str, position: Sequence[float], quaternion: Sequence[float],
           q_init: np.ndarray, restarts: int) -> IkSolution:
        """Joint positions putting the TCP at the world pose (wxyz quaternion), inside the limits."""
        ...

    def step_control(self) -> ControlStep:
        """Simulate one control step with the current targets, call the step hooks, return the step."""
        ...


def _pose_json(pose: sapien.Pose) -> dict[str, list[float]]:
    return {"position": [float(v) for v in pose.p], "quaternion": [float(v) for v in pose.q]}


def _floats(values: np.ndarray) -> list[float]:
    return [float(v) for v in np.asarray(values, dtype=np.float64)]


@dataclass
class RobotSession:
    """A `SimSession` over a SAPIEN scene holding `robot` and rigid `objects` (by G id).

    `scales` and `drawers` map ids to functions returning the scale reading (grams) and the drawer
    value (its joint position, m or rad); the world built from G supplies them. `control_dt` must be
    a whole number of the scene's physics steps."""

    scene: sapien.Scene
    """The scene (physics only or with rendering); stepped only by `step_control`."""
    robot: Robot
    """The robot; its drive targets are the only thing a controller sets."""
    objects: Mapping[str, sapien.Entity] = field(default_factory=dict)
    """Rigid objects a controller may observe, by id."""
    scales: Mapping[str, Callable[[], float]] = field(default_factory=dict)
    """Scale readings by id (grams)."""
    drawers: Mapping[str, Callable[[], float]] = field(default_factory=dict)
    """Drawer values by id (joint position)."""
    control_dt: float = 0.02
    """Seconds per control step (default 50 Hz)."""
    hooks: list[StepHook] = field(default_factory=list)
    """Called after every control step (the recorder's hook goes here)."""

    def __post_init__(self) -> None:
        ratio = self.control_dt / self.scene.timestep
        if ratio < 1 or abs(ratio - round(ratio)) > 1e-6:
            raise ValueError(f"control_dt {self.control_dt} s is not a whole number of physics steps "
                             f"({self.scene.timestep} s)")
        self.physics_steps_per_control = round(ratio)
        self.steps = 0
        self._gripper_targets: dict[str, float | None] = {
            arm: (self.robot.gripper_width(arm) if self.robot.gripper(arm) is not None else None)
            for arm in self.robot.arms
        }

    def add_hook(self, hook: StepHook) -> None:
        """Call `hook` after every control step from now on."""
        self.hooks.append(hook)

    # --- description ----------------------------------------------------------------------------
    def arms(self) -> tuple[str, ...]:
        """Arm names."""
        return self.robot.arms

    def arm_info(self, arm: str) -> ArmInfo:
        """Joint names and limits of `arm`."""
        lim = self.robot.limits(arm)
        gripper = self.robot.gripper(arm)
        return ArmInfo(arm, lim.names, lim.lower, lim.upper, lim.velocity,
                       round(gripper.max_width, 6) if gripper is not None else None)  # PhysX keeps float32

    def describe(self) -> dict[str, Any]:
        """Ids of the objects, scales and drawers (the hello reply adds the arms)."""
        return {"objects": sorted(self.objects), "scales": sorted(self.scales), "drawers": sorted(self.drawers)}

    # --- state ----------------------------------------------------------------------------------
    @property
    def time(self) -> float:
        """Simulated seconds since the episode began (control steps x control_dt)."""
        return self.steps * self.control_dt

    def observe(self) -> dict[str, Any]:
        """Time, per-arm joint state, gripper and TCP pose, object poses and velocities, readings."""
        arms: dict[str, Any] = {}
        for arm in self.robot.arms:
            state: dict[str, Any] = {
                "q": _floats(self.robot.qpos(arm)),
                "qd": _floats(self.robot.qvel(arm)),
                "target": _floats(self.robot.drive_targets(arm)),
                "effort": _floats(self.robot.drive_efforts(arm)),
                "tcp": _pose_json(self.robot.ee_pose(arm)),
            }
            if self.robot.gripper(arm) is not None:
                state["gripper_width"] = self.robot.gripper_width(arm)
                state["gripper_target"] = self._gripper_targets[arm]
            arms[arm] = state
        objects: dict[str, Any] = {}
        for name, entity in self.objects.items():
            entry: dict[str, Any] = _pose_json(entity.pose)
            body = entity.find_component_by_type(sapien.physx.PhysxRigidDynamicComponent)
            if body is not None:
                entry["linear_velocity"] = _floats(body.linear_velocity)
                entry["angular_velocity"] = _floats(body.angular_velocity)
            objects[name] = entry
        return {
            "time": round(self.time, 9),
            "step": self.steps,
            "arms": arms,
            "objects": objects,
            "scales": {k: float(read()) for k, read in self.scales.items()},
            "drawers": {k: float(read()) for k, read in self.drawers.items()},
        }

    def joint_targets(self, arm: str) -> np.ndarray:
        """The arm's current joint position targets."""
        return self.robot.drive_targets(arm)

    # --- commands -------------------------------------------------------------------------------
    def set_joint_targets(self, arm: str, q: np.ndarray) -> None:
        """Hold `q` as the arm's targets (the robot clamps into the limits as a last guard)."""
        self.robot.set_joint_targets(arm, np.asarray(q, dtype=np.float64))

    def set_gripper(self, arm: str, width: float) -> None:
        """Drive the gripper towards `width` metres."""
        self._gripper_targets[arm] = self.robot.set_gripper(arm, float(width))

    def fk(self, arm: str, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World TCP position and wxyz quaternion at joint positions `q` (pinocchio)."""
        pose = self.robot.fk(arm, np.asarray(q, dtype=np.float64))
        return np.asarray(pose.p, dtype=np.float64), np.asarray(pose.q, dtype=np.float64)

    def ik(self, arm: str, position: Sequence[float], quaternion: Sequence[float],
           q_init: np.ndarray, restarts: int = 16) -> IkSolution:
        """The robot's IK (SAPIEN pinocchio), from `q_init`, then seeded restarts."""
        target = sapien.Pose(np.asarray(position, dtype=np.float32), np.asarray(quaternion, dtype=np.float32))
        result = self.robot.ik(arm, target, q_init=np.asarray(q_init, dtype=np.float64), restarts=restarts)
        return IkSolution(np.asarray(result.q, dtype=np.float64), bool(result.success), float(result.error_m))

    def step_control(self) -> ControlStep:
        """Simulate one control step (gravity compensation each physics step), then call the hooks."""
        self.robot.step(self.physics_steps_per_control)
        self.steps += 1
        step = ControlStep(
            index=self.steps,
            time=self.time,
            commands={arm: ArmCommand(self.robot.drive_targets(arm), self._gripper_targets[arm])
                      for arm in self.robot.arms},
        )
        for hook in self.hooks:
            hook(step)
        return step

