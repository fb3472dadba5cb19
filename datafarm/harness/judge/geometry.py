"""The scene geometry the judge needs, built from G: each object as a few solid primitives with
signed distance functions, sampled surface points, container cavities and top faces.

Object frames follow G (datafarm.artifacts.grounding): origin at the centre of the object's
footprint on the face it rests on, z up. Geometry per kind, in the object frame:

| kind | pieces (part name: primitive) |
| --- | --- |
| box, level actor | body: box x in +-x/2, y in +-y/2, z in [0, z] |
| cylinder | body: cylinder of `radius` about z, z in [0, height] |
| sphere | body: sphere of `radius` centred at (0, 0, radius) |
| cup | body: cylinder of `outer_radius`, z in [0, height], minus the cavity (radius outer - wall, z from wall up, open top) |
| scale | housing: box of the plate's footprint, z in [0, body_height]; `plate`: box, z in [body_height, body_height + plate.z] |
| drum | shell: cylinder of `head_radius`, z in [0, height - 5 mm]; `head`: the top 5 mm |
| drawer_cabinet | carcass: outer box minus the drawer slot (open at the front, +x); `drawer`: the drawer box minus its open-top interior; `handle`: a bar (its posts included) on the drawer front, `handle_protrusion` deep; both move with joint `drawer` along +x |

Drawer box (closed): the slot (x from -size.x/2 + wall to size.x/2, y within the side walls, z in
[drawer_bottom, drawer_bottom + drawer_height]) less `DRAWER_CLEARANCE` all round but at the front,
which is flush with the cabinet's; its interior is the box shrunk by one wall on every side but the
top. These are the SAPIEN world's shapes (datafarm/sim/world/shapes.py) as convex solids; sizes are
G's nominal values (apply a drawn variation to G first).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from datafarm.artifacts.grounding import (
    BoxObject,
    CupObject,
    CylinderObject,
    DrawerCabinetObject,
    DrumObject,
    Grounding,
    LevelActor,
    ScaleObject,
    SphereObject,
)

SURFACE_SPACING = 0.01
"""Target spacing of sampled surface points, metres."""
MAX_POINTS_PER_EDGE = 9
"""Cap on sampled points along one edge or ring, so large objects stay cheap."""
DRUM_HEAD_THICKNESS = 0.005
"""Thickness of a drum's head part, metres (assumed; G gives none)."""
HANDLE_BAR = 0.012
"""Cross-section of a drawer handle's bar, metres (assumed; G gives none)."""
DRAWER_CLEARANCE = 0.002
"""Gap between a drawer box and the carcass around it, metres."""
OPEN_EXTENSION = 1.0
"""How far an open cavity is extended through its opening when carving it out of a solid, metres."""


# --- rotations ----------------------------------------------------------------------------------------


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrices (..., 3, 3) from unit quaternions (..., 4) written (w, x, y, z)."""
    q = np.asarray(q, dtype=float)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], axis=-1),
            np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], axis=-1),
            np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], axis=-1),
        ],
        axis=-2,
    )


def quat_angle(q0: np.ndarray, q1: np.ndarray) -> np.ndarray:
    """Rotation angle (radians, in [0, pi]) between orientations q0 and q1 (..., 4), wxyz."""
    q0 = q0 / np.linalg.norm(q0, axis=-1, keepdims=True)
    q1 = q1 / np.linalg.norm(q1, axis=-1, keepdims=True)
    dot = np.abs(np.sum(q0 * q1, axis=-1)).clip(0.0, 1.0)
    return 2.0 * np.arccos(dot)


# --- primitives ---------------------------------------------------------------------------------------


class Primitive(Protocol):
    """A convex solid in a piece's frame."""

    def sdf(self, p: np.ndarray) -> np.ndarray:
        """Signed distance (..., ) of points p (..., 3): negative inside, metres."""
        ...

    def surface_points(self) -> np.ndarray:
        """Points (P, 3) sampled on the surface."""
        ...

    def top_z(self) -> float:
        """Height of the highest point."""
        ...

    def contains_xy(self, p: np.ndarray) -> np.ndarray:
        """True (..., ) where the point's (x, y) lies within the top face's outline."""
        ...

    def extended_up(self, by: float) -> Primitive:
        """The same solid stretched `by` metres further along +z (an open top)."""
        ...

    def radius(self) -> float:
        """Radius of a sphere about the origin that holds the primitive."""
        ...


def _count(length: float) -> int:
    """How many samples along a length: about one per SURFACE_SPACING, at least 2, capped."""
    return int(min(MAX_POINTS_PER_EDGE, max(2, math.ceil(length / SURFACE_SPACING) + 1)))


