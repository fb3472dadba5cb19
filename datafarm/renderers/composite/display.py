"""A scale's live readout drawn into the video with the sim's reading of that frame.

The readout is a seven-segment display (bright segments on a dark panel), right-aligned like a
kitchen scale, with the unit after the digits. It is drawn on G's display rectangle (the scale's
`display.pose`, `width` x `height`), upright (world up projected onto the display) and reading left
to right as seen from in front of it, warped into each camera that faces it, and hidden behind
anything the sim shows closer to the camera than the display.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import cv2
import numpy as np

from datafarm.renderers.scene import Projector
from datafarm.sim.world.frames import pose_to_matrix

PANEL = (28, 32, 30)
"""Panel colour (RGB)."""
LIT = (235, 245, 235)
"""Colour of a lit segment (RGB)."""
TEXTURE_WIDTH = 320
"""Width of the readout texture before it is warped into a view, pixels."""
MIN_CELLS = 4
"""Digit cells on the panel (more when the reading needs them)."""
DIGITS_FRACTION = 0.8
"""Share of the panel width taken by the digits; the unit sits in the rest."""
OCCLUSION_MARGIN_M = 0.01
"""A sim surface this much closer to the camera than the display hides it."""

SEGMENTS = {  # segment name -> (x0, y0, x1, y1) in a unit cell (x right, y down)
    "a": (0.22, 0.04, 0.78, 0.14), "b": (0.70, 0.09, 0.84, 0.49), "c": (0.70, 0.51, 0.84, 0.91),
    "d": (0.22, 0.86, 0.78, 0.96), "e": (0.16, 0.51, 0.30, 0.91), "f": (0.16, 0.09, 0.30, 0.49),
    "g": (0.22, 0.45, 0.78, 0.55),
}
"""Where each of the seven segments lies in a digit cell (fractions of the cell)."""
GLYPHS = {
    "0": "abcdef", "1": "bc", "2": "abdeg", "3": "abcdg", "4": "bcfg", "5": "acdfg", "6": "acdefg", "7": "abc",
    "8": "abcdefg", "9": "abcdfg", "-": "g", " ": "",
}
"""Lit segments of each character."""


def reading_text(grams: float, unit: str, decimals: int) -> str:
    """What the panel shows for a load of `grams` (negative loads read 0, as on a tared scale)."""
    value = max(0.0, grams) / (1000.0 if unit == "kg" else 1.0)
    return f"{value:.{decimals}f}"


def cells_for(text: str) -> int:
    """Digit cells the panel has for `text` (the decimal point takes no cell)."""
    return max(MIN_CELLS, len(text.replace(".", "")))


@dataclass(frozen=True)
class CellBox:
    """Where a digit cell lies on the readout texture."""

    x: float
    """Left edge, texture pixels."""
    y: float
    """Top edge."""
    width: float
    """Cell width."""
    height: float
    """Cell height."""

    def segment(self, name: str) -> tuple[int, int, int, int]:
        """Integer pixel box (x0, y0, x1, y1) of a segment."""
        u0, v0, u1, v1 = SEGMENTS[name]
        return (round(self.x + u0 * self.width), round(self.y + v0 * self.height),
                round(self.x + u1 * self.width), round(self.y + v1 * self.height))


def cell_boxes(texture_width: int, texture_height: int, cells: int) -> list[CellBox]:
    """The digit cells of a readout texture, left to right."""
    digits_width = texture_width * DIGITS_FRACTION
    width = digits_width / cells
    return [CellBox(i * width, 0.1 * texture_height, width, 0.8 * texture_height) for i in range(cells)]


@lru_cache(maxsize=512)
def readout_texture(text: str, unit: str, aspect: float) -> np.ndarray:
    """The readout (uint8 RGB) showing `text` right-aligned, then the unit; width / height = `aspect`."""
    width = TEXTURE_WIDTH
    height = max(8, round(width / aspect))
    image = np.full((height, width, 3), PANEL, dtype=np.uint8)
    chars = text.replace(".", "")
    point_after = text.index(".") - 1 if "." in text else None
    cells = cell_boxes(width, height, cells_for(text))
    first = len(cells) - len(chars)
    for i, ch in enumerate(chars):
        box = cells[first + i]
        for seg in GLYPHS.get(ch, ""):
            x0, y0, x1, y1 = box.segment(seg)
            cv2.rectangle(image, (x0, y0), (x1 - 1, y1 - 1), LIT, thickness=-1)
        if point_after is not None and i == point_after:
            r = max(1, round(box.width * 0.06))
            cv2.circle(image, (round(box.x + box.width * 0.93), round(box.y + box.height * 0.9)), r, LIT, -1)
    scale = height / 60.0
    cv2.putText(image, unit, (round(width * DIGITS_FRACTION + 4 * scale), round(height * 0.85)),
                cv2.FONT_HERSHEY_SIMPLEX, 1.2 * scale, LIT, max(1, round(2 * scale)), cv2.LINE_AA)
    return image


@dataclass(frozen=True)
class DisplayGeometry:
    """A scale's display in its object frame."""

    scale_id: str
    """The scale's G id."""
    object_from_display: np.ndarray
    """4 x 4 pose of the display's centre (it faces its +z axis)."""
    width: float
    """Metres."""
    height: float
    """Metres."""
    unit: str
    """g or kg."""
    decimals: int
    """Digits after the point."""


