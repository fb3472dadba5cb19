"""Deliberate corruptions of an accepted episode's rendered videos, one per row of DESIGN.md's
verifier table, for calibration. Each is an image-space edit of the decoded `obs` frames using the
sim's masks (what a faulty renderer would have produced), and each names the check that must catch it.

A corruption that cannot produce its defect on the given episode (e.g. shifting events when no
object moves and the robot touches none) raises `NotApplicable` with the reason instead of producing
a copy that looks clean. Every corruption is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import cv2
import numpy as np

from datafarm.artifacts.admission import VerifierCheck
from datafarm.verifiers.analysis import Analysis
from datafarm.verifiers.checks.events import robot_contact_frames
from datafarm.verifiers.evidence import SimEvidence, dilate
from datafarm.verifiers.spec import VerifierSpec

Videos = dict[str, np.ndarray]
"""Camera -> (T, H, W, 3) uint8 frames."""

EVENT_SHIFT_S = 0.25
"""How late the shifted object moves, seconds."""
ENLARGE_FACTOR = 1.5
"""How much larger the enlarged object is drawn (linear)."""
BACKGROUND_SHIFT = 0.03
"""How far the background moves, as a fraction of the width."""
HUE_TURN = 60
"""OpenCV hue units (0-180) the recoloured object's hue is turned by (120 degrees)."""


class NotApplicable(Exception):
    """The corruption cannot produce its defect on this episode; the message says why."""


@dataclass
class Source:
    """What a corruption works from: the clean videos, their measurements and the evidence."""

    obs: Videos
    """The clean videos."""
    analysis: Analysis
    """Their measurements (background plates)."""
    evidence: SimEvidence
    """Sim masks and references."""
    spec: VerifierSpec
    """The spec (objects, shared settings)."""

    @property
    def margin(self) -> float:
        """Pixels masks are grown by before filling (the spec's margin plus one)."""
        return self.spec.common.mask_margin_px + 1

    def judged(self, object_id: str, camera: str) -> np.ndarray:
        """Frames where the sim projects enough of the object in `camera`."""
        return np.nonzero(self.evidence.cameras[camera].tracks[object_id].areas >= self.spec.common.min_object_area_px)[0]

    def main_object(self) -> tuple[int, str]:
        """(index, id) of the object judged in the most frames over all views (ties: G order)."""
        return self.objects_by_visibility()[0]

    def objects_by_visibility(self) -> list[tuple[int, str]]:
        """(index, id) of every object judged in some frame, most judged frames first (ties: G order)."""
        ev = self.evidence
        counts = [sum(len(self.judged(oid, c)) for c in ev.cameras) for oid in ev.object_ids]
        if not counts or max(counts) == 0:
            raise NotApplicable("no object is projected large enough in any view")
        order = sorted(range(len(counts)), key=lambda k: (-counts[k], k))
        return [(k, ev.object_ids[k]) for k in order if counts[k] > 0]

    def moving_object(self) -> tuple[int, str, float]:
        """(index, id, travel px) of the object that moves in the world and whose projection travels
        furthest in some view ((-1, "", 0) when none moves)."""
        ev, best = self.evidence, (-1, "", 0.0)
        for k, oid in enumerate(ev.object_ids):
            if ev.speeds[:, k].max() <= 0.02:
                continue  # still in the world
            for cam in ev.cameras.values():
                track = cam.tracks[oid]
                ok = track.areas >= self.spec.common.min_object_area_px
                if ok.sum() >= 2:
                    travel = float(np.ptp(track.centroids[ok], axis=0).max())
                    if travel > best[2]:
                        best = (k, oid, travel)
        return best

    def background(self, camera: str, frame: int, mask: np.ndarray) -> np.ndarray:
        """The frame with `mask` replaced by background: the episode's plate where known, inpainted elsewhere."""
        view = self.analysis.views[camera]
        out = self.obs[camera][frame].copy()
        known = mask & view.known
        out[known] = view.plate[known]
        rest = mask & ~view.known
        if rest.any():
            out = cv2.inpaint(out, rest.astype(np.uint8), 3, cv2.INPAINT_TELEA)
        return out


def _copy(obs: Videos) -> Videos:
    return {n: v.copy() for n, v in obs.items()}


