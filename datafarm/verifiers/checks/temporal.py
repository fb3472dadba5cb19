"""temporal: no jumps, no lag against the sim motion, continuity across chunk seams.

Per frame, over all views: the video's edges (Canny) are compared with the silhouettes of the sim's
robot and objects at the same frame and at the `max_step` frames each side, counting only the
silhouette pixels that move around that frame (those present in every frame of the window are left
out, so the still parts of the scene do not dilute the comparison). A frame whose edges trace a
neighbouring sim frame's moving silhouette better than its own, by more than `min_gain` (share of the
silhouette traced within `edge_radius_px`), is out of step: a dropped frame puts every later frame
one step ahead, a repeated one one step behind, a lagging render behind throughout. Frames whose
silhouettes hardly move (`min_moving_px`) cannot be timed and are skipped. Only runs of MIN_RUN or
more consecutive frames out of step in one direction count (a lone frame is noise; a timing defect
shifts every frame after it).

Slow motion moves a silhouette too little in one frame for its edges to tell neighbouring frames
apart, but a repeated or frozen frame still shows: where the sim's silhouettes change from the
previous frame (`min_moving_px` or more pixels over all views), the video must change too. A frame
whose video changes there by less than STALL_SHARE of what its neighbours' videos change where their
silhouettes move is a stall. The metric counts the frames out of step and the stalls, plus the frames
missing or extra against the episode's steps. The evidence lists the chunk seams (render.json joins)
with the video's frame-to-frame change there against its neighbours'.
"""

from __future__ import annotations

import cv2
import numpy as np

from datafarm.artifacts.admission import CheckResult, Evidence
from datafarm.renderers.control import segment_outlines
from datafarm.verifiers.checks.base import CheckContext, crops_list, frames_list
from datafarm.verifiers.checks.views import edge_distance

MIN_RUN = 3
"""Consecutive timed frames out of step (same direction) that count as a timing defect (see `sustained`)."""

STALL_SHARE = 0.2
"""A frame whose video changes, where the sim's silhouettes move, by less than this share of its
neighbours' change is a stall (clean renders of the reference tasks stay above 0.55; a repeated frame
reads under 0.01 after H.264)."""
STALL_NEIGHBOURS = 3
"""Frames each side whose change a frame's is compared with."""

PARAMETERS = ("max_step", "min_gain", "edge_radius_px", "min_moving_px")
"""The settings this check reads from its spec."""


def frame_changes(obs: np.ndarray) -> np.ndarray:
    """(T,) mean absolute change from the previous frame (0 for the first), 0-255 levels."""
    out = np.zeros(len(obs))
    for t in range(1, len(obs)):
        out[t] = float(np.mean(np.abs(obs[t].astype(np.int16) - obs[t - 1].astype(np.int16))))
    return out


def timing_scores(ctx: CheckContext, reach: int, radius: float, min_moving: float) -> np.ndarray:
    """(T, 2 * reach + 1) share of the moving silhouette of sim frame t + d traced by the video's edges
    at frame t, over all views (NaN where the frame cannot be timed or t + d is outside the episode)."""
    ev = ctx.evidence
    steps = ev.frames
    traced = np.zeros((steps, 2 * reach + 1))
    total = np.zeros((steps, 2 * reach + 1))
    for name, cam in ev.cameras.items():
        obs = ctx.analysis.views[name].obs
        silhouettes = np.stack([segment_outlines(cam.classes[t]) for t in range(steps)])
        for t in range(steps):
            lo, hi = max(0, t - reach), min(steps, t + reach + 1)
            still = np.logical_and.reduce(silhouettes[lo:hi], axis=0)
            distance = None
            for j, d in enumerate(range(-reach, reach + 1)):
                if not 0 <= t + d < steps:
                    continue
                moving = silhouettes[t + d] & ~still
                n = int(moving.sum())
                if n == 0:
                    continue
                if distance is None:
                    distance = edge_distance(obs[t])
                traced[t, j] += float((distance[moving] <= radius).sum())
                total[t, j] += n
    with np.errstate(invalid="ignore", divide="ignore"):
        scores = traced / total
    scores[total[:, [reach]].repeat(2 * reach + 1, axis=1) < min_moving] = np.nan
    scores[total == 0] = np.nan
    return scores


def stall_ratios(ctx: CheckContext, min_moving: float) -> np.ndarray:
    """(T,) per frame: the video's mean grey-level change from the previous frame over the pixels
    where the sim's classes change (all views together), over the median of the same for the
    STALL_NEIGHBOURS frames each side; NaN where fewer than `min_moving` pixels change (nothing moves
    to be seen), for the first frame, or where no neighbour can be compared."""
    ev = ctx.evidence
    steps = ev.frames
    change, moving = np.zeros(steps), np.zeros(steps)
    ratios = np.full(steps, np.nan)
    if steps < 2:
        return ratios
    for name, cam in ev.cameras.items():
        obs = ctx.analysis.views[name].obs
        before = cv2.cvtColor(obs[0], cv2.COLOR_RGB2GRAY).astype(np.int16)
        for t in range(1, steps):
            now = cv2.cvtColor(obs[t], cv2.COLOR_RGB2GRAY).astype(np.int16)
            moved = cam.classes[t] != cam.classes[t - 1]
            n = int(moved.sum())
            if n:
                change[t] += float(np.abs(now[moved] - before[moved]).sum())
                moving[t] += n
            before = now
    judged = moving >= max(1.0, min_moving)
    mean = np.where(judged, change / np.maximum(moving, 1), np.nan)
    for t in np.nonzero(judged)[0]:
        around = [mean[s] for s in range(max(1, t - STALL_NEIGHBOURS), min(steps, t + STALL_NEIGHBOURS + 1))
                  if s != t and judged[s]]
        if around and np.median(around) > 0:
            ratios[t] = mean[t] / float(np.median(around))
    return ratios


