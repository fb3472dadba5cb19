"""S, the scene and initial-state sampler (`sampler.yaml`), and z, the `Variation` it draws for one
episode from one seed.

Ranges are offsets from G's nominal values, drawn uniformly. The default varies the table a little
(height and tilt) and jitters the cameras slightly; objects stay put unless listed.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.clip import CameraName
from datafarm.artifacts.common import FiniteFloat, Pose
from datafarm.artifacts.fields import Name, require_unique
from datafarm.artifacts.request import OodAxis, OodValue


def _ordered(interval: tuple[float, float]) -> tuple[float, float]:
    if interval[0] > interval[1]:
        raise ValueError(f"interval low {interval[0]} is above high {interval[1]}")
    return interval


Interval = Annotated[tuple[FiniteFloat, FiniteFloat], AfterValidator(_ordered)]
"""A closed interval [low, high] drawn from uniformly."""

_DEG = 0.017453292519943295


class ObjectPlacement(Artifact):
    """How one object's initial pose varies: offsets from its G pose."""

    object: Name
    """G object id."""
    x: Interval = (0.0, 0.0)
    """Offset along world x, metres."""
    y: Interval = (0.0, 0.0)
    """Offset along world y, metres."""
    yaw: Interval = (0.0, 0.0)
    """Rotation about world z, radians."""


class CameraJitter(Artifact):
    """Small per-episode perturbation of every camera's pose (each axis uniform in [-max, max])."""

    translation: FiniteFloat = Field(default=0.005, ge=0)
    """Largest offset per axis, metres."""
    rotation: FiniteFloat = Field(default=0.5 * _DEG, ge=0)
    """Largest rotation per axis, radians."""


class SamplerSpec(Artifact):
    """S (`sampler.yaml`): what varies between episodes, and by how much."""

    objects: list[ObjectPlacement] = Field(default_factory=list)
    """Per-object pose variation; unlisted objects keep their G pose."""
    min_clearance: FiniteFloat = Field(default=0.01, ge=0)
    """Least gap between object footprints after drawing, metres (draws that violate it are redrawn)."""
    table_height: Interval = (-0.01, 0.01)
    """Offset of the table top's height, metres (the robot stays put)."""
    table_tilt: Interval = (-0.5 * _DEG, 0.5 * _DEG)
    """Tilt of the table top about world x and about world y (each drawn), radians."""
    camera_jitter: CameraJitter = Field(default_factory=CameraJitter)
    """Camera pose jitter."""
    physics: list[str] = Field(default_factory=list)
    """G quantities drawn from their G range each episode, by path (see `Grounding.tagged_quantities`), e.g. `objects.red_cup.mass`; others keep their nominal value."""
    appearance: dict[OodAxis, Annotated[list[OodValue], Field(min_length=1)]] = Field(default_factory=dict)
    """ood only: appearance axis -> values drawn from (a subset of the request's axes and of R's variations)."""

    @model_validator(mode="after")
    def _unique(self) -> SamplerSpec:
        require_unique([p.object for p in self.objects], "objects")
        require_unique(self.physics, "physics paths")
        return self


class Variation(Artifact):
    """z: what the sampler drew for one episode; with G it fixes the episode's initial scene."""

    seed: int = Field(ge=0)
    """The seed it was drawn from."""
    object_poses: dict[Name, Pose]
    """world_from_object of every object at episode start."""
    table_height_offset: FiniteFloat = 0.0
    """Drawn table-height offset, metres."""
    table_tilt: tuple[FiniteFloat, FiniteFloat] = (0.0, 0.0)
    """Drawn tilt about world x and world y, radians."""
    camera_poses: dict[CameraName, Pose] = Field(default_factory=dict)
    """Jittered world_from_camera per camera."""
    physics: dict[str, FiniteFloat] = Field(default_factory=dict)
    """Drawn values of the G quantities S.physics lists, by path (apply with `Grounding.with_values`)."""
    appearance: dict[OodAxis, OodValue] = Field(default_factory=dict)
    """Drawn value per appearance axis (ood only)."""
