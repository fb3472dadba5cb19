"""A small in-memory robot description (links, joints, primitive collision shapes) and its URDF text.

We write our robots' URDFs from data rather than keeping hand-edited files, so that the kinematics
table in one place (`piper.py`) is the single source of truth and any prefix or variant is generated.
Visual elements are emitted only when asked for (the render path): a physics-only scene must never
see a `<visual>` or `<material>` (SAPIEN then needs a render device).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

ShapeKind = Literal["box", "capsule", "sphere", "cylinder"]


def rpy_to_matrix(rpy: tuple[float, float, float] | np.ndarray) -> np.ndarray:
    """URDF roll-pitch-yaw (fixed axes x, then y, then z) to a 3x3 rotation: Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = (float(a) for a in rpy)
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return rz @ ry @ rx


def matrix_to_rpy(rot: np.ndarray) -> tuple[float, float, float]:
    """Inverse of `rpy_to_matrix` (pitch in [-pi/2, pi/2]; at the singularity roll is set to 0)."""
    pitch = math.asin(max(-1.0, min(1.0, -float(rot[2, 0]))))
    if abs(math.cos(pitch)) > 1e-9:
        roll = math.atan2(float(rot[2, 1]), float(rot[2, 2]))
        yaw = math.atan2(float(rot[1, 0]), float(rot[0, 0]))
    else:
        roll = 0.0
        yaw = math.atan2(-float(rot[0, 1]), float(rot[1, 1]))
    return roll, pitch, yaw


