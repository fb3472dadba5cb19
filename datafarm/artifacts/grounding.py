"""G, the grounding (`grounding.json`): the scene the simulator must reproduce, read from the
calibration clip (or, on the UE track, from a level): robot, cameras, table, objects.

Every physical quantity is a `TaggedFloat` (measured | fitted | assumed | unknown, with a
randomization range unless measured). Poses carry a provenance tag too; how far they vary per
episode is the sampler's business (S), not G's.

Object frames: origin at the centre of the object's footprint on the face it rests on, z up, so an
object standing on the table has pose z = 0. Body references used by the contract and the judge
name an object by its id, or a part of it as `<id>.<part>` (the parts are listed per kind below).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Iterator, Literal

from pydantic import AfterValidator, BaseModel, Field, model_validator

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.clip import CameraName
from datafarm.artifacts.common import FiniteFloat, Intrinsics, Pose, Provenance, TaggedFloat, Vec3
from datafarm.artifacts.fields import Name, Rgb, require_unique, tagged_union


def _low(q: TaggedFloat) -> float:
    return q.range[0] if q.range is not None else q.value


def _high(q: TaggedFloat) -> float:
    return q.range[1] if q.range is not None else q.value


def _positive(q: TaggedFloat) -> TaggedFloat:
    if _low(q) <= 0:
        raise ValueError("must be positive, and so must the low end of its range")
    return q


def _non_negative(q: TaggedFloat) -> TaggedFloat:
    if _low(q) < 0:
        raise ValueError("must be >= 0, and so must the low end of its range")
    return q


Positive = Annotated[TaggedFloat, AfterValidator(_positive)]
"""A TaggedFloat whose value and whole range are > 0 (lengths, masses)."""
NonNegative = Annotated[TaggedFloat, AfterValidator(_non_negative)]
"""A TaggedFloat whose value and whole range are >= 0 (friction, openings)."""


# --- robot -------------------------------------------------------------------------------------------


class ArmMount(Artifact):
    """Where one arm's base sits in the world."""

    name: Name
    """Arm name used in body references and action columns: `arm` for a single arm, `left`/`right` for a dual rig."""
    base: Pose
    """world_from_base: pose of the arm's base_link in the world."""
    base_tag: Provenance
    """How the base pose was obtained (measured when clip.yaml gives it)."""


class PiperRobot(Artifact):
    """One AgileX PiPER arm (6 revolute joints and a parallel gripper)."""

    kind: Literal["piper"]
    """Discriminator: a single PiPER."""
    arms: list[ArmMount] = Field(min_length=1, max_length=1)
    """Exactly one arm."""


class PiperDualRobot(Artifact):
    """Two PiPER arms side by side facing the table; spacing and height parameterize the rig."""

    kind: Literal["piper-dual"]
    """Discriminator: the bimanual PiPER rig."""
    arms: list[ArmMount] = Field(min_length=2, max_length=2)
    """The two arms, `left` then `right`; their bases must agree with `spacing` and `height`."""
    spacing: Positive
    """Distance between the two base origins, metres."""
    height: TaggedFloat
    """Height of both base origins above the table top (world z), metres; 0 when bolted to the table."""

    @model_validator(mode="after")
    def _consistent(self) -> PiperDualRobot:
        names = [a.name for a in self.arms]
        if names != ["left", "right"]:
            raise ValueError(f"a piper-dual rig has arms named left then right, got {names}")
        (lx, ly, lz), (rx, ry, rz) = (a.base.position for a in self.arms)
        distance = ((lx - rx) ** 2 + (ly - ry) ** 2 + (lz - rz) ** 2) ** 0.5
        if abs(distance - self.spacing.value) > 1e-3:
            raise ValueError(f"the bases are {distance:.4f} m apart but spacing is {self.spacing.value} m")
        for arm in self.arms:
            if abs(arm.base.position[2] - self.height.value) > 1e-3:
                raise ValueError(f"arm {arm.name} base z {arm.base.position[2]} differs from height {self.height.value}")
        return self


class UrdfRobot(Artifact):
    """A robot from the lab's own URDF file."""

    kind: Literal["urdf"]
    """Discriminator: a user URDF."""
    urdf: Path
    """The URDF file (as resolved from the request)."""
    arms: list[ArmMount] = Field(min_length=1)
    """Pose of the URDF's root link, one entry per separately mounted copy."""


