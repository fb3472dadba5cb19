"""The AgileX PiPER arm, written by us from its kinematics table (shared/reference/piper-kinematics.md).

Joint origins, axes and limits and the link masses are the table's numbers. Everything else is ours
and is marked as an assumption: the collision geometry (capsules and boxes sized to the link
lengths), inertias (solid bodies of that geometry), velocity limits, the finger effort limit, the
finger shape and friction, and the tool centre point.

Gripper. Two prismatic fingers, `joint7` (range [-0.038, 0]) and `joint8` (range [0, 0.038]). At
q = 0 both inner finger faces lie on the gripper axis (width 0); opening moves `link7` towards +x of
`link6` and `link8` towards -x, so the gap between the inner faces is `q8 - q7`, 0 to 76 mm.

Tool centre point (TCP). A frame fixed to `link6`: on the gripper axis (link6 z), midway between the
two fingers, at the centre of the finger pads, `TCP_IN_LINK6` = 0.155 m from the link6 origin (the
pads span 0.135 to 0.175 m, so the TCP lies 20 mm behind the fingertips). Its orientation is
link6's: z is the approach direction (out of the gripper), x the opening direction (link7 moves to
+x when opening), y = z cross x.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from datafarm.sim.robots.description import (
    Joint,
    Link,
    RobotDescription,
    Shape,
    capsule_between,
    matrix_to_rpy,
    rpy_to_matrix,
)


@dataclass(frozen=True)
class TableRow:
    """One row of the PiPER kinematics table (names without any prefix)."""

    joint: str
    type: str
    parent: str
    child: str
    xyz: tuple[float, float, float]
    rpy: tuple[float, float, float]
    axis: tuple[float, float, float]
    lower: float
    upper: float


# Transcribed from shared/reference/piper-kinematics.md (manufacturer's URDF, MIT).
PIPER_TABLE: tuple[TableRow, ...] = (
    TableRow("joint1", "revolute", "base_link", "link1", (0, 0, 0.123), (0, 0, -1.5708), (0, 0, 1), -2.618, 2.618),
    TableRow("joint2", "revolute", "link1", "link2", (0, 0, 0), (1.5708, -0.10095, -1.5708), (0, 0, 1), 0.0, 3.14),
    TableRow("joint3", "revolute", "link2", "link3", (0.28503, 0, 0), (0, 0, 1.3826), (0, 0, 1), -2.967, 0.0),
    TableRow("joint4", "revolute", "link3", "link4", (0.021984, 0.25075, 0), (-1.5708, 0, 0), (0, 0, -1), -1.832, 1.832),
    TableRow("joint5", "revolute", "link4", "link5", (0, 0, 0), (1.5708, -0.087266, 0), (0, 0, 1), -1.22, 1.22),
    TableRow("joint6", "revolute", "link5", "link6", (0, 0.091, 0.0014165), (-1.5708, -1.5708, 0), (0, 0, -1), -3.14, 3.14),
    TableRow("joint7", "prismatic", "link6", "link7", (0, 0, 0.13503), (1.5708, 0, 1.5708), (0, 0, -1), -0.038, 0.0),
    TableRow("joint8", "prismatic", "link6", "link8", (0, 0, 0.13503), (-1.5708, 0, 1.5708), (0, 0, 1), 0.0, 0.038),
)

PIPER_LINK_MASSES: dict[str, float] = {
    "base_link": 0.16, "link1": 0.098, "link2": 0.290, "link3": 0.291, "link4": 0.127,
    "link5": 0.145, "link6": 0.150, "link7": 0.026, "link8": 0.026,
}

ARM_JOINTS = ("joint1", "joint2", "joint3", "joint4", "joint5", "joint6")
"""The six revolute joints, base to wrist."""
FINGER_JOINTS = ("joint7", "joint8")
"""The two prismatic finger joints."""
EE_LINK = "link6"
"""The link the TCP is fixed to."""
GRIPPER_MAX_WIDTH = 0.076
"""Largest gap between the inner finger faces, metres (2 x 38 mm)."""

ARM_EFFORT = 100.0
"""N m; the source file's value, a placeholder (the real motors are weaker)."""
ARM_VELOCITY = 3.0
"""rad/s; assumed (not in the table)."""
FINGER_EFFORT = 10.0
"""N per finger; assumed (sets the grip force a closed PD finger can reach)."""
FINGER_VELOCITY = 0.1
"""m/s per finger; assumed."""
FINGER_FRICTION = (1.5, 1.5, 0.0)
"""(static, dynamic, restitution) of the finger pads: high, rubber-like, so grasps hold."""