@dataclass(frozen=True)
class Box:
    """An axis-aligned box between corners `lo` and `hi`."""

    lo: tuple[float, float, float]
    """Lower corner."""
    hi: tuple[float, float, float]
    """Upper corner."""

    def sdf(self, p: np.ndarray) -> np.ndarray:
        lo, hi = np.asarray(self.lo), np.asarray(self.hi)
        q = np.abs(p - (lo + hi) / 2) - (hi - lo) / 2
        outside = np.linalg.norm(np.maximum(q, 0.0), axis=-1)
        inside = np.minimum(q.max(axis=-1), 0.0)
        return outside + inside

    def surface_points(self) -> np.ndarray:
        lo, hi = np.asarray(self.lo), np.asarray(self.hi)
        axes = [np.linspace(lo[i], hi[i], _count(hi[i] - lo[i])) for i in range(3)]
        pts = []
        for i in range(3):
            j, k = [a for a in range(3) if a != i]
            gj, gk = np.meshgrid(axes[j], axes[k], indexing="ij")
            for v in (lo[i], hi[i]):
                face = np.empty((gj.size, 3))
                face[:, i], face[:, j], face[:, k] = v, gj.ravel(), gk.ravel()
                pts.append(face)
        return np.unique(np.round(np.concatenate(pts), 9), axis=0)

    def top_z(self) -> float:
        return float(self.hi[2])

    def contains_xy(self, p: np.ndarray) -> np.ndarray:
        return (p[..., 0] >= self.lo[0]) & (p[..., 0] <= self.hi[0]) & (p[..., 1] >= self.lo[1]) & (p[..., 1] <= self.hi[1])

    def extended_up(self, by: float) -> Box:
        return Box(self.lo, (self.hi[0], self.hi[1], self.hi[2] + by))

    def extended_x(self, by: float) -> Box:
        """The box stretched `by` metres further along +x (open at its +x face)."""
        return Box(self.lo, (self.hi[0] + by, self.hi[1], self.hi[2]))

    def radius(self) -> float:
        corners = np.array(list(itertools.product(*zip(self.lo, self.hi))))
        return float(np.linalg.norm(corners, axis=1).max())


@dataclass(frozen=True)
class Cylinder:
    """A solid cylinder of `r` about the z axis, between heights `z0` and `z1`."""

    r: float
    """Radius."""
    z0: float
    """Bottom height."""
    z1: float
    """Top height."""

    def sdf(self, p: np.ndarray) -> np.ndarray:
        d_r = np.hypot(p[..., 0], p[..., 1]) - self.r
        d_z = np.maximum(self.z0 - p[..., 2], p[..., 2] - self.z1)
        outside = np.hypot(np.maximum(d_r, 0.0), np.maximum(d_z, 0.0))
        inside = np.minimum(np.maximum(d_r, d_z), 0.0)
        return outside + inside

    def surface_points(self) -> np.ndarray:
        n_ang = max(12, min(24, math.ceil(2 * math.pi * self.r / SURFACE_SPACING)))
        ang = np.linspace(0.0, 2 * math.pi, n_ang, endpoint=False)
        ring = np.stack([np.cos(ang), np.sin(ang)], axis=-1)
        pts = []
        for z in np.linspace(self.z0, self.z1, _count(self.z1 - self.z0)):
            pts.append(np.column_stack([self.r * ring, np.full(n_ang, z)]))
        for rr in np.linspace(0.0, self.r, _count(self.r))[:-1]:
            for z in (self.z0, self.z1):
                pts.append(np.column_stack([rr * ring, np.full(n_ang, z)]) if rr > 0 else np.array([[0.0, 0.0, z]]))
        return np.concatenate(pts)

    def top_z(self) -> float:
        return float(self.z1)

    def contains_xy(self, p: np.ndarray) -> np.ndarray:
        return np.hypot(p[..., 0], p[..., 1]) <= self.r

    def extended_up(self, by: float) -> Cylinder:
        return Cylinder(self.r, self.z0, self.z1 + by)

    def radius(self) -> float:
        return float(math.hypot(self.r, max(abs(self.z0), abs(self.z1))))


