"""Contact shadows: a soft dark patch on the table under each object and each gripper, the shape of
its outline dropped onto the table top, darker and sharper the closer it is to the table.

Per frame, a caster's hull points (object frame) are placed at the recorded pose, dropped onto the
episode's table plane and projected through the camera; the filled, blurred hull darkens the
background by `strength * exp(-height / FALLOFF_M)`. Only the background is darkened: the sim
foreground is laid over it afterwards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from datafarm.renderers.scene import Projector
from datafarm.sim.world.frames import quat_to_matrix
from datafarm.sim.world.shapes import ShapeSpec, drawer_geometry, rigid_shapes

FALLOFF_M = 0.06
"""Height above the table over which a shadow fades to 1/e of its contact strength, metres."""
SPREAD = 1.12
"""A contact shadow reaches a little beyond the outline (ambient occlusion is wider than the base)."""
BLUR_PX = 1.5
"""Blur of a shadow touching the table, pixels (at 320 px width; scaled with the image)."""
BLUR_PER_M = 60.0
"""Extra blur per metre of height, pixels (at 320 px width)."""
GRIPPER_HALF = (0.03, 0.045, 0.03)
"""Half extents of the box standing in for a gripper around its TCP, metres (TCP frame)."""
_RING = 16


def _shape_points(spec: ShapeSpec) -> np.ndarray:
    """Points spanning one primitive (object frame)."""
    cx, cy, cz = spec.position
    if spec.geometry == "box":
        hx, hy, hz = spec.size
        c, s = math.cos(spec.yaw), math.sin(spec.yaw)
        corners = np.array([(x, y, z) for x in (-hx, hx) for y in (-hy, hy) for z in (-hz, hz)])
        rotated = corners @ np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]).T
        return rotated + (cx, cy, cz)
    radius = spec.size[0]
    half = spec.size[1] if spec.geometry == "cylinder" else radius
    angles = np.linspace(0, 2 * math.pi, _RING, endpoint=False)
    ring = np.stack([radius * np.cos(angles), radius * np.sin(angles)], axis=1)
    return np.concatenate([np.column_stack([ring + (cx, cy), np.full(_RING, cz + dz)]) for dz in (-half, half)])


def hull_points(obj: object) -> np.ndarray:
    """(N, 3) points whose hull is the object's outline, in the object frame."""
    if getattr(obj, "kind", "") == "drawer_cabinet":
        geometry = drawer_geometry(obj)  # type: ignore[arg-type]
        specs = geometry.carcass + geometry.drawer
    else:
        specs = rigid_shapes(obj)  # type: ignore[arg-type]
    return np.concatenate([_shape_points(s) for s in specs])


def gripper_points() -> np.ndarray:
    """(8, 3) corners of the box standing in for a gripper, TCP frame."""
    hx, hy, hz = GRIPPER_HALF
    return np.array([(x, y, z) for x in (-hx, hx) for y in (-hy, hy) for z in (-hz, hz)])


@dataclass(frozen=True)
class ShadowCaster:
    """Something that casts a contact shadow: its outline points in its own frame."""

    name: str
    """Object id or `<arm>.gripper`."""
    points: np.ndarray
    """(N, 3) outline points in the caster's frame."""


def world_points(points: np.ndarray, pose7: np.ndarray) -> np.ndarray:
    """Points of a caster at pose (x, y, z, qw, qx, qy, qz)."""
    rotation = quat_to_matrix(pose7[3:7])
    return points @ rotation.T + pose7[:3]


def draw_shadow(image: np.ndarray, projector: Projector, points_world: np.ndarray, world_from_table: np.ndarray,
                strength: float) -> bool:
    """Darken `image` (uint8, in place) under a caster whose outline is `points_world`. Returns whether
    anything was drawn (nothing when the caster is far above the table or out of view)."""
    normal, origin = world_from_table[:3, 2], world_from_table[:3, 3]
    heights = (points_world - origin) @ normal
    height = max(0.0, float(heights.min()))
    alpha = strength * math.exp(-height / FALLOFF_M)
    if alpha < 0.02 or float(heights.max()) < -0.01:
        return False
    footprint = points_world - np.outer(heights, normal)
    footprint = footprint.mean(axis=0) + (footprint - footprint.mean(axis=0)) * SPREAD
    uv, z = projector.project(footprint)
    if np.any(z <= 0.01):
        return False
    h, w = image.shape[:2]
    scale = w / 320.0
    sigma = (BLUR_PX + BLUR_PER_M * height) * scale
    pad = int(math.ceil(3 * sigma)) + 1
    x0, y0 = np.floor(uv.min(axis=0)).astype(int) - pad
    x1, y1 = np.ceil(uv.max(axis=0)).astype(int) + pad + 1
    ax0, ay0, ax1, ay1 = max(x0, 0), max(y0, 0), min(x1, w), min(y1, h)
    if ax0 >= ax1 or ay0 >= ay1:
        return False
    mask = np.zeros((y1 - y0, x1 - x0), dtype=np.float32)
    hull = cv2.convexHull(np.round((uv - (x0, y0)) * 16).astype(np.int32).reshape(-1, 1, 2))
    cv2.fillConvexPoly(mask, hull, 1.0, lineType=cv2.LINE_AA, shift=4)
    mask = cv2.GaussianBlur(mask, (0, 0), sigma)
    mask = mask[ay0 - y0:ay1 - y0, ax0 - x0:ax1 - x0]
    roi = image[ay0:ay1, ax0:ax1]
    roi[:] = (roi.astype(np.float32) * (1.0 - alpha * mask)[..., None] + 0.5).astype(np.uint8)
    return True
