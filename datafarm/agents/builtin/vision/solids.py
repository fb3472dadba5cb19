"""G's objects and robot as convex solids in the world, for drawing a grounding through its cameras:
the objects' shapes are the simulator's own (datafarm.sim.world.shapes), the robot is the PiPER at
rest on each arm base (`robot`)."""

from __future__ import annotations

import math

import numpy as np

from datafarm.agents.builtin.vision.raster import Solid, box, cylinder, sphere
from datafarm.agents.builtin.vision.robot import robot_solids
from datafarm.artifacts.grounding import ARM_KINDS, Grounding
from datafarm.sim.world.frames import pose_to_matrix
from datafarm.sim.world.shapes import ShapeSpec, drawer_geometry, rigid_shapes

ROBOT = "robot"
"""Owner name of the robot's solids."""


def _shape_solid(world_from_object: np.ndarray, spec: ShapeSpec, owner: str) -> Solid:
    m = np.eye(4)
    c, s = math.cos(spec.yaw), math.sin(spec.yaw)
    m[:3, :3] = [[c, -s, 0], [s, c, 0], [0, 0, 1]]
    m[:3, 3] = spec.position
    pose = world_from_object @ m
    if spec.geometry == "box":
        return box(pose, spec.size, owner)
    if spec.geometry == "cylinder":
        return cylinder(pose, spec.size[0], spec.size[1], owner)
    return sphere(pose[:3, 3], spec.size[0], owner)


def object_solids(obj: object) -> list[Solid]:
    """The solids of one G object at its pose (a drawer cabinet's drawer at its initial opening)."""
    world = pose_to_matrix(obj.pose)  # type: ignore[attr-defined]
    owner = obj.id  # type: ignore[attr-defined]
    kind = getattr(obj, "kind", "")
    if kind == "drawer_cabinet":
        geometry = drawer_geometry(obj)  # type: ignore[arg-type]
        opening = np.eye(4)
        opening[0, 3] = obj.initial_opening.value  # type: ignore[attr-defined]
        return ([_shape_solid(world, s, owner) for s in geometry.carcass]
                + [_shape_solid(world @ opening, s, owner) for s in geometry.drawer])
    if kind == "actor":
        s = obj.size  # type: ignore[attr-defined]
        return [_shape_solid(world, ShapeSpec("box", (s.x.value / 2, s.y.value / 2, s.z.value / 2), (0, 0, s.z.value / 2)), owner)]
    return [_shape_solid(world, s, owner) for s in rigid_shapes(obj)]  # type: ignore[arg-type]


def grounding_solids(g: Grounding) -> list[Solid]:
    """Every object's solids and, for an arm robot, the robot's."""
    solids = [s for obj in g.objects for s in object_solids(obj)]
    if g.robot.kind in ("piper", "piper-dual"):
        solids += robot_solids([pose_to_matrix(a.base) for a in g.robot.arms], ROBOT)
    elif g.robot.kind in ARM_KINDS:
        pass  # a user URDF: its geometry is not drawn here
    return solids
