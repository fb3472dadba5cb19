"""layout: objects sit where the sim puts them, not where the reference frame had them.

Per object and view, over the judged frames: where the sim has moved the object away from its place
in the clip's reference frames (at least half of that place is free of the sim's foreground), the
video must not show the object there (`min_present_fraction` of the free part looking like it); and
wherever the object is seen near its projection, its centroid must lie within `max_offset` object
diameters of the projected centroid. The metric is the worst object and view's share of judged
frames breaking either rule.
"""

from __future__ import annotations

import numpy as np

from datafarm.artifacts.admission import CheckResult, Evidence
from datafarm.verifiers.checks.base import CheckContext, crops_list, frames_list
from datafarm.verifiers.checks.geometry import object_region
from datafarm.verifiers.crops import box_around

PARAMETERS = ("min_present_fraction", "max_offset")
"""The settings this check reads from its spec."""


def run(ctx: CheckContext) -> CheckResult:
    """The layout check (see the module docstring)."""
    ev, spec = ctx.evidence, ctx.spec
    min_area = spec.common.min_object_area_px
    present_min, offset_max = ctx.param("min_present_fraction"), ctx.param("max_offset")
    worst, evidence, informative_any = 0.0, [], False
    for k, oid in enumerate(ev.object_ids):
        for name in ctx.judged_cameras(oid):
            cam, view = ev.cameras[name], ctx.analysis.views[name]
            track = cam.tracks[oid]
            place = cam.reference_classes == 2 + k
            judged = np.nonzero(track.areas >= min_area)[0]
            if not len(judged):
                continue
            diameter = max(2.0, track.diameter)
            at_reference, off, informative = [], [], 0
            for t in (int(f) for f in judged):
                like = view.likeness[oid][t]
                free = place & ~view.grown[t] & ~view.ambiguous[oid]
                if place.sum() >= min_area and free.sum() >= 0.5 * place.sum():
                    informative += 1
                    if like[free].mean() >= present_min:
                        at_reference.append(t)
                region = object_region(like, cam, k, t, diameter, view.confusable[oid], spec.common.mask_margin_px)
                if region.sum() >= min_area / 2:
                    ys, xs = np.nonzero(region)
                    offset = np.hypot(xs.mean() - track.centroids[t, 0], ys.mean() - track.centroids[t, 1]) / diameter
                    if offset > offset_max:
                        off.append(t)
            informative_any |= informative > 0
            bad = sorted(set(at_reference) | set(off))
            share = len(bad) / len(judged)
            worst = max(worst, share)
            t = bad[0] if bad else int(judged[len(judged) // 2])
            mask = cam.object_mask(k, t)
            crop = ctx.crops.save("layout", name, t, view.obs[t], sim=mask, found=view.likeness[oid][t] & place,
                                  box=box_around([mask, place], mask.shape, pad=12), tag=oid)
            evidence.append(Evidence(camera=name, frames=frames_list(bad or [t]), crops=crops_list(crop),
                                     note=f"{oid}: shown at its reference-frame place after the sim moved it in "
                                          f"{len(at_reference)} of {informative} frames; off its sim place in "
                                          f"{len(off)} of {len(judged)} judged frames"))
    if not informative_any:
        evidence.append(Evidence(note="no object leaves its reference-frame place in this episode: only offsets "
                                      "from the sim's places were measured"))
    return ctx.result(worst, evidence)
