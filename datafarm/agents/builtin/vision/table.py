"""The table top's edges, from the views: G's table is a rectangle on the world's z = 0 plane with its
edges along world x and y, so each edge is a line x = const or y = const at z = 0. Such a line shows
in every view as an image edge at the same place (lines off the plane, like the floor's planks or the
wall's foot, do not line up across views). For each side, candidate positions are scored by how
strongly every view's image changes across the projected line, over how much of its length; the
outermost position scoring close to the best is the edge.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from datafarm.agents.builtin.vision.segment import (
    PlaneGrid,
    TableModel,
    View,
    lab_to_linear,
)

SEARCH_FROM_M = 0.15
"""Nearest edge position searched, metres from the world origin."""
SEARCH_TO_M = 1.2
"""Farthest edge position searched, metres."""
STEP_M = 0.003
"""Spacing of the candidate positions, metres."""
SAMPLES = 240
"""Points sampled along a candidate line."""
SPAN_M = 1.6
"""Length of the sampled line segment (centred on the origin), metres."""
EDGE_CAP = 8.0
"""Lightness change per pixel (L, 0-100) counted at most at one point (a few strong spots are no line)."""
MIN_POINTS = 40
"""Fewest sampled points the views must see of a candidate line to score it."""
PEAK_OVER_MEDIAN = 2.5
"""An edge's mean change across it is at least this many times its side's median."""
CLEARANCE_M = 0.03
"""An edge lies at least this far beyond what stands on the table, metres."""
STRIP_M = (0.01, 0.05)
"""Strip beside a candidate line whose cells are checked (from, to), metres from the line."""
INSIDE_TABLE = 0.6
"""Fraction of the strip inside a line that must be table for the line to be the table's edge."""
OUTSIDE_TABLE = 0.3
"""Largest fraction of the strip beyond a line that may look like table for the line to be the edge."""
MIN_EDGE = 0.5
"""An edge's mean lightness change per pixel across it is at least this (L units)."""


@dataclass(frozen=True)
class TableEdges:
    """Where the table top ends on each side, and whether a view saw that edge."""

    x_min: float
    x_max: float
    y_min: float
    y_max: float
    seen: dict[str, bool]
    """`x_min`... -> the edge was found (else the value is the last position the views see)."""

    @property
    def center(self) -> tuple[float, float]:
        """Centre of the rectangle."""
        return (0.5 * (self.x_min + self.x_max), 0.5 * (self.y_min + self.y_max))

    @property
    def size(self) -> tuple[float, float]:
        """(size_x, size_y)."""
        return (self.x_max - self.x_min, self.y_max - self.y_min)


def _gradients(view: View) -> tuple[np.ndarray, np.ndarray]:
    lightness = cv2.GaussianBlur(view.lab[..., 0], (0, 0), 1.2)
    gx = cv2.Sobel(lightness, cv2.CV_32F, 1, 0, ksize=3) / 8.0
    gy = cv2.Sobel(lightness, cv2.CV_32F, 0, 1, ksize=3) / 8.0
    return gx, gy


