"""`SCENE.yaml`: what the studio renders. A table with a PiPER rig, objects, cameras, an optional
ChArUco board, lighting, the clip's length and frame rate, sensor noise and a seed.

This is the studio's *input*, not a grounding: the pipeline never reads it. The studio turns it into
a calibration clip (what the lab would record) and a separate `truth.json` (datafarm.studio.truth).

Frames and units follow datafarm.artifacts.common: metres, radians, kilograms; world z up with its
origin at the centre of the table top; camera poses are given by a position and a point looked at.

Objects are written like G's objects (datafarm.artifacts.grounding) with plain numbers instead of
tagged quantities: `id`, `kind`, `colour`, `position`, `yaw`, `mass`, `friction`, plus the kind's
own dimensions under G's names (box: `size: {x, y, z}`; cylinder: `radius`, `height`; sphere:
`radius`; cup: `outer_radius`, `height`, `wall_thickness`; drum: `head_radius`, `height`; scale:
`plate: {x, y, z}`, `body_height`, `capacity`, `display`; drawer_cabinet: `size`, `wall_thickness`,
`drawer_height`, `drawer_bottom`, `drawer_travel`, `handle_length`, `handle_protrusion`,
`initial_opening`). Missing dimensions that have a sensible default get it (`KIND_DEFAULTS`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.common import FiniteFloat, Vec3
from datafarm.artifacts.fields import Name, Rgb, require_unique
from datafarm.artifacts.grounding import GroundedObject
from datafarm.intake.load import load_model

COLOURS: dict[str, tuple[float, float, float]] = {
    "red": (0.78, 0.12, 0.12),
    "blue": (0.12, 0.32, 0.75),
    "green": (0.15, 0.58, 0.22),
    "yellow": (0.92, 0.78, 0.15),
    "orange": (0.93, 0.45, 0.10),
    "purple": (0.45, 0.20, 0.62),
    "pink": (0.92, 0.50, 0.65),
    "white": (0.90, 0.90, 0.88),
    "black": (0.08, 0.08, 0.09),
    "grey": (0.50, 0.50, 0.52),
    "silver": (0.75, 0.76, 0.78),
    "brown": (0.45, 0.28, 0.14),
    "wood": (0.62, 0.44, 0.26),
    "cream": (0.93, 0.88, 0.76),
}
"""Colour names a scene may use instead of [r, g, b] (sRGB, 0-1)."""

OBJECT_KINDS = ("box", "cylinder", "sphere", "cup", "drum", "scale", "drawer_cabinet")
"""Object kinds the studio can place (G's rigid and articulated kinds)."""

KIND_DEFAULTS: dict[str, dict[str, Any]] = {
    "cup": {"wall_thickness": 0.003},
    "scale": {"capacity": 5.0},
    "drawer_cabinet": {"wall_thickness": 0.012, "handle_length": 0.10, "handle_protrusion": 0.025,
                       "initial_opening": 0.0},
}
"""Dimensions filled in when a scene object of that kind leaves them out."""

TEXTURES = ("wood", "linen", "check", "plain")
"""Table-top surfaces: procedural wood grain, woven linen, a checked tablecloth, or a plain colour."""

_COMMON_OBJECT_KEYS = {"id", "kind", "colour", "position", "yaw", "mass", "friction", "nouns"}


def parse_colour(value: Any) -> Any:
    """A colour name from `COLOURS` as its [r, g, b]; anything else unchanged (validated as Rgb)."""
    if isinstance(value, str):
        key = value.strip().lower()
        if key not in COLOURS:
            raise ValueError(f"unknown colour name {value!r}; use [r, g, b] in 0-1 or one of {', '.join(COLOURS)}")
        return COLOURS[key]
    return value


Colour = Annotated[Rgb, BeforeValidator(parse_colour)]
"""An sRGB colour: [r, g, b] in 0-1, or a name from COLOURS."""


class RobotSetup(Artifact):
    """The PiPER rig: one arm or two side by side, standing on the table top facing +x (when yaw is 0)."""

    kind: Literal["piper", "piper-dual"] = "piper-dual"
    """`piper` (one arm, called `arm`) or `piper-dual` (arms `left` and `right`)."""
    base: tuple[FiniteFloat, FiniteFloat] = (-0.38, 0.0)
    """World (x, y) of the base, metres; for `piper-dual` the midpoint between the two bases."""
    yaw: FiniteFloat = 0.0
    """Rotation of the base(s) about world z, radians (0: the arms face +x)."""
    spacing: FiniteFloat = Field(0.5, gt=0.2, le=1.2)
    """`piper-dual` only: distance between the two bases, metres (the left arm at +spacing/2 along the rig's y)."""
    height: FiniteFloat = 0.0
    """Height of the base mounting plane above the table top, metres (0: bolted to the table)."""


class TableSetup(Artifact):
    """The table: a slab whose top is the world's z = 0 plane."""

    size_x: FiniteFloat = Field(0.9, gt=0.2)
    """Extent along world x, metres."""
    size_y: FiniteFloat = Field(1.2, gt=0.2)
    """Extent along world y, metres."""
    height: FiniteFloat = Field(0.75, gt=0.2)
    """Height of the top above the floor, metres."""
    center: tuple[FiniteFloat, FiniteFloat] = (0.0, 0.0)
    """World (x, y) of the top's centre, metres."""
    colour: Colour = (0.62, 0.44, 0.26)
    """Mean colour of the surface (a name from COLOURS or [r, g, b] in 0-1)."""
    texture: Literal["wood", "linen", "check", "plain"] = "wood"
    """Surface pattern: `wood` grain, woven `linen`, a `check` tablecloth (colour and white), or `plain`."""


class SceneObject(Artifact):
    """One object on the table: G's fields for its kind, with plain numbers (see the module docstring)."""

    model_config = ConfigDict(extra="allow")

    id: Name
    """Unique object id (snake_case), e.g. `red_cup`."""
    kind: Literal["box", "cylinder", "sphere", "cup", "drum", "scale", "drawer_cabinet"]
    """G object kind; its dimensions follow as extra keys named as in G (e.g. `outer_radius`, `height`)."""
    colour: Colour
    """Surface colour: a name from COLOURS or [r, g, b] in 0-1."""
    position: tuple[FiniteFloat, FiniteFloat] | Vec3
    """Where the object rests: (x, y) on the table top, or (x, y, z) with z above it, metres (the object frame's origin: the centre of its footprint)."""
    yaw: FiniteFloat = 0.0
    """Rotation about world z, radians (a drawer cabinet's front faces its +x; yaw pi turns it towards -x)."""
    mass: FiniteFloat = Field(0.1, gt=0)
    """Mass, kg (a drawer cabinet's whole mass)."""
    friction: FiniteFloat = Field(0.6, ge=0)
    """Coulomb friction coefficient of its surfaces."""
    nouns: list[str] = Field(default_factory=list)
    """Words a task would use for it (default: the id with spaces, e.g. `red cup`); kept in the truth."""

    @model_validator(mode="before")
    @classmethod
    def _fill_defaults(cls, data: Any) -> Any:
        if isinstance(data, dict):
            defaults = KIND_DEFAULTS.get(str(data.get("kind")), {})
            data = {**defaults, **data}
            if data.get("kind") == "scale" and "display" not in data and isinstance(data.get("plate"), dict):
                data["display"] = default_scale_display(data)
        return data

    @model_validator(mode="after")
    def _dimensions_fit_the_kind(self) -> SceneObject:
        try:
            self.grounded()
        except ValidationError as err:
            details = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'][1:]) or 'object'}: {e['msg']}" for e in err.errors()
            )
            raise ValueError(f"{self.kind} {self.id!r} does not fit G's {self.kind}: {details}") from None
        return self

    @property
    def dimensions(self) -> dict[str, Any]:
        """The kind's own dimensions as written (the extra keys)."""
        return {k: v for k, v in (self.model_extra or {}).items() if k not in _COMMON_OBJECT_KEYS}

    @property
    def xyz(self) -> tuple[float, float, float]:
        """Position with z (0 when resting on the table)."""
        return (self.position[0], self.position[1], self.position[2] if len(self.position) == 3 else 0.0)

    def grounded(self) -> Any:
        """This object as an exact G object: every quantity `measured`, pose from position and yaw."""
        half = self.yaw / 2.0
        data = {
            "id": self.id, "kind": self.kind, "nouns": self.nouns or [self.id.replace("_", " ")],
            "pose": {"position": list(self.xyz), "quaternion": [math.cos(half), 0.0, 0.0, math.sin(half)]},
            "pose_tag": "measured", "colour": list(self.colour),
            "mass": _measured(self.mass), "friction": _measured(self.friction),
            **{k: _measured_tree(v) for k, v in self.dimensions.items()},
        }
        return TypeAdapter(GroundedObject).validate_python(data)