FINGER_BASE_Z = 0.13503
"""Distance from the link6 origin to the finger joints along the gripper axis (table, joint7/8)."""
FINGER_LENGTH = 0.04
"""Finger pad length along the approach axis (assumed)."""
FINGER_THICKNESS = 0.01
"""Finger thickness along the opening axis (assumed)."""
FINGER_WIDTH = 0.02
"""Finger width across the opening axis (assumed)."""
TCP_IN_LINK6 = (0.0, 0.0, FINGER_BASE_Z + FINGER_LENGTH / 2)
"""TCP position in the link6 frame (orientation = link6's); see the module docstring."""

_GREY, _DARK = (0.75, 0.75, 0.78, 1.0), (0.15, 0.15, 0.17, 1.0)


def _row_transform(row: TableRow) -> np.ndarray:
    t = np.eye(4)
    t[:3, :3] = rpy_to_matrix(row.rpy)
    t[:3, 3] = row.xyz
    return t


def _box_from_parent_frame(row: TableRow, centre_in_parent: np.ndarray, size: tuple[float, float, float],
                           color: tuple[float, float, float, float]) -> Shape:
    """A box given in the parent link's frame (axes aligned with it, joint at q = 0), re-expressed in
    the child link's frame: the finger pads are easiest to state in link6 coordinates."""
    child_from_parent = np.linalg.inv(_row_transform(row))
    centre = child_from_parent[:3, :3] @ centre_in_parent + child_from_parent[:3, 3]
    return Shape("box", size, tuple(float(v) for v in centre), matrix_to_rpy(child_from_parent[:3, :3]),  # type: ignore[arg-type]
                 color)


def _shapes() -> dict[str, tuple[Shape, ...]]:
    """Collision geometry per link (in each link's own frame), sized to the table's link lengths."""
    rows = {r.joint: r for r in PIPER_TABLE}
    origin = np.zeros(3)
    half_pad = FINGER_THICKNESS / 2
    pad_z = FINGER_BASE_Z + FINGER_LENGTH / 2
    pad_size = (FINGER_THICKNESS, FINGER_WIDTH, FINGER_LENGTH)
    return {
        # base: a block under the shoulder, from the mounting plane up to 0.07 m
        "base_link": (Shape("box", (0.1, 0.1, 0.07), (0.0, 0.0, 0.035), color=_DARK),),
        # shoulder housing, just below the joint2 axis (link1 z is vertical)
        "link1": (capsule_between(np.array([0, 0, -0.05]), origin, 0.04, color=_GREY),),
        # upper arm: joint2 to joint3
        "link2": (capsule_between(origin, np.array(rows["joint3"].xyz), 0.035, color=_GREY),),
        # forearm: joint3 to joint4
        "link3": (capsule_between(origin, np.array(rows["joint4"].xyz), 0.03, color=_GREY),),
        # wrist housing around the joint5 axis (link4 z runs along the forearm)
        "link4": (capsule_between(np.array([0, 0, -0.03]), origin, 0.03, color=_DARK),),
        # wrist: joint5 to the flange (joint6)
        "link5": (capsule_between(origin, np.array(rows["joint6"].xyz), 0.03, color=_GREY),),
        # gripper housing between the flange and the finger joints
        "link6": (Shape("box", (0.09, 0.05, 0.125), (0.0, 0.0, 0.0675), color=_DARK),),
        # finger pads: inner faces on the gripper axis at q = 0; link7 on the +x side, link8 on -x
        "link7": (_box_from_parent_frame(rows["joint7"], np.array([half_pad, 0.0, pad_z]), pad_size, _DARK),),
        "link8": (_box_from_parent_frame(rows["joint8"], np.array([-half_pad, 0.0, pad_z]), pad_size, _DARK),),
    }


def piper_description(prefix: str = "") -> RobotDescription:
    """The one-arm PiPER as a RobotDescription; every link and joint name gets `prefix` in front."""
    shapes = _shapes()
    links = tuple(
        Link(prefix + name, mass, shapes[name], FINGER_FRICTION if name in ("link7", "link8") else None)
        for name, mass in PIPER_LINK_MASSES.items()
    )
    joints = []
    for r in PIPER_TABLE:
        finger = r.type == "prismatic"
        joints.append(Joint(
            prefix + r.joint, r.type, prefix + r.parent, prefix + r.child,  # type: ignore[arg-type]
            r.xyz, r.rpy, r.axis, r.lower, r.upper,
            FINGER_EFFORT if finger else ARM_EFFORT, FINGER_VELOCITY if finger else ARM_VELOCITY,
        ))
    notes = (
        "AgileX PiPER, written by datafarm from the kinematics table (joint origins, axes, limits, link "
        "masses from the manufacturer's public URDF, MIT).",
        "Assumed, not from the table: collision geometry, inertias, velocity limits, finger effort, "
        f"finger pads, TCP = {TCP_IN_LINK6} in {prefix}link6.",
    )
    return RobotDescription(f"{prefix}piper", links, tuple(joints), notes)