def sustained(frames: list[int], direction: np.ndarray, timed: np.ndarray) -> list[int]:
    """The frames of `frames` that lie in a run of at least MIN_RUN consecutive timed frames out of
    step in the same direction. A dropped or repeated frame shifts every later frame, and a lagging
    render every frame, so real defects make long runs; a lone frame whose edges happen to fit a
    neighbour a little better (texture, blur, a near-still pose) is measurement noise."""
    order = {int(t): i for i, t in enumerate(timed)}
    keep: list[int] = []
    run: list[int] = []
    for t in frames:
        if run and (order[t] != order[run[-1]] + 1 or direction[t] != direction[run[-1]]):
            keep += run if len(run) >= MIN_RUN else []
            run = []
        run.append(t)
    keep += run if len(run) >= MIN_RUN else []
    return keep


def run(ctx: CheckContext) -> CheckResult:
    """The temporal check (see the module docstring)."""
    ev = ctx.evidence
    steps = ev.frames
    reach = int(ctx.param("max_step"))
    scores = timing_scores(ctx, reach, ctx.param("edge_radius_px"), ctx.param("min_moving_px"))
    own = scores[:, reach]
    timed = np.isfinite(own)
    filled = np.where(np.isfinite(scores), scores, -np.inf)
    best = np.argmax(filled, axis=1)
    gains = filled[np.arange(steps), best] - np.where(timed, own, np.inf)
    stray = [t for t in range(steps) if timed[t] and best[t] != reach and gains[t] > ctx.param("min_gain")]
    out_of_step = sustained(stray, np.sign(best - reach), np.nonzero(timed)[0])
    ratios = stall_ratios(ctx, ctx.param("min_moving_px"))
    stalled = [int(t) for t in np.nonzero(np.isfinite(ratios) & (ratios < STALL_SHARE))[0]]
    missing = max([abs(n - steps) for n in ctx.analysis.frame_counts.values()] + [0])
    metric = len(set(out_of_step) | set(stalled)) + missing
    evidence = []
    changes = np.mean([frame_changes(v.obs) for v in ctx.analysis.views.values()], axis=0)
    for seam in ev.seams:
        if 0 < seam < steps:
            around = [changes[t] for t in range(max(1, seam - 3), min(steps, seam + 4)) if t != seam]
            evidence.append(Evidence(frames=[seam - 1, seam],
                                     note=f"chunk seam at frame {seam}: video change {changes[seam]:.2f} levels "
                                          f"(neighbours' median {float(np.median(around)) if around else 0:.2f})"))
    if out_of_step:
        t = out_of_step[0]
        name = next(iter(ev.cameras))
        offsets = sorted({int(best[f]) - reach for f in out_of_step})
        crop = ctx.crops.save("temporal", name, t, ctx.analysis.views[name].obs[t],
                              sim=ev.cameras[name].classes[t] != 0,
                              found=ev.cameras[name].classes[min(steps - 1, max(0, t + offsets[0]))] != 0,
                              tag="out-of-step")
        evidence.append(Evidence(frames=frames_list(out_of_step), crops=crops_list(crop),
                                 note=f"{len(out_of_step)} of {int(timed.sum())} timed frames out of step with the "
                                      f"sim (best-fitting sim frame offsets {offsets}); first at frame {t} (green: its "
                                      f"own sim silhouette, magenta: the one it fits)"))
    else:
        lone = f"; {len(stray)} lone frames fit a neighbour better, in no run of {MIN_RUN} or more" if stray else ""
        evidence.append(Evidence(frames=frames_list(stray),
                                 note=f"no run of {MIN_RUN} or more of the {int(timed.sum())} timed frames fits a "
                                      f"neighbouring sim frame (±{reach}) better than its own{lone}"))
    judged_stalls = int(np.isfinite(ratios).sum())
    if stalled:
        t = stalled[0]
        name = next(iter(ev.cameras))
        crop = ctx.crops.save("temporal", name, t, ctx.analysis.views[name].obs[t],
                              sim=ev.cameras[name].classes[t] != ev.cameras[name].classes[t - 1], tag="stall")
        shares = ", ".join(f"{f} ({ratios[f]:.2f})" for f in stalled[:6])
        evidence.append(Evidence(frames=frames_list(stalled), crops=crops_list(crop),
                                 note=f"{len(stalled)} of {judged_stalls} frames stall: the video hardly changes where "
                                      f"the sim's silhouettes move (change against the neighbours': {shares}; under "
                                      f"{STALL_SHARE:g} is a stall; green: where the sim moved)"))
    elif judged_stalls:
        evidence.append(Evidence(note=f"no stall: in all {judged_stalls} frames where the sim's silhouettes move, the "
                                      f"video changes there by at least {STALL_SHARE:g} of its neighbours' change "
                                      f"(least {float(np.nanmin(ratios)):.2f})"))
    for problem in ctx.analysis.problems:
        evidence.append(Evidence(note=f"video does not fit the episode: {problem}"))
    return ctx.result(metric, evidence)
