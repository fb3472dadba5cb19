"""All cameras tiled on one canvas, so a video model generates every view in one video (lighting and
materials then agree across views), and the canvas split back into one image per camera.

The layout is a grid of equal tiles (every camera is rendered at R's resolution) in camera order,
row by row; the grid shape is the one whose canvas is closest to 16:9 (what video models generate
best), and unused cells are a flat grey. The layout is recorded with every render.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from pydantic import Field, model_validator

from datafarm.artifacts.base import Artifact

TARGET_ASPECT = 16 / 9
"""Canvas aspect ratio the grid shape aims for."""
EMPTY_GREY = 96
"""Value (all channels) of canvas cells that hold no camera."""


class Tile(Artifact):
    """Where one camera's image sits on the canvas."""

    camera: str
    """Camera name."""
    x: int = Field(ge=0)
    """Left edge, pixels."""
    y: int = Field(ge=0)
    """Top edge, pixels."""
    width: int = Field(gt=0)
    """Tile width, pixels (the camera video's width)."""
    height: int = Field(gt=0)
    """Tile height, pixels (the camera video's height)."""


class CanvasLayout(Artifact):
    """The canvas all cameras are tiled on."""

    width: int = Field(gt=0)
    """Canvas width, pixels."""
    height: int = Field(gt=0)
    """Canvas height, pixels."""
    columns: int = Field(gt=0)
    """Grid columns."""
    rows: int = Field(gt=0)
    """Grid rows."""
    tiles: list[Tile] = Field(min_length=1)
    """One tile per camera, in camera order (row by row)."""

    @model_validator(mode="after")
    def _inside(self) -> CanvasLayout:
        for t in self.tiles:
            if t.x + t.width > self.width or t.y + t.height > self.height:
                raise ValueError(f"tile {t.camera} reaches outside the {self.width}x{self.height} canvas")
        return self

    @property
    def cameras(self) -> list[str]:
        """Camera names in tile order."""
        return [t.camera for t in self.tiles]

    def tile(self, camera: str) -> Tile:
        """The tile of `camera` (KeyError if none)."""
        for t in self.tiles:
            if t.camera == camera:
                return t
        raise KeyError(camera)

    def describe(self) -> str:
        """The grid in words for prompts, e.g. `2 x 2 grid: top row front, left; bottom row right`."""
        names = ["top", "bottom"] if self.rows == 2 else [f"row {r + 1}" for r in range(self.rows)]
        if self.rows == 1:
            return "one row, left to right: " + ", ".join(self.cameras)
        parts = []
        for r in range(self.rows):
            row = [t.camera for t in self.tiles if t.y == r * self.tiles[0].height]
            parts.append(f"{names[r]} row {', '.join(row) if row else '(empty)'}")
        return f"{self.columns} x {self.rows} grid: " + "; ".join(parts)

    def compose(self, images: Mapping[str, np.ndarray]) -> np.ndarray:
        """One canvas (H x W x C, the images' dtype) from every camera's image."""
        first = next(iter(images.values()))
        canvas = np.full((self.height, self.width, *first.shape[2:]), EMPTY_GREY, dtype=first.dtype)
        for t in self.tiles:
            image = images[t.camera]
            if image.shape[:2] != (t.height, t.width):
                raise ValueError(f"camera {t.camera}: image is {image.shape[1]}x{image.shape[0]}, "
                                 f"its tile {t.width}x{t.height}")
            canvas[t.y:t.y + t.height, t.x:t.x + t.width] = image
        return canvas

    def split(self, canvas: np.ndarray) -> dict[str, np.ndarray]:
        """Each camera's image cut from a canvas (views, not copies)."""
        if canvas.shape[:2] != (self.height, self.width):
            raise ValueError(f"canvas is {canvas.shape[1]}x{canvas.shape[0]}, the layout {self.width}x{self.height}")
        return {t.camera: canvas[t.y:t.y + t.height, t.x:t.x + t.width] for t in self.tiles}


def make_layout(cameras: Sequence[str], width: int, height: int) -> CanvasLayout:
    """The grid of `cameras` (each `width` x `height`) whose canvas is closest to 16:9."""
    if not cameras:
        raise ValueError("need at least one camera")
    n = len(cameras)
    best = min(range(1, n + 1), key=lambda c: (abs(math.log(c * width / (math.ceil(n / c) * height) / TARGET_ASPECT)), c))
    columns, rows = best, math.ceil(n / best)
    tiles = [Tile(camera=name, x=(i % columns) * width, y=(i // columns) * height, width=width, height=height)
             for i, name in enumerate(cameras)]
    return CanvasLayout(width=columns * width, height=rows * height, columns=columns, rows=rows, tiles=tiles)
