"""Measure a video file by decoding it with PyAV: frame count, frame rate, size, codec."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av


class VideoUnreadable(Exception):
    """The file cannot be opened or decoded as a video; the message says why, in plain words."""


@dataclass(frozen=True)
class VideoProbe:
    """What decoding a whole video measured."""

    frames: int
    """Frames decoded (container frame counts are unreliable, e.g. 0 in mkv)."""
    fps: float
    """Stream frame rate from the container (average rate, else guessed from timestamps)."""
    width: int
    """Frame width in pixels."""
    height: int
    """Frame height in pixels."""
    codec: str
    """FFmpeg codec name, e.g. h264."""
    pix_fmt: str | None
    """Pixel format of the decoded frames, e.g. yuv420p."""


def _reason(err: Exception) -> str:
    """FFmpeg's short reason (e.g. "Invalid data found when processing input"), without errno noise."""
    return getattr(err, "strerror", None) or str(err)


def _rate_from_timestamps(first: float | None, last: float | None, frames: int) -> float:
    """Frames per second implied by the first and last presentation times."""
    if first is None or last is None or frames < 2 or last <= first:
        return 0.0
    return (frames - 1) / (last - first)


def probe_video(path: Path) -> VideoProbe:
    """Open `path`, decode every frame of its first video stream, and report what was found.

    Raises VideoUnreadable if FFmpeg cannot open or decode it, or if it has no video stream.
    """
    try:
        container = av.open(str(path))
    except (av.FFmpegError, OSError) as err:
        raise VideoUnreadable(f"FFmpeg cannot open it as a video ({_reason(err)})") from err
    with container:
        if not container.streams.video:
            kinds = ", ".join(s.type for s in container.streams) or "none"
            raise VideoUnreadable(f"it has no video stream (streams found: {kinds})")
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        frames = 0
        first_t: float | None = None
        last_t: float | None = None
        width = height = 0
        pix_fmt: str | None = None
        try:
            for frame in container.decode(stream):
                if frames == 0:
                    width, height, pix_fmt = frame.width, frame.height, frame.format.name
                t = frame.time
                if t is not None:
                    first_t = t if first_t is None else min(first_t, t)
                    last_t = t if last_t is None else max(last_t, t)
                frames += 1
        except av.FFmpegError as err:
            raise VideoUnreadable(f"decoding failed after {frames} frames ({_reason(err)})") from err
        rate: Fraction | None = stream.average_rate or stream.guessed_rate
        fps = float(rate) if rate else _rate_from_timestamps(first_t, last_t, frames)
        codec = stream.codec_context.name
        if frames == 0:
            width, height = stream.codec_context.width, stream.codec_context.height
    return VideoProbe(frames=frames, fps=fps, width=width, height=height, codec=codec, pix_fmt=pix_fmt)
