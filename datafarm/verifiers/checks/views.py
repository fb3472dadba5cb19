"""views: each camera's video matches that camera's geometry.

On frames spread over the episode, the video's edges (Canny) are compared with the outlines of every
sim surface (table, robot, objects) as each camera projects them: a camera's score against a sim view
is the share of that view's outline pixels with a video edge within `edge_radius_px`. A view's margin
is how much of what chance leaves untraced its own camera's outlines trace: (own - rival) / (1 -
rival), where the rival is the best score against any other camera's outlines or its own, mirrored
(the chance level of a wrong geometry: busy textures trace any outline often). The metric is the
smallest margin. A view
that another camera's outlines fit better was swapped or mis-tiled (routes to render); a view that
fits nothing well (own score under `min_own_score`) is off its camera's geometry (routes to grounding).
"""

from __future__ import annotations

import cv2
import numpy as np

from datafarm.artifacts.admission import CheckResult, Evidence
from datafarm.artifacts.stages import Stage
from datafarm.verifiers.checks.base import CheckContext, crops_list

CANNY = (40, 120)
"""Canny hysteresis thresholds on the video's grey levels."""


PARAMETERS = ("edge_radius_px", "sample_frames", "min_own_score")
"""The settings this check reads from its spec."""


def edge_distance(rgb: np.ndarray) -> np.ndarray:
    """Distance, pixels, from every pixel to the nearest edge of an image."""
    grey = cv2.GaussianBlur(cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY), (3, 3), 0)
    edges = cv2.Canny(grey, *CANNY)
    return cv2.distanceTransform((edges == 0).astype(np.uint8), cv2.DIST_L2, 3)


def traced(distance: np.ndarray, outline: np.ndarray, radius: float) -> float:
    """Share of outline pixels with an edge within `radius`."""
    n = int(outline.sum())
    return float((distance[outline] <= radius).sum() / n) if n else 0.0


def run(ctx: CheckContext) -> CheckResult:
    """The views check (see the module docstring)."""
    ev = ctx.evidence
    names = list(ev.cameras)
    radius = ctx.param("edge_radius_px")
    count = int(ctx.param("sample_frames"))
    first = ev.cameras[names[0]]
    picks = first.outline_frames
    if len(picks) > count:
        picks = [picks[i] for i in np.linspace(0, len(picks) - 1, count).round().astype(int)]
    slots = [first.outline_frames.index(f) for f in picks]
    scores = {a: {b: 0.0 for b in [*names, "mirrored"]} for a in names}
    for slot, frame in zip(slots, picks, strict=True):
        for a in names:
            dist = edge_distance(ctx.analysis.views[a].obs[frame])
            for b in names:
                scores[a][b] += traced(dist, ev.cameras[b].outlines[slot], radius) / len(picks)
            scores[a]["mirrored"] += traced(dist, np.fliplr(ev.cameras[a].outlines[slot]), radius) / len(picks)
    worst, evidence, route = float("inf"), [], None
    for a in names:
        own = scores[a][a]
        rival = max((b for b in scores[a] if b != a), key=lambda b: scores[a][b])
        margin = (own - scores[a][rival]) / max(1e-6, 1.0 - scores[a][rival])
        worst = min(worst, margin)
        frame = picks[len(picks) // 2]
        slot = slots[len(slots) // 2]
        outline = ev.cameras[a].outlines[slot]
        crop = ctx.crops.save("views", a, frame, ctx.analysis.views[a].obs[frame], sim=outline, tag="outlines")
        others = ", ".join(f"{b} {scores[a][b]:.2f}" for b in scores[a] if b != a)
        evidence.append(Evidence(camera=a, frames=list(picks), crops=crops_list(crop),
                                 note=f"video edges trace {own:.2f} of camera {a}'s sim outlines; other geometries: "
                                      f"{others}; margin {margin:.2f}"))
        if margin < ctx.check.threshold:
            if rival in names and scores[a][rival] > own:
                route = route or Stage.render
                evidence[-1].note += f" (the video fits camera {rival} better: swapped or mis-tiled views)"
            elif own < ctx.param("min_own_score") and route is None:
                route = Stage.grounding
                evidence[-1].note += " (the video fits no camera's geometry: G's camera may be wrong)"
    return ctx.result(worst if np.isfinite(worst) else 0.0, evidence, route)
