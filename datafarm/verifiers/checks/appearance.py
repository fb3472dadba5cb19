"""appearance: colours and textures match the real reference (or the requested ood variant).

Per object and view: the median colour of the video's pixels inside the object's projected mask
(shrunk by a pixel, over every judged frame) against the median colour of the object's real pixels
in R's reference frames (where G's scene puts it in the clip), both under the episode's ood light
cast; their distance in weighted Lab. For an object judged with a tighter colour tolerance than the
shared one (it stands close to its surroundings, `analysis.object_tolerance`), also their chromatic
distance (a* and b* only) as a share of that tolerance, times the threshold: a hue or chroma drift
of its whole tolerance (half the way to its surroundings) fails, as a beige drum turned bluish does
(11 to 13 units, under K's threshold). Lightness is left out of that part: a pale object's median
lightness moves by several units with how much of its lit top and shaded side a view shows. In
sim2real (and ood without a tablecloth): also the video's
own background (its median outside the sim's foreground) against the clip's median frame, away from
where the clip has objects (median per-pixel distance). The metric is the largest of these distances. Texture (the spread of lightness)
is compared too and reported in the evidence.
"""

from __future__ import annotations

import numpy as np

from datafarm.artifacts.admission import CheckResult, Evidence
from datafarm.verifiers.checks.base import CheckContext, crops_list
from datafarm.verifiers.colour import apply_gains, distance, to_lab
from datafarm.verifiers.crops import box_around
from datafarm.verifiers.evidence import dilate, erode

PARAMETERS = ("texture_ratio_limit",)
"""The settings this check reads from its spec."""


def _chromatic(chroma: float, judged: float | None, tolerance: float, separation: float | None) -> str:
    """How an object's chromatic gap was judged, for the evidence (nothing when it was not)."""
    if judged is None:
        return ""
    return (f"; chromatic distance {chroma:.1f} of its tolerance {tolerance:.1f} (its colour lies {separation:.1f} "
            f"from its real surroundings), judged as {judged:.1f}")


def run(ctx: CheckContext) -> CheckResult:
    """The appearance check (see the module docstring)."""
    ev, spec = ctx.evidence, ctx.spec
    min_area = spec.common.min_object_area_px
    worst, evidence = 0.0, []
    for k, oid in enumerate(ev.object_ids):
        for name in ctx.judged_cameras(oid):
            cam, view = ev.cameras[name], ctx.analysis.views[name]
            judged = np.nonzero(cam.tracks[oid].areas >= min_area)[0]
            if not len(judged):
                continue
            pixels = to_lab(np.concatenate([view.obs[t][erode(cam.object_mask(k, int(t)), 1)] for t in judged]))
            reference = cam.reference_lab[oid]
            if len(pixels) < 10 or len(reference) == 0:
                continue
            seen, real = np.median(pixels, axis=0), np.median(reference, axis=0)
            gap = float(distance(seen, real))
            chroma = float(distance(seen[1:], real[1:]))
            tolerance = view.tolerance[oid]
            judged_chroma = chroma / tolerance * ctx.check.threshold if tolerance < spec.common.colour_tolerance else None
            worst = max(worst, gap, judged_chroma or 0.0)
            spread = (float(pixels[:, 0].std()) + 1.0) / (float(reference[:, 0].std()) + 1.0)
            t = int(judged[len(judged) // 2])
            mask = cam.object_mask(k, t)
            crop = ctx.crops.save("appearance", name, t, view.obs[t], sim=mask,
                                  box=box_around([mask], mask.shape, pad=12), tag=oid)
            texture = "" if 1 / ctx.param("texture_ratio_limit") <= spread <= ctx.param("texture_ratio_limit") else \
                " (texture differs: lightness spread far from the reference's)"
            evidence.append(Evidence(camera=name, frames=[t], crops=crops_list(crop),
                                     note=f"{oid}: colour distance {gap:.1f} from its real reference "
                                          f"({cam.colours[oid].source}){_chromatic(chroma, judged_chroma, tolerance, view.separation[oid])}; "
                                          f"lightness spread ratio {spread:.2f}{texture}"))
    if "tablecloth" not in ev.variations:
        for name, cam in ev.cameras.items():
            view = ctx.analysis.views[name]
            away = view.own_known & ~dilate(cam.reference_classes >= 2, 2 * spec.common.mask_margin_px + 2)
            if away.sum() < 100:
                continue
            real = to_lab(apply_gains(cam.clip_median, ev.light_gains))
            gap = float(np.median(distance(to_lab(view.own_plate), real)[away]))
            worst = max(worst, gap)
            evidence.append(Evidence(camera=name, note=f"background: median colour distance {gap:.1f} from the "
                                                       f"clip's real background over {int(away.sum())} pixels"))
    else:
        evidence.append(Evidence(note="background colour not compared: the episode's ood tablecloth replaces the "
                                      "real table"))
    return ctx.result(worst, evidence)
