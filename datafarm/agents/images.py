"""Frames for the agents' eyes: decode one frame of a video (PyAV), encode it as PNG for a model, and
measure it (a pixel's colour, a region's statistics, where a colour is) so a role can check what it
sees with numbers rather than by eye."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import av
import cv2
import numpy as np


class FrameError(Exception):
    """A frame cannot be read (no such frame, unreadable video); the message says why in plain words."""


@lru_cache(maxsize=32)
def _decode(path: str, mtime_ns: int, index: int) -> np.ndarray:
    try:
        container = av.open(path)
    except (av.FFmpegError, OSError) as err:
        raise FrameError(f"cannot open {Path(path).name} as a video ({getattr(err, 'strerror', None) or err})") from None
    with container:
        if not container.streams.video:
            raise FrameError(f"{Path(path).name} has no video stream")
        count = 0
        for frame in container.decode(container.streams.video[0]):
            if count == index:
                rgb = frame.to_ndarray(format="rgb24")
                rgb.setflags(write=False)
                return rgb
            count += 1
    raise FrameError(f"frame {index} does not exist: {Path(path).name} has {count} frames (0..{count - 1})")


def read_frame(video: Path, index: int) -> np.ndarray:
    """Frame `index` (0-based) of `video` as an H x W x 3 uint8 RGB array (read-only, cached)."""
    if index < 0:
        raise FrameError("frame indices start at 0")
    video = Path(video)
    if not video.is_file():
        raise FrameError(f"no video {video.name}")
    return _decode(str(video), video.stat().st_mtime_ns, index)


def png_bytes(rgb: np.ndarray, max_side: int = 1024) -> bytes:
    """`rgb` encoded as PNG, scaled down (never up) so its longer side is at most `max_side` pixels."""
    h, w = rgb.shape[:2]
    scale = max_side / max(h, w)
    if scale < 1:
        rgb = cv2.resize(rgb, (max(1, round(w * scale)), max(1, round(h * scale))), interpolation=cv2.INTER_AREA)
    ok, data = cv2.imencode(".png", cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2BGR))
    if not ok:
        raise FrameError("PNG encoding failed")
    return data.tobytes()


@dataclass(frozen=True)
class Box:
    """A pixel rectangle, x0 <= x < x1, y0 <= y < y1."""

    x0: int
    y0: int
    x1: int
    y1: int


def _clip_box(rgb: np.ndarray, box: Box) -> Box:
    h, w = rgb.shape[:2]
    x0, x1 = sorted((max(0, min(w, box.x0)), max(0, min(w, box.x1))))
    y0, y1 = sorted((max(0, min(h, box.y0)), max(0, min(h, box.y1))))
    if x1 <= x0 or y1 <= y0:
        raise FrameError(f"the region is empty inside the {w}x{h} frame")
    return Box(x0, y0, x1, y1)


def pixel_colour(rgb: np.ndarray, x: int, y: int) -> dict[str, object]:
    """The colour at (x, y): 0-255 RGB and 0-1 RGB (the artifacts' colour convention)."""
    h, w = rgb.shape[:2]
    if not (0 <= x < w and 0 <= y < h):
        raise FrameError(f"pixel ({x}, {y}) is outside the {w}x{h} frame")
    value = [int(v) for v in rgb[y, x]]
    return {"x": x, "y": y, "rgb255": value, "rgb": [round(v / 255, 4) for v in value]}


def region_stats(rgb: np.ndarray, box: Box) -> dict[str, object]:
    """Mean, standard deviation, min and max RGB (0-1) of a rectangle, and its size."""
    b = _clip_box(rgb, box)
    region = rgb[b.y0 : b.y1, b.x0 : b.x1].reshape(-1, 3).astype(np.float64) / 255
    return {
        "box": [b.x0, b.y0, b.x1, b.y1],
        "pixels": int(region.shape[0]),
        "mean_rgb": [round(float(v), 4) for v in region.mean(axis=0)],
        "std_rgb": [round(float(v), 4) for v in region.std(axis=0)],
        "min_rgb": [round(float(v), 4) for v in region.min(axis=0)],
        "max_rgb": [round(float(v), 4) for v in region.max(axis=0)],
    }


def find_colour(rgb: np.ndarray, colour: tuple[float, float, float], tolerance: float) -> dict[str, object]:
    """Pixels within `tolerance` (Euclidean, 0-1 RGB) of `colour`: their count, bounding box and centroid."""
    target = np.asarray(colour, dtype=np.float64)
    distance = np.linalg.norm(rgb.astype(np.float64) / 255 - target, axis=2)
    ys, xs = np.nonzero(distance <= tolerance)
    if xs.size == 0:
        return {"pixels": 0, "bbox": None, "centroid": None}
    return {
        "pixels": int(xs.size),
        "bbox": [int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1],
        "centroid": [round(float(xs.mean()), 2), round(float(ys.mean()), 2)],
    }
