"""Procedural textures for the studio: wood grain, woven linen, a checked cloth, painted plaster,
floor planks, and a scale's LCD readout. Each is a float32 H x W x 3 image in 0-1 whose mean is the
requested colour, drawn from a seeded generator (the same seed draws the same texture).

They are made of smoothed value noise (random grids resized with cubic interpolation) and a few
sinusoids: cheap, tileable enough for a table top, and varied enough that a surface is not flat.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import cv2
import numpy as np

TEXTURE_SIZE = 512
"""Side of the square textures, pixels."""


def value_noise(rng: np.random.Generator, size: int, cells: int, octaves: int = 3) -> np.ndarray:
    """Smooth noise in about [-1, 1]: `octaves` layers of random `cells` x `cells` grids, each twice as
    fine and half as strong as the last, resized to `size` x `size`."""
    out = np.zeros((size, size), np.float32)
    amplitude, total = 1.0, 0.0
    for octave in range(octaves):
        n = max(2, cells * 2**octave)
        grid = rng.uniform(-1.0, 1.0, (n, n)).astype(np.float32)
        out += amplitude * cv2.resize(grid, (size, size), interpolation=cv2.INTER_CUBIC)
        total += amplitude
        amplitude *= 0.5
    return np.clip(out / total, -1.0, 1.0)


def _tint(pattern: np.ndarray, colour: Sequence[float]) -> np.ndarray:
    """An RGB image whose mean is `colour`: `pattern` (around 1) times the colour, renormalized."""
    pattern = pattern / float(pattern.mean())
    rgb = pattern[..., None] * np.asarray(colour, np.float32)[None, None, :]
    return np.clip(rgb, 0.0, 1.0).astype(np.float32)


def wood(rng: np.random.Generator, colour: Sequence[float], planks: int = 4, size: int = TEXTURE_SIZE) -> np.ndarray:
    """Wood planks running along the image's v axis: long, gently wavy grain lines (a phase per
    plank), a tone per plank and dark seams between planks."""
    u = np.mgrid[0:size, 0:size][1].astype(np.float32) / size
    plank = np.minimum(np.floor(u * planks).astype(int), planks - 1)
    offsets = rng.uniform(0, 1, planks).astype(np.float32)
    warp = value_noise(rng, size, 2, 2) * 0.35 + value_noise(rng, size, 6, 1) * 0.06
    lines = 0.5 + 0.5 * np.sin(2 * math.pi * (u * planks * 7.0 + offsets[plank] * 3 + warp))
    grain = 0.25 * lines**4 + 0.05 * value_noise(rng, size, 48, 2) + 0.04 * np.sin(2 * math.pi * u * planks * 31.0)
    tones = rng.uniform(0.88, 1.12, planks).astype(np.float32)
    pattern = (0.85 + grain) * tones[plank]
    seam = np.abs((u * planks) - np.round(u * planks)) < 0.006 * planks
    pattern[seam] *= 0.5
    return _tint(pattern, colour)


def linen(rng: np.random.Generator, colour: Sequence[float], threads: int = 90, size: int = TEXTURE_SIZE) -> np.ndarray:
    """A woven cloth: crossing threads with slubs (thicker spots) and a soft mottling."""
    v, u = np.mgrid[0:size, 0:size].astype(np.float32) / size
    weft = 0.5 + 0.5 * np.sin(2 * math.pi * threads * u + value_noise(rng, size, 20, 1) * 1.5)
    warp = 0.5 + 0.5 * np.sin(2 * math.pi * threads * v + value_noise(rng, size, 20, 1) * 1.5)
    pattern = 0.9 + 0.07 * (weft * warp) + 0.05 * value_noise(rng, size, 6)
    return _tint(pattern, colour)


def check(rng: np.random.Generator, colour: Sequence[float], squares: int = 12, size: int = TEXTURE_SIZE) -> np.ndarray:
    """A checked tablecloth: bands of `colour` crossing on white (gingham), on a linen weave."""
    v, u = np.mgrid[0:size, 0:size].astype(np.float32) / size
    band_u = (np.floor(u * squares) % 2 == 0).astype(np.float32)
    band_v = (np.floor(v * squares) % 2 == 0).astype(np.float32)
    strength = (band_u + band_v) / 2.0  # 0 white, 0.5 half-tone, 1 full colour
    white = np.array([0.93, 0.92, 0.89], np.float32)
    rgb = white[None, None, :] * (1 - strength[..., None]) + np.asarray(colour, np.float32)[None, None, :] * strength[..., None]
    weave = linen(rng, (1.0, 1.0, 1.0), size=size)
    return np.clip(rgb * weave, 0.0, 1.0).astype(np.float32)


def plain(rng: np.random.Generator, colour: Sequence[float], size: int = TEXTURE_SIZE) -> np.ndarray:
    """A nearly uniform surface: a faint large-scale mottling (no surface is perfectly even)."""
    return _tint(1.0 + 0.03 * value_noise(rng, size, 4), colour)


def plaster(rng: np.random.Generator, colour: Sequence[float], size: int = TEXTURE_SIZE) -> np.ndarray:
    """Painted wall: soft blotches and a fine grain."""
    return _tint(1.0 + 0.05 * value_noise(rng, size, 5) + 0.02 * value_noise(rng, size, 80, 1), colour)


def floor_planks(rng: np.random.Generator, colour: Sequence[float], size: int = TEXTURE_SIZE) -> np.ndarray:
    """Floor boards: wood grain with more, narrower planks."""
    return wood(rng, colour, planks=6, size=size)


def table_texture(kind: str, rng: np.random.Generator, colour: Sequence[float]) -> np.ndarray:
    """The table-top texture named by TableSetup.texture."""
    makers = {"wood": wood, "linen": linen, "check": check, "plain": plain}
    if kind not in makers:
        raise ValueError(f"no table texture {kind!r}; choose one of {', '.join(makers)}")
    return makers[kind](rng, colour)


_SEGMENTS = {  # seven-segment digits: segments a..g lit
    "0": "abcdef", "1": "bc", "2": "abdeg", "3": "abcdg", "4": "bcfg", "5": "acdfg", "6": "acdefg",
    "7": "abc", "8": "abcdefg", "9": "abcdfg", "-": "g",
}


def lcd_readout(text: str, width: int = 240, height: int = 80) -> np.ndarray:
    """A scale's LCD showing `text` (digits, '-', '.', and a trailing unit such as 'g') as a float32
    RGB image: light segments on a dark green-grey glass."""
    image = np.zeros((height, width, 3), np.uint8)
    image[:] = (26, 33, 28)
    lit = (158, 242, 178)
    digits, unit = text.rstrip("gk "), text[len(text.rstrip("gk ")):].strip()
    h = int(height * 0.62)
    w = int(h * 0.5)
    thick = max(2, h // 9)
    x = width - int(width * 0.22) - len(digits.replace(".", "")) * (w + thick * 2)
    y0 = (height - h) // 2
    for char in digits:
        if char == ".":
            cv2.rectangle(image, (x - thick, y0 + h - thick), (x, y0 + h), lit, -1)
            continue
        segs = _SEGMENTS.get(char, "")
        half = h // 2
        pieces = {"a": ((x, y0), (x + w, y0 + thick)), "g": ((x, y0 + half - thick // 2), (x + w, y0 + half + thick // 2)),
                  "d": ((x, y0 + h - thick), (x + w, y0 + h)), "f": ((x, y0), (x + thick, y0 + half)),
                  "b": ((x + w - thick, y0), (x + w, y0 + half)), "e": ((x, y0 + half), (x + thick, y0 + h)),
                  "c": ((x + w - thick, y0 + half), (x + w, y0 + h))}
        for seg in segs:
            cv2.rectangle(image, pieces[seg][0], pieces[seg][1], lit, -1)
        x += w + thick * 2
    if unit:
        cv2.putText(image, unit, (width - int(width * 0.19), y0 + int(h * 0.8)), cv2.FONT_HERSHEY_SIMPLEX, h / 45.0, lit,
                    max(1, thick // 2), cv2.LINE_AA)
    return image.astype(np.float32) / 255.0
