"""`truth.json`: what a studio clip really shows, for scoring a grounding. The pipeline never reads it.

The truth is an exact grounding (every quantity `measured`, so no randomization ranges) of the scene
that was rendered: robot bases, cameras (intrinsics and world_from_camera), table, objects with their
exact sizes, poses and colours, plus the ChArUco board's pose and what clip.yaml revealed.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.common import Intrinsics
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.io import load_artifact, save_artifact
from datafarm.hashing import sha256_json
from datafarm.sim.world.frames import look_at, matrix_to_pose, rotation_z
from datafarm.studio.board import ClipBoard, clip_board
from datafarm.studio.scene import KnownCalibration, SceneCamera, SceneSpec

TRUTH_FILE = "truth.json"
"""Default file name of the truth, written next to (never inside) the clip folder."""


class StudioTruth(Artifact):
    """truth.json: the exact scene behind a studio clip."""

    scene: str
    """The scene's name."""
    scene_sha256: str
    """sha256 of the scene description (canonical JSON of the validated SCENE.yaml)."""
    seed: int
    """Seed the clip was rendered with."""
    fps: float
    """Frame rate of the clip."""
    frames: int
    """Frames per camera."""
    grounding: Grounding
    """The exact scene as a grounding: every quantity measured (robot bases, cameras, table, objects)."""
    board: ClipBoard | None = None
    """The ChArUco board and its exact pose, when the scene has one."""
    known: KnownCalibration
    """What clip.yaml gave the pipeline (intrinsics, extrinsics, robot bases)."""


def camera_intrinsics(camera: SceneCamera) -> Intrinsics:
    """A scene camera's OpenCV intrinsics (defaults filled in)."""
    return Intrinsics(width=camera.width, height=camera.height, fx=camera.fx,
                      fy=camera.fy if camera.fy is not None else camera.fx,
                      cx=camera.cx if camera.cx is not None else camera.width / 2,
                      cy=camera.cy if camera.cy is not None else camera.height / 2)


def camera_pose(camera: SceneCamera) -> np.ndarray:
    """4x4 world_from_camera (OpenCV frame) of a scene camera: aimed at `look_at`, then rolled."""
    rotation = look_at(camera.position, camera.look_at)
    if camera.roll:
        c, s = math.cos(camera.roll), math.sin(camera.roll)
        rotation = rotation @ np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    out = np.eye(4)
    out[:3, :3] = rotation
    out[:3, 3] = camera.position
    return out


def arm_bases(scene: SceneSpec) -> list[tuple[str, np.ndarray]]:
    """(arm name, 4x4 world_from_base) per arm, placed as datafarm's RobotSpec places them."""
    robot = scene.robot
    mid = np.array([robot.base[0], robot.base[1], robot.height])
    yaw = robot.yaw
    placements = [("arm", mid)] if robot.kind == "piper" else [
        ("left", mid + robot.spacing / 2 * np.array([-math.sin(yaw), math.cos(yaw), 0.0])),
        ("right", mid - robot.spacing / 2 * np.array([-math.sin(yaw), math.cos(yaw), 0.0])),
    ]
    out = []
    for name, position in placements:
        matrix = np.eye(4)
        matrix[:3, :3] = rotation_z(yaw)
        matrix[:3, 3] = position
        out.append((name, matrix))
    return out


def scene_grounding(scene: SceneSpec) -> Grounding:
    """The exact grounding of a scene: what a perfect grounding stage would write (all measured)."""
    bases = arm_bases(scene)
    arms = [{"name": name, "base": matrix_to_pose(m).model_dump(), "base_tag": "measured"} for name, m in bases]
    robot: dict = {"kind": scene.robot.kind, "arms": arms}
    if scene.robot.kind == "piper-dual":
        robot.update(spacing={"value": scene.robot.spacing, "tag": "measured"},
                     height={"value": scene.robot.height, "tag": "measured"})
    table = scene.table
    measured = lambda v: {"value": v, "tag": "measured"}
    reach = 0.5
    return Grounding.model_validate({
        "robot": robot,
        "cameras": [{"name": c.name, "video": f"{c.name}.mp4", "intrinsics": camera_intrinsics(c).model_dump(),
                     "intrinsics_tag": "measured", "world_from_camera": matrix_to_pose(camera_pose(c)).model_dump(),
                     "extrinsics_tag": "measured"} for c in scene.cameras],
        "table": {"size_x": measured(table.size_x), "size_y": measured(table.size_y), "height": measured(table.height),
                  "tilt_x": measured(0.0), "tilt_y": measured(0.0), "colour": list(table.colour),
                  "center": list(table.center)},
        "objects": [o.grounded().model_dump() for o in scene.objects],
        "workspace": {"bounds_min": [table.center[0] - table.size_x / 2, table.center[1] - table.size_y / 2, 0.0],
                      "bounds_max": [table.center[0] + table.size_x / 2, table.center[1] + table.size_y / 2, reach]},
        "notes": f"exact grounding of studio scene {scene.name!r} (truth; every quantity measured)",
    })


def scene_truth(scene: SceneSpec) -> StudioTruth:
    """The truth of a scene (independent of rendering; deterministic)."""
    return StudioTruth(scene=scene.name, scene_sha256=sha256_json(scene.model_dump(mode="json")), seed=scene.seed,
                       fps=scene.fps, frames=scene.frames, grounding=scene_grounding(scene),
                       board=clip_board(scene.board) if scene.board is not None else None, known=scene.known)


def save_truth(truth: StudioTruth, path: Path | str) -> Path:
    """Write truth.json atomically."""
    return save_artifact(truth, path)


def load_truth(path: Path | str) -> StudioTruth:
    """Read truth.json; InputError naming the field for any defect."""
    return load_artifact(StudioTruth, path)