def delete_object(src: Source) -> tuple[Videos, str]:
    """Remove the most visible object from every frame of every view (the background shows instead)."""
    k, oid = src.main_object()
    out = _copy(src.obs)
    for name, cam in src.evidence.cameras.items():
        for t in range(src.evidence.frames):
            mask = dilate(cam.object_mask(k, t), src.margin)
            if mask.any():
                out[name][t] = src.background(name, t, mask)
    return out, f"{oid} removed from every frame of every view"


def _offset_for(src: Source, name: str, k: int, oid: str) -> tuple[int, int] | None:
    """A constant offset that puts a copy of the object on free background in every frame it is judged."""
    cam = src.evidence.cameras[name]
    d = max(4.0, cam.tracks[oid].diameter)
    union = (cam.classes != 0).any(axis=0)
    masks = (cam.classes == 2 + k).any(axis=0)
    h, w = union.shape
    best, best_overlap = None, None
    for fx, fy in ((2.5, 0), (-2.5, 0), (0, 2.0), (0, -2.0), (2.5, 2.0), (-2.5, 2.0), (3.5, 0), (-3.5, 0)):
        dx, dy = round(fx * d), round(fy * d)
        ys, xs = np.nonzero(masks)
        if not len(xs) or xs.min() + dx < 0 or xs.max() + dx >= w or ys.min() + dy < 0 or ys.max() + dy >= h:
            continue
        moved = np.zeros_like(masks)
        moved[ys + dy, xs + dx] = True
        overlap = int((moved & dilate(union, src.margin)).sum())
        if best_overlap is None or overlap < best_overlap:
            best, best_overlap = (dx, dy), overlap
    return best


def duplicate_object(src: Source) -> tuple[Videos, str]:
    """Draw a second copy of the most visible object beside it (a constant offset per view, on free
    background); when no view has room for a copy of it (a cabinet filling the view), of the next most
    visible object that has room."""
    out = _copy(src.obs)
    tried = []
    for k, oid in src.objects_by_visibility():
        placed = []
        for name, cam in src.evidence.cameras.items():
            offset = _offset_for(src, name, k, oid)
            if offset is None:
                continue
            dx, dy = offset
            h, w = cam.classes.shape[1:]
            for t in src.judged(oid, name):
                ys, xs = np.nonzero(cam.object_mask(k, int(t)))
                ty, tx = ys + dy, xs + dx
                inside = (ty >= 0) & (ty < h) & (tx >= 0) & (tx < w)
                out[name][t][ty[inside], tx[inside]] = src.obs[name][t][ys[inside], xs[inside]]
            placed.append(f"{name} ({dx:+d}, {dy:+d}) px")
        if placed:
            return out, f"a copy of {oid} drawn at offsets {', '.join(placed)} in every frame it is seen"
        tried.append(oid)
    raise NotApplicable(f"no view has room for a copy of {', '.join(tried)}")


def enlarge_object(src: Source) -> tuple[Videos, str]:
    """Draw the most visible object ENLARGE_FACTOR times larger about its centre in every frame."""
    k, oid = src.main_object()
    out = _copy(src.obs)
    for name, cam in src.evidence.cameras.items():
        h, w = cam.classes.shape[1:]
        for t in src.judged(oid, name):
            mask = cam.object_mask(k, int(t))
            ys, xs = np.nonzero(mask)
            cx, cy = xs.mean(), ys.mean()
            grow = 1 - ENLARGE_FACTOR
            matrix = np.array([[ENLARGE_FACTOR, 0, grow * cx], [0, ENLARGE_FACTOR, grow * cy]])
            big = cv2.warpAffine(src.obs[name][t], matrix, (w, h), flags=cv2.INTER_LINEAR)
            big_mask = cv2.warpAffine(mask.astype(np.uint8), matrix, (w, h), flags=cv2.INTER_NEAREST).astype(bool)
            out[name][t][big_mask] = big[big_mask]
    return out, f"{oid} drawn {ENLARGE_FACTOR:g} times larger in every frame it is seen"


