"""Rigid-transform arithmetic in float64 for world building: artifact Poses (wxyz quaternions) as 4x4
matrices, quaternion products, and the table-top transform that the sampled height and tilt apply.

SAPIEN poses are float32; the variation z is written in float64 so that a seed reproduces the same
numbers in any process, and only the final pose is handed to SAPIEN.
"""

from __future__ import annotations

import math

import numpy as np
import sapien

from datafarm.artifacts.common import Pose


def quat_to_matrix(q: tuple[float, float, float, float] | np.ndarray) -> np.ndarray:
    """3x3 rotation matrix of a unit quaternion (w, x, y, z)."""
    w, x, y, z = (float(c) for c in q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def matrix_to_quat(r: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z) with w >= 0 of a 3x3 rotation matrix (Shepperd's method)."""
    m = np.asarray(r, dtype=np.float64)
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    if trace > 0:
        s = 2.0 * math.sqrt(trace + 1.0)
        q = [0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s]
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        q = [(m[2, 1] - m[1, 2]) / s, 0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s]
    elif m[1, 1] > m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
        q = [(m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s]
    else:
        s = 2.0 * math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
        q = [(m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s]
    out = np.array(q)
    out /= np.linalg.norm(out)
    return -out if out[0] < 0 else out


def look_at(position: tuple[float, float, float], target: tuple[float, float, float]) -> np.ndarray:
    """world_from_camera rotation of an OpenCV camera (columns: x right, y down, z forward) at
    `position` looking at `target`, its x axis level (the image is not rolled)."""
    z = np.subtract(target, position).astype(float)
    z /= np.linalg.norm(z)
    x = np.cross(z, (0.0, 0.0, 1.0))
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    return np.stack([x, y, z], axis=1)


def pose_to_matrix(pose: Pose) -> np.ndarray:
    """4x4 homogeneous matrix of an artifact Pose."""
    t = np.eye(4)
    t[:3, :3] = quat_to_matrix(pose.quaternion)
    t[:3, 3] = pose.position
    return t


def matrix_to_pose(t: np.ndarray) -> Pose:
    """Artifact Pose of a 4x4 homogeneous matrix."""
    return Pose(position=tuple(float(v) for v in t[:3, 3]), quaternion=tuple(float(v) for v in matrix_to_quat(t[:3, :3])))


def rotation_x(angle: float) -> np.ndarray:
    """3x3 rotation about x by `angle` radians."""
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]], dtype=np.float64)


def rotation_y(angle: float) -> np.ndarray:
    """3x3 rotation about y by `angle` radians."""
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]], dtype=np.float64)


def rotation_z(angle: float) -> np.ndarray:
    """3x3 rotation about z by `angle` radians."""
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]], dtype=np.float64)


def rotvec_to_matrix(v: np.ndarray) -> np.ndarray:
    """3x3 rotation of a rotation vector (axis times angle, radians; Rodrigues' formula)."""
    v = np.asarray(v, dtype=np.float64)
    angle = float(np.linalg.norm(v))
    if angle < 1e-15:
        return np.eye(3)
    k = v / angle
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + math.sin(angle) * kx + (1 - math.cos(angle)) * kx @ kx


def table_top_matrix(center: tuple[float, float], height_offset: float, tilt_x: float, tilt_y: float) -> np.ndarray:
    """world_from_top: the table top's frame, whose origin is the top's centre on its upper surface.

    The top is tilted about its centre, by `tilt_x` about world x after `tilt_y` about world y
    (R = Rx(tilt_x) Ry(tilt_y); the order only matters to second order for such small angles), and
    raised by `height_offset`. With zero offset and tilt it is the world frame moved to `center`."""
    t = np.eye(4)
    t[:3, :3] = rotation_x(tilt_x) @ rotation_y(tilt_y)
    t[:3, 3] = (center[0], center[1], height_offset)
    return t


def yaw_of(pose: Pose) -> float:
    """Rotation of `pose` about world z, radians (the heading of its x axis in the xy plane)."""
    r = quat_to_matrix(pose.quaternion)
    return math.atan2(r[1, 0], r[0, 0])


def tilt_of(pose: Pose) -> float:
    """Angle between `pose`'s z axis and world z, radians (0 for a pose that only yaws)."""
    r = quat_to_matrix(pose.quaternion)
    return math.acos(max(-1.0, min(1.0, r[2, 2])))


def to_sapien(pose: Pose | np.ndarray) -> sapien.Pose:
    """A sapien.Pose from an artifact Pose or a 4x4 matrix."""
    if isinstance(pose, np.ndarray):
        pose = matrix_to_pose(pose)
    return sapien.Pose(np.array(pose.position, dtype=np.float32), np.array(pose.quaternion, dtype=np.float32))


def local_pose(xyz: tuple[float, float, float], rotation: np.ndarray | None = None) -> sapien.Pose:
    """A shape's pose inside its body: translation `xyz`, optional 3x3 `rotation`."""
    q = matrix_to_quat(rotation) if rotation is not None else np.array([1.0, 0.0, 0.0, 0.0])
    return sapien.Pose(np.array(xyz, dtype=np.float32), q.astype(np.float32))


Z_FROM_X = rotation_y(-math.pi / 2)
"""Turns SAPIEN's cylinder axis (x) onto z: cylinders in datafarm stand upright."""
