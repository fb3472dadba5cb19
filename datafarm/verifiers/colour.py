"""Colour measurements the checks share: CIE Lab with lightness down-weighted (shading changes
lightness far more than it changes an object's hue), an object's colour model (a few prototype
colours of its real pixels), and per-pixel distances to an object and to the background.

Distances are Euclidean in (L * LIGHTNESS_WEIGHT, a, b), in CIE Lab units (a just-noticeable
difference is about 2; red against blue is over 100).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

LIGHTNESS_WEIGHT = 0.5
"""Weight of L* against a* and b* in every colour distance."""
MAX_PROTOTYPES = 3
"""Most prototype colours an object's model keeps."""
MIN_PROTOTYPE_SHARE = 0.15
"""A cluster of an object's reference pixels smaller than this share is not one of its colours (a
highlight, a neighbour's edge)."""


def to_lab(rgb: np.ndarray) -> np.ndarray:
    """float32 (..., 3) weighted Lab of sRGB values. uint8 input goes through OpenCV's 8-bit path
    (L quantized to 0.4 units, a and b to 1: far below any tolerance here, and many times faster);
    float input (0-255) is converted exactly."""
    values = np.asarray(rgb)
    shape = values.shape
    if values.dtype == np.uint8:
        lab = cv2.cvtColor(np.ascontiguousarray(values.reshape(-1, 1, 3)), cv2.COLOR_RGB2Lab).reshape(shape)
        out = lab.astype(np.float32)
        out[..., 0] *= 100.0 / 255.0 * LIGHTNESS_WEIGHT
        out[..., 1:] -= 128.0
        return out
    scaled = values.astype(np.float32) / 255.0
    out = cv2.cvtColor(np.ascontiguousarray(scaled.reshape(-1, 1, 3)), cv2.COLOR_RGB2Lab).reshape(shape)
    out[..., 0] *= LIGHTNESS_WEIGHT
    return out


def distance(lab: np.ndarray, colour: np.ndarray) -> np.ndarray:
    """Weighted-Lab distance of every pixel of `lab` (..., 3) to one weighted-Lab colour (3,) or to
    pixel-aligned colours of the same shape."""
    diff = np.asarray(lab, dtype=np.float32) - np.asarray(colour, dtype=np.float32)
    return np.sqrt(np.einsum("...i,...i->...", diff, diff))


@dataclass(frozen=True)
class ColourModel:
    """An object's colours: prototype colours (weighted Lab) with their shares, and the median."""

    prototypes: np.ndarray
    """(k, 3) weighted-Lab prototype colours, most common first."""
    shares: np.ndarray
    """(k,) share of the reference pixels each prototype stands for."""
    median: np.ndarray
    """(3,) weighted-Lab median of all reference pixels."""
    pixels: int
    """How many reference pixels the model was fitted on (0: from a stated colour)."""
    source: str
    """Where the colours come from, for the evidence."""

    def distance(self, lab: np.ndarray, squared_norms: np.ndarray | None = None) -> np.ndarray:
        """Distance of every pixel to the nearest prototype (`squared_norms`: the pixels' squared
        lengths, when already computed: |x - p|^2 = |x|^2 - 2 x.p + |p|^2 saves a subtraction per prototype)."""
        if squared_norms is None:
            squared_norms = np.einsum("...i,...i->...", lab, lab)
        best = None
        for p in self.prototypes.astype(np.float32):
            d2 = squared_norms - 2.0 * (lab @ p) + float(p @ p)
            best = d2 if best is None else np.minimum(best, d2, out=best)
        return np.sqrt(np.maximum(best, 0.0, out=best))

    @property
    def median_rgb(self) -> tuple[int, int, int]:
        """The median as sRGB 0-255 (for notes)."""
        lab = self.median.astype(np.float32).copy()
        lab[0] /= LIGHTNESS_WEIGHT
        rgb = cv2.cvtColor(lab.reshape(1, 1, 3), cv2.COLOR_Lab2RGB).reshape(3)
        return tuple(round(float(np.clip(v, 0, 1)) * 255) for v in rgb)  # type: ignore[return-value]


def model_from_pixels(rgb: np.ndarray, source: str, exclude: np.ndarray | None = None,
                      exclude_distance: float = 0.0) -> ColourModel | None:
    """The colour model of (N, 3) sRGB pixels: k-means prototypes in weighted Lab (deterministic
    seeding), clusters under MIN_PROTOTYPE_SHARE dropped, and prototypes within `exclude_distance`
    of any colour in `exclude` (weighted Lab, (m, 3)) dropped too (the background showing through a
    mask that is a little off). None when fewer than 10 pixels remain."""
    lab = to_lab(np.asarray(rgb).reshape(-1, 3)).reshape(-1, 3)
    if len(lab) < 10:
        return None
    k = int(min(MAX_PROTOTYPES, max(1, len(lab) // 20)))
    criteria = (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 30, 0.1)
    # k-means++ seeding is random; fix OpenCV's RNG so the same pixels always give the same model
    cv2.setRNGSeed(12345)
    _, labels, centres = cv2.kmeans(np.ascontiguousarray(lab), k, None, criteria, 3, cv2.KMEANS_PP_CENTERS)
    counts = np.bincount(labels.reshape(-1), minlength=k).astype(np.float64)
    shares = counts / counts.sum()
    order = np.argsort(-shares, kind="stable")
    keep = [i for i in order if shares[i] >= MIN_PROTOTYPE_SHARE]
    if exclude is not None and len(exclude) and exclude_distance > 0:
        far = [i for i in keep if float(distance(exclude, centres[i]).min()) > exclude_distance]
        keep = far or keep[:1]
    if not keep:
        keep = [int(order[0])]
    median = np.median(lab[np.isin(labels.reshape(-1), keep)], axis=0)
    return ColourModel(prototypes=centres[keep].astype(np.float32), shares=shares[keep], median=median.astype(np.float32),
                       pixels=len(lab), source=source)


def model_from_colour(rgb01: tuple[float, float, float], source: str) -> ColourModel:
    """A one-prototype model of a stated sRGB colour (0-1)."""
    lab = to_lab(np.array(rgb01, dtype=np.float32) * 255.0).reshape(3)
    return ColourModel(prototypes=lab[None, :], shares=np.ones(1), median=lab, pixels=0, source=source)


def apply_gains(rgb: np.ndarray, gains: np.ndarray | None) -> np.ndarray:
    """uint8 sRGB times per-channel gains (an ood light cast), clipped."""
    if gains is None or np.allclose(gains, 1.0):
        return rgb
    return np.clip(rgb.astype(np.float32) * np.asarray(gains, dtype=np.float32) + 0.5, 0, 255).astype(np.uint8)
