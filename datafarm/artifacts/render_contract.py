"""R, the render contract (`render_contract.yaml`): per camera the real reference frames, the
target appearance, the allowed appearance variations, the renderer, and how the video is chunked.

Prompts for video models come only from K's Jinja2 render templates. A task fills template
*variables* (`renderer.template_variables`); any attempt to supply or override a template or prompt
is rejected on validation.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import Field, JsonValue, field_validator, model_validator
from pydantic_core import PydanticCustomError

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.clip import CameraName
from datafarm.artifacts.common import FiniteFloat
from datafarm.artifacts.fields import Name, Rgb, require_unique
from datafarm.artifacts.request import Mode, OodAxis, OodValue, Renderer

_TEMPLATE_KEY = re.compile(r"template|prompt", re.IGNORECASE)
_TEMPLATE_SYNTAX = ("{{", "{%", "{#")


class CameraReference(Artifact):
    """The real frames of one camera that condition its rendering."""

    camera: CameraName
    """Camera name (as in G)."""
    frames: list[Annotated[int, Field(ge=0)]] = Field(min_length=1)
    """Clip frame indices, ascending, no repeats."""

    @model_validator(mode="after")
    def _ascending(self) -> CameraReference:
        if any(a >= b for a, b in zip(self.frames, self.frames[1:])):
            raise ValueError("frames must be ascending without repeats")
        return self


class ObjectLook(Artifact):
    """How one object must look."""

    colour: Rgb
    """Target colour (the real one in sim2real)."""
    material: str = ""
    """Short material words, e.g. `matte plastic`, `glazed ceramic`."""


class TargetAppearance(Artifact):
    """What the rendered video must look like (before any ood variation)."""

    scene: str = Field(min_length=1)
    """One sentence describing the real scene's look (setting, table surface, lighting)."""
    table_colour: Rgb | None = None
    """Target table colour; null on the UE track."""
    objects: dict[Name, ObjectLook] = Field(default_factory=dict)
    """G object id -> its look."""


def _override(where: str) -> PydanticCustomError:
    """The error for an attempt to supply or override a template or prompt at `where`."""
    return PydanticCustomError(
        "template_override",
        "'{where}': a task may not supply or override a render template or prompt",
        {
            "where": where,
            "expected_words": "only values of K's template variables, under renderer.template_variables",
            "hint": "render templates come from the capability layer K and no task may replace them",
        },
    )


def _reject_template_keys(value: Any, path: str = "", recursive: bool = True, allowed: tuple[str, ...] = ()) -> None:
    """Raise `_override` for any key of `value` (and, if `recursive`, below it) naming a template or prompt."""
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and key not in allowed and _TEMPLATE_KEY.search(key):
                raise _override(where)
            if recursive:
                _reject_template_keys(item, where)
    elif isinstance(value, list) and recursive:
        for i, item in enumerate(value):
            _reject_template_keys(item, f"{path}[{i}]")


class RendererSettings(Artifact):
    """Which renderer runs, with which parameters and template variables."""

    name: Renderer
    """Renderer: composite (offline, CPU) or a hosted video model."""
    parameters: dict[str, JsonValue] = Field(default_factory=dict)
    """Renderer-specific settings (e.g. model name, guidance strength); never a template or prompt."""
    template_variables: dict[str, str] = Field(default_factory=dict)
    """Values for the variables of K's render templates, by variable name (plain text, no template syntax)."""

    @model_validator(mode="before")
    @classmethod
    def _no_template_keys(cls, data: Any) -> Any:
        _reject_template_keys(data, recursive=False, allowed=("template_variables",))
        return data

    @field_validator("parameters", mode="before")
    @classmethod
    def _no_template_parameters(cls, parameters: Any) -> Any:
        _reject_template_keys(parameters)
        return parameters

    @field_validator("template_variables", mode="before")
    @classmethod
    def _plain_variables(cls, variables: Any) -> Any:
        _reject_template_keys(variables, recursive=False)
        if isinstance(variables, dict):
            for key, text in variables.items():
                if isinstance(text, str) and any(s in text for s in _TEMPLATE_SYNTAX):
                    raise PydanticCustomError(
                        "template_syntax",
                        "'{key}': a template variable holds plain text, not template syntax",
                        {"key": str(key), "expected_words": "a template variable's plain-text value, without {{ }}, {% %} or {# #}"},
                    )
        return variables


class RenderContract(Artifact):
    """R (`render_contract.yaml`): how episodes become photoreal multi-view video."""

    mode: Mode
    """sim2real (match the real scene) or ood (vary appearance along `variations`)."""
    cameras: list[CameraReference] = Field(min_length=1)
    """Real reference frames per camera; every camera is rendered."""
    appearance: TargetAppearance
    """Target appearance."""
    variations: dict[OodAxis, Annotated[list[OodValue], Field(min_length=1)]] = Field(default_factory=dict)
    """ood only: axis -> values the renderer may apply (within the request's ood_axes)."""
    renderer: RendererSettings
    """The renderer and its settings."""
    chunk_frames: int = Field(ge=2)
    """Frames generated per chunk of the tiled canvas video."""
    overlap_frames: int = Field(ge=1)
    """Frames shared by adjacent chunks (the join is chosen inside the overlap)."""
    fps: FiniteFloat = Field(gt=0)
    """Output frame rate, frames per second."""
    resolution: tuple[Annotated[int, Field(gt=0, multiple_of=2)], Annotated[int, Field(gt=0, multiple_of=2)]]
    """Output (width, height) of each camera's video, pixels (even, for H.264)."""

    @model_validator(mode="before")
    @classmethod
    def _no_template_keys(cls, data: Any) -> Any:
        _reject_template_keys(data, recursive=False)
        return data

    @model_validator(mode="after")
    def _consistent(self) -> RenderContract:
        require_unique([c.camera for c in self.cameras], "cameras")
        if self.overlap_frames >= self.chunk_frames:
            raise ValueError("overlap_frames must be less than chunk_frames")
        if self.mode == "sim2real" and self.variations:
            raise ValueError("a sim2real contract has no variations (they are for mode ood)")
        if self.mode == "ood" and not self.variations:
            raise ValueError("an ood contract names at least one variation axis")
        return self
