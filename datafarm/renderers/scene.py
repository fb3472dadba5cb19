"""The pieces of an episode's scene that renderers share: cameras at the render resolution (at the
clip's poses and at the episode's possibly jittered poses), which segmentation ids belong to which
object or to the robot, the geometry helpers that project world points through a camera, and the
calibration clip's frames at the render resolution.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from datafarm.artifacts.clip import ClipSpec
from datafarm.artifacts.common import Pose
from datafarm.artifacts.grounding import GroundedCamera, Grounding
from datafarm.artifacts.render_contract import RenderContract
from datafarm.errors import InputError, Problem
from datafarm.intake.load import load_model
from datafarm.renderers.video import iter_video
from datafarm.sim.render_passes import scale_intrinsics
from datafarm.sim.world import World
from datafarm.sim.world.frames import pose_to_matrix

BACKGROUND = 0
"""Segment class of everything that is not an object or the robot (table, floor, nothing)."""
ROBOT = 1
"""Segment class of the robot's links."""


def render_camera(camera: GroundedCamera, width: int, height: int, pose: Pose | None = None) -> GroundedCamera:
    """`camera` with intrinsics scaled to `width` x `height` and, when given, another world pose."""
    intrinsics = camera.intrinsics
    if (intrinsics.width, intrinsics.height) != (width, height):
        intrinsics = scale_intrinsics(intrinsics, width, height)
    return camera.model_copy(update={"intrinsics": intrinsics, "world_from_camera": pose or camera.world_from_camera})


