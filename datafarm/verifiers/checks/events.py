"""events: object motion in the video starts and stops when the sim's motion and contact events say.

Per object that moves in the episode (its recorded speed exceeds MOVING_SPEED) and per view where
its projection travels at least `min_travel_px`: the object's track in the video (centroid of the
largest region that looks like it near anywhere the sim ever projects it) is compared with its
projected sim track (frames where it is not much occluded) shifted by -S..S frames (`max_shift_s`);
the error at each shift is the median distance between the two tracks over the frames near the
sim's motion (still frames match at every shift and would hide a delay), averaged over the views. The
shift with the smallest error is the object's time shift, unless it improves on no shift by less
than `min_gain` (or a pixel): then it is 0. The metric is the largest absolute shift over the
objects, in seconds. The evidence names the frames where the sim's motion starts and stops and the
object's contact events.

When no object moves far enough to be timed (a drum that is struck and stays), the events are the
robot's contacts with the objects, and the robot's motion around them is timed instead
(`robot_shift`): on the pixels where the sim's robot silhouette differs between the shifts searched
(what moves), the video's silhouette (pixels far from the background plate) is compared with the
sim's at each shift, and the shift that agrees best is the robot's time shift (0 unless it improves
on no shift by `min_gain` of the disagreement). The metric is then that shift, in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from datafarm.artifacts.admission import CheckResult, Evidence
from datafarm.verifiers.analysis import ViewAnalysis
from datafarm.verifiers.checks.base import CheckContext, crops_list, frames_list
from datafarm.verifiers.checks.objects import largest_blob
from datafarm.verifiers.colour import distance, to_lab
from datafarm.verifiers.crops import box_around
from datafarm.verifiers.evidence import SimEvidence, dilate

MOVING_SPEED = 0.02
"""Sim speed, m/s, above which an object counts as moving (objects that never do are not timed)."""
UNOCCLUDED = 0.6
"""Share of its usual projected area an object must show for its centroid to be tracked."""


ROBOT = 1
"""The robot's class in the sim segmentation."""
OCCUPIED = 10.0
"""Weighted-Lab distance from the background plate beyond which a pixel shows something in front of it."""
MIN_CONTESTED = 200
"""Fewest contested pixels (the sim's robot silhouette differs between shifts) for the robot to be timed."""
NOT_ROBOT = frozenset({"table", "ground", "agent"})
"""Body names in contact events that are neither objects nor robot links."""

PARAMETERS = ("max_shift_s", "min_travel_px", "min_gain")
"""The settings this check reads from its spec."""


def video_track(likeness: np.ndarray, window: np.ndarray, min_area: float) -> tuple[np.ndarray, list]:
    """(T, 2) centroid per frame of the largest region of `likeness` inside `window` (NaN when it is
    smaller than `min_area`), and the regions."""
    out = np.full((len(likeness), 2), np.nan)
    regions = []
    for t in range(len(likeness)):
        area, blob = largest_blob(likeness[t] & window)
        regions.append(blob)
        if area >= min_area and blob is not None:
            ys, xs = np.nonzero(blob)
            out[t] = (xs.mean(), ys.mean())
    return out, regions


def unoccluded(areas: np.ndarray, min_area: float) -> np.ndarray:
    """Frames where the projection is large enough and not much occluded (at least UNOCCLUDED of its
    90th-percentile area), so its centroid is the object's and not that of a visible sliver."""
    seen = areas[areas >= min_area]
    if not len(seen):
        return np.zeros(len(areas), bool)
    return (areas >= min_area) & (areas >= UNOCCLUDED * np.percentile(seen, 90))


def moving_frames(sim: np.ndarray, reach: int) -> np.ndarray:
    """Frames within `reach` frames of one where the projected sim track moves (more than a tenth of
    a pixel since the frame before). Only these can tell a shift apart: in the still frames every
    shift matches, and an object that rests most of the episode would otherwise hide any delay."""
    step = np.linalg.norm(np.diff(sim, axis=0), axis=1)
    moving = np.zeros(len(sim), bool)
    moving[1:] = np.isfinite(step) & (step > 0.1)
    if not moving.any():
        return moving
    return np.convolve(moving.astype(np.int32), np.ones(2 * reach + 1, np.int32), mode="same") > 0


