"""Media going to and coming from the hosted video services: images and videos as data URLs, and a
returned video fitted to a chunk (its frame count and the canvas size)."""

from __future__ import annotations

import base64

import cv2
import numpy as np


def png_data_url(rgb: np.ndarray) -> str:
    """A uint8 RGB image as a `data:image/png;base64,...` URL."""
    ok, encoded = cv2.imencode(".png", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    if not ok:
        raise ValueError("PNG encoding failed")
    return "data:image/png;base64," + base64.b64encode(encoded.tobytes()).decode("ascii")


def mp4_data_url(data: bytes) -> str:
    """MP4 bytes as a `data:video/mp4;base64,...` URL."""
    return "data:video/mp4;base64," + base64.b64encode(data).decode("ascii")


def decode_data_url(url: str) -> tuple[str, bytes]:
    """(media type, bytes) of a base64 data URL (ValueError for anything else)."""
    if not url.startswith("data:") or ";base64," not in url:
        raise ValueError("not a base64 data URL")
    head, _, payload = url.partition(";base64,")
    return head[len("data:"):], base64.b64decode(payload)


def cover_resize(image: np.ndarray, width: int, height: int) -> np.ndarray:
    """`image` scaled to cover width x height (aspect kept), then centre-cropped to it."""
    h, w = image.shape[:2]
    if (w, h) == (width, height):
        return image
    scale = max(width / w, height / h)
    new_w, new_h = max(width, round(w * scale)), max(height, round(h * scale))
    resized = cv2.resize(image, (new_w, new_h), interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR)
    x0, y0 = (new_w - width) // 2, (new_h - height) // 2
    return np.ascontiguousarray(resized[y0:y0 + height, x0:x0 + width])


def fit_frames(frames: np.ndarray, count: int, width: int, height: int) -> list[np.ndarray]:
    """`count` frames sampled uniformly in time from `frames` (a model returns its own duration and
    frame rate; the chunk needs exactly `count`), each cover-resized to width x height."""
    if len(frames) == 0:
        raise ValueError("the returned video has no frames")
    picks = np.round(np.linspace(0, len(frames) - 1, count)).astype(int) if count > 1 else np.array([0])
    return [cover_resize(frames[i], width, height) for i in picks]


RATIOS = {"16:9": 16 / 9, "4:3": 4 / 3, "1:1": 1.0, "3:4": 3 / 4, "9:16": 9 / 16, "21:9": 21 / 9}
"""Aspect ratios video services generate."""


def closest_ratio(width: int, height: int) -> str:
    """The service aspect ratio closest to width / height (in log terms)."""
    aspect = width / height
    return min(RATIOS, key=lambda r: abs(np.log(RATIOS[r] / aspect)))
