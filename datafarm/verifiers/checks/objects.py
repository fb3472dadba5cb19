"""objects: every object the sim shows is visible where the sim projects it, and nothing else.

Per object and view, in every frame where the sim projects enough of the object: the share of its
projected pixels (shrunk by a pixel) that look like it in the video; under `min_present_fraction`
the object is missing there. In every frame: the largest connected region outside every (grown) sim
mask that looks like the object, at `min_blob_fraction` of the object's typical projected area or
more, is an extra object. "Looks like" uses the object's colour tolerance in that view (tighter than
the shared one for an object close to its surroundings; the evidence says so). Pixels whose
background itself looks like the object are not judged (a frame where too few others remain in the
mask is skipped). The metric is the worst object and
view's share of frames with either defect. An object missing in every view it is expected in routes
to grounding (G may have placed something that is not there); everything else routes to render.
"""

from __future__ import annotations

import cv2
import numpy as np

from datafarm.artifacts.admission import CheckResult, Evidence
from datafarm.artifacts.stages import Stage
from datafarm.verifiers.checks.base import CheckContext, crops_list, frames_list
from datafarm.verifiers.crops import box_around
from datafarm.verifiers.evidence import erode

MIN_JUDGEABLE = 0.3
"""Least share of a projected mask whose background does not itself look like the object, for the
frame to be judged (an object in front of a same-coloured background cannot be seen to be there)."""


PARAMETERS = ("min_present_fraction", "min_blob_fraction")
"""The settings this check reads from its spec."""


def present_fraction(likeness: np.ndarray, mask: np.ndarray, ambiguous: np.ndarray | None = None) -> float | None:
    """Share of a projected mask (shrunk by a pixel when enough remains) that looks like the object,
    over the pixels whose background does not look like it; None when too few of those remain."""
    inner = erode(mask, 1)
    if inner.sum() < 0.3 * mask.sum():
        inner = mask
    if not inner.any():
        return 0.0
    if ambiguous is not None:
        clear = inner & ~ambiguous
        if clear.sum() < MIN_JUDGEABLE * inner.sum():
            return None
        inner = clear
    return float(likeness[inner].mean())


def largest_blob(mask: np.ndarray) -> tuple[int, np.ndarray | None]:
    """(area, mask) of the largest 8-connected region of `mask` (0, None when empty)."""
    if not mask.any():
        return 0, None
    count, labels, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
    if count <= 1:
        return 0, None
    best = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
    return int(stats[best, cv2.CC_STAT_AREA]), labels == best


def run(ctx: CheckContext) -> CheckResult:
    """The objects check (see the module docstring)."""
    ev, spec = ctx.evidence, ctx.spec
    min_area = spec.common.min_object_area_px
    present_min, blob_min = ctx.param("min_present_fraction"), ctx.param("min_blob_fraction")
    worst, evidence = 0.0, []
    missing_everywhere: list[str] = []
    for k, oid in enumerate(ev.object_ids):
        cameras = ctx.judged_cameras(oid)
        sizes = [ev.cameras[c].tracks[oid].typical_area for c in cameras]
        missing_in: list[str] = []
        for name in cameras:
            cam, view = ev.cameras[name], ctx.analysis.views[name]
            track = cam.tracks[oid]
            typical = track.typical_area or max(sizes + [0.0])
            like, unclear = view.likeness[oid], view.ambiguous[oid]
            fractions = {int(t): present_fraction(like[t], cam.object_mask(k, int(t)), unclear)
                         for t in np.nonzero(track.areas >= min_area)[0]}
            fractions = {t: f for t, f in fractions.items() if f is not None}
            judged = np.array(sorted(fractions), dtype=int)
            missing = [t for t, f in fractions.items() if f < present_min]
            extra, worst_blob = [], (0, -1, None)
            if typical > 0:
                for t in range(ev.frames):
                    area, blob = largest_blob(like[t] & ~view.grown[t] & ~unclear)
                    if area >= max(blob_min * typical, min_area / 2):
                        extra.append(t)
                        if area > worst_blob[0]:
                            worst_blob = (area, t, blob)
            share_missing = len(missing) / len(judged) if len(judged) else 0.0
            share_extra = len(extra) / ev.frames
            share = max(share_missing, share_extra)
            worst = max(worst, share)
            if len(judged) and share_missing > ctx.check.threshold:
                missing_in.append(name)
            if missing:
                t = min(missing, key=lambda f: fractions[f])
                mask = cam.object_mask(k, t)
                crop = ctx.crops.save("objects", name, t, view.obs[t], sim=mask, found=like[t] & mask,
                                      box=box_around([mask], mask.shape, pad=12), tag=f"{oid}-missing")
                evidence.append(Evidence(camera=name, frames=frames_list(missing), crops=crops_list(crop),
                                         note=f"{oid} missing where the sim projects it in {len(missing)} of "
                                              f"{len(judged)} judged frames (present fraction at frame {t}: "
                                              f"{fractions[t]:.2f}, needs {present_min:g})"))
            if extra:
                area, t, blob = worst_blob
                crop = ctx.crops.save("objects", name, t, view.obs[t], sim=cam.object_mask(k, t), found=blob,
                                      box=box_around([blob, cam.object_mask(k, t)], blob.shape, pad=12),
                                      tag=f"{oid}-extra")
                evidence.append(Evidence(camera=name, frames=frames_list(extra), crops=crops_list(crop),
                                         note=f"a {oid}-coloured region where the sim has no object in {len(extra)} "
                                              f"frames (largest {area} px at frame {t}; the object's typical "
                                              f"projection is {typical:.0f} px)"))
            if view.tolerance[oid] < spec.common.colour_tolerance:
                evidence.append(Evidence(camera=name, note=f"{oid} judged with colour tolerance "
                                                           f"{view.tolerance[oid]:.1f} (shared {spec.common.colour_tolerance:g}): "
                                                           f"its colour lies {view.separation[oid]:.1f} from its real "
                                                           "surroundings"))
            if not missing and not extra and len(judged):
                t = int(judged[len(judged) // 2])
                mask = cam.object_mask(k, t)
                crop = ctx.crops.save("objects", name, t, view.obs[t], sim=mask, found=like[t] & mask,
                                      box=box_around([mask], mask.shape, pad=12), tag=oid)
                evidence.append(Evidence(camera=name, frames=[t], crops=crops_list(crop),
                                         note=f"{oid} seen where the sim projects it in all {len(judged)} judged "
                                              f"frames; no {oid}-coloured region elsewhere"))
        shown_in = {c for c in cameras if (ev.cameras[c].tracks[oid].areas >= min_area).any()}
        if missing_in and set(missing_in) == shown_in:
            missing_everywhere.append(oid)
    route = Stage.grounding if missing_everywhere else None
    if missing_everywhere:
        evidence.append(Evidence(note=f"missing in every view it is expected in: {', '.join(missing_everywhere)} "
                                      "(routes to grounding)"))
    return ctx.result(worst, evidence, route)