def _measured(value: Any) -> Any:
    return {"value": float(value), "tag": "measured"} if isinstance(value, (int, float)) else value


def _measured_tree(value: Any) -> Any:
    """Numbers (also inside a box-size mapping) as measured TaggedFloats; a display passes unchanged."""
    if isinstance(value, dict) and set(value) <= {"x", "y", "z"}:
        return {k: _measured(v) for k, v in value.items()}
    return _measured(value)


def default_scale_display(data: dict[str, Any]) -> dict[str, Any]:
    """A readout on the scale housing's +x face, facing +x, its x axis along +y and y up (so text
    drawn with image rows going down the display's -y reads upright from the front)."""
    plate = data["plate"]
    body = float(data.get("body_height", 0.025))
    width = min(0.06, 0.6 * float(plate.get("y", 0.15)))
    return {"pose": {"position": [float(plate.get("x", 0.15)) / 2 + 0.001, 0.0, body / 2],
                     "quaternion": [0.5, 0.5, 0.5, 0.5]},
            "width": width, "height": min(0.02, 0.7 * body), "unit": "g", "decimals": 0}


class SceneCamera(Artifact):
    """A pinhole camera aimed at a point; its image is `width` x `height` pixels (both even, for H.264)."""

    name: Name
    """Camera name (also its video's file name, `<name>.mp4`)."""
    width: int = Field(320, ge=16, le=1920)
    """Image width, pixels (even)."""
    height: int = Field(240, ge=16, le=1080)
    """Image height, pixels (even)."""
    fx: FiniteFloat = Field(260.0, gt=0)
    """Focal length along x, pixels."""
    fy: FiniteFloat | None = None
    """Focal length along y, pixels (default: fx)."""
    cx: FiniteFloat | None = None
    """Principal point x, pixels (default: width / 2)."""
    cy: FiniteFloat | None = None
    """Principal point y, pixels (default: height / 2)."""
    position: Vec3
    """Camera centre in the world, metres."""
    look_at: Vec3 = (0.0, 0.0, 0.0)
    """World point on the optical axis; the image is not rolled (its x axis stays level)."""
    roll: FiniteFloat = 0.0
    """Rotation about the optical axis after aiming, radians (positive turns the camera's x axis towards its y axis, image right towards image down)."""

    @field_validator("width", "height")
    @classmethod
    def _even(cls, value: int) -> int:
        if value % 2:
            raise ValueError(f"{value} is odd; H.264 (yuv420p) needs even image sizes")
        return value

    @model_validator(mode="after")
    def _not_at_target(self) -> SceneCamera:
        gap = math.dist(self.position, self.look_at)
        horizontal = math.hypot(self.look_at[0] - self.position[0], self.look_at[1] - self.position[1])
        if gap < 0.05 or horizontal < 1e-3:
            raise ValueError("look_at must be at least 5 cm away and not straight below or above the camera")
        return self