def display_corners(geometry: DisplayGeometry, world_from_object: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(4, 3) world corners (top-left, top-right, bottom-right, bottom-left as read) and the normal."""
    pose = world_from_object @ geometry.object_from_display
    centre, normal = pose[:3, 3], pose[:3, 2]
    up = np.array([0.0, 0.0, 1.0]) - normal * normal[2]
    if np.linalg.norm(up) < 1e-3:  # a display facing straight up or down: its own y axis is up
        up = pose[:3, 1]
    up /= np.linalg.norm(up)
    right = np.cross(up, normal)
    hw, hh = geometry.width / 2, geometry.height / 2
    corners = np.array([centre + up * hh - right * hw, centre + up * hh + right * hw,
                        centre - up * hh + right * hw, centre - up * hh - right * hw])
    return corners, normal


def draw_display(image: np.ndarray, projector: Projector, geometry: DisplayGeometry, world_from_object: np.ndarray,
                 grams: float, depth: np.ndarray) -> bool:
    """Draw the readout for `grams` into `image` (uint8, in place) when the camera faces the display;
    pixels where the sim `depth` shows something in front of it keep what they had. Returns whether
    it was drawn."""
    corners, normal = display_corners(geometry, world_from_object)
    if float(np.dot(normal, projector.position - corners.mean(axis=0))) <= 0:
        return False
    uv, z = projector.project(corners)
    if np.any(z <= 0.01):
        return False
    h, w = image.shape[:2]
    x0, y0 = np.floor(uv.min(axis=0)).astype(int) - 1
    x1, y1 = np.ceil(uv.max(axis=0)).astype(int) + 2
    ax0, ay0, ax1, ay1 = max(x0, 0), max(y0, 0), min(x1, w), min(y1, h)
    if ax0 >= ax1 or ay0 >= ay1:
        return False
    text = reading_text(grams, geometry.unit, geometry.decimals)
    texture = readout_texture(text, geometry.unit, geometry.width / geometry.height)
    th, tw = texture.shape[:2]
    source = np.array([[0, 0], [tw, 0], [tw, th], [0, th]], dtype=np.float32) - 0.5
    target = (uv - (ax0, ay0)).astype(np.float32)
    homography = cv2.getPerspectiveTransform(source, target)
    size = (ax1 - ax0, ay1 - ay0)
    warped = cv2.warpPerspective(texture, homography, size, flags=cv2.INTER_AREA if tw > size[0] else cv2.INTER_LINEAR)
    coverage = cv2.warpPerspective(np.ones((th, tw), dtype=np.float32), homography, size, flags=cv2.INTER_LINEAR)
    roi_depth = depth[ay0:ay1, ax0:ax1]
    in_front = (roi_depth > 0) & (roi_depth < float(z.min()) - OCCLUSION_MARGIN_M)
    coverage[in_front] = 0.0
    roi = image[ay0:ay1, ax0:ax1]
    blend = coverage[..., None]
    roi[:] = (roi.astype(np.float32) * (1.0 - blend) + warped.astype(np.float32) * blend + 0.5).astype(np.uint8)
    return True


def scale_displays(grounding: object) -> list[DisplayGeometry]:
    """The displays of G's scales."""
    out = []
    for obj in getattr(grounding, "objects", []):
        if getattr(obj, "kind", "") == "scale":
            d = obj.display
            out.append(DisplayGeometry(obj.id, pose_to_matrix(d.pose), d.width, d.height, d.unit, d.decimals))
    return out


def decode_readout(texture_view: np.ndarray, text_length: int, cells: int | None = None) -> str:
    """Read the digits back from an upright, unwarped readout image (the inverse of `readout_texture`,
    for checks): a segment is lit when its centre is brighter than the panel's midpoint to LIT."""
    h, w = texture_view.shape[:2]
    gray = texture_view.astype(np.float32).mean(axis=2)
    threshold = (np.mean(PANEL) + np.mean(LIT)) / 2
    boxes = cell_boxes(w, h, cells or max(MIN_CELLS, text_length))
    lookup = {frozenset(v): k for k, v in GLYPHS.items()}
    out = []
    for box in boxes[len(boxes) - text_length:]:
        lit = set()
        for seg in SEGMENTS:
            x0, y0, x1, y1 = box.segment(seg)
            cx, cy = (x0 + x1) // 2, (y0 + y1) // 2
            if gray[min(cy, h - 1), min(cx, w - 1)] > threshold:
                lit.add(seg)
        out.append(lookup.get(frozenset(lit), "?"))
    return "".join(out)


def unwarp_readout(image: np.ndarray, projector: Projector, geometry: DisplayGeometry, world_from_object: np.ndarray,
                   width: int = TEXTURE_WIDTH) -> np.ndarray:
    """The display region of a rendered `image`, warped back to an upright readout `width` wide."""
    corners, _ = display_corners(geometry, world_from_object)
    uv, _ = projector.project(corners)
    height = max(8, round(width * geometry.height / geometry.width))
    target = np.array([[0, 0], [width, 0], [width, height], [0, height]], dtype=np.float32) - 0.5
    homography = cv2.getPerspectiveTransform(uv.astype(np.float32), target)
    return cv2.warpPerspective(image, homography, (width, height), flags=cv2.INTER_LINEAR)
