"""Reading and writing the renderers' videos with PyAV.

Every video a renderer writes is H.264 (yuv420p, so width and height must be even) in MP4, with frame
i stamped at time i / fps: frame i of every rendered video is control step i of the episode.

The same frames give the same bytes: x264 runs single-threaded and without macroblock-tree rate
control, which (measured with the FFmpeg 8 / x264 core 165 that PyAV bundles) otherwise changes the
encoded bits, and the decoded pixels, from run to run in the same process.
"""

from __future__ import annotations

import io
import queue
import threading
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import BinaryIO

import av
import numpy as np

DEFAULT_CRF = 18
"""x264 constant rate factor for rendered videos: visually lossless at these sizes."""
DEFAULT_PRESET = "veryfast"
"""x264 preset: ~0.8 ms per 320x240 frame on one core."""


def frame_rate(fps: float) -> Fraction:
    """`fps` as an exact fraction (e.g. 29.97 -> 2997/100), which PyAV needs for the time base."""
    return Fraction(fps).limit_denominator(1001)


class VideoWriter:
    """An H.264 MP4 written frame by frame; frame i gets presentation time i / fps.

    Use as a context manager, or call `close`. ValueError for odd sizes (yuv420p halves both)."""

    def __init__(self, target: Path | str | BinaryIO, width: int, height: int, fps: float,
                 crf: int = DEFAULT_CRF, preset: str = DEFAULT_PRESET) -> None:
        if width <= 0 or height <= 0 or width % 2 or height % 2:
            raise ValueError(f"H.264 (yuv420p) needs an even, positive width and height, got {width}x{height}")
        self.width, self.height = width, height
        self.frames = 0
        self._container = av.open(str(target) if isinstance(target, (str, Path)) else target, "w", format="mp4")
        rate = frame_rate(fps)
        self._stream = self._container.add_stream(
            "libx264", rate=rate, options={"crf": str(crf), "preset": preset, "threads": "1", "x264-params": "mbtree=0"})
        self._stream.width, self._stream.height, self._stream.pix_fmt = width, height, "yuv420p"
        self._stream.thread_count = 1

    def write(self, rgb: np.ndarray) -> None:
        """Append one uint8 H x W x 3 RGB frame."""
        if rgb.shape != (self.height, self.width, 3) or rgb.dtype != np.uint8:
            raise ValueError(f"expected a uint8 {self.height}x{self.width}x3 frame, got {rgb.dtype} {rgb.shape}")
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
        frame.pts = self.frames  # in the codec's time base, 1 / fps
        for packet in self._stream.encode(frame):
            self._container.mux(packet)
        self.frames += 1

    def close(self) -> None:
        """Flush the encoder and finish the file."""
        if self._container is None:
            return
        for packet in self._stream.encode():
            self._container.mux(packet)
        self._container.close()
        self._container = None  # type: ignore[assignment]

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def encode_video(frames: list[np.ndarray] | np.ndarray, fps: float, crf: int = DEFAULT_CRF) -> bytes:
    """The frames (uint8 RGB, even size) as MP4 bytes."""
    buffer = io.BytesIO()
    first = frames[0]
    with VideoWriter(buffer, first.shape[1], first.shape[0], fps, crf=crf) as writer:
        for frame in frames:
            writer.write(frame)
    return buffer.getvalue()


def iter_video(source: Path | str | bytes) -> Iterator[tuple[np.ndarray, float]]:
    """(uint8 RGB frame, presentation time in seconds) of every frame of a video file or bytes."""
    handle = io.BytesIO(source) if isinstance(source, bytes) else str(source)
    with av.open(handle) as container:
        stream = container.streams.video[0]
        for frame in container.decode(stream):
            time = float(frame.pts * frame.time_base) if frame.pts is not None else float("nan")
            yield frame.to_ndarray(format="rgb24"), time


def read_video(source: Path | str | bytes) -> tuple[np.ndarray, list[float]]:
    """All frames (N x H x W x 3 uint8) and their presentation times of a video file or bytes."""
    frames, times = [], []
    for frame, time in iter_video(source):
        frames.append(frame)
        times.append(time)
    if not frames:
        return np.zeros((0, 0, 0, 3), dtype=np.uint8), []
    return np.stack(frames), times


def read_frames(path: Path | str, indices: list[int] | None = None, limit: int | None = None) -> dict[int, np.ndarray]:
    """Frames of a video by index (all of them, or the first `limit`, when `indices` is None)."""
    wanted = set(indices) if indices is not None else None
    last = max(wanted) if wanted else None
    out: dict[int, np.ndarray] = {}
    for i, (frame, _) in enumerate(iter_video(path)):
        if wanted is None or i in wanted:
            out[i] = frame
        if (last is not None and i >= last) or (limit is not None and i + 1 >= limit):
            break
    return out


class BackgroundEncoder:
    """Encodes frames for several VideoWriters on one worker thread, so H.264 encoding (which releases
    the GIL) overlaps with rendering. Frames must not be modified after `write`. An encoder error is
    raised by the next `write` or by `close`."""

    def __init__(self, max_pending: int = 64) -> None:
        self._queue: queue.Queue[tuple[VideoWriter, np.ndarray] | None] = queue.Queue(maxsize=max_pending)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="datafarm-encoder", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self._error is None:
                try:
                    item[0].write(item[1])
                except BaseException as err:  # noqa: BLE001 - handed to the producer thread
                    self._error = err

    def write(self, writer: VideoWriter, rgb: np.ndarray) -> None:
        """Queue one frame for `writer` (blocks while `max_pending` frames wait)."""
        if self._error is not None:
            raise self._error
        self._queue.put((writer, rgb))

    def close(self) -> None:
        """Wait until every queued frame is encoded (the writers stay open)."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        if self._error is not None:
            raise self._error