def _profiles(views: Sequence[View], grads: Sequence[tuple[np.ndarray, np.ndarray]], axis: int, sign: float,
              positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per view and candidate position of the line {axis = sign * p}: (mean lightness change across the
    line, number of its points the view sees)."""
    along = np.linspace(-SPAN_M / 2, SPAN_M / 2, SAMPLES)
    scores = np.zeros((len(views), len(positions)))
    seen = np.zeros((len(views), len(positions)))
    for k, (view, (gx, gy)) in enumerate(zip(views, grads)):
        cam = view.camera
        for i, p in enumerate(positions):
            pts = np.zeros((SAMPLES, 3))
            pts[:, axis] = sign * p
            pts[:, 1 - axis] = along
            pix, depth = cam.project(pts)
            # the line's direction in the image, to measure the change across it
            ahead = pts.copy()
            ahead[:, 1 - axis] += 0.01
            pix2, _ = cam.project(ahead)
            d = pix2 - pix
            n = np.column_stack([-d[:, 1], d[:, 0]])
            n /= np.linalg.norm(n, axis=1, keepdims=True) + 1e-12
            u, v = np.round(pix[:, 0]).astype(int), np.round(pix[:, 1]).astype(int)
            ok = (depth > 0) & (u >= 2) & (v >= 2) & (u < cam.width - 2) & (v < cam.height - 2)
            ok[ok] &= ~view.robot[v[ok], u[ok]]
            if not ok.any():
                continue
            across = np.abs(gx[v[ok], u[ok]] * n[ok, 0] + gy[v[ok], u[ok]] * n[ok, 1])
            scores[k, i] = float(np.minimum(across, EDGE_CAP).mean())
            seen[k, i] = float(ok.sum())
    return scores, seen


def _strip_fraction(tableness: np.ndarray, seen: np.ndarray, grid: PlaneGrid, axis: int, sign: float,
                    positions: np.ndarray, inward: bool) -> np.ndarray:
    """Fraction of table cells among the seen cells of the strip just inside (or outside) each line."""
    coords = grid.x0 + grid.res * np.arange(grid.nx) if axis == 0 else grid.y0 + grid.res * np.arange(grid.ny)
    table = tableness.sum(axis=0 if axis == 0 else 1).astype(float)
    count = seen.sum(axis=0 if axis == 0 else 1).astype(float)
    out = np.zeros(len(positions))
    for i, p in enumerate(positions):
        near, far = (p - STRIP_M[1], p - STRIP_M[0]) if inward else (p + STRIP_M[0], p + STRIP_M[1])
        sel = (sign * coords >= near) & (sign * coords <= far)
        n = count[sel].sum()
        out[i] = table[sel].sum() / n if n > 0 else 0.0
    return out


def table_edges(views: Sequence[View], model: TableModel | None = None,
                inside: Sequence[float] | None = None) -> TableEdges:
    """The table top's four edges (see the module docstring). With the segmentation's table model, a
    line counts only when the strip just inside it is mostly table (a line beyond the edge is not).
    `inside` = (x_min, x_max, y_min, y_max) of what stands on the table (robot, objects): an edge lies
    beyond it. Of the lines that qualify, the strongest is the edge (table against floor is the
    strongest change; plank seams and printed boards are weaker)."""
    grads = [_gradients(v) for v in views]
    if model is not None:
        tableness = model.agree & (model.mismatch(lab_to_linear(model.median)) < 1.0)
        seen_cells = model.agree | model.seen_by_two
    positions = np.arange(SEARCH_FROM_M, SEARCH_TO_M, STEP_M)
    out: dict[str, float] = {}
    seen_edge: dict[str, bool] = {}
    for name, axis, sign in (("x_min", 0, -1.0), ("x_max", 0, 1.0), ("y_min", 1, -1.0), ("y_max", 1, 1.0)):
        scores, points = _profiles(views, grads, axis, sign, positions)
        sees = points >= MIN_POINTS
        visible = np.flatnonzero(sees.any(axis=0))
        last_seen = positions[visible[-1]] if len(visible) else SEARCH_FROM_M
        votes = np.zeros(len(positions), int)
        for k in range(len(views)):
            if not sees[k].any():
                continue
            floor = float(np.median(scores[k, sees[k]]))
            strong = sees[k] & (scores[k] >= PEAK_OVER_MEDIAN * floor) & (scores[k] >= MIN_EDGE)
            votes += cv2.dilate(strong.astype(np.uint8)[None], np.ones((1, 3), np.uint8))[0] > 0  # a step either way
        # a line on the table plane lines up in every view that sees it; a chance line in one view does not
        needed = np.ceil(sees.sum(axis=0) / 2.0)
        mean = np.where(sees, scores, 0).sum(axis=0) / np.maximum(sees.sum(axis=0), 1)
        peak = (votes >= np.maximum(needed, 1)) & (mean >= np.maximum(np.roll(mean, 1), np.roll(mean, -1)))
        if model is not None:
            # the top is table on the inside and something else beyond (a plank seam has table on both sides)
            peak &= _strip_fraction(tableness, seen_cells, model.grid, axis, sign, positions, True) >= INSIDE_TABLE
            peak &= _strip_fraction(tableness, seen_cells, model.grid, axis, sign, positions, False) <= OUTSIDE_TABLE
        if inside is not None:
            bound = {"x_min": -inside[0], "x_max": inside[1], "y_min": -inside[2], "y_max": inside[3]}[name]
            peak &= positions >= bound + CLEARANCE_M
        if peak.any():
            candidates = np.flatnonzero(peak)
            out[name] = sign * float(positions[candidates[np.argmax(mean[candidates])]])
            seen_edge[name] = True
        else:
            out[name] = sign * float(last_seen)
            seen_edge[name] = False
    return TableEdges(out["x_min"], out["x_max"], out["y_min"], out["y_max"], seen_edge)