class BoardSetup(Artifact):
    """A printed ChArUco board lying flat on the table (a chessboard with ArUco markers in its white squares).

    The default (5 x 4 squares of 6 cm, 4x4 markers) is read reliably by 640 x 480 cameras about a
    metre away; at 320 x 240 its markers are too small to decode."""

    squares: tuple[int, int] = (5, 4)
    """Squares along the board's x (its columns) and y (its rows)."""
    square_length: FiniteFloat = Field(0.06, gt=0.005)
    """Side of one chessboard square, metres."""
    marker_length: FiniteFloat = Field(0.045, gt=0.003)
    """Side of one ArUco marker, metres (smaller than a square)."""
    dictionary: str = "DICT_4X4_50"
    """OpenCV ArUco dictionary name (cv2.aruco.DICT_...)."""
    center: tuple[FiniteFloat, FiniteFloat] = (0.25, 0.0)
    """World (x, y) of the board's centre on the table top, metres."""
    yaw: FiniteFloat = 0.0
    """Rotation about world z, radians; at 0 the board's columns run along world +y and its rows along +x, so a camera at +x reads it upright."""
    margin: FiniteFloat = Field(0.01, ge=0.0)
    """White paper around the squares, metres."""

    @model_validator(mode="after")
    def _marker_fits(self) -> BoardSetup:
        if self.marker_length >= self.square_length:
            raise ValueError("marker_length must be smaller than square_length")
        if min(self.squares) < 2:
            raise ValueError("a ChArUco board needs at least 2 x 2 squares")
        import cv2.aruco

        if not hasattr(cv2.aruco, self.dictionary):
            raise ValueError(f"unknown ArUco dictionary {self.dictionary!r} (e.g. DICT_4X4_50, DICT_5X5_100)")
        return self