def track_error(video: np.ndarray, sim: np.ndarray, shift: int, frames: np.ndarray | None = None) -> tuple[float, int]:
    """Median distance between video[t] and sim[t - shift] over the frames both exist (and how many),
    counting only the frames `frames` marks when given."""
    n = len(video)
    t = np.arange(max(0, shift), min(n, n + shift))
    if frames is not None:
        t = t[frames[t]]
    if len(t) == 0:
        return float("inf"), 0
    d = np.linalg.norm(video[t] - sim[t - shift], axis=1)
    d = d[np.isfinite(d)]
    return (float(np.median(d)), len(d)) if len(d) else (float("inf"), 0)


def motion_spans(speed: np.ndarray) -> tuple[list[int], list[int]]:
    """Frames where the sim's speed rises above MOVING_SPEED (onsets) and falls below it (stops)."""
    moving = speed > MOVING_SPEED
    change = np.diff(moving.astype(np.int8))
    return (np.nonzero(change == 1)[0] + 1).tolist(), (np.nonzero(change == -1)[0] + 1).tolist()


def run(ctx: CheckContext) -> CheckResult:
    """The events check (see the module docstring)."""
    ev, spec = ctx.evidence, ctx.spec
    min_area = spec.common.min_object_area_px
    max_shift = max(1, round(ctx.param("max_shift_s") * ev.fps))
    worst, evidence, timed = 0.0, [], 0
    for k, oid in enumerate(ev.object_ids):
        if ev.speeds[:, k].max() <= MOVING_SPEED:
            continue  # still in the world (a projection that shifts under occlusion is not motion)
        tracks = {}
        for name in ctx.judged_cameras(oid):
            cam, view = ev.cameras[name], ctx.analysis.views[name]
            track = cam.tracks[oid]
            sim = np.where(unoccluded(track.areas, min_area)[:, None], track.centroids, np.nan)
            valid = sim[np.all(np.isfinite(sim), axis=1)]
            if len(valid) < 2 or np.ptp(valid, axis=0).max() < ctx.param("min_travel_px"):
                continue
            window = dilate((cam.classes == 2 + k).any(axis=0), max(2.0, track.diameter))
            video, regions = video_track(view.likeness[oid], window & ~view.ambiguous[oid], min_area / 2)
            tracks[name] = (sim, video, regions)
        if not tracks:
            continue
        timed += 1
        errors = {}
        for s in range(-max_shift, max_shift + 1):
            per_view = [track_error(video, sim, s, moving_frames(sim, max_shift)) for sim, video, _ in tracks.values()]
            if all(n >= 5 for _, n in per_view):
                errors[s] = float(np.mean([e for e, _ in per_view]))
        if 0 not in errors:
            continue
        best = min(errors, key=lambda s: (errors[s], abs(s)))
        gain = errors[0] - errors[best]
        shift = best if best != 0 and gain >= max(1.0, ctx.param("min_gain") * errors[0]) else 0
        seconds = abs(shift) / ev.fps
        worst = max(worst, seconds)
        onsets, stops = motion_spans(ev.speeds[:, k])
        contacts = ev.contact_frames(oid)
        name, (sim, video, regions) = next(iter(tracks.items()))
        d0 = np.linalg.norm(video - sim, axis=1)
        t = int(np.nanargmax(np.where(np.isfinite(d0), d0, -1))) if np.isfinite(d0).any() else 0
        cam, view = ev.cameras[name], ctx.analysis.views[name]
        mask = cam.object_mask(k, t)
        crop = ctx.crops.save("events", name, t, view.obs[t], sim=mask, found=regions[t],
                              box=box_around([mask, regions[t]], mask.shape, pad=12), tag=oid)
        contact_text = ", ".join(f"{other} {a}-{'end' if b is None else b}" for a, b, other in contacts[:6]) or "none"
        evidence.append(Evidence(camera=name, frames=frames_list([*onsets, *stops, t]), crops=crops_list(crop),
                                 note=f"{oid}: video track best aligned with the sim at a shift of {shift:+d} frames "
                                      f"({seconds:.3f} s; track error {errors[0]:.1f} px unshifted, "
                                      f"{errors[best]:.1f} px at {best:+d}); sim motion starts at {onsets or '-'}, "
                                      f"stops at {stops or '-'}; contacts: {contact_text}; views "
                                      f"{', '.join(tracks)}"))
    if not timed:
        timing = robot_shift(ev, {n: ctx.analysis.views[n] for n in ev.cameras}, max_shift, ctx.param("min_gain"))
        if timing is None:
            evidence.append(Evidence(note="no object's projection travels far enough in any view to time its "
                                          "motion, and no robot contact with an object can be timed"))
        else:
            worst = abs(timing.shift) / ev.fps
            evidence.append(Evidence(frames=frames_list(timing.contacts), note=(
                f"no object moves far enough to time; the robot's motion around its {len(timing.contacts)} contact"
                f"{'s' if len(timing.contacts) != 1 else ''} with objects (frames {timing.contacts[:6]}) is best "
                f"aligned with the sim at a shift of {timing.shift:+d} frames ({worst:.3f} s; silhouette agreement "
                f"{timing.agreement[0]:.3f} unshifted, {timing.agreement[timing.best]:.3f} at {timing.best:+d}, "
                f"on {timing.pixels} contested pixels in views {', '.join(timing.views)})")))
    return ctx.result(worst, evidence)


