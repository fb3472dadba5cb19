"""H.264 encoding of studio clips with PyAV: mp4, yuv420p, single-threaded.

Reproducible bytes need more than a single thread: measured here, libx264 gives different bitstreams
for identical frames when several encoders are open at once in a process that also renders with
SAPIEN (the outcome varies from run to run). Encoded one video at a time in a fresh process, the
bytes are the same on every run. So a clip's frames are first spooled raw to disk (`RawVideo`), then
`encode_raw_videos` encodes them one after another in a fresh Python process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from types import TracebackType
from typing import Self

import av
import cv2
import numpy as np

DEFAULT_CRF = 20
"""x264 constant rate factor of studio clips (lower: larger files, fewer compression artefacts)."""


class H264Writer:
    """Writes RGB frames of one fixed even size into an mp4 file; use as a context manager."""

    def __init__(self, path: Path | str, width: int, height: int, fps: float, crf: int = DEFAULT_CRF) -> None:
        """Open `path` for `width` x `height` frames at `fps` frames per second."""
        if width % 2 or height % 2:
            raise ValueError(f"H.264 (yuv420p) needs even sizes, got {width}x{height}")
        self.path = Path(path)
        self.width, self.height = width, height
        self._container = av.open(str(self.path), "w", format="mp4")
        rate = Fraction(fps).limit_denominator(1001)
        self._stream = self._container.add_stream(
            "libx264", rate=rate, options={"crf": str(crf), "preset": "medium", "threads": "1",
                                           "x264-params": "threads=1:lookahead-threads=1:sliced-threads=0:sync-lookahead=0"})
        self._stream.width, self._stream.height, self._stream.pix_fmt = width, height, "yuv420p"
        self._time_base = Fraction(1) / rate
        self._stream.codec_context.time_base = self._time_base
        self._stream.thread_count = 1
        self._stream.codec_context.thread_type = "NONE"
        self.frames = 0

    def write(self, rgb: np.ndarray) -> None:
        """Append one uint8 H x W x 3 RGB frame."""
        if rgb.shape != (self.height, self.width, 3) or rgb.dtype != np.uint8:
            raise ValueError(f"expected a uint8 {self.height}x{self.width}x3 frame, got {rgb.dtype} {rgb.shape}")
        # convert to yuv420p here (OpenCV, BT.601 limited range as FFmpeg assumes) rather than in the
        # encoder's scaler, so the encoder input is exactly what this function computed
        yuv = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2YUV_I420)
        frame = av.VideoFrame.from_ndarray(yuv, format="yuv420p")
        # explicit timestamps: without them the encoder's rate control sees whatever pts it invents,
        # and the bytes (not just the container) can differ between runs
        frame.pts = self.frames
        frame.time_base = self._time_base
        for packet in self._stream.encode(frame):
            self._container.mux(packet)
        self.frames += 1

    def close(self) -> None:
        """Flush the encoder and close the file."""
        if self._container is None:
            return
        for packet in self._stream.encode():
            self._container.mux(packet)
        self._container.close()
        self._container = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def read_frames(path: Path | str) -> list[np.ndarray]:
    """Every frame of a video as uint8 RGB arrays (for tests and checks)."""
    with av.open(str(path)) as container:
        return [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]


@dataclass(frozen=True)
class RawVideo:
    """Frames of one video spooled to a raw file (uint8 RGB, frame after frame), to be encoded later."""

    raw_path: Path
    """The raw file (created empty by `start`)."""
    video_path: Path
    """The mp4 to write."""
    width: int
    """Frame width, pixels."""
    height: int
    """Frame height, pixels."""
    fps: float
    """Frame rate."""
    crf: int = DEFAULT_CRF
    """x264 constant rate factor."""

    def start(self) -> RawVideo:
        """Create (or empty) the raw file; returns self."""
        self.raw_path.write_bytes(b"")
        return self

    def append(self, rgb: np.ndarray) -> None:
        """Add one uint8 H x W x 3 frame."""
        if rgb.shape != (self.height, self.width, 3) or rgb.dtype != np.uint8:
            raise ValueError(f"expected a uint8 {self.height}x{self.width}x3 frame, got {rgb.dtype} {rgb.shape}")
        with open(self.raw_path, "ab") as f:
            f.write(np.ascontiguousarray(rgb).tobytes())

    def encode(self) -> int:
        """Encode the raw frames into `video_path` (in this process); returns the frame count."""
        frame_bytes = self.width * self.height * 3
        data = self.raw_path.read_bytes()
        count = len(data) // frame_bytes
        frames = np.frombuffer(data, dtype=np.uint8, count=count * frame_bytes).reshape(count, self.height, self.width, 3)
        with H264Writer(self.video_path, self.width, self.height, self.fps, self.crf) as writer:
            for frame in frames:
                writer.write(frame)
        return count

    def to_json(self) -> dict[str, object]:
        """A plain mapping (for the encoder process's manifest)."""
        return {"raw_path": str(self.raw_path), "video_path": str(self.video_path), "width": self.width,
                "height": self.height, "fps": self.fps, "crf": self.crf}


def encode_raw_videos(videos: list[RawVideo], timeout: float = 600.0) -> None:
    """Encode spooled videos one after another in a fresh Python process (`python -m
    datafarm.studio.video MANIFEST`), for reproducible bytes. RuntimeError with the encoder's
    output if it fails."""
    if not videos:
        return
    manifest = videos[0].raw_path.parent / "encode.json"
    manifest.write_text(json.dumps([v.to_json() for v in videos]))
    result = subprocess.run([sys.executable, "-m", "datafarm.studio.video", str(manifest)], capture_output=True,
                            text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"video encoding failed (exit {result.returncode}): {result.stderr.strip()[-2000:]}")


def main(argv: list[str] | None = None) -> None:
    """Encoder process entry: encode every video of a manifest (a JSON list of RawVideo fields), in order."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit("usage: python -m datafarm.studio.video MANIFEST.json")
    for entry in json.loads(Path(args[0]).read_text()):
        RawVideo(Path(entry["raw_path"]), Path(entry["video_path"]), int(entry["width"]), int(entry["height"]),
                 float(entry["fps"]), int(entry["crf"])).encode()


if __name__ == "__main__":
    main()
