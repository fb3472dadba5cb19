"""The calibration clip e^c: `clip.yaml` (ClipSpec) and what validation measured from its videos
(ClipReport).

A clip folder holds `clip.yaml` and one video per camera, nothing else that looks like a video.
Extrinsics follow datafarm's conventions (datafarm.artifacts.common): `world_from_camera`, OpenCV
camera frame (x right, y down, z forward), world z up with the origin on the table top.
"""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any

from pydantic import Field, StringConstraints, field_validator, model_validator
from pydantic_core import PydanticCustomError

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.common import FiniteFloat, Intrinsics, Pose

VIDEO_SUFFIXES: tuple[str, ...] = (".mp4", ".mkv", ".avi", ".mov", ".webm")
"""File suffixes treated as videos in a clip folder (case-insensitive)."""

CameraName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]+$")]
VideoFileName = Annotated[str, StringConstraints(pattern=r"^[^/\\]+$", min_length=1)]


class CameraSpec(Artifact):
    """One camera of the clip: its name, its video file and, when the lab knows them, its calibration."""

    name: CameraName
    """Camera name, unique in the clip: lowercase letters, digits and underscores (e.g. `front`)."""
    video: VideoFileName
    """Video file name inside the clip folder; defaults to `<name>.mp4`."""
    intrinsics: Intrinsics | None = None
    """Pinhole intrinsics for the video's image size, when known (else grounding fits them)."""
    extrinsics: Pose | None = None
    """Camera pose in the world (world_from_camera, OpenCV camera frame), when known."""

    @model_validator(mode="before")
    @classmethod
    def _default_video(cls, data: Any) -> Any:
        if isinstance(data, dict) and "video" not in data and isinstance(data.get("name"), str):
            data = {**data, "video": f"{data['name']}.mp4"}
        return data

    @field_validator("video")
    @classmethod
    def _not_a_dot_name(cls, video: str) -> str:
        if video in (".", ".."):
            raise PydanticCustomError(
                "video_name", "not a file name", {"expected_words": "a file name inside the clip folder"}
            )
        return video


class ClipSpec(Artifact):
    """`clip.yaml`: the cameras of a calibration clip, its frame rate, and what the lab knows about the rig."""

    fps: FiniteFloat = Field(gt=0)
    """Frame rate every camera's video was recorded at, frames per second."""
    cameras: list[CameraSpec] = Field(min_length=1)
    """The cameras, at least one; each has one video in the clip folder."""
    robot_base: list[Pose] | None = None
    """Pose of each robot arm's base in the world, one per arm (e.g. left then right for a dual PiPER), when known."""
    notes: str = ""
    """Free text for people: how and where the clip was recorded."""

    @field_validator("cameras")
    @classmethod
    def _unique(cls, cameras: list[CameraSpec]) -> list[CameraSpec]:
        for attr in ("name", "video"):
            counts = Counter(getattr(c, attr) for c in cameras)
            repeated = sorted(v for v, n in counts.items() if n > 1)
            if repeated:
                raise PydanticCustomError(
                    "camera_not_unique",
                    "camera {attr} {values} used more than once",
                    {
                        "attr": attr,
                        "values": ", ".join(repeated),
                        "expected_words": f"a different {attr} for every camera",
                    },
                )
        return cameras

    def camera(self, name: str) -> CameraSpec:
        """The camera called `name` (KeyError if there is none)."""
        for cam in self.cameras:
            if cam.name == name:
                return cam
        raise KeyError(name)


class CameraReport(Artifact):
    """What decoding one camera's video measured."""

    name: str
    """Camera name from clip.yaml."""
    video: str
    """Video file name inside the clip folder."""
    frames: int = Field(ge=0)
    """Number of frames, counted by decoding the whole video."""
    fps: float = Field(ge=0)
    """Frame rate of the video stream as stored in the container."""
    width: int = Field(ge=0)
    """Frame width in pixels."""
    height: int = Field(ge=0)
    """Frame height in pixels."""
    codec: str
    """Codec name as FFmpeg reports it (e.g. `h264`)."""
    sha256: str
    """sha256 of the video file's bytes."""


class ClipReport(Artifact):
    """The result of validating a clip folder: the parsed clip.yaml plus what every video measured."""

    spec: ClipSpec
    """clip.yaml as parsed and validated."""
    cameras: list[CameraReport]
    """One report per camera, in clip.yaml order."""
    frames: int = Field(ge=0)
    """Frames in the clip: the smallest per-camera count (views may differ by at most one frame)."""
    sha256: str
    """sha256 of the whole clip folder (datafarm.hashing.sha256_tree)."""

    def camera(self, name: str) -> CameraReport:
        """The report of the camera called `name` (KeyError if there is none)."""
        for cam in self.cameras:
            if cam.name == name:
                return cam
        raise KeyError(name)