def robot_contact_frames(ev: SimEvidence) -> list[int]:
    """First frames of the contacts between a robot link and an object (strikes, touches, grasps)."""
    objects = set(ev.object_ids)
    out = set()
    for e in ev.contacts:
        a, b = e.a.split(".")[0], e.b.split(".")[0]
        for mine, other in ((a, b), (b, a)):
            if mine in objects and other not in objects and other not in NOT_ROBOT:
                out.add(e.start_step)
    return sorted(out)


@dataclass(frozen=True)
class RobotTiming:
    """How the video's robot silhouette agrees with the sim's at each time shift."""

    contacts: list[int]
    """First frames of the robot's contacts with objects."""
    agreement: dict[int, float]
    """Shift, frames -> share of the contested pixels where the video and the shifted sim agree."""
    pixels: int
    """Contested pixels counted (over frames and views)."""
    views: list[str]
    """Views that had contested pixels."""
    best: int
    """The shift that agrees best (the smallest of equals)."""
    shift: int
    """The robot's time shift, frames: `best`, or 0 when it improves on no shift by less than min_gain
    of the disagreement at no shift."""


def robot_shift(ev: SimEvidence, views: dict[str, ViewAnalysis], max_shift: int, min_gain: float) -> RobotTiming | None:
    """Time the robot's motion around its contacts with objects (see the module docstring); None when
    it has no such contact or too few contested pixels where the background is known."""
    contacts = robot_contact_frames(ev)
    if not contacts:
        return None
    frames = set()
    for c in contacts:
        frames.update(range(c - 2 * max_shift, c + 2 * max_shift + 1))
    frames = sorted(t for t in frames if max_shift <= t < ev.frames - max_shift)
    shifts = range(-max_shift, max_shift + 1)
    agree = dict.fromkeys(shifts, 0)
    total, used = 0, []
    for name, cam in ev.cameras.items():
        view = views[name]
        plate = to_lab(view.plate)
        counted = 0
        for t in frames:
            robot = cam.classes[t - max_shift:t + max_shift + 1] == ROBOT  # robot[max_shift - s] is frame t - s
            objects = (cam.classes[t - max_shift:t + max_shift + 1] >= 2).any(axis=0)
            contested = robot.any(axis=0) & ~robot.all(axis=0) & view.known & ~dilate(objects, 2)
            if not contested.any():
                continue
            seen = distance(to_lab(view.obs[t][contested]), plate[contested]) > OCCUPIED
            for s in shifts:
                agree[s] += int((seen == robot[max_shift - s][contested]).sum())
            counted += int(contested.sum())
        if counted:
            total += counted
            used.append(name)
    if total < MIN_CONTESTED:
        return None
    agreement = {s: agree[s] / total for s in shifts}
    best = max(agreement, key=lambda s: (agreement[s], -abs(s)))
    gain = agreement[best] - agreement[0]
    shift = best if best != 0 and gain >= min_gain * (1.0 - agreement[0]) else 0
    return RobotTiming(contacts, agreement, total, used, best, shift)
