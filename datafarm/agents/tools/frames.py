"""Seeing and measuring frames: the calibration clip's views (author, reviewer) and an episode's
rendered videos (reviewer). Every video path goes through the role's path guard, so a view or camera
name such as `../../judge/spec` is refused like any other path."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from pathlib import Path

import numpy as np

from datafarm.agents.access import RoleAccess
from datafarm.agents.images import Box, find_colour, pixel_colour, png_bytes, read_frame, region_stats
from datafarm.agents.messages import ImagePart, TextPart
from datafarm.agents.tools.base import Tool, ToolArgs, ToolError, ToolOutput
from datafarm.artifacts.clip import ClipSpec
from datafarm.artifacts.io import load_artifact
from datafarm.intake.video import VideoUnreadable, probe_video

CLIP_ROOT = "clip"
"""Name of the calibration clip's external root in RoleAccess."""


class ClipViews:
    """The calibration clip's camera views, read through a role's path guard."""

    def __init__(self, access: RoleAccess) -> None:
        self.access = access
        """The reading role's guard (with the clip as external root `clip`)."""

    @cached_property
    def spec(self) -> ClipSpec:
        """The clip's clip.yaml."""
        return load_artifact(ClipSpec, self.access.external_file(CLIP_ROOT, "clip.yaml"))

    def names(self) -> list[str]:
        """Camera names, in clip order."""
        return [c.name for c in self.spec.cameras]

    def video(self, view: str) -> Path:
        """The checked path of a view's video; ToolError for an unknown view."""
        if view not in self.names():
            raise ToolError(f"there is no view {view!r}; the views are: {', '.join(self.names())}")
        return self.access.external_file(CLIP_ROOT, self.spec.camera(view).video)

    def frame(self, view: str, index: int) -> np.ndarray:
        """Frame `index` of `view` as RGB."""
        return read_frame(self.video(view), index)

    def describe(self) -> list[dict[str, object]]:
        """What list_views returns: per view its size, frame count, rate and known calibration."""
        out = []
        for cam in self.spec.cameras:
            try:
                probe = probe_video(self.video(cam.name))
                size: dict[str, object] = {"width": probe.width, "height": probe.height, "frames": probe.frames}
            except VideoUnreadable as e:
                size = {"error": str(e)}
            out.append(
                {
                    "view": cam.name,
                    **size,
                    "fps": self.spec.fps,
                    "intrinsics": cam.intrinsics.model_dump(mode="json") if cam.intrinsics else None,
                    "world_from_camera": cam.extrinsics.model_dump(mode="json") if cam.extrinsics else None,
                }
            )
        return out


FrameSource = Callable[[str, int], np.ndarray]
"""`source(view_or_camera, frame_index) -> RGB frame`."""


class FrameArgs(ToolArgs):
    """Which frame."""

    view: str
    """View (camera) name."""
    frame: int
    """0-based frame index."""


class MeasureArgs(FrameArgs):
    """Which frame to measure."""

    source: str | None = None
    """Which frames: for roles with more than one kind (the reviewer: `rendered` or `reference`); default the first kind."""


class PixelArgs(MeasureArgs):
    """A pixel of a frame."""

    x: int
    """Column, 0 at the left."""
    y: int
    """Row, 0 at the top."""


class RegionArgs(MeasureArgs):
    """A rectangle of a frame, x0 <= x < x1, y0 <= y < y1."""

    x0: int
    """Left column (inclusive)."""
    y0: int
    """Top row (inclusive)."""
    x1: int
    """Right column (exclusive)."""
    y1: int
    """Bottom row (exclusive)."""


class ColourArgs(MeasureArgs):
    """A colour to look for in a frame."""

    rgb: tuple[float, float, float]
    """Target colour, each channel in 0..1."""
    tolerance: float = 0.15
    """Largest Euclidean RGB distance (0..1 channels) counted as a match."""


def image_output(rgb: np.ndarray, label: str) -> ToolOutput:
    """A frame as a tool result: a line of text and the PNG."""
    h, w = rgb.shape[:2]
    return ToolOutput([TextPart(f"{label} ({w}x{h} pixels)"), ImagePart(png_bytes(rgb), "image/png", label)])


def frame_tools(sources: dict[str, tuple[FrameSource, str, str]]) -> list[Tool]:
    """Fetch tools and three measurement tools (pixel colour, region statistics, colour search).

    `sources` maps a kind of frame (`clip`, `rendered`, `reference`) to (source, fetch tool name,
    fetch tool description); the measurement tools take the kind as `source` (default the first).
    """
    kinds = list(sources)

    def pick(args: MeasureArgs) -> np.ndarray:
        kind = args.source or kinds[0]
        if kind not in sources:
            raise ToolError(f"source must be one of: {', '.join(kinds)}")
        return sources[kind][0](args.view, args.frame)

    def fetcher(kind: str, source: FrameSource):
        def fetch(args: FrameArgs, _ctx) -> ToolOutput:
            return image_output(source(args.view, args.frame), f"{kind} {args.view} frame {args.frame}")

        return fetch

    def pixel(args: PixelArgs, _ctx) -> dict:
        return pixel_colour(pick(args), args.x, args.y)

    def region(args: RegionArgs, _ctx) -> dict:
        return region_stats(pick(args), Box(args.x0, args.y0, args.x1, args.y1))

    def colour(args: ColourArgs, _ctx) -> dict:
        return find_colour(pick(args), args.rgb, args.tolerance)

    of = f" (source: {' or '.join(kinds)}; default {kinds[0]})" if len(kinds) > 1 else ""
    tools = [Tool(name, description, FrameArgs, fetcher(kind, source)) for kind, (source, name, description) in sources.items()]
    return tools + [
        Tool("pixel_colour", f"Measure the colour of one pixel of a frame{of}: RGB 0-255 and 0-1.", PixelArgs, pixel),
        Tool(
            "region_stats",
            f"Measure a rectangle of a frame{of}: mean, standard deviation, min and max RGB (0-1) and pixel count.",
            RegionArgs,
            region,
        ),
        Tool(
            "find_colour",
            f"Find the pixels of a frame{of} close to a colour: count, bounding box [x0, y0, x1, y1] and centroid. "
            "Use it to locate an object of known colour and measure its size in the image.",
            ColourArgs,
            colour,
        ),
    ]
