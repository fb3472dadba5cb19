"""geometry: object size and shape in the video match the sim projection.

Per object and view, in every judged frame where the object is present: the region that looks like
the object within `search_radius` object diameters of its projection (the connected parts of it that
touch the projection, small gaps closed, leaving out where the sim projects the robot or another
object that itself looks like it) is compared with the projected mask: the symmetric difference of
the two, relative to the mask's area (0 = identical; an object drawn 1.5 times too large reads about
1.25). The metric is the worst object and view's median over frames. A failure routes to grounding (G's object
dimensions are the usual cause).
"""

from __future__ import annotations

import cv2
import numpy as np

from datafarm.artifacts.admission import CheckResult, Evidence
from datafarm.verifiers.checks.base import CheckContext, crops_list, frames_list
from datafarm.verifiers.checks.objects import present_fraction
from datafarm.verifiers.crops import box_around
from datafarm.verifiers.evidence import CameraEvidence, dilate

_CLOSE = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (3, 3))


PARAMETERS = ("search_radius", "min_present_fraction")
"""The settings this check reads from its spec."""


def _neighbourhood(cam: CameraEvidence, k: int, t: int, radius: float) -> tuple[slice, slice, np.ndarray, np.ndarray] | None:
    """(rows, columns, mask grown by `radius`, mask grown by 1) around object k's projection at frame t,
    cropped to where they can be set (cached on the evidence: every video verified against it reuses them)."""
    key = ("near", k, t, round(radius, 3))
    if key not in cam.cache:
        mask = cam.object_mask(k, t)
        ys, xs = np.nonzero(mask)
        if not len(ys):
            cam.cache[key] = None  # type: ignore[assignment]
        else:
            pad = int(np.ceil(radius)) + 2
            h, w = mask.shape
            rows = slice(max(0, ys.min() - pad), min(h, ys.max() + pad + 1))
            cols = slice(max(0, xs.min() - pad), min(w, xs.max() + pad + 1))
            sub = mask[rows, cols]
            cam.cache[key] = (rows, cols, dilate(sub, radius), dilate(sub, 1))  # type: ignore[assignment]
    return cam.cache[key]  # type: ignore[return-value]


def object_region(likeness: np.ndarray, cam: CameraEvidence, k: int, t: int, radius: float,
                  leave_out: frozenset[int] = frozenset(), margin: float = 0.0) -> np.ndarray:
    """The region that looks like object k near its projection at frame t: the parts of the likeness
    map (H x W) within `radius` pixels of the projection that touch it (gaps of a pixel closed).
    Pixels where the sim projects a class of `leave_out` (the robot or objects that look like object k
    themselves, `ViewAnalysis.confusable`; grown by `margin`, outside object k's own projection) are
    left out: a gripper the colour of a scale, touching it, must not read as part of the scale."""
    out = np.zeros(likeness.shape, bool)
    near = _neighbourhood(cam, k, t, radius)
    if near is None:
        return out
    rows, cols, within, touch = near
    candidate = likeness[rows, cols] & within
    if leave_out:
        classes = cam.classes[t][rows, cols]
        others = np.isin(classes, list(leave_out))
        if others.any():
            candidate &= ~(dilate(others, margin) & (classes != 2 + k))
    closed = cv2.morphologyEx(candidate.astype(np.uint8), cv2.MORPH_CLOSE, _CLOSE)
    count, labels = cv2.connectedComponents(closed, connectivity=8)
    if count <= 1:
        return out
    touching = np.unique(labels[touch & (closed > 0)])
    touching = touching[touching > 0]
    out[rows, cols] = np.isin(labels, touching)
    return out


def run(ctx: CheckContext) -> CheckResult:
    """The geometry check (see the module docstring)."""
    ev, spec = ctx.evidence, ctx.spec
    min_area = spec.common.min_object_area_px
    present_min = ctx.param("min_present_fraction")
    worst, evidence = 0.0, []
    for k, oid in enumerate(ev.object_ids):
        for name in ctx.judged_cameras(oid):
            cam, view = ev.cameras[name], ctx.analysis.views[name]
            track = cam.tracks[oid]
            radius = max(2.0, ctx.param("search_radius") * track.diameter)
            errors: dict[int, tuple[float, float]] = {}
            for t in np.nonzero(track.areas >= min_area)[0]:
                mask = cam.object_mask(k, int(t))
                like = view.likeness[oid][t]
                present = present_fraction(like, mask, view.ambiguous[oid])
                if present is None or present < present_min:
                    continue  # missing (the objects check reports it) or unjudgeable: no shape to measure
                region = object_region(like, cam, k, int(t), radius, view.confusable[oid], spec.common.mask_margin_px)
                errors[int(t)] = (float((region ^ mask).sum() / mask.sum()), float(region.sum() / mask.sum()))
            if not errors:
                continue
            values = np.array([e[0] for e in errors.values()])
            median = float(np.median(values))
            worst = max(worst, median)
            bad = [t for t, e in errors.items() if e[0] > ctx.check.threshold]
            t = max(errors, key=lambda f: errors[f][0]) if bad else sorted(errors)[len(errors) // 2]
            mask = cam.object_mask(k, t)
            region = object_region(view.likeness[oid][t], cam, k, t, radius, view.confusable[oid],
                                   spec.common.mask_margin_px)
            crop = ctx.crops.save("geometry", name, t, view.obs[t], sim=mask, found=region,
                                  box=box_around([mask, region], mask.shape, pad=10), tag=oid)
            ratios = np.array([e[1] for e in errors.values()])
            evidence.append(Evidence(camera=name, frames=frames_list(bad or [t]), crops=crops_list(crop),
                                     note=f"{oid}: median mismatch {median:.2f} of the projected area over "
                                          f"{len(errors)} frames (video/sim area ratio median "
                                          f"{float(np.median(ratios)):.2f}); {len(bad)} frames over "
                                          f"{ctx.check.threshold:g}"))
    return ctx.result(worst, evidence)