@dataclass(frozen=True)
class Sphere:
    """A solid sphere."""

    center: tuple[float, float, float]
    """Centre."""
    r: float
    """Radius."""

    def sdf(self, p: np.ndarray) -> np.ndarray:
        return np.linalg.norm(p - np.asarray(self.center), axis=-1) - self.r

    def surface_points(self) -> np.ndarray:
        n = max(26, min(120, math.ceil(4 * math.pi * self.r**2 / SURFACE_SPACING**2)))
        i = np.arange(n) + 0.5
        polar = np.arccos(1 - 2 * i / n)
        azimuth = math.pi * (1 + 5**0.5) * i
        dirs = np.column_stack([np.sin(polar) * np.cos(azimuth), np.sin(polar) * np.sin(azimuth), np.cos(polar)])
        dirs = np.concatenate([dirs, [[0, 0, 1], [0, 0, -1]]])  # the poles: exact top and bottom
        return np.asarray(self.center) + self.r * dirs

    def top_z(self) -> float:
        return float(self.center[2] + self.r)

    def contains_xy(self, p: np.ndarray) -> np.ndarray:
        return np.hypot(p[..., 0] - self.center[0], p[..., 1] - self.center[1]) <= self.r

    def extended_up(self, by: float) -> Sphere:
        raise ValueError("a sphere has no open top")

    def radius(self) -> float:
        return float(np.linalg.norm(self.center) + self.r)


# --- pieces and objects -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Piece:
    """One rigid piece of an object: a convex solid, optionally minus a hole, optionally a container.

    A piece driven by an articulated joint is displaced by `joint value * axis` in the object frame."""

    part: str | None
    """Part name (`drawer`, `handle`, `plate`, `head`), or None for the object's main body."""
    outer: Primitive
    """The convex solid the piece fills."""
    hole: Primitive | None = None
    """The empty space carved out of `outer` (open cavities are stretched through their opening)."""
    cavity: Box | Cylinder | None = None
    """The container interior (bounded at the rim) that `inside` tests against, or None."""
    joint: str | None = None
    """The object's joint that moves this piece, or None when it is fixed to the object."""
    axis: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """Direction the joint moves it, object frame."""

    def sdf(self, p: np.ndarray) -> np.ndarray:
        """Signed distance to the solid (outer minus hole), metres; negative inside."""
        d = self.outer.sdf(p)
        return d if self.hole is None else np.maximum(d, -self.hole.sdf(p))

    def surface_points(self) -> np.ndarray:
        """Points on the solid's boundary: outer surface outside the hole, hole surface inside the outer."""
        outer = self.outer.surface_points()
        if self.hole is None:
            return outer
        keep_outer = outer[self.hole.sdf(outer) >= -1e-9]
        inner = self.hole.surface_points()
        keep_inner = inner[self.outer.sdf(inner) <= 1e-9]
        return np.concatenate([keep_outer, keep_inner])

    def hull_points(self) -> np.ndarray:
        """Points on the outer (convex) surface: what `inside`, `above` and `on` test."""
        return self.outer.surface_points()


@dataclass(frozen=True)
class ObjectShape:
    """An object's geometry: its pieces in its own frame."""

    id: str
    """G object id."""
    kind: str
    """G object kind."""
    pieces: tuple[Piece, ...]
    """The pieces; the first is the main body."""
    joints: tuple[str, ...] = ()
    """Names of the object's articulated joints (e.g. `drawer`)."""

    def parts(self) -> tuple[str, ...]:
        """Names of the object's parts (pieces with a part name)."""
        return tuple(p.part for p in self.pieces if p.part is not None)

    def select(self, part: str | None) -> tuple[Piece, ...]:
        """The pieces a body reference means: every piece for the object itself, the named part's otherwise."""
        if part is None:
            return self.pieces
        chosen = tuple(p for p in self.pieces if p.part == part)
        if not chosen:
            raise KeyError(part)
        return chosen


@dataclass(frozen=True)
class TableGeometry:
    """The table top: a horizontal rectangle at height `top_z` (its tilt is ignored)."""

    center: tuple[float, float]
    """World (x, y) of the centre."""
    size: tuple[float, float]
    """Extents along world x and y."""
    top_z: float = 0.0
    """World z of the top surface (G's 0 plus the episode's sampled height offset)."""

    def covers(self, p: np.ndarray) -> np.ndarray:
        """True (..., ) where a world point's (x, y) is over the table."""
        return (np.abs(p[..., 0] - self.center[0]) <= self.size[0] / 2) & (np.abs(p[..., 1] - self.center[1]) <= self.size[1] / 2)


