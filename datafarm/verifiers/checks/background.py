"""background: the static background stays static.

Per view, at half resolution, on the background's textured pixels (grey-level gradient of at least
`min_gradient` in the first frame, outside the sim's grown foreground in the frames compared): each
frame is registered against the first frame by trying every shift up to `search_px` pixels each way
and keeping the one with the smallest mean absolute grey-level difference (a shift that lowers the
difference by less than `min_gain` levels counts as none); a static background registers at 0. The
first frame is registered the same way against the clip's real background seen from the episode's
camera pose (a background that is off from the start; not under an ood tablecloth, which replaces
the real table). The metric is the largest displacement, full-resolution pixels. A view with too few
textured background pixels (`min_textured_fraction`) cannot be judged and is reported.
"""

from __future__ import annotations

import cv2
import numpy as np

from datafarm.artifacts.admission import CheckResult, Evidence
from datafarm.verifiers.checks.base import CheckContext, crops_list, frames_list
from datafarm.verifiers.colour import apply_gains
from datafarm.verifiers.evidence import CameraEvidence, dilate

SCALE = 2
"""Registration runs on images this many times smaller."""


PARAMETERS = ("search_px", "min_gradient", "min_gain", "min_textured_fraction")
"""The settings this check reads from its spec."""


def grey(rgb: np.ndarray) -> np.ndarray:
    """Grey levels of an RGB image at 1/SCALE resolution (float32)."""
    g = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
    h, w = g.shape
    return cv2.resize(g, (w // SCALE, h // SCALE), interpolation=cv2.INTER_AREA).astype(np.float32)


def small(mask: np.ndarray) -> np.ndarray:
    """A mask at 1/SCALE resolution (a small pixel is set when any of its pixels is)."""
    h, w = mask.shape
    return cv2.resize(mask.astype(np.float32), (w // SCALE, h // SCALE), interpolation=cv2.INTER_AREA) > 0


def free_background(cam: CameraEvidence, margin: float) -> np.ndarray:
    """(T, h, w) bool at 1/SCALE resolution: pixels clear of the sim's grown foreground (cached on the evidence)."""
    key = ("background-free", margin)
    if key not in cam.cache:
        grown = cam.grown(margin)
        cam.cache[key] = np.stack([~small(dilate(grown[t], SCALE)) for t in range(len(grown))])
    return cam.cache[key]


def textured(image: np.ndarray, minimum: float) -> np.ndarray:
    """bool: pixels whose grey-level gradient (Sobel magnitude / 4, levels per pixel) reaches `minimum`."""
    gx, gy = cv2.Sobel(image, cv2.CV_32F, 1, 0), cv2.Sobel(image, cv2.CV_32F, 0, 1)
    return np.hypot(gx, gy) / 4.0 >= minimum


class Registration:
    """Registers images against one reference on a fixed set of its pixels, over shifts up to `reach`
    each way: every second shift first, then the neighbours of the best."""

    def __init__(self, reference: np.ndarray, pixels: np.ndarray, reach: int) -> None:
        w = reference.shape[1]
        self.reach, self.stride = reach, w + 2 * reach
        self.padded = np.pad(reference, reach, mode="edge").ravel()
        self.ys, self.xs = np.nonzero(pixels)
        self.base = (self.ys + reach) * self.stride + (self.xs + reach)
        dy, dx = np.mgrid[-reach:reach + 1:2, -reach:reach + 1:2]
        self.coarse = np.stack([dx.ravel(), dy.ravel()], axis=1)

    def _errors(self, values: np.ndarray, base: np.ndarray, shifts: np.ndarray) -> np.ndarray:
        offsets = shifts[:, 1] * self.stride + shifts[:, 0]
        moved = self.padded[base[None, :] - offsets[:, None]]
        return np.abs(moved - values[None, :]).mean(axis=1)

    def displacement(self, image: np.ndarray, keep: np.ndarray | None, min_gain: float) -> float:
        """Length of the shift that best maps `image` onto the reference (0 unless it gains `min_gain`
        levels over no shift), on the reference's pixels where `keep` is set."""
        sel = slice(None) if keep is None else keep[self.ys, self.xs]
        values, base = image[self.ys[sel], self.xs[sel]], self.base[sel]
        if len(values) == 0:
            return 0.0
        zero = float(self._errors(values, base, np.zeros((1, 2), int))[0])
        coarse = self._errors(values, base, self.coarse)
        centre = self.coarse[int(np.argmin(coarse))]
        fine = np.array([(centre[0] + dx, centre[1] + dy) for dy in (-1, 0, 1) for dx in (-1, 0, 1)
                         if abs(centre[0] + dx) <= self.reach and abs(centre[1] + dy) <= self.reach])
        errors = self._errors(values, base, fine)
        lengths = np.hypot(fine[:, 0], fine[:, 1])
        best = int(np.argmin(errors + 1e-6 * lengths))  # ties: the smallest shift
        if zero - float(errors[best]) < min_gain:
            return 0.0
        return float(lengths[best] * SCALE)


def run(ctx: CheckContext) -> CheckResult:
    """The background check (see the module docstring)."""
    ev = ctx.evidence
    worst, evidence = 0.0, []
    least, gain = ctx.param("min_textured_fraction"), ctx.param("min_gain")
    reach = max(1, round(ctx.param("search_px") / SCALE))
    grow = 2 * ctx.spec.common.mask_margin_px + 2
    for name, cam in ev.cameras.items():
        view = ctx.analysis.views[name]
        first = grey(view.obs[0])
        free = free_background(cam, ctx.spec.common.mask_margin_px)
        pixels = textured(first, ctx.param("min_gradient")) & free[0]
        if pixels.mean() < least:
            evidence.append(Evidence(camera=name, note=f"background too flat to judge ({pixels.mean():.3f} of the "
                                                       f"pixels textured, needs {least:g})"))
            continue
        register = Registration(first, pixels, reach)
        shifts = np.zeros(ev.frames)
        for t in range(1, ev.frames):
            shifts[t] = register.displacement(grey(view.obs[t]), free[t], gain)
        note = f"largest displacement from the first frame {shifts.max():.0f} px (frame {int(np.argmax(shifts))})"
        off_real = 0.0
        if "tablecloth" not in ev.variations:
            real = grey(apply_gains(cam.clip_median, ev.light_gains))
            clear = ~small(dilate(cam.reference_classes != 0, grow))
            off_real = register.displacement(real, clear, gain)
            note += f"; first frame against the clip's real background {off_real:.0f} px"
        worst = max(worst, float(shifts.max()), off_real)
        moved = [t for t in range(ev.frames) if shifts[t] > ctx.check.threshold]
        t = int(np.argmax(shifts))
        crop = ctx.crops.save("background", name, t, view.obs[t], sim=view.grown[t], tag="moved" if moved else "")
        if moved:
            note += f"; moved in {len(moved)} frames"
        evidence.append(Evidence(camera=name, frames=frames_list(moved or [t]), crops=crops_list(crop), note=note))
    return ctx.result(worst, evidence)