def shift_events(src: Source) -> tuple[Videos, str]:
    """Make the object that moves most move EVENT_SHIFT_S later: in each frame it is drawn where it was
    that much earlier (the rest of the frame unchanged). When no object moves far enough, the robot's
    strokes around its contacts with objects come that much late instead (`_shift_robot`)."""
    ev = src.evidence
    k, oid, travel = src.moving_object()
    size = max([c.tracks[oid].diameter for c in ev.cameras.values()] + [4.0]) if k >= 0 else 4.0
    lag = max(1, round(EVENT_SHIFT_S * ev.fps))
    if k < 0 or travel < 2 * size:
        return _shift_robot(src, lag)
    out = _copy(src.obs)
    for name, cam in ev.cameras.items():
        for t in range(ev.frames):
            earlier = max(0, t - lag)
            now, then = cam.object_mask(k, t), cam.object_mask(k, earlier)
            if not now.any() and not then.any():
                continue
            frame = src.background(name, t, dilate(now, src.margin)) if now.any() else out[name][t]
            # the object as it was drawn `lag` frames earlier, without what occluded it then
            frame[then] = src.obs[name][earlier][then]
            out[name][t] = frame
    return out, f"{oid} drawn {lag} frames ({lag / ev.fps:.2f} s) late in every view"


def _shift_robot(src: Source, lag: int) -> tuple[Videos, str]:
    """The robot drawn `lag` frames late in every frame: around where the sim has it now or had it then,
    each frame shows that earlier frame. Only for episodes where no object moves (so everything but the
    robot is the same in both frames) and the robot touches an object (the events to shift)."""
    ev = src.evidence
    if not robot_contact_frames(ev):
        raise NotApplicable("no object's projection travels more than twice its size in any view, and the robot "
                            "touches no object")
    out = _copy(src.obs)
    for name, cam in ev.cameras.items():
        robot = cam.classes == 1
        for t in range(lag, ev.frames):
            if np.array_equal(robot[t], robot[t - lag]):
                continue
            region = dilate(robot[t] | robot[t - lag], src.margin)
            out[name][t][region] = src.obs[name][t - lag][region]
    contacts = robot_contact_frames(ev)
    return out, (f"no object moves: the robot drawn {lag} frames ({lag / ev.fps:.2f} s) late in every view, so its "
                 f"contacts with objects (frames {contacts[:6]}) come late")


def swap_views(src: Source) -> tuple[Videos, str]:
    """Swap the videos of the first two cameras."""
    names = list(src.evidence.cameras)
    if len(names) < 2:
        raise NotApplicable("the episode has one camera: there is no view to swap with")
    out = _copy(src.obs)
    out[names[0]], out[names[1]] = src.obs[names[1]].copy(), src.obs[names[0]].copy()
    return out, f"videos of {names[0]} and {names[1]} swapped"


def change_colour(src: Source) -> tuple[Videos, str]:
    """Turn the hue of the most visible object by 120 degrees in every frame."""
    k, oid = src.main_object()
    out = _copy(src.obs)
    for name, cam in src.evidence.cameras.items():
        for t in range(src.evidence.frames):
            mask = cam.object_mask(k, t)
            if not mask.any():
                continue
            hsv = cv2.cvtColor(src.obs[name][t], cv2.COLOR_RGB2HSV)
            hsv[..., 0] = ((hsv[..., 0].astype(np.int16) + HUE_TURN) % 180).astype(np.uint8)
            turned = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)
            out[name][t][mask] = turned[mask]
    return out, f"{oid}'s hue turned by 120 degrees in every frame"


def _seam(src: Source) -> int:
    """The first chunk seam inside the episode (the middle frame when the render had one chunk)."""
    inside = [s for s in src.evidence.seams if 1 <= s < src.evidence.frames - 1]
    return inside[0] if inside else src.evidence.frames // 2


def drop_frame_at_seam(src: Source) -> tuple[Videos, str]:
    """Lose the frame at the first chunk seam (later frames come one step early; the last is held)."""
    j = _seam(src)
    out = {n: np.concatenate([v[:j], v[j + 1:], v[-1:]]) for n, v in src.obs.items()}
    return out, f"frame {j} (chunk seam) dropped in every view, later frames one step early, the last frame held"


def repeat_frame_at_seam(src: Source) -> tuple[Videos, str]:
    """Show the frame before the first chunk seam twice (later frames one step late; the last is lost)."""
    j = _seam(src)
    out = {n: np.concatenate([v[:j], v[j - 1:j], v[j:-1]]) for n, v in src.obs.items()}
    return out, f"frame {j - 1} repeated at the chunk seam {j} in every view, later frames one step late"


