"""Appearance transfer: the colour statistics of each object's real pixels (in the clip's reference
frames) imposed on its sim pixels, and the scene's light (the real table against the sim table)
imposed on what has no real pixels of its own (the robot).

Both are per-channel affine maps, fitted once per camera from the sim render of G's scene (objects
where the clip shows them) against the real reference frames, and applied per frame as 256-entry
lookup tables, so the transfer costs one table lookup per pixel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_PIXELS = 30
"""Fewest real pixels of an object that make its colour statistics usable in one view."""
OUTLIER_SIGMA = 2.5
"""Real pixels further than this many standard deviations from the object's median (highlights, a
neighbour's edge) are left out of its statistics."""
GAIN_LIMITS = (0.5, 2.0)
"""Bounds of a per-channel light gain."""
SPREAD_LIMITS = (0.25, 4.0)
"""Bounds of the per-channel spread ratio of a colour transfer."""


@dataclass(frozen=True)
class ColourStats:
    """Per-channel mean and standard deviation of some pixels (0-255 scale)."""

    mean: np.ndarray
    """(3,) means."""
    std: np.ndarray
    """(3,) standard deviations."""
    pixels: int
    """How many pixels they were computed from."""


def colour_stats(pixels: np.ndarray, reject_outliers: bool = True) -> ColourStats:
    """Statistics of (N, 3) pixels, optionally without the outliers (see OUTLIER_SIGMA)."""
    values = np.asarray(pixels, dtype=np.float64).reshape(-1, 3)
    if reject_outliers and len(values) >= MIN_PIXELS:
        centre = np.median(values, axis=0)
        spread = np.maximum(values.std(axis=0), 4.0)
        keep = np.all(np.abs(values - centre) <= OUTLIER_SIGMA * spread, axis=1)
        if keep.sum() >= MIN_PIXELS:
            values = values[keep]
    if len(values) == 0:
        return ColourStats(np.zeros(3), np.zeros(3), 0)
    return ColourStats(values.mean(axis=0), values.std(axis=0), len(values))


def pool(stats: list[ColourStats]) -> ColourStats:
    """Statistics of the union of several pixel sets."""
    n = sum(s.pixels for s in stats)
    if n == 0:
        return ColourStats(np.zeros(3), np.zeros(3), 0)
    mean = sum(s.mean * s.pixels for s in stats) / n
    second = sum((s.std ** 2 + s.mean ** 2) * s.pixels for s in stats) / n
    return ColourStats(mean, np.sqrt(np.maximum(second - mean ** 2, 0.0)), n)


def transfer_lut(sim: ColourStats, real: ColourStats, gains: np.ndarray | None = None) -> np.ndarray:
    """A (256, 1, 3) uint8 lookup table mapping sim values to real ones per channel:
    (x - sim mean) * real std / sim std + real mean, then times `gains` (an ood light cast)."""
    ratio = np.where(sim.std > 1.0, real.std / np.maximum(sim.std, 1e-6), 1.0)
    ratio = np.clip(ratio, *SPREAD_LIMITS)
    x = np.arange(256, dtype=np.float64)[:, None]
    out = (x - sim.mean[None, :]) * ratio[None, :] + real.mean[None, :]
    if gains is not None:
        out = out * gains[None, :]
    return np.clip(out + 0.5, 0, 255).astype(np.uint8).reshape(256, 1, 3)


def gain_lut(gains: np.ndarray) -> np.ndarray:
    """A (256, 1, 3) uint8 lookup table multiplying each channel by its gain."""
    x = np.arange(256, dtype=np.float64)[:, None] * np.asarray(gains, dtype=np.float64)[None, :]
    return np.clip(x + 0.5, 0, 255).astype(np.uint8).reshape(256, 1, 3)


CHROMA_LIMIT = 0.1
"""Largest relative difference between a light gain's channels and their mean: the table's albedo,
not only the light, differs between sim and reality, so only a mild colour cast is trusted."""


def light_gains(sim: ColourStats, real: ColourStats) -> np.ndarray:
    """Per-channel gains that turn the sim's light into the real one: the ratio of means, its colour
    part held within CHROMA_LIMIT of its brightness part, bounded by GAIN_LIMITS."""
    if sim.pixels == 0 or real.pixels == 0:
        return np.ones(3)
    ratio = real.mean / np.maximum(sim.mean, 1.0)
    level = float(ratio.mean())
    ratio = np.clip(ratio, level * (1 - CHROMA_LIMIT), level * (1 + CHROMA_LIMIT))
    return np.clip(ratio, *GAIN_LIMITS)
