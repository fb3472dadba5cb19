"""The ChArUco calibration board: how clip.yaml describes it (`ClipBoard`), the OpenCV board it is,
its printed image, and where a scene's `BoardSetup` puts it in the world.

Board frame (OpenCV's, what `cv2.solvePnP` on the board's object points returns): origin at the outer
corner of the first square, x along the columns (the image's right when the board image is upright),
y along the rows (image down), z = x cross y, into the board. A board lying face up on the table has
its z pointing down. A camera pose follows from a detection as
`world_from_camera = world_from_board @ inverse(camera_from_board)`.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.common import FiniteFloat, Pose
from datafarm.sim.world.frames import matrix_to_pose, rotation_z
from datafarm.studio.scene import BoardSetup

BOARD_LIFT = 0.0008
"""Height of the printed surface above the table top, metres (paper on the table; avoids z-fighting)."""


class ClipBoard(Artifact):
    """A ChArUco board seen in the clip, as the lab describes it: its pattern and where it lies in the world."""

    dictionary: str
    """OpenCV ArUco dictionary name, e.g. `DICT_4X4_50`."""
    squares_x: int = Field(ge=2)
    """Number of squares along the board's x axis (columns)."""
    squares_y: int = Field(ge=2)
    """Number of squares along the board's y axis (rows)."""
    square_length: FiniteFloat = Field(gt=0)
    """Side of a chessboard square, metres."""
    marker_length: FiniteFloat = Field(gt=0)
    """Side of an ArUco marker, metres."""
    world_from_board: Pose
    """Pose of the board frame in the world (OpenCV's board frame: origin at the outer corner of the first square, x along the columns, y along the rows, z into the board)."""


def opencv_board(board: ClipBoard | BoardSetup) -> object:
    """The `cv2.aruco.CharucoBoard` of a board description (current, non-legacy pattern)."""
    import cv2

    if isinstance(board, ClipBoard):
        squares, square, marker, name = (board.squares_x, board.squares_y), board.square_length, board.marker_length, board.dictionary
    else:
        squares, square, marker, name = board.squares, board.square_length, board.marker_length, board.dictionary
    dictionary = cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, name))
    return cv2.aruco.CharucoBoard(squares, square, marker, dictionary)


PIXELS_PER_SQUARE = 96
"""Resolution of the printed board's image (texture pixels per square)."""


def margin_pixels(setup: BoardSetup, pixels_per_square: int = PIXELS_PER_SQUARE) -> int:
    """The white margin of the board image, whole pixels (the printed margin is this many pixels wide)."""
    return round(setup.margin / setup.square_length * pixels_per_square)


def board_image(setup: BoardSetup, pixels_per_square: int = PIXELS_PER_SQUARE) -> np.ndarray:
    """The printed board as a uint8 grey image, white margin included (rows along the board's y)."""
    import cv2

    nx, ny = setup.squares
    margin = margin_pixels(setup, pixels_per_square)
    image = opencv_board(setup).generateImage((nx * pixels_per_square, ny * pixels_per_square), marginSize=0)
    return cv2.copyMakeBorder(image, margin, margin, margin, margin, cv2.BORDER_CONSTANT, value=255)


def world_from_board(setup: BoardSetup) -> np.ndarray:
    """4x4 world_from_board of a board lying face up at `setup.center`, turned by `setup.yaw`.

    At yaw 0 the board's x (columns) runs along world +y and its y (rows) along world +x, so a camera
    at +x looking back at the table sees the printed image upright."""
    upright = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, -1.0]])  # columns: board axes in world
    rotation = rotation_z(setup.yaw) @ upright
    half = np.array([setup.squares[0] * setup.square_length / 2, setup.squares[1] * setup.square_length / 2, 0.0])
    out = np.eye(4)
    out[:3, :3] = rotation
    out[:3, 3] = np.array([setup.center[0], setup.center[1], BOARD_LIFT]) - rotation @ half
    return out


def clip_board(setup: BoardSetup) -> ClipBoard:
    """The clip.yaml description of a scene's board."""
    return ClipBoard(dictionary=setup.dictionary, squares_x=setup.squares[0], squares_y=setup.squares[1],
                     square_length=setup.square_length, marker_length=setup.marker_length,
                     world_from_board=matrix_to_pose(world_from_board(setup)))


def board_footprint(setup: BoardSetup) -> float:
    """Radius of a circle around the board (margin included), metres."""
    nx, ny = setup.squares
    return 0.5 * math.hypot(nx * setup.square_length + 2 * setup.margin, ny * setup.square_length + 2 * setup.margin)
