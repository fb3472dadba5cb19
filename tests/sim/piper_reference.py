"""An independent numpy forward kinematics of the PiPER, written in the tests straight from
shared/reference/piper-kinematics.md (it does not import datafarm): the product, base to tip, of
each joint's origin transform (xyz, then roll-pitch-yaw) and its motion about/along its axis."""

from __future__ import annotations

import numpy as np

# joint: (parent, child, type, origin xyz, origin rpy, axis) -- copied from the reference table
TABLE = {
    "joint1": ("base_link", "link1", "revolute", (0, 0, 0.123), (0, 0, -1.5708), (0, 0, 1)),
    "joint2": ("link1", "link2", "revolute", (0, 0, 0), (1.5708, -0.10095, -1.5708), (0, 0, 1)),
    "joint3": ("link2", "link3", "revolute", (0.28503, 0, 0), (0, 0, 1.3826), (0, 0, 1)),
    "joint4": ("link3", "link4", "revolute", (0.021984, 0.25075, 0), (-1.5708, 0, 0), (0, 0, -1)),
    "joint5": ("link4", "link5", "revolute", (0, 0, 0), (1.5708, -0.087266, 0), (0, 0, 1)),
    "joint6": ("link5", "link6", "revolute", (0, 0.091, 0.0014165), (-1.5708, -1.5708, 0), (0, 0, -1)),
    "joint7": ("link6", "link7", "prismatic", (0, 0, 0.13503), (1.5708, 0, 1.5708), (0, 0, -1)),
    "joint8": ("link6", "link8", "prismatic", (0, 0, 0.13503), (-1.5708, 0, 1.5708), (0, 0, 1)),
}
LOWER = np.array([-2.618, 0.0, -2.967, -1.832, -1.22, -3.14])
UPPER = np.array([2.618, 3.14, 0.0, 1.832, 1.22, 3.14])


def rot_x(a: float) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def rot_y(a: float) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def rot_z(a: float) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def axis_angle(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rodrigues' formula."""
    k = np.asarray(axis, float) / np.linalg.norm(axis)
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(angle) * kx + (1 - np.cos(angle)) * kx @ kx


def joint_transform(name: str, q: float) -> np.ndarray:
    """Parent-from-child transform of one joint at position q."""
    _, _, kind, xyz, (r, p, y), axis = TABLE[name]
    origin = np.eye(4)
    origin[:3, :3] = rot_z(y) @ rot_y(p) @ rot_x(r)
    origin[:3, 3] = xyz
    motion = np.eye(4)
    if kind == "revolute":
        motion[:3, :3] = axis_angle(np.array(axis), q)
    else:
        motion[:3, 3] = np.asarray(axis, float) * q
    return origin @ motion


def link6_in_base(q: np.ndarray) -> np.ndarray:
    """Pose of link6 in the base frame at the six arm joint positions q."""
    t = np.eye(4)
    for i in range(6):
        t = t @ joint_transform(f"joint{i + 1}", float(q[i]))
    return t


def tcp_in_base(q: np.ndarray, tcp_in_link6: tuple[float, float, float]) -> np.ndarray:
    """Pose of a point fixed in link6 (orientation = link6's) in the base frame."""
    offset = np.eye(4)
    offset[:3, 3] = tcp_in_link6
    return link6_in_base(q) @ offset


def finger_in_base(q: np.ndarray, finger: str, q_finger: float) -> np.ndarray:
    """Pose of link7 or link8 in the base frame."""
    return link6_in_base(q) @ joint_transform({"link7": "joint7", "link8": "joint8"}[finger], q_finger)