def move_background(src: Source) -> tuple[Videos, str]:
    """From a third of the way in, the background slides diagonally by BACKGROUND_SHIFT of the width
    in x and in y (the robot and objects stay where the sim has them)."""
    ev = src.evidence
    start = max(1, ev.frames // 3)
    dx = max(2, round(BACKGROUND_SHIFT * ev.width))
    out = _copy(src.obs)
    matrix = np.array([[1.0, 0.0, dx], [0.0, 1.0, dx]])
    for name, cam in ev.cameras.items():
        for t in range(start, ev.frames):
            fg = cam.foreground(t)
            clean = src.background(name, t, dilate(fg, src.margin))
            moved = cv2.warpAffine(clean, matrix, (ev.width, ev.height), borderMode=cv2.BORDER_REPLICATE)
            keep = dilate(fg, 1)
            out[name][t] = np.where(keep[..., None], src.obs[name][t], moved)
    return out, f"background moved by ({dx}, {dx}) px from frame {start} on, in every view"


def paste_reference_layout(src: Source) -> tuple[Videos, str]:
    """Show the objects where the clip's reference frame has them instead of where the sim puts them:
    the sim's objects removed, the reference frame's objects pasted (behind the robot)."""
    ev = src.evidence
    out = _copy(src.obs)
    moved, offsets = [], []
    for k, oid in enumerate(ev.object_ids):
        for name, cam in ev.cameras.items():
            place = cam.reference_classes == 2 + k
            judged = src.judged(oid, name)
            if place.sum() >= ev.cameras[name].tracks[oid].typical_area * 0.3 and place.any():
                free = [(place & ~dilate(cam.foreground(int(t)), 1)).sum() >= 0.5 * place.sum() for t in judged]
                if any(free):
                    moved.append(oid)
                if len(judged):
                    ys, xs = np.nonzero(place)
                    track = cam.tracks[oid]
                    gap = np.hypot(track.centroids[judged, 0] - xs.mean(), track.centroids[judged, 1] - ys.mean())
                    offsets.append(float(gap.max()) / max(1.0, track.diameter))
    if not moved:
        # the reference layout is then the sim's own layout: pasting it makes no defect to catch
        how_far = f" (its sim centroid stays within {max(offsets):.2f} diameters of it)" if offsets else ""
        raise NotApplicable(f"no object leaves its reference-frame place in any view{how_far}, so the reference "
                            "layout is the sim's")
    for name, cam in ev.cameras.items():
        places = dilate(cam.reference_classes >= 2, 1)
        for t in range(ev.frames):
            objects = cam.classes[t] >= 2
            frame = src.background(name, t, dilate(objects, src.margin)) if objects.any() else out[name][t]
            paste = places & (cam.classes[t] != 1)
            frame[paste] = cam.reference_image[paste]
            out[name][t] = frame
    names = ", ".join(sorted(set(moved)))
    return out, (f"the reference frame's objects pasted at their clip places in every frame ({names} leave "
                 "those places in the sim)")


@dataclass(frozen=True)
class Corruption:
    """One row of the calibration table."""

    name: str
    """Row name."""
    target: VerifierCheck
    """The check that must catch it."""
    description: str
    """What it does."""
    apply: Callable[[Source], tuple[Videos, str]]
    """Make the corrupted videos (and say what was done)."""


CORRUPTIONS: tuple[Corruption, ...] = (
    Corruption("delete_object", VerifierCheck.objects, "delete an object", delete_object),
    Corruption("duplicate_object", VerifierCheck.objects, "duplicate an object", duplicate_object),
    Corruption("enlarge_object", VerifierCheck.geometry, "enlarge an object", enlarge_object),
    Corruption("shift_events", VerifierCheck.events, "shift events in time", shift_events),
    Corruption("swap_views", VerifierCheck.views, "swap two views", swap_views),
    Corruption("change_colour", VerifierCheck.appearance, "change an object's colour", change_colour),
    Corruption("drop_frame_at_seam", VerifierCheck.temporal, "drop a frame at a chunk seam", drop_frame_at_seam),
    Corruption("repeat_frame_at_seam", VerifierCheck.temporal, "repeat a frame at a chunk seam", repeat_frame_at_seam),
    Corruption("move_background", VerifierCheck.background, "move the background", move_background),
    Corruption("paste_reference_layout", VerifierCheck.layout, "paste the reference layout", paste_reference_layout),
)
"""Every corruption, in DESIGN.md's table order."""
