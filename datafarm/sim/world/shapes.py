"""Collision geometry of G's object kinds, as lists of primitive shapes in each object's own frame.

Object frame (grounding.py): origin at the centre of the footprint on the face the object rests on,
z up. Each shape carries the part it belongs to ("" for the object itself, else the `<part>` of
`<id>.<part>`). Sizes come from G's nominal values (with a variation's draws already applied).

Assumed dimensions that G does not give are named constants here, so a reviewer sees them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from datafarm.artifacts.grounding import (
    BoxObject,
    CupObject,
    CylinderObject,
    DrawerCabinetObject,
    DrumObject,
    ScaleObject,
    SphereObject,
)

CUP_WALL_SEGMENTS = 16
"""A cup's wall is this many boxes around the axis (PhysX has no hollow cylinder)."""
DRUM_HEAD_THICKNESS = 0.005
"""Thickness of a drum's head (the top part that registers strikes), metres."""
DRAWER_CLEARANCE = 0.002
"""Gap between a drawer and the carcass around it, metres (so the slide runs free)."""
HANDLE_BAR = 0.012
"""Cross-section of the drawer handle's bar and posts, metres (the fingers wrap around the bar)."""


@dataclass(frozen=True)
class ShapeSpec:
    """One primitive collision shape of an object, in the object's (or link's) frame."""

    geometry: Literal["box", "cylinder", "sphere"]
    """Primitive type; cylinders stand along the frame's z axis."""
    size: tuple[float, ...]
    """box: half extents (x, y, z); cylinder: (radius, half height); sphere: (radius,)."""
    position: tuple[float, float, float]
    """Centre of the shape in the frame, metres."""
    part: str = ""
    """Part name (`head`, `plate`, `drawer`, `handle`), or "" for the object itself."""
    yaw: float = 0.0
    """Rotation of the shape about the frame's z axis, radians (cup wall segments)."""
    max_contact_offset: float | None = None
    """Cap on the shape's contact offset, metres (thin parts near other surfaces; see `cup_shapes`)."""
    faceted: bool = False
    """Collide as a faceted convex hull of the primitive rather than the exact one (solid round bodies
    that can roll; see `bodies.sphere_hull`): the flat facets stand in for the contact patch that
    gives a real round object its rolling resistance, which PhysX does not model."""

    @property
    def volume(self) -> float:
        """Volume in m^3 (for splitting an object's mass between articulation links)."""
        if self.geometry == "box":
            return 8.0 * self.size[0] * self.size[1] * self.size[2]
        if self.geometry == "cylinder":
            return math.pi * self.size[0] ** 2 * 2.0 * self.size[1]
        return 4.0 / 3.0 * math.pi * self.size[0] ** 3


def _box(x0: float, x1: float, y0: float, y1: float, z0: float, z1: float, part: str = "") -> ShapeSpec:
    """An axis-aligned box from its corner coordinates."""
    return ShapeSpec("box", ((x1 - x0) / 2, (y1 - y0) / 2, (z1 - z0) / 2), ((x0 + x1) / 2, (y0 + y1) / 2, (z0 + z1) / 2), part)


def box_shapes(obj: BoxObject) -> list[ShapeSpec]:
    """A solid box resting on its bottom face."""
    x, y, z = obj.size.x.value, obj.size.y.value, obj.size.z.value
    return [ShapeSpec("box", (x / 2, y / 2, z / 2), (0.0, 0.0, z / 2))]


def cylinder_shapes(obj: CylinderObject) -> list[ShapeSpec]:
    """A solid cylinder standing on its base (its axis along the object's z), faceted: it can be laid
    on its side and would roll."""
    h = obj.height.value
    return [ShapeSpec("cylinder", (obj.radius.value, h / 2), (0.0, 0.0, h / 2), faceted=True)]


