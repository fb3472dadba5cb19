"""What the checks measure on the rendered video, computed once per set of videos: the background
plate each pixel is compared with (the clip's real background, or the video's own median outside the
sim's foreground), and per object where the video looks like that object (within its colour
tolerance of one of its colours and closer to them than to the background) and where the background
itself looks like it (so nothing can be judged there). An object's colour tolerance is the shared
one unless the object stands close to its real surroundings (`object_tolerance`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from datafarm.renderers.video import read_video
from datafarm.verifiers.colour import apply_gains, distance, to_lab
from datafarm.verifiers.evidence import CameraEvidence, SimEvidence, dilate
from datafarm.verifiers.spec import VerifierSpec

CHUNK_FRAMES = 16
"""Frames converted to Lab at a time."""
UNKNOWN = np.float32(np.inf)
"""Distance to the background where the plate is unknown (the sim's foreground never left the pixel)."""


@dataclass
class ViewAnalysis:
    """One camera's video, measured."""

    name: str
    """Camera name."""
    obs: np.ndarray
    """(T, H, W, 3) uint8 video frames."""
    grown: np.ndarray
    """(T, H, W) bool sim foreground grown by the mask margin."""
    plate: np.ndarray
    """(H, W, 3) uint8 the background plate (see `analyse_view`)."""
    known: np.ndarray
    """(H, W) bool pixels where the plate is known."""
    own_plate: np.ndarray
    """(H, W, 3) uint8 the video's own background: its median outside the sim's grown foreground."""
    own_known: np.ndarray
    """(H, W) bool pixels where the video's own background is known."""
    likeness: dict[str, np.ndarray] = field(default_factory=dict)
    """Object id -> (T, H, W) bool: the pixel looks like the object (and, where the background is known, more
    like it than like the background)."""
    ambiguous: dict[str, np.ndarray] = field(default_factory=dict)
    """Object id -> (H, W) bool: the background itself looks like the object there (within the colour
    tolerance; for unknown background, its known surroundings do), so the video cannot show whether the
    object is there: such pixels are not judged for that object."""
    tolerance: dict[str, float] = field(default_factory=dict)
    """Object id -> the colour tolerance it is judged with in this view (`object_tolerance`)."""
    separation: dict[str, float | None] = field(default_factory=dict)
    """Object id -> its colour's separation from its real surroundings in this view (None: not measured)."""
    confusable: dict[str, frozenset[int]] = field(default_factory=dict)
    """Object id -> classes (1 robot, 2 + k object k) whose own real pixels in this view often look like
    the object (`confusable_classes`): where the sim projects them, the video cannot show where the
    object ends. Empty under a spec without `colour_contrast` (as such specs were calibrated)."""


@dataclass
class Analysis:
    """All cameras' videos, measured; plus what did not fit the episode (frame count, size)."""

    views: dict[str, ViewAnalysis]
    """Camera -> its measurements."""
    problems: list[str]
    """Videos whose frame count or size differ from the episode's (fitted by cutting or holding the last frame)."""
    frame_counts: dict[str, int] = field(default_factory=dict)
    """Camera -> frames its video had (before fitting it to the episode's steps)."""


def read_obs(folder: Path | str, cameras: list[str]) -> dict[str, np.ndarray]:
    """The rendered videos `obs/<camera>.mp4` of an episode folder, decoded (T, H, W, 3)."""
    return {name: read_video(Path(folder) / "obs" / f"{name}.mp4")[0] for name in cameras}


def _fit(frames: np.ndarray, steps: int, height: int, width: int, name: str, problems: list[str]) -> np.ndarray:
    """The frames cut or padded (holding the last) to `steps`, blank when the size is wrong."""
    if frames.ndim != 4 or frames.shape[1:3] != (height, width):
        problems.append(f"{name}: frames are {frames.shape[1:3] if frames.ndim == 4 else frames.shape}, "
                        f"expected {(height, width)}")
        return np.zeros((steps, height, width, 3), np.uint8)
    if len(frames) != steps:
        problems.append(f"{name}: {len(frames)} frames for {steps} episode steps")
        if len(frames) > steps:
            return frames[:steps]
        pad = np.repeat(frames[-1:] if len(frames) else np.zeros((1, height, width, 3), np.uint8),
                        steps - len(frames), axis=0)
        return np.concatenate([frames, pad]) if len(frames) else pad
    return frames


def _plate(obs: np.ndarray, grown: np.ndarray, samples: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-pixel median of a spread of `samples` frames, counting only frames where the pixel lies
    outside the grown foreground (the lower median for an even count), and where it is known."""
    picks = np.unique(np.linspace(0, len(obs) - 1, min(len(obs), samples)).round().astype(int))
    stack = obs[picks].astype(np.float32)
    free = ~grown[picks]
    stack[~free] = np.inf  # sorted last
    stack.sort(axis=0)
    count = free.sum(axis=0)
    known = count > 0
    middle = np.maximum(count - 1, 0) // 2
    median = np.take_along_axis(stack, middle[None, :, :, None].repeat(3, axis=3), axis=0)[0]
    plate = np.where(known[..., None], median, 0).round().astype(np.uint8)
    return plate, known


def analyse_view(camera: CameraEvidence, frames: np.ndarray, spec: VerifierSpec, evidence: SimEvidence) -> ViewAnalysis:
    """Measure one camera's video against its evidence.

    The background plate is the clip's real background (its median frame under the episode's light
    cast) wherever the clip shows neither robot nor objects, and the video's own median outside the
    sim's foreground elsewhere; where the clip had objects, or the sim's foreground never leaves, it is
    unknown (whatever the video shows at the clip's object places must not become "background"). With
    an ood tablecloth the real table is gone, so the video's own median is used throughout."""
    common = spec.common
    grown = camera.grown(common.mask_margin_px)
    own, known_own = _plate(frames, grown, int(common.plate_frames))
    reach = 2 * common.mask_margin_px + 2
    clip_objects = dilate(camera.reference_classes >= 2, reach)
    if "tablecloth" in evidence.variations:
        plate, known = own, known_own & ~clip_objects
    else:
        real = apply_gains(camera.clip_median, evidence.light_gains)
        clear = ~dilate(camera.reference_classes != 0, reach)
        plate = np.where(clear[..., None], real, own)
        known = clear | (known_own & ~clip_objects)
    view = ViewAnalysis(name=camera.name, obs=frames, grown=grown, plate=plate, known=known, own_plate=own,
                        own_known=known_own)
    plate_lab = to_lab(plate)
    # a spec from before the colour-contrast rule re-verifies as it was calibrated: nothing confusable
    real_lab = None if spec.colour_contrast is None else to_lab(apply_gains(camera.clip_median, evidence.light_gains))
    for k, oid in enumerate(evidence.object_ids):
        view.tolerance[oid], view.separation[oid] = object_tolerance(camera, k, oid, spec, evidence)
        view.confusable[oid] = (frozenset() if real_lab is None
                                else confusable_classes(camera, k, oid, view.tolerance[oid], real_lab))
        view.likeness[oid] = np.zeros(grown.shape, bool)
        view.ambiguous[oid] = _ambiguous(camera.colours[oid].distance(plate_lab) < view.tolerance[oid], known)
    # a few frames at a time, so long episodes never hold their whole video in Lab
    for start in range(0, len(frames), CHUNK_FRAMES):
        lab = to_lab(frames[start:start + CHUNK_FRAMES])
        to_plate = distance(lab, plate_lab[None])
        to_plate[:, ~known] = UNKNOWN
        norms = np.einsum("...i,...i->...", lab, lab)
        for oid in evidence.object_ids:
            d = camera.colours[oid].distance(lab, norms)
            view.likeness[oid][start:start + CHUNK_FRAMES] = (d < view.tolerance[oid]) & (d < to_plate)
    return view


AMBIGUOUS_SURROUNDINGS = 0.1
"""An unknown stretch of background counts as object-like when this share of its known surroundings is."""
SURROUNDINGS_PX = 6
"""How far around an unknown stretch of background its surroundings reach, pixels."""

MIN_SURROUNDINGS = 20
"""Fewest real background pixels around an object for its separation from them to be measured."""


def object_tolerance(camera: CameraEvidence, k: int, object_id: str, spec: VerifierSpec,
                     evidence: SimEvidence) -> tuple[float, float | None]:
    """(colour tolerance, separation) of object k in one view.

    K's shared tolerance is wide, so that shading and a renderer's colour drift still look like the
    object. An object whose colour lies closer than that to the background around it (a beige drum on
    a wood table before a grey wall) would then have its background look like it everywhere: nothing
    near it could be judged, and its deletion, duplication or recolouring would go unseen. Its
    separation is measured on its real surroundings: the clip's real background (under the episode's
    light cast) in a band SURROUNDINGS_PX wide just beyond the mask margin around where the clip and the
    sim put it; the spec's `colour_contrast` turns it into the tolerance (a share of the separation,
    between its minimum and the shared tolerance). It uses the evidence alone, never the video being
    verified, so a corrupted video cannot loosen its own judgement. The shared tolerance holds for a
    spec without that rule, under an ood tablecloth (the real table is not what surrounds the object)
    and where too little real background surrounds the object (separation None)."""
    common, rule = spec.common, spec.colour_contrast
    if rule is None or "tablecloth" in evidence.variations:
        return float(common.colour_tolerance), None
    reach = 2 * common.mask_margin_px + 2
    key = ("surroundings", k, reach)
    if key not in camera.cache:
        around = (camera.reference_classes == 2 + k) | (camera.classes == 2 + k).any(axis=0)
        clear = ~dilate(camera.reference_classes != 0, reach)
        camera.cache[key] = dilate(around, reach + SURROUNDINGS_PX) & clear
    band = camera.cache[key]
    if band.sum() < MIN_SURROUNDINGS:
        return float(common.colour_tolerance), None
    real = to_lab(apply_gains(camera.clip_median, evidence.light_gains)[band])
    separation = float(np.percentile(camera.colours[object_id].distance(real), rule.percentile))
    tolerance = min(float(common.colour_tolerance), max(float(rule.min_tolerance), rule.share * separation))
    return tolerance, separation


CONFUSABLE_SHARE = 0.25
"""The robot or another object is confusable with an object when this share of its real pixels looks
like it (a grey scale and the robot's dark grey gripper: about half; a red apple and the robot: none)."""


def confusable_classes(camera: CameraEvidence, k: int, object_id: str, tolerance: float,
                       real_lab: np.ndarray) -> frozenset[int]:
    """The classes other than object k (the robot, other objects) of which CONFUSABLE_SHARE or more of
    the real pixels (the clip's view of G's scene, `real_lab` its median frame in weighted Lab) lie
    within `tolerance` of object k's colours: evidence alone, like the tolerance."""
    near = camera.colours[object_id].distance(real_lab) < tolerance
    out = set()
    for c in np.unique(camera.reference_classes):
        if c != 0 and c != 2 + k and near[camera.reference_classes == c].mean() >= CONFUSABLE_SHARE:
            out.add(int(c))
    return frozenset(out)


def _ambiguous(object_like: np.ndarray, known: np.ndarray) -> np.ndarray:
    """Where the background looks like the object: known pixels that do, and unknown stretches whose
    known surroundings often do."""
    out = object_like & known
    if known.all():
        return out
    count, labels = cv2.connectedComponents((~known).astype(np.uint8), connectivity=8)
    for region in range(1, count):
        stretch = labels == region
        ring = dilate(stretch, SURROUNDINGS_PX) & known
        if ring.any() and out[ring].mean() >= AMBIGUOUS_SURROUNDINGS:
            out |= stretch
    return out


def analyse(evidence: SimEvidence, obs: dict[str, np.ndarray], spec: VerifierSpec) -> Analysis:
    """Measure every camera's video (missing cameras read as blank, and are reported)."""
    problems: list[str] = []
    views, counts = {}, {}
    for name, camera in evidence.cameras.items():
        frames = obs.get(name)
        if frames is None:
            problems.append(f"{name}: no video")
            frames = np.zeros((0, evidence.height, evidence.width, 3), np.uint8)
        counts[name] = len(frames)
        frames = _fit(frames, evidence.frames, evidence.height, evidence.width, name, problems)
        views[name] = analyse_view(camera, frames, spec, evidence)
    return Analysis(views=views, problems=problems, frame_counts=counts)
