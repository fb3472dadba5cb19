"""A simple camera sensor model applied to clean renders, so studio clips are not trivially clean:
lens blur, vignetting, a per-camera white balance, per-frame exposure flicker and pixel noise whose
spread grows with brightness (shot noise) on top of a floor (read noise).

`level` scales every effect (0: the render passes through unchanged). Everything random comes from
the generator handed in, so a seed reproduces the frames exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

READ_NOISE = 1.5
"""Standard deviation of the brightness-independent noise at level 1, in 8-bit steps."""
SHOT_NOISE = 0.12
"""Shot noise at level 1: the standard deviation is sqrt(SHOT_NOISE * value) 8-bit steps."""
FLICKER = 0.015
"""Relative standard deviation of the exposure from frame to frame at level 1."""
BLUR_SIGMA = 0.55
"""Gaussian blur of the lens at level 1, pixels."""
VIGNETTING = 0.18
"""Brightness lost in the image corners at level 1 (fraction)."""
WHITE_BALANCE = 0.012
"""Relative spread of the per-camera colour channel gains at level 1."""


@dataclass
class Sensor:
    """One camera's sensor: its fixed traits (white balance, vignetting) and its noise generator."""

    level: float
    gains: np.ndarray
    vignette: np.ndarray
    rng: np.random.Generator

    @classmethod
    def create(cls, width: int, height: int, level: float, rng: np.random.Generator) -> Sensor:
        """A sensor of `width` x `height` pixels; draws its white balance from `rng`."""
        gains = (1.0 + WHITE_BALANCE * level * rng.standard_normal(3)).astype(np.float32)
        y, x = np.mgrid[0:height, 0:width].astype(np.float32)
        r2 = ((x - width / 2) / (width / 2)) ** 2 + ((y - height / 2) / (height / 2)) ** 2
        vignette = (1.0 - VIGNETTING * level * r2 / 2.0).astype(np.float32)
        return cls(level, gains, vignette, rng)

    def expose(self, rgb: np.ndarray, light: float = 1.0) -> np.ndarray:
        """The recorded uint8 frame for a clean uint8 render; `light` scales the exposure (a lighting
        change the renderer did not model)."""
        if self.level <= 0:
            return rgb
        image = rgb.astype(np.float32)
        image = cv2.GaussianBlur(image, (0, 0), BLUR_SIGMA * self.level)
        exposure = light * (1.0 + FLICKER * self.level * float(self.rng.standard_normal()))
        image *= self.gains[None, None, :] * self.vignette[..., None] * exposure
        sigma = self.level * np.sqrt(READ_NOISE**2 + SHOT_NOISE * np.clip(image, 0, None))
        image += sigma * self.rng.standard_normal(image.shape, dtype=np.float32)
        return np.clip(image + 0.5, 0, 255).astype(np.uint8)
