"""Camera calibration from a ChArUco board lying on the table (OpenCV's `cv2.aruco`).

The lab describes the board (its pattern and where it lies in the world: `world_from_board`, OpenCV's
board frame with its origin at the outer corner of the first square, x along the columns, y along the
rows, z into the board). Every view detects the board's chessboard corners (averaged over several
frames of the static camera); `solvePnP` gives camera_from_board, so
`world_from_camera = world_from_board @ inverse(camera_from_board)`. Without known intrinsics, the
focal length is fitted from the same corners first (principal point at the image centre, no
distortion: one planar view constrains little else).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from datafarm.artifacts.common import Pose
from datafarm.sim.world.frames import pose_to_matrix

MIN_CORNERS = 6
"""Fewest chessboard corners a view must see to be calibrated from the board."""


@dataclass(frozen=True)
class Board:
    """A ChArUco board as the lab describes it."""

    dictionary: str
    """OpenCV ArUco dictionary name, e.g. `DICT_4X4_50`."""
    squares_x: int
    """Squares along the board's x (columns)."""
    squares_y: int
    """Squares along the board's y (rows)."""
    square_length: float
    """Side of a square, metres."""
    marker_length: float
    """Side of a marker, metres."""
    world_from_board: np.ndarray
    """4x4 pose of the board frame in the world."""

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> Board:
        """From a board description (clip.yaml's `board` or the clip's board.yaml): dictionary,
        squares_x, squares_y, square_length, marker_length, world_from_board {position, quaternion}."""
        pose = Pose.model_validate(data["world_from_board"])
        return cls(str(data["dictionary"]), int(data["squares_x"]), int(data["squares_y"]),
                   float(data["square_length"]), float(data["marker_length"]), pose_to_matrix(pose))

    def opencv(self) -> Any:
        """The `cv2.aruco.CharucoBoard`."""
        dictionary = cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, self.dictionary))
        return cv2.aruco.CharucoBoard((self.squares_x, self.squares_y), self.square_length, self.marker_length, dictionary)

    def corners_in_board(self) -> np.ndarray:
        """Inner chessboard corners (N x 3) in the board frame, indexed by corner id."""
        return np.asarray(self.opencv().getChessboardCorners(), float).reshape(-1, 3)

    def outline_in_world(self, margin: float = 0.0) -> np.ndarray:
        """The board's four outer corners (4 x 3) in the world, grown by `margin` metres."""
        w, h = self.squares_x * self.square_length, self.squares_y * self.square_length
        local = np.array([[-margin, -margin, 0], [w + margin, -margin, 0], [w + margin, h + margin, 0], [-margin, h + margin, 0]])
        return local @ self.world_from_board[:3, :3].T + self.world_from_board[:3, 3]


def detect(board: Board, frames: Sequence[np.ndarray]) -> dict[int, np.ndarray]:
    """Chessboard corner id -> pixel position (x, y), averaged over the frames it was found in."""
    detector = cv2.aruco.CharucoDetector(board.opencv())
    found: dict[int, list[np.ndarray]] = {}
    for rgb in frames:
        grey = cv2.cvtColor(np.asarray(rgb, np.uint8), cv2.COLOR_RGB2GRAY)
        corners, ids, _, _ = detector.detectBoard(grey)
        if ids is None or corners is None:
            continue
        for i, c in zip(ids.ravel(), corners.reshape(-1, 2)):
            found.setdefault(int(i), []).append(c.astype(float))
    return {i: np.mean(v, axis=0) for i, v in found.items()}


@dataclass(frozen=True)
class BoardFit:
    """One camera calibrated from the board."""

    K: np.ndarray
    """3x3 intrinsics (given, or fitted when `intrinsics_fitted`)."""
    world_from_camera: np.ndarray
    """4x4 camera pose in the world."""
    corners: int
    """Corners used."""
    rms_px: float
    """Root-mean-square reprojection error of the corners, pixels."""
    intrinsics_fitted: bool
    """The focal length was fitted (no intrinsics were given)."""


def fit_camera(board: Board, frames: Sequence[np.ndarray], K: np.ndarray | None = None,
               dist: np.ndarray | None = None) -> BoardFit | None:
    """The camera's pose (and, without `K`, its focal length) from the board; None when it sees too little."""
    seen = detect(board, frames)
    if len(seen) < MIN_CORNERS:
        return None
    ids = sorted(seen)
    obj = board.corners_in_board()[ids].astype(np.float32)
    img = np.array([seen[i] for i in ids], np.float32)
    h, w = np.asarray(frames[0]).shape[:2]
    dist = np.zeros(5) if dist is None or len(dist) == 0 else np.asarray(dist, float)
    fitted = K is None
    if fitted:
        guess = np.array([[0.9 * w, 0, (w - 1) / 2], [0, 0.9 * w, (h - 1) / 2], [0, 0, 1]], float)
        flags = (cv2.CALIB_USE_INTRINSIC_GUESS | cv2.CALIB_FIX_PRINCIPAL_POINT | cv2.CALIB_FIX_ASPECT_RATIO
                 | cv2.CALIB_ZERO_TANGENT_DIST | cv2.CALIB_FIX_K1 | cv2.CALIB_FIX_K2 | cv2.CALIB_FIX_K3)
        _, K, dist, _, _ = cv2.calibrateCamera([obj], [img], (w, h), guess, np.zeros(5), flags=flags)
    ok, rvec, tvec = cv2.solvePnP(obj, img, np.asarray(K, float), dist, flags=cv2.SOLVEPNP_IPPE)
    if not ok:
        return None
    rvec, tvec = cv2.solvePnPRefineLM(obj, img, np.asarray(K, float), dist, rvec, tvec)
    projected, _ = cv2.projectPoints(obj, rvec, tvec, np.asarray(K, float), dist)
    rms = float(np.sqrt(np.mean(np.sum((projected.reshape(-1, 2) - img) ** 2, axis=1))))
    camera_from_board = np.eye(4)
    camera_from_board[:3, :3] = cv2.Rodrigues(rvec)[0]
    camera_from_board[:3, 3] = tvec.ravel()
    world_from_camera = board.world_from_board @ np.linalg.inv(camera_from_board)
    return BoardFit(np.asarray(K, float), world_from_camera, len(ids), rms, fitted)


def triangulated_square(board: Board, frames_by_view: Sequence[Sequence[np.ndarray]],
                        projections: Sequence[np.ndarray]) -> float | None:
    """The board's square side measured in the world the cameras define: corners seen by two or more
    views triangulated (3x4 projection matrices `projections`, world -> pixels), then the mean distance
    of neighbouring corners. None when fewer than two views see shared corners."""
    seen = [detect(board, frames) for frames in frames_by_view]
    points: dict[int, np.ndarray] = {}
    for cid in set().union(*[set(s) for s in seen]):
        views = [(P, s[cid]) for P, s in zip(projections, seen) if cid in s]
        if len(views) < 2:
            continue
        rows = []
        for P, (u, v) in views:
            rows.append(u * P[2] - P[0])
            rows.append(v * P[2] - P[1])
        _, _, vt = np.linalg.svd(np.array(rows))
        X = vt[-1]
        points[cid] = X[:3] / X[3]
    nx = board.squares_x - 1
    gaps = [float(np.linalg.norm(points[i] - points[j])) for i in points for j in (i + 1, i + nx)
            if j in points and (j != i + 1 or (i + 1) % nx != 0)]
    return float(np.mean(gaps)) if gaps else None