@dataclass(frozen=True)
class SceneGeometry:
    """Everything the judge knows of the scene's shape: objects, where they rest, the table, the arms."""

    shapes: dict[str, ObjectShape]
    """Object id -> geometry."""
    rest_poses: dict[str, np.ndarray] = field(default_factory=dict)
    """Object id -> pose (7: xyz + wxyz) used for objects the trajectory has no track for (fixed ones)."""
    table: TableGeometry | None = None
    """The table, when there is one."""
    arms: tuple[str, ...] = ()
    """Arm names (`left`, `right`, `arm`)."""

    @classmethod
    def from_grounding(cls, grounding: Grounding, table_top_z: float = 0.0) -> SceneGeometry:
        """Geometry of G's objects (nominal values) and table; `table_top_z` is the episode's table height offset."""
        shapes: dict[str, ObjectShape] = {}
        rest: dict[str, np.ndarray] = {}
        for obj in grounding.objects:
            shapes[obj.id] = object_shape(obj)
            rest[obj.id] = np.array([*obj.pose.position, *obj.pose.quaternion], dtype=float)
        table = None
        if grounding.table is not None:
            t = grounding.table
            table = TableGeometry(center=tuple(t.center), size=(t.size_x.value, t.size_y.value), top_z=table_top_z)
        return cls(shapes=shapes, rest_poses=rest, table=table, arms=tuple(a.name for a in grounding.robot.arms))


def object_shape(obj: object) -> ObjectShape:
    """The pieces of one G object (see the module docstring for each kind)."""
    if isinstance(obj, (BoxObject, LevelActor)):
        x, y, z = obj.size.x.value, obj.size.y.value, obj.size.z.value
        return ObjectShape(obj.id, obj.kind, (Piece(None, Box((-x / 2, -y / 2, 0.0), (x / 2, y / 2, z))),))
    if isinstance(obj, CylinderObject):
        return ObjectShape(obj.id, obj.kind, (Piece(None, Cylinder(obj.radius.value, 0.0, obj.height.value)),))
    if isinstance(obj, SphereObject):
        r = obj.radius.value
        return ObjectShape(obj.id, obj.kind, (Piece(None, Sphere((0.0, 0.0, r), r)),))
    if isinstance(obj, CupObject):
        r, h, w = obj.outer_radius.value, obj.height.value, obj.wall_thickness.value
        cavity = Cylinder(r - w, w, h)
        return ObjectShape(obj.id, obj.kind, (Piece(None, Cylinder(r, 0.0, h), cavity.extended_up(OPEN_EXTENSION), cavity),))
    if isinstance(obj, ScaleObject):
        px, py, pz, hb = obj.plate.x.value, obj.plate.y.value, obj.plate.z.value, obj.body_height.value
        housing = Piece(None, Box((-px / 2, -py / 2, 0.0), (px / 2, py / 2, hb)))
        plate = Piece("plate", Box((-px / 2, -py / 2, hb), (px / 2, py / 2, hb + pz)))
        return ObjectShape(obj.id, obj.kind, (housing, plate))
    if isinstance(obj, DrumObject):
        r, h = obj.head_radius.value, obj.height.value
        head_z = max(h - DRUM_HEAD_THICKNESS, h / 2)
        return ObjectShape(obj.id, obj.kind, (Piece(None, Cylinder(r, 0.0, head_z)), Piece("head", Cylinder(r, head_z, h))))
    if isinstance(obj, DrawerCabinetObject):
        return _drawer_cabinet(obj)
    raise TypeError(f"no judge geometry for object kind {getattr(obj, 'kind', type(obj).__name__)!r}")


def _drawer_cabinet(obj: DrawerCabinetObject) -> ObjectShape:
    sx, sy, sz = obj.size.x.value, obj.size.y.value, obj.size.z.value
    w, db, dh, c = obj.wall_thickness.value, obj.drawer_bottom.value, obj.drawer_height.value, DRAWER_CLEARANCE
    slot = Box((-sx / 2 + w, -sy / 2 + w, db), (sx / 2, sy / 2 - w, db + dh))
    box = Box((-sx / 2 + w + c, -sy / 2 + w + c, db + c), (sx / 2, sy / 2 - w - c, db + dh - c))
    interior = Box((box.lo[0] + w, box.lo[1] + w, box.lo[2] + w), (box.hi[0] - w, box.hi[1] - w, box.hi[2]))
    carcass = Piece(None, Box((-sx / 2, -sy / 2, 0.0), (sx / 2, sy / 2, sz)), slot.extended_x(OPEN_EXTENSION))
    drawer = Piece("drawer", box, interior.extended_up(OPEN_EXTENSION), interior, joint="drawer", axis=(1.0, 0.0, 0.0))
    hl, hp = obj.handle_length.value, obj.handle_protrusion.value
    bar, hz = min(HANDLE_BAR, hp / 2), (box.lo[2] + box.hi[2]) / 2
    handle = Piece("handle", Box((sx / 2, -hl / 2, hz - bar / 2), (sx / 2 + hp, hl / 2, hz + bar / 2)),
                   joint="drawer", axis=(1.0, 0.0, 0.0))
    return ObjectShape(obj.id, obj.kind, (carcass, drawer, handle), joints=("drawer",))