class FirstPersonAgent(Artifact):
    """UE track: the player character the expert walks and looks around with."""

    kind: Literal["ue-character"]
    """Discriminator: a first-person character in an Unreal level."""
    start: Pose
    """world_from_agent at the start of an episode (player start; agent x forward, z up)."""
    start_tag: Provenance
    """How the start pose was obtained (measured when read from the level)."""
    eye_height: Positive
    """Height of the first-person camera above the agent's feet, metres."""
    radius: Positive
    """Radius of the agent's collision capsule, metres."""

    @property
    def arms(self) -> list[ArmMount]:
        """No arms: uniform access for code that iterates over arms."""
        return []


Robot = tagged_union("kind", PiperRobot, PiperDualRobot, UrdfRobot, FirstPersonAgent)
"""The embodiment the expert controls, chosen by `kind`."""

ARM_KINDS = ("piper", "piper-dual", "urdf")
"""Robot kinds that manipulate objects on a table."""


# --- cameras, table, level ----------------------------------------------------------------------------


class GroundedCamera(Artifact):
    """One camera: its calibration and where it came from."""

    name: CameraName
    """Camera name, as in clip.yaml."""
    video: str | None
    """The clip video this camera was grounded from (file name in the clip folder); null for a UE level camera."""
    intrinsics: Intrinsics
    """Pinhole intrinsics at the video's resolution."""
    intrinsics_tag: Provenance
    """How the intrinsics were obtained (measured from clip.yaml, fitted from a board, assumed)."""
    world_from_camera: Pose
    """Camera pose in the world (OpenCV camera frame); for an attached camera, its pose at episode start."""
    extrinsics_tag: Provenance
    """How the extrinsics were obtained."""
    attached_to: Name | None = None
    """Null for a camera fixed in the world; else the body it rides on (e.g. `agent` for a first-person camera), whose per-step pose the episode records."""


class Table(Artifact):
    """The table top. Its centre is at `center` on the world's z = 0 plane and its edges run along world x and y."""

    size_x: Positive
    """Extent along world x, metres."""
    size_y: Positive
    """Extent along world y, metres."""
    height: Positive
    """Height of the top above the floor, metres (the sampler varies it by S.table_height)."""
    tilt_x: TaggedFloat
    """Rotation of the top about world x, radians (usually assumed 0 with a small range)."""
    tilt_y: TaggedFloat
    """Rotation of the top about world y, radians."""
    colour: Rgb
    """Mean colour of the surface in the clip."""
    center: tuple[FiniteFloat, FiniteFloat] = (0.0, 0.0)
    """World (x, y) of the top's centre, metres."""


class NavRegion(Artifact):
    """UE track: one walkable floor polygon."""

    floor_z: FiniteFloat
    """World z of the floor, metres."""
    outline: list[tuple[FiniteFloat, FiniteFloat]] = Field(min_length=3)
    """Polygon vertices (x, y) in world metres, in order."""


class UeLevel(Artifact):
    """UE track: the level the scene was read from instead of a clip."""

    map: str = Field(min_length=1)
    """Unreal map path, e.g. `/Game/Maps/Suburb`."""
    navigable: list[NavRegion] = Field(min_length=1)
    """Where the agent can walk."""


# --- objects ------------------------------------------------------------------------------------------


class ViewObservation(Artifact):
    """Where an object was seen in one camera of the clip (evidence for the reprojection check)."""

    camera: CameraName
    """The camera."""
    frame: int = Field(ge=0)
    """Clip frame index the observation was made in."""
    bbox: tuple[int, int, int, int]
    """Pixel box (x0, y0, x1, y1), x1 and y1 exclusive."""
    mask_area: int = Field(ge=0)
    """Pixels in the object's segmentation mask."""
    mask: str | None = None
    """Mask image (PNG, non-zero = object), relative to the task folder, when saved."""

    @model_validator(mode="after")
    def _box(self) -> ViewObservation:
        x0, y0, x1, y1 = self.bbox
        if not (0 <= x0 < x1 and 0 <= y0 < y1):
            raise ValueError(f"bbox {self.bbox} must satisfy 0 <= x0 < x1 and 0 <= y0 < y1")
        return self


class _ObjectBase(Artifact):
    """Fields every object has."""

    id: Name
    """Unique object id, used by every other artifact."""
    nouns: list[str] = Field(default_factory=list)
    """Task-text noun phrases this object is linked to (e.g. `red cup`); empty for a distractor."""
    pose: Pose
    """world_from_object at rest in the clip (see the module docstring for the object frame)."""
    pose_tag: Provenance
    """How the pose was obtained."""
    colour: Rgb
    """Dominant colour in the clip."""
    observations: list[ViewObservation] = Field(default_factory=list)
    """Where it was seen, per camera."""


class _RigidBase(_ObjectBase):
    """An object the physics engine simulates."""

    mass: Positive
    """Mass, kg (total for articulated objects)."""
    friction: NonNegative
    """Coulomb friction coefficient (static and dynamic) of its surfaces."""