def rotation_z_to(direction: np.ndarray) -> np.ndarray:
    """A rotation whose z axis points along `direction` (URDF capsules and cylinders lie along z)."""
    z = np.asarray(direction, dtype=float)
    z = z / np.linalg.norm(z)
    helper = np.array([1.0, 0.0, 0.0]) if abs(z[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = np.cross(helper, z)
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    return np.column_stack([x, y, z])


@dataclass(frozen=True)
class Shape:
    """A primitive collision (and, on the render path, visual) shape placed in its link's frame.

    `size` is: box -> full extents (x, y, z); capsule/cylinder -> (radius, length along local z);
    sphere -> (radius,). A capsule's `length` is the distance between its two hemisphere centres.
    """

    kind: ShapeKind
    size: tuple[float, ...]
    xyz: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)
    color: tuple[float, float, float, float] = (0.6, 0.6, 0.6, 1.0)

    def inertia_diagonal(self, mass: float) -> tuple[float, float, float]:
        """Principal moments of a solid body of this shape and `mass`, about its own centre and axes.

        A capsule is treated as a solid cylinder spanning its full length (2r + length): simple, and
        within a few percent of the exact capsule for the slender links used here.
        """
        if self.kind == "box":
            x, y, z = self.size
            return (mass * (y * y + z * z) / 12, mass * (x * x + z * z) / 12, mass * (x * x + y * y) / 12)
        if self.kind == "sphere":
            (r,) = self.size
            i = 0.4 * mass * r * r
            return (i, i, i)
        r, length = self.size
        h = length + 2 * r if self.kind == "capsule" else length
        side = mass * (3 * r * r + h * h) / 12
        return (side, side, 0.5 * mass * r * r)


def capsule_between(a: np.ndarray, b: np.ndarray, radius: float, **kw: object) -> Shape:
    """A capsule whose two hemisphere centres are the points `a` and `b` of the link frame."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    rot = rotation_z_to(b - a)
    return Shape(
        "capsule",
        (radius, float(np.linalg.norm(b - a))),
        tuple(float(v) for v in (a + b) / 2),  # type: ignore[arg-type]
        matrix_to_rpy(rot),
        **kw,  # type: ignore[arg-type]
    )


@dataclass(frozen=True)
class Link:
    """A rigid link: its mass (inertia from its first shape) and its primitive shapes."""

    name: str
    mass: float
    shapes: tuple[Shape, ...] = ()
    friction: tuple[float, float, float] | None = None
    """(static, dynamic, restitution) for this link's collision shapes; None keeps the scene default."""


@dataclass(frozen=True)
class Joint:
    """A URDF joint: `xyz`/`rpy` place the child frame in the parent frame (at q = 0)."""

    name: str
    type: Literal["revolute", "prismatic", "fixed"]
    parent: str
    child: str
    xyz: tuple[float, float, float]
    rpy: tuple[float, float, float]
    axis: tuple[float, float, float] = (0.0, 0.0, 1.0)
    lower: float = 0.0
    upper: float = 0.0
    effort: float = 0.0
    velocity: float = 0.0


@dataclass(frozen=True)
class RobotDescription:
    """A kinematic tree of links and joints (the first link is the root)."""

    name: str
    links: tuple[Link, ...]
    joints: tuple[Joint, ...]
    notes: tuple[str, ...] = field(default=())
    """Free text written as XML comments at the top of the URDF (where the numbers come from)."""

    def link(self, name: str) -> Link:
        """The link called `name`."""
        for link in self.links:
            if link.name == name:
                return link
        raise KeyError(name)


def _fmt(values: tuple[float, ...] | np.ndarray) -> str:
    return " ".join(f"{float(v) + 0.0:.9g}" for v in values)  # + 0.0 turns -0.0 into 0


def _geometry(parent: ET.Element, shape: Shape) -> None:
    geom = ET.SubElement(parent, "geometry")
    if shape.kind == "box":
        ET.SubElement(geom, "box", size=_fmt(shape.size))
    elif shape.kind == "sphere":
        ET.SubElement(geom, "sphere", radius=_fmt(shape.size[:1]))
    else:
        ET.SubElement(geom, shape.kind, radius=_fmt(shape.size[:1]), length=_fmt(shape.size[1:2]))


def to_urdf(robot: RobotDescription, visuals: bool = False) -> str:
    """The URDF text of `robot`; `<visual>`/`<material>` only when `visuals` is True (render path)."""
    root = ET.Element("robot", name=robot.name)
    for note in robot.notes:
        root.append(ET.Comment(f" {note} "))
    for link in robot.links:
        el = ET.SubElement(root, "link", name=link.name)
        if link.friction is not None:
            s, d, r = link.friction
            el.append(ET.Comment(f" contact material (applied by datafarm's loader): static friction {s}, "
                                 f"dynamic friction {d}, restitution {r} "))
        if link.mass > 0 and link.shapes:
            main = link.shapes[0]
            inertial = ET.SubElement(el, "inertial")
            ET.SubElement(inertial, "origin", xyz=_fmt(main.xyz), rpy=_fmt(main.rpy))
            ET.SubElement(inertial, "mass", value=f"{link.mass:.9g}")
            ixx, iyy, izz = main.inertia_diagonal(link.mass)
            ET.SubElement(inertial, "inertia", ixx=f"{ixx:.9g}", ixy="0", ixz="0", iyy=f"{iyy:.9g}",
                          iyz="0", izz=f"{izz:.9g}")
        for i, shape in enumerate(link.shapes):
            if visuals:
                vis = ET.SubElement(el, "visual", name=f"{link.name}_visual_{i}")
                ET.SubElement(vis, "origin", xyz=_fmt(shape.xyz), rpy=_fmt(shape.rpy))
                _geometry(vis, shape)
                mat = ET.SubElement(vis, "material", name=f"{link.name}_material_{i}")
                ET.SubElement(mat, "color", rgba=_fmt(shape.color))
            col = ET.SubElement(el, "collision", name=f"{link.name}_collision_{i}")
            ET.SubElement(col, "origin", xyz=_fmt(shape.xyz), rpy=_fmt(shape.rpy))
            _geometry(col, shape)
    for joint in robot.joints:
        el = ET.SubElement(root, "joint", name=joint.name, type=joint.type)
        ET.SubElement(el, "origin", xyz=_fmt(joint.xyz), rpy=_fmt(joint.rpy))
        ET.SubElement(el, "parent", link=joint.parent)
        ET.SubElement(el, "child", link=joint.child)
        if joint.type != "fixed":
            ET.SubElement(el, "axis", xyz=_fmt(joint.axis))
            ET.SubElement(el, "limit", lower=f"{joint.lower:.9g}", upper=f"{joint.upper:.9g}",
                          effort=f"{joint.effort:.9g}", velocity=f"{joint.velocity:.9g}")
    ET.indent(root)
    return '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
