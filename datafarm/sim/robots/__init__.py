"""Robots for the SAPIEN simulator: our own PiPER descriptions (one arm, two arms), user URDFs,
PD drives with gravity compensation, a parallel gripper, FK and IK per arm."""

from datafarm.sim.robots.kinematics import IkResult
from datafarm.sim.robots.robot import (
    Gripper,
    JointLimits,
    Robot,
    load_robot,
    robot_urdf_text,
    to_artifact_pose,
    to_sapien_pose,
    write_robot_urdf,
)
from datafarm.sim.robots.spec import RobotSpec

__all__ = [
    "Gripper",
    "IkResult",
    "JointLimits",
    "Robot",
    "RobotSpec",
    "load_robot",
    "robot_urdf_text",
    "to_artifact_pose",
    "to_sapien_pose",
    "write_robot_urdf",
]