class BoxSize(Artifact):
    """Extents of a box along its own x, y, z axes."""

    x: Positive
    """Extent along x, metres."""
    y: Positive
    """Extent along y, metres."""
    z: Positive
    """Extent along z (height), metres."""


class BoxObject(_RigidBase):
    """A cuboid (a block)."""

    kind: Literal["box"]
    """Discriminator."""
    size: BoxSize
    """Outer extents."""


class CylinderObject(_RigidBase):
    """A solid cylinder standing on its base."""

    kind: Literal["cylinder"]
    """Discriminator."""
    radius: Positive
    """Radius, metres."""
    height: Positive
    """Height, metres."""


class SphereObject(_RigidBase):
    """A sphere (e.g. an apple's stand-in)."""

    kind: Literal["sphere"]
    """Discriminator."""
    radius: Positive
    """Radius, metres."""


class CupObject(_RigidBase):
    """A hollow cylindrical cup with an open top; a smaller cup can nest inside a larger one."""

    kind: Literal["cup"]
    """Discriminator."""
    outer_radius: Positive
    """Outer radius, metres."""
    height: Positive
    """Outer height, metres."""
    wall_thickness: Positive
    """Thickness of the wall and of the bottom, metres."""

    @model_validator(mode="after")
    def _hollow(self) -> CupObject:
        if _high(self.wall_thickness) >= _low(self.outer_radius) or _high(self.wall_thickness) >= _low(self.height):
            raise ValueError("wall_thickness (its whole range) must stay below outer_radius and height")
        return self


class DrawerCabinetObject(_RigidBase):
    """A cabinet with one prismatic drawer that slides out along the cabinet's +x axis.

    Parts: `<id>.drawer` (the drawer box), `<id>.handle`; joint `drawer` (opening, metres, 0 = closed)."""

    kind: Literal["drawer_cabinet"]
    """Discriminator."""
    size: BoxSize
    """Outer extents of the cabinet (x is depth, front face at +x)."""
    wall_thickness: Positive
    """Thickness of cabinet and drawer walls, metres."""
    drawer_height: Positive
    """Outer height of the drawer box, metres."""
    drawer_bottom: NonNegative
    """Height of the drawer's underside above the cabinet's bottom, metres."""
    drawer_travel: Positive
    """How far the drawer can be pulled out, metres."""
    handle_length: Positive
    """Length of the handle across the drawer front, metres."""
    handle_protrusion: Positive
    """How far the handle stands out from the drawer front, metres."""
    initial_opening: NonNegative
    """Drawer opening in the clip, metres (0 = closed)."""

    @model_validator(mode="after")
    def _fits(self) -> DrawerCabinetObject:
        if _high(self.drawer_bottom) + _high(self.drawer_height) > _low(self.size.z):
            raise ValueError("the drawer (drawer_bottom + drawer_height) must fit inside the cabinet height")
        if _high(self.drawer_travel) >= _low(self.size.x):
            raise ValueError("drawer_travel must be less than the cabinet depth (size.x)")
        if _high(self.initial_opening) > _low(self.drawer_travel):
            raise ValueError("initial_opening cannot exceed drawer_travel")
        if 2 * _high(self.wall_thickness) >= min(_low(self.size.y), _low(self.drawer_height)):
            raise ValueError("wall_thickness leaves no room inside the drawer")
        return self


class ScaleDisplay(Artifact):
    """The scale's live readout, drawn by the renderer with the sim's reading (not simulated)."""

    pose: Pose
    """object_from_display: the display's centre; it faces its own +z axis."""
    width: FiniteFloat = Field(gt=0)
    """Display width, metres."""
    height: FiniteFloat = Field(gt=0)
    """Display height, metres."""
    unit: Literal["g", "kg"] = "g"
    """Unit shown."""
    decimals: int = Field(default=0, ge=0, le=3)
    """Digits shown after the decimal point."""


class ScaleObject(_RigidBase):
    """A kitchen scale: a housing with a weighing plate on top; the sim reports the plate's vertical load in grams.

    Parts: `<id>.plate`."""

    kind: Literal["scale"]
    """Discriminator."""
    plate: BoxSize
    """Plate extents (z is its thickness); the housing has the same footprint."""
    body_height: Positive
    """Height of the housing below the plate, metres."""
    capacity: Positive
    """Largest load it reads, kg."""
    display: ScaleDisplay
    """Where the readout is."""


class DrumObject(_RigidBase):
    """A drum: a cylindrical shell with a head on top whose strikes register as contact events.

    Parts: `<id>.head`."""

    kind: Literal["drum"]
    """Discriminator."""
    head_radius: Positive
    """Radius of the head (and shell), metres."""
    height: Positive
    """Height of the head above the drum's base, metres."""


