"""Test helpers: tiny videos written with PyAV and a clip.yaml that fits them."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np


def write_video(
    path: Path,
    *,
    width: int = 32,
    height: int = 24,
    frames: int = 10,
    fps: int = 15,
    codec: str = "libx264",
    pix_fmt: str = "yuv420p",
) -> Path:
    """Encode `frames` frames of a moving gradient; small enough to write and decode in milliseconds."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        for i in range(frames):
            image = np.full((height, width, 3), (i * 23) % 256, np.uint8)
            image[:, : width // 2, 0] = 200
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


CLIP_YAML = """\
fps: 15
cameras:
  - name: front
    intrinsics: {width: 32, height: 24, fx: 30, fy: 30, cx: 16, cy: 12}
    extrinsics: {position: [0.8, 0, 0.5], quaternion: [0.34, -0.62, -0.62, 0.34]}
  - name: left
    video: left.mp4
  - name: right
notes: test clip
"""
