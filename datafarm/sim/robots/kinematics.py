"""Forward and inverse kinematics of one arm, on SAPIEN's pinocchio model of its articulation.

Poses are of the arm's TCP (a fixed offset from its end-effector link) in the world frame; the arm's
base pose is fixed at load time. The pinocchio model covers every active joint of the articulation
(fingers included); the arm joints are a subset, and IK moves only them.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import sapien


def pose_to_matrix(pose: sapien.Pose) -> np.ndarray:
    """A sapien.Pose as a float64 4x4 homogeneous matrix."""
    return np.asarray(pose.to_transformation_matrix(), dtype=np.float64)


def matrix_to_pose(matrix: np.ndarray) -> sapien.Pose:
    """A 4x4 homogeneous matrix as a sapien.Pose (float32 inside SAPIEN)."""
    return sapien.Pose(np.asarray(matrix, dtype=np.float32))


def rotation_angle(rot: np.ndarray) -> float:
    """The angle (radians, 0..pi) of a 3x3 rotation matrix, from ||R - I||_F = 2 sqrt(2) sin(angle/2)
    (well conditioned near 0, unlike acos of the trace)."""
    return 2.0 * math.asin(min(1.0, float(np.linalg.norm(rot - np.eye(3))) / (2.0 * math.sqrt(2.0))))


class IkResult(NamedTuple):
    """What `ik` returns: arm joint positions, whether the target was reached inside the joint
    limits, and the TCP position error of `q` in metres."""

    q: np.ndarray
    success: bool
    error_m: float


class ArmKinematics:
    """FK/IK of one arm: `joint_indices` pick the arm joints out of the articulation's active joints."""

    def __init__(self, articulation: sapien.physx.PhysxArticulation, joint_indices: np.ndarray,
                 ee_link_index: int, tcp_in_link: np.ndarray, base_pose: np.ndarray,
                 lower: np.ndarray, upper: np.ndarray, revolute: np.ndarray) -> None:
        self.model = articulation.create_pinocchio_model()
        self.dof = articulation.dof
        self.joint_indices = np.asarray(joint_indices, dtype=np.int64)
        self.ee_link_index = ee_link_index
        self.tcp_in_link = np.asarray(tcp_in_link, dtype=np.float64)
        self.base_pose = np.asarray(base_pose, dtype=np.float64)
        self.lower = np.asarray(lower, dtype=np.float64)
        self.upper = np.asarray(upper, dtype=np.float64)
        self.revolute = np.asarray(revolute, dtype=bool)
        self._mask = np.zeros(self.dof, dtype=np.int32)
        self._mask[self.joint_indices] = 1

    def _full(self, q: np.ndarray) -> np.ndarray:
        full = np.zeros(self.dof)
        full[self.joint_indices] = q
        return full

    def tcp_in_base(self, q: np.ndarray) -> np.ndarray:
        """4x4 pose of the TCP in the arm's base frame at arm joint positions `q`."""
        self.model.compute_forward_kinematics(self._full(np.asarray(q, dtype=np.float64)))
        return pose_to_matrix(self.model.get_link_pose(self.ee_link_index)) @ self.tcp_in_link

    def fk(self, q: np.ndarray) -> sapien.Pose:
        """World pose of the TCP at arm joint positions `q` (computed, not simulated)."""
        return matrix_to_pose(self.base_pose @ self.tcp_in_base(q))

    def within_limits(self, q: np.ndarray, tol: float = 1e-9) -> bool:
        """True when every arm joint of `q` lies inside its limits (plus `tol`)."""
        return bool(np.all(q >= self.lower - tol) and np.all(q <= self.upper + tol))

    def wrap_into_limits(self, q: np.ndarray) -> np.ndarray:
        """Shift revolute joints by multiples of 2 pi into their limits where that is possible."""
        q = np.array(q, dtype=np.float64)
        for i in np.flatnonzero(self.revolute):
            for shift in (0.0, 2 * math.pi, -2 * math.pi, 4 * math.pi, -4 * math.pi):
                if self.lower[i] <= q[i] + shift <= self.upper[i]:
                    q[i] += shift
                    break
        return q

    def _errors(self, q: np.ndarray, target_in_base: np.ndarray) -> tuple[float, float]:
        tcp = self.tcp_in_base(q)
        pos = float(np.linalg.norm(tcp[:3, 3] - target_in_base[:3, 3]))
        rot = rotation_angle(tcp[:3, :3].T @ target_in_base[:3, :3])
        return pos, rot

    def ik(self, target: sapien.Pose, q_init: np.ndarray, pos_tol: float = 1e-3, rot_tol: float = 1e-2,
           restarts: int = 16, seed: int = 0, max_iterations: int = 500) -> IkResult:
        """Arm joint positions that put the TCP at the world pose `target`, inside the joint limits.

        Runs SAPIEN's pinocchio CLIK from `q_init`, then (if that fails) from `restarts` seeded random
        in-limit configurations. A solution outside the limits is wrapped by 2 pi where possible,
        otherwise clamped and rejected. Success: position within `pos_tol` metres and orientation
        within `rot_tol` radians. On failure, the in-limit configuration with the smallest error is
        returned. Deterministic for a given `seed`.
        """
        target_in_base = np.linalg.inv(self.base_pose) @ pose_to_matrix(target)
        link_target = matrix_to_pose(target_in_base @ np.linalg.inv(self.tcp_in_link))
        rng = np.random.default_rng(seed)
        starts = [np.clip(np.asarray(q_init, dtype=np.float64), self.lower, self.upper)]
        finite_lo = np.where(np.isfinite(self.lower), self.lower, -math.pi)
        finite_hi = np.where(np.isfinite(self.upper), self.upper, math.pi)
        best: tuple[float, np.ndarray, float] | None = None
        for attempt in range(restarts + 1):
            start = starts[0] if attempt == 0 else rng.uniform(finite_lo, finite_hi)
            full, _converged, _err6 = self.model.compute_inverse_kinematics(
                self.ee_link_index, link_target, initial_qpos=self._full(start),
                active_qmask=self._mask, max_iterations=max_iterations)
            q = self.wrap_into_limits(np.asarray(full, dtype=np.float64)[self.joint_indices])
            inside = self.within_limits(q)
            q = np.clip(q, self.lower, self.upper)
            pos, rot = self._errors(q, target_in_base)
            if inside and pos <= pos_tol and rot <= rot_tol:
                return IkResult(q, True, pos)
            score = pos + 0.1 * rot  # 0.1 m per radian: ranks near-misses sensibly
            if best is None or score < best[0]:
                best = (score, q, pos)
        assert best is not None
        return IkResult(best[1], False, best[2])