def sphere_shapes(obj: SphereObject) -> list[ShapeSpec]:
    """A sphere resting on its lowest point, faceted (see `ShapeSpec.faceted`)."""
    r = obj.radius.value
    return [ShapeSpec("sphere", (r,), (0.0, 0.0, r), faceted=True)]


def cup_shapes(obj: CupObject) -> list[ShapeSpec]:
    """A hollow cup: a bottom disc plus `CUP_WALL_SEGMENTS` boxes standing on it.

    The segments' inner faces are tangent to a circle of radius `outer_radius - wall_thickness`
    (the cavity a smaller cup nests into); each segment is wide enough to cover the outer circle's
    polygon, so neighbours overlap at the outer corners and the wall has no gaps. The segments stand
    one wall thickness above the surface the cup rests on; their contact offset is capped at a quarter
    of that thickness so PhysX does not report (and the recorder read) a speculative contact between
    every segment and the table."""
    radius, height, t = obj.outer_radius.value, obj.height.value, obj.wall_thickness.value
    n = CUP_WALL_SEGMENTS
    shapes = [ShapeSpec("cylinder", (radius, t / 2), (0.0, 0.0, t / 2))]
    half_width = radius * math.tan(math.pi / n)
    centre_r = radius - t / 2
    wall_h = height - t
    for i in range(n):
        angle = 2 * math.pi * i / n
        shapes.append(ShapeSpec("box", (t / 2, half_width, wall_h / 2),
                                (centre_r * math.cos(angle), centre_r * math.sin(angle), t + wall_h / 2), yaw=angle,
                                max_contact_offset=t / 4))
    return shapes


def drum_shapes(obj: DrumObject) -> list[ShapeSpec]:
    """A drum: a cylindrical shell and, on top, a thin head (part `head`) of the same radius."""
    r, h = obj.head_radius.value, obj.height.value
    head = min(DRUM_HEAD_THICKNESS, h / 2)
    return [
        ShapeSpec("cylinder", (r, (h - head) / 2), (0.0, 0.0, (h - head) / 2)),
        ShapeSpec("cylinder", (r, head / 2), (0.0, 0.0, h - head / 2), part="head"),
    ]


def scale_shapes(obj: ScaleObject) -> list[ShapeSpec]:
    """A kitchen scale: a housing (`body_height` tall) with the weighing plate (part `plate`) on top,
    both of the plate's footprint. The reading is the load other bodies put on the plate."""
    px, py, pz = obj.plate.x.value, obj.plate.y.value, obj.plate.z.value
    bh = obj.body_height.value
    return [
        ShapeSpec("box", (px / 2, py / 2, bh / 2), (0.0, 0.0, bh / 2)),
        ShapeSpec("box", (px / 2, py / 2, pz / 2), (0.0, 0.0, bh + pz / 2), part="plate"),
    ]


@dataclass(frozen=True)
class DrawerGeometry:
    """The two links of a drawer cabinet (carcass fixed, drawer sliding along the cabinet's +x)."""

    carcass: list[ShapeSpec]
    """Back, sides, top, shelf under the drawer, front panels above and below the drawer opening."""
    drawer: list[ShapeSpec]
    """The drawer box (part `drawer`) and its handle (part `handle`), at opening 0 (closed)."""
    interior_min: tuple[float, float, float]
    """Inner corner of the drawer's cavity in the drawer frame (= cabinet frame when closed)."""
    interior_max: tuple[float, float, float]
    """Opposite inner corner of the drawer's cavity."""


