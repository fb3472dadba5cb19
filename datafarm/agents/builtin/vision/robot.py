"""The robot's silhouette at rest: the PiPER's link shapes (datafarm.sim.robots.piper, the geometry
the simulator and the studio use) placed by forward kinematics at every joint 0 with the gripper
open, as convex solids in the world, one set per arm base."""

from __future__ import annotations

import numpy as np

from datafarm.agents.builtin.vision.raster import Solid, box, capsule, cylinder, sphere
from datafarm.sim.robots import piper
from datafarm.sim.robots.description import Shape, rpy_to_matrix

REST_FINGERS = {"joint7": -piper.GRIPPER_MAX_WIDTH / 2, "joint8": piper.GRIPPER_MAX_WIDTH / 2}
"""Finger joint positions at rest: open (as the studio renders the clip and the sim starts)."""


def _frame(xyz, rpy) -> np.ndarray:
    t = np.eye(4)
    t[:3, :3] = rpy_to_matrix(rpy)
    t[:3, 3] = xyz
    return t


def link_frames(base: np.ndarray, q: dict[str, float] | None = None) -> dict[str, np.ndarray]:
    """world_from_link of every PiPER link for arm base `base` (4x4) and joint positions `q` (default rest)."""
    q = {**REST_FINGERS, **(q or {})}
    desc = piper.piper_description()
    frames = {desc.links[0].name: np.asarray(base, float)}
    for joint in desc.joints:
        parent = frames[joint.parent]
        t = parent @ _frame(joint.xyz, joint.rpy)
        value = q.get(joint.name, 0.0)
        motion = np.eye(4)
        axis = np.asarray(joint.axis, float)
        if joint.type == "prismatic":
            motion[:3, 3] = axis * value
        elif joint.type == "revolute" and value:
            k = axis / np.linalg.norm(axis)
            kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
            motion[:3, :3] = np.eye(3) + np.sin(value) * kx + (1 - np.cos(value)) * kx @ kx
        frames[joint.child] = t @ motion
    return frames


def _solid(world_from_link: np.ndarray, shape: Shape, owner: str) -> Solid:
    pose = world_from_link @ _frame(shape.xyz, shape.rpy)
    if shape.kind == "box":
        return box(pose, [s / 2 for s in shape.size], owner)
    if shape.kind == "sphere":
        return sphere(pose[:3, 3], shape.size[0], owner)
    radius, length = shape.size
    if shape.kind == "cylinder":
        return cylinder(pose, radius, length / 2, owner)
    axis = pose[:3, 2] * length / 2
    return capsule(pose[:3, 3] - axis, pose[:3, 3] + axis, radius, owner)


def arm_solids(base: np.ndarray, owner: str = "robot") -> list[Solid]:
    """Convex solids of one PiPER arm at rest on `base` (world_from_base, 4x4)."""
    desc = piper.piper_description()
    frames = link_frames(base)
    return [_solid(frames[link.name], shape, owner) for link in desc.links for shape in link.shapes]


def robot_solids(bases: list[np.ndarray], owner: str = "robot") -> list[Solid]:
    """Solids of every arm of the rig."""
    return [s for base in bases for s in arm_solids(base, owner)]
