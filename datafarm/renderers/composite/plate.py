"""A clean plate per camera: the real static background with the foreground taken out.

The median over frames spread across the clip removes what moves through the view; pixels where
fewer than `stable_fraction` of the frames agree with the median (something stood there part of
the time) and pixels covered by the scene's foreground as G places it (objects at their clip poses,
the robot at its start pose, dilated for pose error) are filled by inpainting from the surrounding
background. So the objects' real positions never show through: they appear only where the sim puts
them.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass

import cv2
import numpy as np

AGREE_LEVELS = 14
"""A frame agrees with the median at a pixel when no channel differs by more than this (0-255)."""


@dataclass(frozen=True)
class CleanPlate:
    """A camera's clean plate and what was filled in."""

    image: np.ndarray
    """uint8 H x W x 3 background."""
    filled: np.ndarray
    """bool H x W: pixels inpainted (foreground or unstable)."""
    unstable_fraction: float
    """Fraction of pixels where the clip's frames disagree (moving parts)."""


def dilate(mask: np.ndarray, radius: int) -> np.ndarray:
    """`mask` grown by `radius` pixels (an elliptical structuring element)."""
    if radius <= 0:
        return mask.copy()
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))
    return cv2.dilate(mask.astype(np.uint8), kernel).astype(bool)


def erode(mask: np.ndarray, radius: int) -> np.ndarray:
    """`mask` shrunk by `radius` pixels."""
    if radius <= 0:
        return mask.copy()
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))
    return cv2.erode(mask.astype(np.uint8), kernel).astype(bool)


_CACHE: OrderedDict[str, CleanPlate] = OrderedDict()
_CACHE_SIZE = 16


def clean_plate(frames: np.ndarray, foreground: np.ndarray, dilation_px: int, stable_fraction: float = 0.6) -> CleanPlate:
    """The clean plate of one camera from clip `frames` (N x H x W x 3 uint8) and the foreground mask
    of G's scene in that view (bool H x W). Episodes of one task share their plates: the result is
    kept (per process, for the last few inputs) and reused when the same inputs come again."""
    digest = hashlib.sha1(usedforsecurity=False)
    for part in (frames, np.packbits(foreground), np.array([dilation_px, stable_fraction])):
        digest.update(np.ascontiguousarray(part).data)
    digest.update(repr(frames.shape).encode())
    key = digest.hexdigest()
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    median = np.median(frames, axis=0).astype(np.uint8)
    if len(frames) > 1:
        agree = np.zeros(median.shape[:2], dtype=np.int32)
        for frame in frames:
            agree += cv2.absdiff(frame, median).max(axis=2) <= AGREE_LEVELS
        unstable = agree < stable_fraction * len(frames)
    else:
        unstable = np.zeros(median.shape[:2], dtype=bool)
    holes = dilate(foreground, dilation_px) | dilate(unstable, 1)
    radius = max(3, dilation_px // 2)
    image = cv2.inpaint(median, holes.astype(np.uint8), radius, cv2.INPAINT_TELEA) if holes.any() else median
    image.setflags(write=False)  # shared by every episode that reuses it
    holes.setflags(write=False)
    plate = CleanPlate(image=image, filled=holes, unstable_fraction=float(unstable.mean()))
    _CACHE[key] = plate
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return plate
