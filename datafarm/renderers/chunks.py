"""Long episodes are generated in chunks of R's `chunk_frames` that share `overlap_frames` with the
next chunk; adjacent chunks are joined at the frame of their overlap where they differ least, so a
seam falls where the two generations agree best. Every join is recorded (frame and difference).

Frames before the join come from the earlier chunk, the join frame and after from the later one;
every episode frame appears exactly once in the output.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import Field, model_validator

from datafarm.artifacts.base import Artifact


class ChunkSpan(Artifact):
    """One chunk: the episode frames [start, stop) it generates."""

    index: int = Field(ge=0)
    """Chunk number, from 0."""
    start: int = Field(ge=0)
    """First frame (= control step)."""
    stop: int = Field(gt=0)
    """One past the last frame."""
    seed: int = Field(ge=0)
    """Seed the renderer used for this chunk."""

    @property
    def frames(self) -> int:
        """Number of frames in the chunk."""
        return self.stop - self.start


class Join(Artifact):
    """Where two adjacent chunks were joined."""

    before: int = Field(ge=0)
    """Index of the earlier chunk."""
    after: int = Field(ge=1)
    """Index of the later chunk."""
    overlap: tuple[int, int]
    """Episode frames [start, stop) both chunks generated."""
    frame: int = Field(ge=0)
    """The chosen join: frames before it come from the earlier chunk, it and later ones from the later chunk."""
    difference: float = Field(ge=0)
    """Mean absolute difference (0-255 scale, all channels) of the two chunks at the join frame."""
    differences: list[float]
    """The difference at every overlap frame, in order (the join is the smallest)."""

    @model_validator(mode="after")
    def _inside(self) -> Join:
        if not self.overlap[0] <= self.frame < self.overlap[1]:
            raise ValueError(f"join frame {self.frame} is outside the overlap {self.overlap}")
        return self


def plan_chunks(frames: int, chunk_frames: int, overlap_frames: int, seed: int = 0) -> list[ChunkSpan]:
    """Chunks covering frames [0, frames): each `chunk_frames` long (the last may be shorter), each
    starting `overlap_frames` before the previous one ends. Chunk k's seed derives from `seed`."""
    if frames < 1:
        raise ValueError("an episode to render has at least one frame")
    if not 1 <= overlap_frames < chunk_frames:
        raise ValueError(f"need 1 <= overlap_frames < chunk_frames, got {overlap_frames} and {chunk_frames}")
    spans: list[ChunkSpan] = []
    start = 0
    while True:
        stop = min(start + chunk_frames, frames)
        spans.append(ChunkSpan(index=len(spans), start=start, stop=stop, seed=chunk_seed(seed, len(spans))))
        if stop >= frames:
            return spans
        start = stop - overlap_frames


def chunk_seed(seed: int, index: int) -> int:
    """A deterministic 31-bit seed for chunk `index` of an episode rendered with `seed`."""
    mixed = np.random.SeedSequence([seed & 0xFFFFFFFF, seed >> 32, index]).generate_state(1)[0]
    return int(mixed) & 0x7FFFFFFF


def frame_difference(a: np.ndarray, b: np.ndarray) -> float:
    """Mean absolute difference of two uint8 images (0-255 scale)."""
    return float(np.mean(np.abs(a.astype(np.int16) - b.astype(np.int16))))


def choose_join(earlier: Sequence[np.ndarray], later: Sequence[np.ndarray], overlap_start: int,
                before: int, after: int) -> Join:
    """The join of two chunks from their frames over the same overlap (equal counts): the overlap frame
    where they differ least (the first such frame on a tie)."""
    if len(earlier) != len(later) or not earlier:
        raise ValueError(f"both chunks must give the same, non-zero number of overlap frames ({len(earlier)} vs {len(later)})")
    differences = [frame_difference(a, b) for a, b in zip(earlier, later, strict=True)]
    best = int(np.argmin(differences))
    return Join(before=before, after=after, overlap=(overlap_start, overlap_start + len(differences)),
                frame=overlap_start + best, difference=differences[best], differences=differences)
