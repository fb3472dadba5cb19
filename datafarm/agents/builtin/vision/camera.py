"""A calibrated pinhole camera as NumPy arrays: projecting world points, casting pixel rays and
meeting them with the table plane. Frames follow datafarm.artifacts.common (OpenCV camera frame,
`world_from_camera`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import cv2
import numpy as np

from datafarm.artifacts.common import Intrinsics, Pose
from datafarm.sim.world.frames import matrix_to_pose, pose_to_matrix


@dataclass(frozen=True)
class Camera:
    """One camera: intrinsics matrix, distortion, pose, image size."""

    name: str
    """Camera (view) name."""
    K: np.ndarray
    """3x3 intrinsics matrix."""
    dist: np.ndarray
    """OpenCV distortion coefficients (may be empty)."""
    world_from_camera: np.ndarray
    """4x4 pose of the OpenCV camera frame in the world."""
    width: int
    """Image width, pixels."""
    height: int
    """Image height, pixels."""

    @classmethod
    def of(cls, name: str, intrinsics: Intrinsics, pose: Pose) -> Camera:
        """A camera from artifact intrinsics and its world_from_camera pose."""
        K = np.array([[intrinsics.fx, 0.0, intrinsics.cx], [0.0, intrinsics.fy, intrinsics.cy], [0.0, 0.0, 1.0]])
        return cls(name, K, np.asarray(intrinsics.distortion, float), pose_to_matrix(pose), intrinsics.width,
                   intrinsics.height)

    @cached_property
    def camera_from_world(self) -> np.ndarray:
        """4x4 inverse of the pose."""
        return np.linalg.inv(self.world_from_camera)

    @property
    def centre(self) -> np.ndarray:
        """Camera centre in the world."""
        return self.world_from_camera[:3, 3].copy()

    def intrinsics(self) -> Intrinsics:
        """The intrinsics as an artifact."""
        return Intrinsics(width=self.width, height=self.height, fx=float(self.K[0, 0]), fy=float(self.K[1, 1]),
                          cx=float(self.K[0, 2]), cy=float(self.K[1, 2]), distortion=[float(v) for v in self.dist])

    def pose(self) -> Pose:
        """world_from_camera as an artifact Pose."""
        return matrix_to_pose(self.world_from_camera)

    def scaled(self, width: int, height: int) -> Camera:
        """The same camera for images resized to `width` x `height`."""
        sx, sy = width / self.width, height / self.height
        K = self.K.copy()
        K[0] *= sx
        K[1] *= sy
        return Camera(self.name, K, self.dist, self.world_from_camera, width, height)

    def to_camera(self, points: np.ndarray) -> np.ndarray:
        """World points (N x 3) in the camera frame."""
        cfw = self.camera_from_world
        return np.asarray(points, float) @ cfw[:3, :3].T + cfw[:3, 3]

    def project(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(pixels N x 2, depth N) of world points; depth <= 0 means behind the camera."""
        pc = self.to_camera(np.asarray(points, float).reshape(-1, 3))
        depth = pc[:, 2]
        safe = np.where(np.abs(depth) < 1e-9, 1e-9, depth)
        if self.dist.size and np.any(self.dist):
            rvec = np.zeros(3)
            pix, _ = cv2.projectPoints(pc.reshape(-1, 1, 3), rvec, np.zeros(3), self.K, self.dist)
            return pix.reshape(-1, 2), depth
        uv = pc[:, :2] / safe[:, None]
        return uv @ self.K[:2, :2].T + self.K[:2, 2], depth

    def rays(self, pixels: np.ndarray) -> np.ndarray:
        """Unit world directions (N x 3) of the rays through pixel centres (N x 2)."""
        pix = np.asarray(pixels, float).reshape(-1, 2)
        if self.dist.size and np.any(self.dist):
            norm = cv2.undistortPoints(pix.reshape(-1, 1, 2), self.K, self.dist).reshape(-1, 2)
        else:
            norm = (pix - self.K[:2, 2]) / np.diag(self.K)[:2]
        d = np.column_stack([norm, np.ones(len(norm))]) @ self.world_from_camera[:3, :3].T
        return d / np.linalg.norm(d, axis=1, keepdims=True)

    def plane_points(self, pixels: np.ndarray, z: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """(world points N x 3, valid N) where the pixel rays meet the horizontal plane at height `z`."""
        d = self.rays(pixels)
        c = self.centre
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (z - c[2]) / d[:, 2]
        valid = np.isfinite(t) & (t > 0)
        t = np.where(valid, t, 0.0)
        return c + d * t[:, None], valid

    def pixel_grid(self, step: int = 1) -> np.ndarray:
        """Pixel centres (H*W x 2) of the whole image (row-major), every `step` pixels."""
        ys, xs = np.mgrid[0:self.height:step, 0:self.width:step]
        return np.column_stack([xs.ravel(), ys.ravel()]).astype(float)


def rotation_error_deg(a: np.ndarray, b: np.ndarray) -> float:
    """Angle of the rotation between two 3x3 rotations, degrees."""
    cos = (np.trace(a[:3, :3].T @ b[:3, :3]) - 1.0) / 2.0
    return float(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))))
