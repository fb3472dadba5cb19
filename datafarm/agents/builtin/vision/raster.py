"""Pure NumPy/OpenCV rasterization of convex solids (boxes, cylinders, spheres, capsules) through a
pinhole camera: each solid's silhouette is the convex hull of its projected surface samples, and
solids are painted far to near, so a label image shows which solid each pixel sees.

Good enough for masks of tabletop scenes (separated convex parts); no GPU, no render device.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from datafarm.agents.builtin.vision.camera import Camera

CIRCLE_SAMPLES = 48
"""Points per circle of a cylinder's rims."""
SPHERE_SAMPLES = 160
"""Points on a sphere's surface (a Fibonacci lattice)."""


@dataclass(frozen=True)
class Solid:
    """A convex solid given by surface samples in the world, and who it belongs to."""

    points: np.ndarray
    """World points (N x 3) whose convex hull is the solid."""
    owner: str
    """What it is part of: an object id, `robot`..."""

    @property
    def centre(self) -> np.ndarray:
        """Mean of the samples (for far-to-near ordering)."""
        return self.points.mean(axis=0)


def _circle(n: int = CIRCLE_SAMPLES) -> np.ndarray:
    a = np.linspace(0.0, 2.0 * math.pi, n, endpoint=False)
    return np.column_stack([np.cos(a), np.sin(a)])


def _fibonacci(n: int = SPHERE_SAMPLES) -> np.ndarray:
    i = np.arange(n) + 0.5
    phi = np.arccos(1 - 2 * i / n)
    theta = math.pi * (1 + 5**0.5) * i
    return np.column_stack([np.cos(theta) * np.sin(phi), np.sin(theta) * np.sin(phi), np.cos(phi)])


def transform(matrix: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Points (N x 3) moved by a 4x4 transform."""
    return points @ matrix[:3, :3].T + matrix[:3, 3]


def box(world_from_shape: np.ndarray, half: Sequence[float], owner: str) -> Solid:
    """A box with half extents `half`, centred at the shape frame's origin."""
    hx, hy, hz = half
    corners = np.array([[sx * hx, sy * hy, sz * hz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
    return Solid(transform(world_from_shape, corners), owner)


def cylinder(world_from_shape: np.ndarray, radius: float, half_height: float, owner: str) -> Solid:
    """A cylinder along the shape frame's z, centred at its origin."""
    ring = _circle() * radius
    pts = np.vstack([np.column_stack([ring, np.full(len(ring), z)]) for z in (-half_height, half_height)])
    return Solid(transform(world_from_shape, pts), owner)


def sphere(centre: Sequence[float], radius: float, owner: str) -> Solid:
    """A sphere."""
    return Solid(np.asarray(centre, float) + radius * _fibonacci(), owner)


def capsule(a: Sequence[float], b: Sequence[float], radius: float, owner: str) -> Solid:
    """A capsule: the hull of two spheres of `radius` around the points `a` and `b`."""
    unit = radius * _fibonacci(64)
    return Solid(np.vstack([np.asarray(a, float) + unit, np.asarray(b, float) + unit]), owner)


def polygon(camera: Camera, solid: Solid, near: float = 0.02) -> np.ndarray | None:
    """The solid's convex image polygon (M x 2 float pixels), or None when it is not in front of the camera."""
    pix, depth = camera.project(solid.points)
    if np.any(depth < near):
        front = depth >= near
        if not front.any():
            return None
        pix = pix[front]  # partly behind the camera: draw what is in front (rare on a tabletop)
    if not np.all(np.isfinite(pix)):
        return None
    limit = 4.0 * max(camera.width, camera.height)
    pix = np.clip(pix, -limit, limit + max(camera.width, camera.height))
    return cv2.convexHull(pix.astype(np.float32)).reshape(-1, 2).astype(np.float64)


def fill(image: np.ndarray, poly: np.ndarray, value: int, offset: tuple[int, int] = (0, 0), smooth: bool = False) -> None:
    """Paint a convex polygon (float pixels) into `image` in place; `offset` is the image's top-left
    pixel; `smooth` antialiases the edges (for uint8 coverage images)."""
    pts = np.round((poly - np.asarray(offset, float)) * 16).astype(np.int32)
    cv2.fillConvexPoly(image, pts, value, lineType=cv2.LINE_AA if smooth else cv2.LINE_8, shift=4)


def label_image(camera: Camera, solids: Sequence[Solid], owners: Sequence[str]) -> np.ndarray:
    """int32 image: 1 + index into `owners` of the nearest solid seen at each pixel, 0 where none."""
    labels = np.zeros((camera.height, camera.width), np.int32)
    index = {o: i + 1 for i, o in enumerate(owners)}
    centre = camera.centre
    order = sorted(solids, key=lambda s: -float(np.linalg.norm(s.centre - centre)))
    for solid in order:
        poly = polygon(camera, solid)
        if poly is None or solid.owner not in index:
            continue
        fill(labels, poly, index[solid.owner])
    return labels


def mask(camera: Camera, solids: Sequence[Solid]) -> np.ndarray:
    """bool image: pixels any of the solids covers."""
    out = np.zeros((camera.height, camera.width), np.uint8)
    for solid in solids:
        poly = polygon(camera, solid)
        if poly is not None:
            fill(out, poly, 1)
    return out.astype(bool)