# --- projection ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Projector:
    """Pinhole projection through one camera (OpenCV convention, no distortion)."""

    k: np.ndarray
    """3 x 3 intrinsic matrix."""
    camera_from_world: np.ndarray
    """4 x 4 rigid transform."""
    width: int
    """Image width, pixels."""
    height: int
    """Image height, pixels."""

    @classmethod
    def of(cls, camera: GroundedCamera) -> Projector:
        """The projector of a grounded camera."""
        i = camera.intrinsics
        k = np.array([[i.fx, 0.0, i.cx], [0.0, i.fy, i.cy], [0.0, 0.0, 1.0]])
        return cls(k, np.linalg.inv(pose_to_matrix(camera.world_from_camera)), i.width, i.height)

    @property
    def position(self) -> np.ndarray:
        """Camera centre in the world."""
        r, t = self.camera_from_world[:3, :3], self.camera_from_world[:3, 3]
        return -r.T @ t

    def to_camera(self, points: np.ndarray) -> np.ndarray:
        """(N, 3) world points in the camera frame."""
        return np.asarray(points, dtype=np.float64) @ self.camera_from_world[:3, :3].T + self.camera_from_world[:3, 3]

    def project(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(N, 2) pixel coordinates and (N,) depths (camera z) of world points."""
        cam = self.to_camera(points)
        z = cam[:, 2]
        uv = (cam @ self.k.T)[:, :2] / np.where(np.abs(z) < 1e-9, 1e-9, z)[:, None]
        return uv, z

    def plane_homography(self, world_from_plane: np.ndarray) -> np.ndarray:
        """3 x 3 homography from plane coordinates (x, y metres, on the plane's z = 0) to pixels."""
        camera_from_plane = self.camera_from_world @ world_from_plane
        return self.k @ np.column_stack([camera_from_plane[:3, 0], camera_from_plane[:3, 1], camera_from_plane[:3, 3]])


# --- segmentation classes --------------------------------------------------------------------------------


@dataclass
class SegmentClasses:
    """Segmentation id -> class: BACKGROUND, ROBOT, or 2 + the index of a G object."""

    object_ids: list[str]
    """G object ids; object k has class 2 + k."""
    lut: np.ndarray
    """uint8 array indexed by segmentation id (ids beyond it are background)."""
    names: dict[int, str] = field(default_factory=dict)
    """Segmentation id -> entity name (for the record)."""

    def object_class(self, object_id: str) -> int:
        """The class of a G object."""
        return 2 + self.object_ids.index(object_id)

    def classify(self, segmentation: np.ndarray) -> np.ndarray:
        """uint8 class map of a segmentation image."""
        ids = np.minimum(segmentation, len(self.lut) - 1)
        return self.lut[ids]


def segment_classes(world: World, labels: Mapping[int, str], articulation_labels: Mapping[int, str]) -> SegmentClasses:
    """Classes of a world's segmentation ids: robot links, each object (with its parts and links), the rest background."""
    object_ids = list(world.objects)
    robot_articulations = {world.robot.articulation(arm).name for arm in world.robot.arms}
    size = max([*labels, *articulation_labels, 0]) + 2
    lut = np.full(size, BACKGROUND, dtype=np.uint8)
    for sid, name in labels.items():
        articulation = articulation_labels.get(sid)
        if articulation in robot_articulations:
            lut[sid] = ROBOT
        elif articulation in world.objects:
            lut[sid] = 2 + object_ids.index(articulation)
        elif name in world.objects:
            lut[sid] = 2 + object_ids.index(name)
        else:
            owner = next((oid for oid in object_ids if name.startswith(f"{oid}_") or name.startswith(f"{oid}.")), None)
            if owner is not None:
                lut[sid] = 2 + object_ids.index(owner)
    return SegmentClasses(object_ids, lut, dict(labels))


# --- the clip -----------------------------------------------------------------------------------------


@dataclass
class CameraClip:
    """What a renderer takes from one camera's clip video, at the render resolution."""

    plate: np.ndarray
    """N x H x W x 3 frames spread evenly over the clip (for the static-background median)."""
    references: list[np.ndarray]
    """The reference frames R names for this camera, in R's order."""
    frames: int
    """Frames in the camera's video."""


def _frame_count(video: Path) -> int:
    """Frames in a video: the container's count when it has one, else counted by decoding."""
    import av

    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        if stream.frames:
            return int(stream.frames)
        return sum(1 for _ in container.decode(stream))


class ClipFrames:
    """The calibration clip's frames per camera, resized to the render resolution. Only the frames a
    renderer uses are kept (a spread of up to `max_frames` for the background, and R's references)."""

    def __init__(self, clip_dir: Path | str, width: int, height: int, max_frames: int = 30) -> None:
        self.dir = Path(clip_dir)
        self.spec = load_model(ClipSpec, self.dir / "clip.yaml")
        self.width, self.height, self.max_frames = width, height, max_frames
        self._cache: dict[tuple[str, tuple[int, ...]], CameraClip] = {}

    def _resize(self, frame: np.ndarray) -> np.ndarray:
        if frame.shape[:2] == (self.height, self.width):
            return frame
        return cv2.resize(frame, (self.width, self.height), interpolation=cv2.INTER_AREA)

    def camera(self, camera: str, references: Sequence[int]) -> CameraClip:
        """The plate frames and R's reference frames of `camera` (InputError for an unknown camera or
        a reference index past the clip's end)."""
        key = (camera, tuple(references))
        if key in self._cache:
            return self._cache[key]
        try:
            video = self.dir / self.spec.camera(camera).video
        except KeyError:
            raise InputError([Problem(f"the clip has no camera {camera!r}", file=self.dir / "clip.yaml",
                                      expected=", ".join(c.name for c in self.spec.cameras))]) from None
        count = _frame_count(video)
        bad = [i for i in references if i >= count]
        if bad:
            raise InputError([Problem(f"reference frames {bad} of camera {camera} are past the clip's {count} frames",
                                      field="cameras.frames", expected=f"indices below {count}")])
        plate_at = set(np.linspace(0, count - 1, min(count, self.max_frames)).round().astype(int).tolist())
        wanted = plate_at | set(references)
        kept: dict[int, np.ndarray] = {}
        for i, (frame, _) in enumerate(iter_video(video)):
            if i in wanted:
                kept[i] = self._resize(frame)
            if i >= max(wanted):
                break
        clip = CameraClip(plate=np.stack([kept[i] for i in sorted(plate_at) if i in kept]),
                          references=[kept[i] for i in references], frames=count)
        self._cache[key] = clip
        return clip


def check_cameras(contract: RenderContract, grounding: Grounding) -> list[str]:
    """R's cameras in R order; InputError unless they are exactly G's cameras."""
    names = [c.camera for c in contract.cameras]
    grounded = [c.name for c in grounding.cameras]
    missing, unknown = sorted(set(grounded) - set(names)), sorted(set(names) - set(grounded))
    problems = []
    if unknown:
        problems.append(Problem(f"R names cameras {unknown} that G does not have", field="cameras",
                                expected=", ".join(grounded)))
    if missing:
        problems.append(Problem(f"R leaves out G's cameras {missing}; every camera is rendered", field="cameras",
                                expected=", ".join(grounded)))
    if problems:
        raise InputError(problems)
    return names
