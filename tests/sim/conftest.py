"""Shared helpers for the world and recording tests: groundings (the paper-task fixtures of
tests/artifacts, plus small scenes built with the same builders) and a scripted arm mover that
drives a Recorder through IK waypoints, as an expert controller would."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import sapien

from datafarm.artifacts.grounding import Grounding
from datafarm.sim.recording import Recorder
from datafarm.sim.world.frames import matrix_to_quat, rotation_x, rotation_y
from tests.artifacts.test_schemas import (  # noqa: F401  (re-exported for the test modules)
    drawer_grounding,
    drum_grounding,
    nest_grounding,
    rigid,
    scene,
    tagged,
    weigh_grounding,
)

DOWN = (0.0, 1.0, 0.0, 0.0)
"""TCP orientation with the gripper pointing straight down (approach axis = -world z)."""


def tilted_down(pitch_deg: float) -> tuple[np.ndarray, np.ndarray]:
    """(quaternion, approach axis) of a TCP pointing down and pitched forward (+x) by `pitch_deg`."""
    r = rotation_y(-math.radians(pitch_deg)) @ rotation_x(math.pi)
    return matrix_to_quat(r), r[:, 2]


def block(oid: str = "block", xy: tuple[float, float] = (-0.15, 0.3), size: float = 0.04, mass: float = 0.05,
          friction: float = 0.7) -> dict[str, Any]:
    """A cube as G's agents write it."""
    obj = rigid(oid, "box", [0.8, 0.1, 0.1], xy)
    obj["size"] = {"x": tagged(size), "y": tagged(size), "z": tagged(size)}
    obj["mass"] = tagged(mass, "assumed", 0.5)
    obj["friction"] = tagged(friction, "assumed", 0.3)
    return obj


def grounding_with(*objects: dict[str, Any]) -> Grounding:
    """The paper's dual-PiPER scene (bases at x = -0.45, y = +-0.3) with these objects."""
    return Grounding.model_validate(scene(list(objects)))


class ArmScript:
    """Moves one arm of a Recorder's world to IK waypoints: the joint targets go from where they are
    to the IK solution over the first 60 % of `steps` control steps, then hold."""

    def __init__(self, recorder: Recorder, arm: str) -> None:
        self.recorder, self.arm = recorder, arm
        self.robot = recorder.world.robot
        self.targets = self.robot.qpos(arm)

    def move(self, position: tuple[float, float, float] | np.ndarray, width: float, steps: int,
             quaternion: tuple[float, ...] | np.ndarray = DOWN) -> None:
        """Go to the TCP pose (`position`, `quaternion`) with the gripper opening to `width`."""
        result = self.robot.ik(self.arm, sapien.Pose(np.asarray(position, dtype=np.float64), np.asarray(quaternion)),
                               q_init=self.targets)
        assert result.success, f"IK failed for {position}: {result.error_m:.3f} m"
        start = self.targets
        for k in range(steps):
            a = min(1.0, (k + 1) / (0.6 * steps))
            self.targets = (1 - a) * start + a * result.q
            self.recorder.step({self.arm: self.targets}, {self.arm: width})