class LevelActor(_ObjectBase):
    """UE track: an actor of the level the task refers to (the engine owns its physics)."""

    kind: Literal["actor"]
    """Discriminator."""
    actor: str = Field(min_length=1)
    """The actor's name in the level."""
    size: BoxSize
    """Axis-aligned bounding box extents in the object frame."""


GroundedObject = tagged_union(
    "kind", BoxObject, CylinderObject, SphereObject, CupObject, DrawerCabinetObject, ScaleObject, DrumObject, LevelActor
)
"""An object of the scene, its fields chosen by `kind`."""


# --- sanity values and the whole grounding ----------------------------------------------------------


class ScaleCheck(Artifact):
    """Metric-scale sanity: a thing of known size, measured in G's world frame."""

    reference: str = Field(min_length=1)
    """What it is, e.g. `ChArUco square`, `PiPER upper arm (link2)`."""
    expected: FiniteFloat = Field(gt=0)
    """Its known length, metres."""
    estimated: FiniteFloat = Field(gt=0)
    """Its length in the grounded scene, metres."""

    @property
    def ratio(self) -> float:
        """estimated / expected: 1.0 means the metric scale is right."""
        return self.estimated / self.expected


class Workspace(Artifact):
    """The box objects may occupy and the robot must reach (world frame)."""

    bounds_min: Vec3
    """Lower corner (x, y, z), metres."""
    bounds_max: Vec3
    """Upper corner (x, y, z), metres."""

    @model_validator(mode="after")
    def _ordered(self) -> Workspace:
        if not all(a < b for a, b in zip(self.bounds_min, self.bounds_max)):
            raise ValueError("bounds_min must be below bounds_max on every axis")
        return self


class Grounding(Artifact):
    """G (`grounding.json`): the scene, read from the calibration clip (or a UE level)."""

    robot: Robot
    """The robot (or first-person agent) and where it is mounted."""
    cameras: list[GroundedCamera] = Field(min_length=1)
    """Every camera, calibrated."""
    table: Table | None
    """The table; required for arm robots, null on the UE track."""
    level: UeLevel | None = None
    """UE track only: the level the scene was read from."""
    objects: list[GroundedObject]
    """The objects of the scene."""
    workspace: Workspace
    """Workspace bounds for placement and reach sanity."""
    scale_checks: list[ScaleCheck] = Field(default_factory=list)
    """Metric-scale sanity measurements."""
    notes: str = ""
    """Free text for people: what was uncertain and why."""

    @model_validator(mode="after")
    def _consistent(self) -> Grounding:
        require_unique([c.name for c in self.cameras], "camera names")
        require_unique([o.id for o in self.objects], "object ids")
        cameras = {c.name for c in self.cameras}
        for obj in self.objects:
            for obs in obj.observations:
                if obs.camera not in cameras:
                    raise ValueError(f"object {obj.id} is observed in unknown camera {obs.camera!r}")
        if self.robot.kind in ARM_KINDS and self.table is None:
            raise ValueError(f"a {self.robot.kind} robot works at a table: give `table`")
        if self.robot.kind == "ue-character" and self.level is None:
            raise ValueError("a ue-character needs `level`")
        return self

    def object(self, object_id: str) -> GroundedObject:
        """The object with id `object_id` (KeyError if none)."""
        for obj in self.objects:
            if obj.id == object_id:
                return obj
        raise KeyError(object_id)

    def tagged_quantities(self) -> dict[str, TaggedFloat]:
        """Every TaggedFloat in G by dotted path, e.g. `objects.red_cup.mass`, `table.height`.

        List items are named by their `id` (objects) or `name` (arms, cameras). These paths are what
        S.physics lists and what a Variation's `physics` values are keyed by."""
        return dict(_walk(self, ""))

    def with_values(self, values: dict[str, float]) -> Grounding:
        """A copy of G with the nominal value of each TaggedFloat at path replaced (a drawn variation).

        Raises KeyError for an unknown path and ValueError for a value outside its range."""
        copy = self.model_copy(deep=True)
        quantities = copy.tagged_quantities()
        for path, value in values.items():
            if path not in quantities:
                raise KeyError(f"no tagged quantity at {path!r}")
            quantities[path].value = value
        return copy


def _walk(value: object, path: str) -> Iterator[tuple[str, TaggedFloat]]:
    """(path, quantity) for every TaggedFloat below `value`."""
    if isinstance(value, TaggedFloat):
        yield path, value
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _walk(getattr(value, name), f"{path}.{name}" if path else name)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            key = getattr(item, "id", None) or getattr(item, "name", None) or i
            yield from _walk(item, f"{path}.{key}")
