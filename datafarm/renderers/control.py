"""Control signals per camera and frame, computed from the sim render passes: an edge map (OpenCV
Canny on the sim image, plus the outlines of every segment, so object silhouettes are closed even
where two surfaces have the same shade), with the passes' depth and segmentation kept alongside.

The edge map is what a hosted video model receives as its control video; the composite renderer
uses the sim RGB, depth and segmentation directly.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from datafarm.sim.render_passes import CameraFrame

CANNY_LOW = 40
"""Canny hysteresis low threshold (0-255 gradient units)."""
CANNY_HIGH = 120
"""Canny hysteresis high threshold."""


@dataclass(frozen=True)
class ControlFrame:
    """One camera's control signals for one frame."""

    camera: str
    """Camera name."""
    rgb: np.ndarray
    """uint8 H x W x 3 sim render."""
    depth: np.ndarray
    """float32 H x W metres along the optical axis, 0 = nothing hit."""
    segmentation: np.ndarray
    """uint32 H x W entity ids, 0 = nothing hit."""
    edges: np.ndarray
    """uint8 H x W, 255 on an edge, 0 elsewhere."""


def segment_outlines(segmentation: np.ndarray) -> np.ndarray:
    """bool H x W: pixels whose right or lower neighbour belongs to another segment."""
    out = np.zeros(segmentation.shape, dtype=bool)
    out[:, :-1] |= segmentation[:, :-1] != segmentation[:, 1:]
    out[:-1, :] |= segmentation[:-1, :] != segmentation[1:, :]
    return out


def edge_map(rgb: np.ndarray, segmentation: np.ndarray | None = None) -> np.ndarray:
    """uint8 edge map: Canny edges of the image, OR the segment outlines when given."""
    gray = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
    edges = cv2.Canny(gray, CANNY_LOW, CANNY_HIGH)
    if segmentation is not None:
        edges[segment_outlines(segmentation)] = 255
    return edges


def control_frame(frame: CameraFrame) -> ControlFrame:
    """The control signals of one render-pass frame."""
    return ControlFrame(camera=frame.camera, rgb=frame.rgb, depth=frame.depth, segmentation=frame.segmentation,
                        edges=edge_map(frame.rgb, frame.segmentation))