def drawer_geometry(obj: DrawerCabinetObject) -> DrawerGeometry:
    """Carcass and drawer shapes of a drawer cabinet (front face at +x, see grounding.py)."""
    sx, sy, sz = obj.size.x.value, obj.size.y.value, obj.size.z.value
    t = obj.wall_thickness.value
    db, dh = obj.drawer_bottom.value, obj.drawer_height.value
    c = DRAWER_CLEARANCE
    eps = 1e-4
    front, back = sx / 2, -sx / 2
    carcass = [
        _box(back, back + t, -sy / 2, sy / 2, 0.0, sz),  # back wall
        _box(back + t, front, sy / 2 - t, sy / 2, 0.0, sz),  # left side (+y)
        _box(back + t, front, -sy / 2, -sy / 2 + t, 0.0, sz),  # right side (-y)
    ]
    top_low = max(db + dh, sz - t)
    if sz - top_low > eps:
        carcass.append(_box(back + t, front, -sy / 2 + t, sy / 2 - t, top_low, sz))
    if top_low - (db + dh) > eps:  # front panel between the drawer opening and the top
        carcass.append(_box(front - t, front, -sy / 2 + t, sy / 2 - t, db + dh, top_low))
    if db > eps:  # shelf the drawer runs over, and the front panel below it
        carcass.append(_box(back + t, front, -sy / 2 + t, sy / 2 - t, max(0.0, db - t), db))
        if db - t > eps:
            carcass.append(_box(front - t, front, -sy / 2 + t, sy / 2 - t, 0.0, db - t))

    # the drawer box fills the opening minus the clearance; its front is flush with the cabinet's
    x0, x1 = back + t + c, front
    y0, y1 = -sy / 2 + t + c, sy / 2 - t - c
    z0, z1 = db + c, db + dh - c
    drawer = [
        _box(x0, x1, y0, y1, z0, z0 + t, "drawer"),  # bottom
        _box(x1 - t, x1, y0, y1, z0 + t, z1, "drawer"),  # front
        _box(x0, x0 + t, y0, y1, z0 + t, z1, "drawer"),  # back
        _box(x0 + t, x1 - t, y1 - t, y1, z0 + t, z1, "drawer"),  # left side
        _box(x0 + t, x1 - t, y0, y0 + t, z0 + t, z1, "drawer"),  # right side
    ]
    # handle: a bar across the front, held off it by two posts so fingers can close around it
    length, protrusion = obj.handle_length.value, obj.handle_protrusion.value
    bar = min(HANDLE_BAR, protrusion / 2)
    zc = (z0 + z1) / 2
    drawer.append(_box(front + protrusion - bar, front + protrusion, -length / 2, length / 2, zc - bar / 2, zc + bar / 2, "handle"))
    for side in (-1.0, 1.0):
        y = side * (length / 2 - bar / 2)
        drawer.append(_box(front, front + protrusion - bar, y - bar / 2, y + bar / 2, zc - bar / 2, zc + bar / 2, "handle"))
    return DrawerGeometry(carcass, drawer, (x0 + t, y0 + t, z0 + t), (x1 - t, y1 - t, z1))


def rigid_shapes(obj: BoxObject | CylinderObject | SphereObject | CupObject | DrumObject | ScaleObject) -> list[ShapeSpec]:
    """Collision shapes of a single-body object kind."""
    return {
        "box": box_shapes, "cylinder": cylinder_shapes, "sphere": sphere_shapes, "cup": cup_shapes,
        "drum": drum_shapes, "scale": scale_shapes,
    }[obj.kind](obj)  # type: ignore[operator]


def footprint_radius(obj: object) -> float:
    """Radius of a circle around the object's footprint (for the sampler's clearance check), metres."""
    kind = getattr(obj, "kind", "")
    if kind in ("box", "drawer_cabinet", "actor"):
        size = obj.size  # type: ignore[attr-defined]
        return 0.5 * math.hypot(size.x.value, size.y.value)
    if kind == "scale":
        return 0.5 * math.hypot(obj.plate.x.value, obj.plate.y.value)  # type: ignore[attr-defined]
    if kind in ("cylinder", "sphere"):
        return obj.radius.value  # type: ignore[attr-defined]
    if kind == "cup":
        return obj.outer_radius.value  # type: ignore[attr-defined]
    if kind == "drum":
        return obj.head_radius.value  # type: ignore[attr-defined]
    raise ValueError(f"no footprint for object kind {kind!r}")