class Lighting(Artifact):
    """Room lighting: ambient light plus a key light (a directional light, optionally casting shadows)."""

    ambient: FiniteFloat = Field(0.35, ge=0.0, le=2.0)
    """Ambient light intensity (grey)."""
    key_direction: Vec3 = (0.4, 0.3, -1.0)
    """Direction the key light shines in (world)."""
    key_intensity: FiniteFloat = Field(0.9, ge=0.0, le=5.0)
    """Key light intensity."""
    key_colour: Colour = (1.0, 0.96, 0.9)
    """Key light colour (slightly warm by default)."""
    fill_intensity: FiniteFloat = Field(0.25, ge=0.0, le=5.0)
    """Intensity of a shadowless fill light from the opposite side."""
    shadows: bool = True
    """Whether the key light casts shadows."""
    drift: FiniteFloat = Field(0.06, ge=0.0, le=0.5)
    """Relative amplitude of the slow change of the lights' intensity over the clip (as clouds or a dimmer)."""


class Room(Artifact):
    """The room around the table: a floor and walls (procedurally textured)."""

    wall_colour: Colour = (0.82, 0.80, 0.75)
    """Mean colour of the walls."""
    floor_colour: Colour = (0.42, 0.40, 0.38)
    """Mean colour of the floor."""
    wall_distance: FiniteFloat = Field(1.6, gt=0.5)
    """Distance from the table centre to each wall, metres."""


class KnownCalibration(Artifact):
    """What the lab knows and writes into clip.yaml; the rest the grounding must fit."""

    intrinsics: bool = True
    """clip.yaml gives every camera's intrinsics."""
    extrinsics: bool = True
    """clip.yaml gives every camera's pose (else the grounding fits it from the ChArUco board)."""
    robot_base: bool = True
    """clip.yaml gives the arm base poses."""


class SceneSpec(Artifact):
    """SCENE.yaml: everything the studio needs to render a synthetic calibration clip and its truth."""

    name: Name = "scene"
    """Short name of the scene (snake_case)."""
    notes: str = ""
    """Free text for people; copied into clip.yaml's notes."""
    robot: RobotSetup = Field(default_factory=RobotSetup)
    """The PiPER rig (at rest: every joint at 0, grippers open)."""
    table: TableSetup = Field(default_factory=TableSetup)
    """The table."""
    objects: list[SceneObject] = Field(default_factory=list)
    """Objects on the table."""
    cameras: list[SceneCamera] = Field(min_length=1)
    """The cameras, each recording one video."""
    board: BoardSetup | None = None
    """A ChArUco board on the table (needed when the extrinsics are not known)."""
    lighting: Lighting = Field(default_factory=Lighting)
    """Lights."""
    room: Room = Field(default_factory=Room)
    """Floor and walls."""
    known: KnownCalibration = Field(default_factory=KnownCalibration)
    """What clip.yaml tells the pipeline."""
    seconds: FiniteFloat = Field(2.0, gt=0, le=30)
    """Clip length, seconds."""
    fps: FiniteFloat = Field(15.0, gt=0, le=60)
    """Frame rate, frames per second."""
    noise: FiniteFloat = Field(1.0, ge=0.0, le=5.0)
    """Sensor noise level: 0 renders clean frames; 1 is a decent webcam (Gaussian noise ~2.5/255, 1.5% exposure flicker, slight blur and vignetting, per-camera white balance); values scale every effect."""
    seed: int = Field(0, ge=0)
    """Seed of everything random (textures, noise, light drift): the same scene and seed give the same clip."""

    @model_validator(mode="after")
    def _consistent(self) -> SceneSpec:
        require_unique([c.name for c in self.cameras], "camera names")
        require_unique([o.id for o in self.objects], "object ids")
        if not self.known.extrinsics and self.board is None:
            raise ValueError("known.extrinsics is false but there is no board: the grounding could not fit the "
                             "cameras; add `board` or set known.extrinsics: true")
        if self.frames < 2:
            raise ValueError(f"seconds * fps gives {self.frames} frame(s); a clip needs at least 2")
        return self

    @property
    def frames(self) -> int:
        """Number of frames per camera: round(seconds * fps)."""
        return round(self.seconds * self.fps)


def load_scene(path: Path | str) -> SceneSpec:
    """Read SCENE.yaml; InputError naming file, line and field for any defect."""
    return load_model(SceneSpec, path)
