"""Types shared by several artifacts: poses, camera intrinsics, provenance-tagged quantities.

Conventions (used everywhere in datafarm):
- Lengths in metres, angles in radians, masses in kilograms, time in seconds.
- World frame: right-handed, z up, origin on the table top (before any sampled tilt or height change).
- Quaternions are (w, x, y, z), normalized on validation.
- Camera frames follow OpenCV: x right, y down, z forward (optical axis). A camera's extrinsics are
  the pose of the camera frame in the world (`world_from_camera`).
"""

from __future__ import annotations

import math
from enum import Enum
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from datafarm.artifacts.base import Artifact

FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
Vec3 = tuple[FiniteFloat, FiniteFloat, FiniteFloat]
Quat = tuple[FiniteFloat, FiniteFloat, FiniteFloat, FiniteFloat]


class Pose(Artifact):
    """A rigid transform: position plus orientation, of a child frame expressed in a parent frame."""

    position: Vec3 = (0.0, 0.0, 0.0)
    """Translation (x, y, z) in metres."""
    quaternion: Quat = (1.0, 0.0, 0.0, 0.0)
    """Rotation as a unit quaternion (w, x, y, z); normalized on load, must not be all zeros."""

    @field_validator("quaternion")
    @classmethod
    def _normalize(cls, q: Quat) -> Quat:
        n = math.sqrt(sum(c * c for c in q))
        if n < 1e-9:
            raise ValueError("quaternion must be non-zero (identity is [1, 0, 0, 0])")
        return tuple(c / n for c in q)  # type: ignore[return-value]


class Intrinsics(Artifact):
    """Pinhole camera intrinsics in pixels (OpenCV convention), with the image size they refer to."""

    width: int = Field(gt=0)
    """Image width in pixels."""
    height: int = Field(gt=0)
    """Image height in pixels."""
    fx: FiniteFloat = Field(gt=0)
    """Focal length along x, pixels."""
    fy: FiniteFloat = Field(gt=0)
    """Focal length along y, pixels."""
    cx: FiniteFloat
    """Principal point x, pixels."""
    cy: FiniteFloat
    """Principal point y, pixels."""
    distortion: list[FiniteFloat] = Field(default_factory=list)
    """OpenCV distortion coefficients (k1, k2, p1, p2[, k3...]); empty means none."""


class Provenance(str, Enum):
    """Where a grounding quantity came from."""

    measured = "measured"
    """Given by the lab (clip.yaml) or measured directly from the clip with a known scale."""
    fitted = "fitted"
    """Estimated from the clip by a fit (e.g. camera pose from a ChArUco board)."""
    assumed = "assumed"
    """Not observable from the clip; a prior (e.g. mass from the object category)."""
    unknown = "unknown"
    """No information at all; must be randomized over a wide range."""


def _article(tag: Provenance) -> str:
    """`an assumed`, `a fitted`: the tag with its indefinite article, for error messages."""
    return ("an " if tag.value[0] in "aeiou" else "a ") + tag.value


class TaggedFloat(Artifact):
    """A scalar grounding quantity with its provenance and, unless measured, a randomization range."""

    value: FiniteFloat
    """The nominal value (SI units of the field it fills)."""
    tag: Provenance
    """How the value was obtained."""
    range: tuple[FiniteFloat, FiniteFloat] | None = None
    """Closed interval [low, high] the sampler draws from; required unless tag is `measured`."""

    @model_validator(mode="after")
    def _range_rules(self) -> "TaggedFloat":
        if self.tag is not Provenance.measured and self.range is None:
            raise ValueError(f"{_article(self.tag)} quantity needs a randomization range [low, high]")
        if self.range is not None:
            lo, hi = self.range
            if lo > hi:
                raise ValueError(f"range low {lo} is above high {hi}")
            if not lo <= self.value <= hi:
                raise ValueError(f"value {self.value} lies outside its range [{lo}, {hi}]")
        return self


class TaggedVec3(Artifact):
    """A 3-vector grounding quantity with provenance and, unless measured, a per-axis range."""

    value: Vec3
    """The nominal vector (SI units of the field it fills)."""
    tag: Provenance
    """How the value was obtained."""
    range: tuple[Vec3, Vec3] | None = None
    """Per-axis [low, high] bounds for sampling; required unless tag is `measured`."""

    @model_validator(mode="after")
    def _range_rules(self) -> "TaggedVec3":
        if self.tag is not Provenance.measured and self.range is None:
            raise ValueError(f"{_article(self.tag)} quantity needs a randomization range [[low xyz], [high xyz]]")
        if self.range is not None:
            lo, hi = self.range
            for i, (a, v, b) in enumerate(zip(lo, self.value, hi)):
                if not a <= v <= b:
                    raise ValueError(f"axis {i}: value {v} lies outside its range [{a}, {b}]")
        return self
