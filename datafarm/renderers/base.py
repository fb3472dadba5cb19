"""The interface every renderer implements, and what the pipeline hands it.

A renderer is prepared once per episode with a `RenderJob` (the contract, the scene, the clip, the
canvas layout, the prompt) and then generates the canvas video chunk by chunk: `render_chunk` takes
the chunk's span and an iterator over its frames' control signals (all cameras, in frame order) and
yields exactly `chunk.frames` canvas images (uint8, layout.height x layout.width x 3). It may consume
the control frames lazily (composite: one in, one out) or all first (hosted models: the whole
control video goes up with the job).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ValidationError

from datafarm.artifacts.grounding import GroundedCamera, Grounding
from datafarm.artifacts.render_contract import RenderContract
from datafarm.artifacts.sampler import Variation
from datafarm.errors import InputError, Problem
from datafarm.renderers.chunks import ChunkSpan
from datafarm.renderers.control import ControlFrame
from datafarm.renderers.layout import CanvasLayout
from datafarm.renderers.prompts import RenderedPrompt
from datafarm.renderers.record import RendererReport
from datafarm.renderers.scene import ClipFrames, SegmentClasses
from datafarm.sim.recording import Recording


@dataclass(frozen=True)
class FrameInput:
    """One frame's control signals for every camera."""

    step: int
    """Episode frame = control step."""
    controls: dict[str, ControlFrame]
    """Camera name -> its control signals."""


@dataclass
class RenderJob:
    """Everything a renderer needs to render one episode."""

    episode_id: str
    """Episode id."""
    contract: RenderContract
    """R."""
    grounding: Grounding
    """G with the episode's drawn physics values (what the sim built)."""
    variation: Variation
    """z."""
    recording: Recording
    """The episode's recorded arrays (row i = control step i)."""
    layout: CanvasLayout
    """Canvas layout (camera order = tile order)."""
    cameras: dict[str, GroundedCamera]
    """Cameras at the render resolution, at the episode's poses (z may jitter them)."""
    clip_cameras: dict[str, GroundedCamera]
    """The same cameras at the clip's poses (where the real frames were taken)."""
    clip: ClipFrames
    """The calibration clip's frames at the render resolution."""
    nominal: dict[str, ControlFrame]
    """Sim render of G's scene as the clip shows it (G's object poses, the robot's start pose), through the clip cameras."""
    segments: SegmentClasses
    """Segmentation id -> background / robot / object class."""
    world_from_table_top: np.ndarray
    """4 x 4 pose of the episode's table top (with z's height and tilt)."""
    clip_world_from_table_top: np.ndarray
    """4 x 4 pose of the table top as G has it (as the clip shows it)."""
    prompt: RenderedPrompt
    """The prompt from K's render template."""
    variations: dict[str, Any]
    """ood axis -> value applied in this episode (empty in sim2real)."""
    fps: float
    """Output frame rate."""
    seed: int
    """Render seed."""
    work_dir: Path
    """A scratch folder for this render (removed afterwards)."""


class Renderer(ABC):
    """A renderer: prepared per episode, then asked for the canvas video one chunk at a time."""

    name: ClassVar[str]
    """Registry name (as R's `renderer.name`)."""
    parameters_model: ClassVar[type[BaseModel] | None] = None
    """The pydantic model R's `renderer.parameters` must validate against (None: no parameters)."""

    def __init__(self, parameters: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> None:
        self.parameters = self.parse_parameters(parameters or {})
        self.env = dict(env) if env is not None else None

    @classmethod
    def parse_parameters(cls, parameters: Mapping[str, Any]) -> Any:
        """R's parameters validated against `parameters_model` (InputError naming each bad one)."""
        if cls.parameters_model is None:
            if parameters:
                raise InputError([Problem(f"renderer {cls.name} takes no parameters", field="renderer.parameters")])
            return None
        try:
            return cls.parameters_model.model_validate(dict(parameters))
        except ValidationError as err:
            fields = ", ".join(f for f in cls.parameters_model.model_fields)
            raise InputError([Problem(e["msg"], field="renderer.parameters." + ".".join(str(p) for p in e["loc"]),
                                      expected=f"parameters of renderer {cls.name}: {fields}")
                              for e in err.errors()]) from None

    @abstractmethod
    def prepare(self, job: RenderJob) -> None:
        """Get ready to render `job` (read the clip, fit appearance, check keys...)."""

    @abstractmethod
    def render_chunk(self, chunk: ChunkSpan, frames: Iterator[FrameInput]) -> Iterator[np.ndarray]:
        """Yield exactly `chunk.frames` canvas images for the chunk's frames."""

    def report(self) -> RendererReport:
        """Cost, hosted jobs, notes and measurements of the episode rendered so far."""
        return RendererReport()
