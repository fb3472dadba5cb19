"""Image crops saved as evidence for review (`episodes/<id>/verifier/<check>-<camera>-f<frame>[-tag].png`).

A crop shows the rendered frame around what a check looked at, with the sim's projection outlined in
green and what the check found in the video outlined in magenta; small crops are enlarged (nearest
neighbour) so a reviewer can see single pixels.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

CROP_DIR = "verifier"
"""Folder of the crops inside the episode folder."""
MIN_SIDE = 128
"""Crops are enlarged to at least this many pixels on their shorter side."""
SIM_COLOUR = (0, 255, 0)
"""Outline colour of the sim's projection (RGB)."""
FOUND_COLOUR = (255, 0, 255)
"""Outline colour of what the check found in the video (RGB)."""


def box_around(masks: list[np.ndarray], shape: tuple[int, int], pad: int = 8) -> tuple[int, int, int, int]:
    """(x0, y0, x1, y1) around every True pixel of `masks`, padded; the whole image when all are empty."""
    h, w = shape
    ys, xs = [], []
    for m in masks:
        if m is not None and m.any():
            y, x = np.nonzero(m)
            ys += [y.min(), y.max()]
            xs += [x.min(), x.max()]
    if not xs:
        return 0, 0, w, h
    return max(0, min(xs) - pad), max(0, min(ys) - pad), min(w, max(xs) + pad + 1), min(h, max(ys) + pad + 1)


def _outline(image: np.ndarray, mask: np.ndarray | None, colour: tuple[int, int, int]) -> None:
    if mask is None or not mask.any():
        return
    contours, _ = cv2.findContours(mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
    cv2.drawContours(image, contours, -1, colour, 1)


class CropWriter:
    """Writes crops into an episode folder's `verifier/` (or nowhere, when `episode_dir` is None)."""

    def __init__(self, episode_dir: Path | str | None, subdir: str = CROP_DIR, checks: set[str] | None = None) -> None:
        self.folder = Path(episode_dir) / subdir if episode_dir is not None else None
        self.subdir = subdir
        self.checks = checks
        """Only these checks' crops are written (None: every check's)."""
        self.written: list[str] = []
        """Relative paths written so far."""

    def save(self, check: str, camera: str, frame: int, image: np.ndarray, *, sim: np.ndarray | None = None,
             found: np.ndarray | None = None, box: tuple[int, int, int, int] | None = None,
             tag: str = "") -> str | None:
        """Save one crop of `image` (uint8 RGB) with the sim's mask and the found mask outlined; returns
        its path relative to the episode folder (None when crops are not written)."""
        if self.folder is None or (self.checks is not None and check not in self.checks):
            return None
        panel = np.ascontiguousarray(image.copy())
        _outline(panel, sim, SIM_COLOUR)
        _outline(panel, found, FOUND_COLOUR)
        x0, y0, x1, y1 = box or (0, 0, image.shape[1], image.shape[0])
        crop = panel[y0:y1, x0:x1]
        scale = max(1, int(np.ceil(MIN_SIDE / max(1, min(crop.shape[:2])))))
        if scale > 1:
            crop = cv2.resize(crop, (crop.shape[1] * scale, crop.shape[0] * scale), interpolation=cv2.INTER_NEAREST)
        name = f"{check}-{camera}-f{frame:05d}{'-' + tag if tag else ''}.png"
        self.folder.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(self.folder / name), cv2.cvtColor(crop, cv2.COLOR_RGB2BGR))
        rel = f"{self.subdir}/{name}"
        self.written.append(rel)
        return rel

    def clear(self) -> None:
        """Remove crops a previous run left (so the folder holds this run's evidence only)."""
        if self.folder is not None and self.folder.is_dir():
            for path in self.folder.glob("*.png"):
                path.unlink()
