"""The builtin reviewer's own evidence: measurements on decoded frames and the claims built on them.
No verifier code, spec or number is used; the sim-state summary says where the sim puts things
(`ReviewFacts`, its machine-readable part), the frames say what the video shows.

Frames are compared after a light blur (so H.264 noise and one-pixel edges do not count), in CIE Lab
(ΔE, about 2.3 just noticeable) for backgrounds, as edge structure for telling views apart, and as
chromaticity (r, g, b) / (r + g + b) for object colours, which shading and exposure leave alone.
Pixel boxes are `(x0, y0, x1, y1)` with x1 and y1 exclusive, in the rendered frames' pixels.

| measurement | what it says |
| --- | --- |
| `agreement` | the fraction of the masked pixels where a frame matches any of a set of other frames (ΔE) |
| `correlation` of `Picture.edges` | how well two frames' edge structure lines up over a mask |
| `object_colour` | an object's colour in its box: the median of the strongly coloured pixels that stand out from the box's surroundings |
| `locate_colour` | where pixels of a colour lie inside a window (optionally only those that changed): count and centroid |

The claims (`review_claims`), one per check, each with evidence per camera: `frames`, `views`,
`background`, `appearance`, `motion` (see datafarm.agents.builtin.reviewer for what each checks).
In ood the allowed variations are honoured: a tablecloth takes the table top out of the background,
a light colour or intensity is undone by per-channel gains measured on the background.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated

import cv2
import numpy as np
from pydantic import Field, JsonValue

from datafarm.artifacts.admission import Evidence, ReviewClaim
from datafarm.artifacts.base import Artifact
from datafarm.artifacts.clip import CameraName
from datafarm.artifacts.common import FiniteFloat, Vec3

Box = tuple[int, int, int, int]
"""A pixel box (x0, y0, x1, y1), x1 and y1 exclusive."""
PixelBox = tuple[Annotated[int, Field(ge=0)], Annotated[int, Field(ge=0)], Annotated[int, Field(ge=0)], Annotated[int, Field(ge=0)]]
"""A box as the facts store it."""

BLUR_SIGMA = 1.0
"""Gaussian blur (pixels) applied before measuring: removes codec noise and aliasing at edges."""
DISTINCT_DE = 15.0
"""ΔE by which a pixel must differ from every sampled surrounding pixel to count as the object's."""
RING_PX = 4
"""Width of the ring around a box whose pixels are taken as the object's surroundings."""
MIN_OBJECT_PIXELS = 12
"""Fewest distinct pixels for an object's colour to be measured at all."""
STRUCTURE_SIGMA = 2.0
"""Blur (pixels) of the edge-strength images compared to tell camera views apart."""
LIGHT_AXES = ("light_colour", "light_intensity")
"""ood axes that change the light (and so every colour by a per-channel gain)."""
TABLE_PAD = 4
"""Pixels by which the table top is grown when an ood tablecloth takes it out of the background."""
CHANGE_DE = 10.0
"""ΔE beyond which a pixel has changed between two frames of a video."""
DARK = 30.0
"""Brightness (mean of R, G, B, 0-255) below which a pixel's chromaticity is too noisy to use."""


class Picture:
    """One decoded frame, blurred, in the forms the measurements use."""

    def __init__(self, rgb: np.ndarray) -> None:
        image = cv2.GaussianBlur(np.asarray(rgb, dtype=np.float32), (0, 0), BLUR_SIGMA)
        self.rgb = image
        """Blurred RGB, float 0-255."""
        self.lab = cv2.cvtColor(image / 255.0, cv2.COLOR_RGB2LAB)
        """CIE Lab (L 0-100)."""

    @cached_property
    def edges(self) -> np.ndarray:
        """Edge structure: the lightness gradient's magnitude, blurred by STRUCTURE_SIGMA so that a
        camera jittered by a pixel or two still lines up."""
        lightness = np.ascontiguousarray(self.lab[..., 0])
        gx = cv2.Sobel(lightness, cv2.CV_32F, 1, 0, ksize=3)
        gy = cv2.Sobel(lightness, cv2.CV_32F, 0, 1, ksize=3)
        return cv2.GaussianBlur(np.hypot(gx, gy), (0, 0), STRUCTURE_SIGMA)


def resized(rgb: np.ndarray, width: int, height: int) -> np.ndarray:
    """`rgb` at width x height (area interpolation when shrinking)."""
    if rgb.shape[:2] == (height, width):
        return rgb
    shrink = rgb.shape[1] > width
    return cv2.resize(rgb, (width, height), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)


def delta_e(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-pixel ΔE between Lab arrays (or a Lab array and one colour)."""
    return np.linalg.norm(a - b, axis=-1)


def chromaticity(rgb: np.ndarray) -> np.ndarray:
    """(r, g, b) / (r + g + b) of RGB values (any leading shape): the colour without its brightness."""
    rgb = np.asarray(rgb, dtype=np.float64)
    return rgb / np.maximum(rgb.sum(axis=-1, keepdims=True), 3 * DARK)


def brightness(rgb: np.ndarray) -> np.ndarray:
    """Mean of R, G and B (0-255)."""
    return np.asarray(rgb, dtype=np.float64).mean(axis=-1)


def grow(box: Box, fraction: float, pixels: int, width: int, height: int) -> Box:
    """`box` enlarged by `fraction` of its size plus `pixels` on every side, clipped to the frame."""
    x0, y0, x1, y1 = box
    dx, dy = (x1 - x0) * fraction + pixels, (y1 - y0) * fraction + pixels
    return (max(0, int(x0 - dx)), max(0, int(y0 - dy)), min(width, int(np.ceil(x1 + dx))), min(height, int(np.ceil(y1 + dy))))


def centre(box: Box) -> np.ndarray:
    """The box's centre (x, y)."""
    return np.array([(box[0] + box[2]) / 2, (box[1] + box[3]) / 2])


def inside(point: Sequence[float], box: Box) -> bool:
    """Whether (x, y) lies in the box."""
    return box[0] <= point[0] < box[2] and box[1] <= point[1] < box[3]


def box_mask(shape: tuple[int, int], boxes: Iterable[Box], fraction: float = 0.0, pixels: int = 0) -> np.ndarray:
    """Boolean H x W mask of the union of `boxes`, each grown by `fraction` of its size plus `pixels`."""
    height, width = shape
    mask = np.zeros((height, width), dtype=bool)
    for box in boxes:
        x0, y0, x1, y1 = grow(box, fraction, pixels, width, height)
        mask[y0:y1, x0:x1] = True
    return mask


def polygon_mask(shape: tuple[int, int], polygons: Iterable[Sequence[Sequence[float]]], pixels: int = 0) -> np.ndarray:
    """Boolean H x W mask of the union of polygons (corner lists), each dilated by `pixels`."""
    canvas = np.zeros(shape, dtype=np.uint8)
    for polygon in polygons:
        if len(polygon) >= 3:
            cv2.fillPoly(canvas, [np.round(np.asarray(polygon) * 16).astype(np.int32)], 1, lineType=cv2.LINE_8, shift=4)
    if pixels > 0:
        canvas = cv2.dilate(canvas, np.ones((2 * pixels + 1, 2 * pixels + 1), np.uint8))
    return canvas.astype(bool)


def light_gains(frame: Picture, reference: Picture, mask: np.ndarray) -> np.ndarray:
    """Per-channel gains (R, G, B) that take `reference` to `frame` over `mask`: the median ratio of
    pixels bright enough to tell; ones where nothing can be measured."""
    a, b = frame.rgb[mask], reference.rgb[mask]
    usable = (brightness(a) >= DARK) & (brightness(b) >= DARK) & np.all(b >= 1.0, axis=-1)
    if usable.sum() < MIN_OBJECT_PIXELS:
        return np.ones(3, dtype=np.float32)
    return np.median(a[usable] / b[usable], axis=0).astype(np.float32)


def agreement(frame: Picture, others: Sequence[Picture], mask: np.ndarray, tolerance: float) -> float:
    """Fraction of `mask`'s pixels where `frame` is within `tolerance` ΔE of at least one of `others`
    (several reference frames absorb the real scene's own flicker); 0 for an empty mask."""
    if not mask.any() or not others:
        return 0.0
    best = np.min(np.stack([delta_e(frame.lab[mask], other.lab[mask]) for other in others]), axis=0)
    return float(np.mean(best <= tolerance))


def correlation(a: np.ndarray, b: np.ndarray, mask: np.ndarray) -> float:
    """Zero-mean normalized cross-correlation of two single-channel images over `mask` (-1..1; 0 when
    either is flat there)."""
    x, y = a[mask].astype(np.float64), b[mask].astype(np.float64)
    if x.size < 2:
        return 0.0
    x, y = x - x.mean(), y - y.mean()
    norm = float(np.sqrt((x * x).sum() * (y * y).sum()))
    return float((x * y).sum() / norm) if norm > 0 else 0.0


@dataclass(frozen=True)
class ObjectColour:
    """An object's colour as measured in one frame."""

    rgb: tuple[float, float, float]
    """Median RGB (0-255) of its strongly coloured distinct pixels."""
    pixels: int
    """How many pixels it was measured on."""
    visible: float
    """Fraction of the box not masked out (not covered by the robot)."""

    def rgb255(self) -> list[int]:
        """The colour rounded, for evidence notes."""
        return [round(c) for c in self.rgb]

    def compare(self, other: ObjectColour) -> tuple[float, float]:
        """(chromaticity distance, brightness ratio self / other)."""
        distance = float(np.linalg.norm(chromaticity(self.rgb) - chromaticity(other.rgb)))
        return distance, float(brightness(self.rgb) / max(float(brightness(other.rgb)), 1.0))


def object_colour(frame: Picture, box: Box, hidden: np.ndarray | None = None) -> ObjectColour | None:
    """The colour of the object in `box`: of the box's pixels that differ by more than DISTINCT_DE
    from every sampled pixel of a ring just outside the box (its surroundings: table, wall), the more
    strongly coloured half, median. `hidden` masks pixels to leave out (the robot in front of it).
    None when too few distinct pixels remain (the object is not there, or hidden)."""
    height, width = frame.lab.shape[:2]
    x0, y0, x1, y1 = grow(box, 0.0, 0, width, height)
    if x1 - x0 < 2 or y1 - y0 < 2:
        return None
    in_box = np.zeros((height, width), dtype=bool)
    in_box[y0:y1, x0:x1] = True
    keep = in_box & ~hidden if hidden is not None else in_box
    visible = float(keep.sum()) / float(in_box.sum())
    ring = box_mask((height, width), [(x0, y0, x1, y1)], pixels=RING_PX) & ~in_box
    if hidden is not None:
        ring &= ~hidden
    candidates, surroundings = frame.lab[keep], frame.lab[ring]
    if len(candidates) < MIN_OBJECT_PIXELS or len(surroundings) == 0:
        return None
    samples = surroundings[:: max(1, len(surroundings) // 400)]
    nearest = np.full(len(candidates), np.inf, dtype=np.float32)
    for start in range(0, len(samples), 64):  # bounded memory: candidates x 64 distances at a time
        chunk = samples[start : start + 64]
        nearest = np.minimum(nearest, delta_e(candidates[:, None, :], chunk[None, :, :]).min(axis=1))
    distinct = nearest > DISTINCT_DE
    if distinct.sum() < max(MIN_OBJECT_PIXELS, 0.05 * len(candidates)):
        return None
    lab, rgb = candidates[distinct], frame.rgb[keep][distinct]
    # the more strongly coloured half: edge pixels mixed with the surroundings, dark insides and
    # highlights are less saturated than the object's own colour
    chroma = np.hypot(lab[:, 1], lab[:, 2])
    body = rgb[chroma >= np.median(chroma)]
    median = np.median(body, axis=0)
    return ObjectColour(tuple(round(float(v), 1) for v in median), len(body), round(visible, 3))


@dataclass(frozen=True)
class Found:
    """Where pixels of a colour lie."""

    pixels: int
    """How many match."""
    centroid: tuple[float, float] | None
    """Their mean (x, y); None when none match."""


def locate_colour(frame: Picture, colour: ObjectColour, window: Box, tolerance: float, ratio: float,
                  changed_from: Picture | None = None) -> Found:
    """Pixels inside `window` whose chromaticity lies within `tolerance` of `colour`'s and whose
    brightness is within a factor `ratio` of it (and not too dark to tell); with `changed_from`, only
    those that differ from that frame by more than CHANGE_DE (what moved, not a same-coloured
    background such as a patterned tablecloth)."""
    x0, y0, x1, y1 = window
    patch = frame.rgb[y0:y1, x0:x1]
    if patch.size == 0:
        return Found(0, None)
    target = np.asarray(colour.rgb)
    light = brightness(patch)
    level = float(brightness(target))
    close = np.linalg.norm(chromaticity(patch) - chromaticity(target), axis=-1) <= tolerance
    match = close & (light >= DARK) & (light >= level / ratio) & (light <= level * ratio)
    if changed_from is not None:
        match &= delta_e(frame.lab[y0:y1, x0:x1], changed_from.lab[y0:y1, x0:x1]) > CHANGE_DE
    ys, xs = np.nonzero(match)
    if xs.size == 0:
        return Found(0, None)
    return Found(int(xs.size), (round(float(xs.mean()) + x0, 1), round(float(ys.mean()) + y0, 1)))


def unchanged_share(a: Picture, b: Picture, box: Box, hidden: np.ndarray) -> float:
    """Share of `box`'s pixels (outside `hidden`) where two frames agree within CHANGE_DE; 1 when all hidden."""
    x0, y0, x1, y1 = box
    keep = ~hidden[y0:y1, x0:x1]
    if not keep.any():
        return 1.0
    return float(np.mean(delta_e(a.lab[y0:y1, x0:x1][keep], b.lab[y0:y1, x0:x1][keep]) <= CHANGE_DE))


def union(boxes: Iterable[Box]) -> Box | None:
    """The smallest box holding every box; None for none."""
    boxes = list(boxes)
    if not boxes:
        return None
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


# --- the summary's machine-readable part ---------------------------------------------------------------


class Regions(Artifact):
    """Where the sim puts things in one camera's image: boxes of projected collision geometry."""

    objects: dict[str, PixelBox | None]
    """Per G object, its box; null when it projects outside the image."""
    robot: list[PixelBox] = Field(default_factory=list)
    """Boxes of the robot's links (the robot covers their union)."""
    depths: dict[str, tuple[FiniteFloat, FiniteFloat] | None] = Field(default_factory=dict)
    """Per G object, the nearest and farthest camera depth (metres) of its collision box corners:
    one object can hide part of another only where it is nearer; null when it has no box."""

    def boxes(self) -> list[Box]:
        """Every box, objects and robot."""
        return [b for b in self.objects.values() if b is not None] + list(self.robot)


class KeyframeRegions(Regions):
    """Regions at one frame of the rendered video."""

    frame: int = Field(ge=0)
    """Frame index of the episode's videos (= control step)."""


class CameraFacts(Artifact):
    """What one camera sees of the sim state."""

    camera: CameraName
    """Camera name (its video is `obs/<camera>.mp4`)."""
    reference_frames: list[int] = Field(default_factory=list)
    """Clip frames that are this camera's real reference frames."""
    keyframes: list[KeyframeRegions]
    """Regions at each keyframe, in frame order."""
    reference: Regions
    """Regions of the scene as the clip shows it (objects at G's poses, the robot as the episode
    starts), through the clip's camera, in the rendered frames' pixels."""
    table: list[tuple[FiniteFloat, FiniteFloat]] = Field(default_factory=list)
    """Corners of the table top in the rendered frames (episode camera); empty without a table."""
    reference_table: list[tuple[FiniteFloat, FiniteFloat]] = Field(default_factory=list)
    """Corners of the table top as the clip's camera sees it; empty without a table."""

    def at(self, frame: int) -> KeyframeRegions:
        """Regions at keyframe `frame`."""
        return next(k for k in self.keyframes if k.frame == frame)


class ObjectFacts(Artifact):
    """One object's motion in the sim."""

    id: str
    """G object id."""
    kind: str
    """G object kind."""
    start: Vec3
    """Position at the first step, world metres."""
    end: Vec3
    """Position at the last step, world metres."""
    moved_m: FiniteFloat = Field(ge=0)
    """Distance from start to end, metres."""
    moved: bool
    """Whether the sim moved it (by more than MOVED_M)."""


class ReviewFacts(Artifact):
    """The machine-readable part of the sim-state summary a reviewer gets."""

    episode_id: str
    """Episode id."""
    frames: int = Field(ge=1)
    """Frames in every rendered video (= control steps)."""
    fps: FiniteFloat = Field(gt=0)
    """Frame rate of the videos."""
    resolution: tuple[int, int]
    """(width, height) of the rendered videos; boxes are in these pixels."""
    mode: str = "sim2real"
    """sim2real or ood."""
    variations: dict[str, JsonValue] = Field(default_factory=dict)
    """ood values applied per axis (empty in sim2real)."""
    keyframes: list[int] = Field(min_length=1)
    """Frames whose regions are listed (first and last included)."""
    cameras: list[CameraFacts] = Field(min_length=1)
    """Per camera, its regions."""
    objects: list[ObjectFacts] = Field(default_factory=list)
    """Per G object, its motion."""

    def camera(self, name: str) -> CameraFacts:
        """The facts of camera `name`."""
        return next(c for c in self.cameras if c.camera == name)


MOVED_M = 0.02
"""An object whose start and end lie further apart than this (metres) has moved."""
FACTS_HEADING = "Review facts"
"""How the summary's line introducing the JSON facts begins."""
_FACTS_BLOCK = re.compile(re.escape(FACTS_HEADING) + r"[^\n]*\n```json\n(.*?)\n```", re.DOTALL)


def facts_text(facts: ReviewFacts) -> str:
    """The facts as the summary's last section: a heading line and a fenced JSON block."""
    body = facts.model_dump_json(exclude_none=False)
    return (f"{FACTS_HEADING} (JSON; pixel boxes [x0, y0, x1, y1], x1 and y1 exclusive, in the rendered frames; "
            f"`reference` is the scene as the real clip shows it):\n```json\n{body}\n```")


def parse_facts(summary: str) -> ReviewFacts | None:
    """The facts in a summary; None when it has none (a summary written for a person only)."""
    match = _FACTS_BLOCK.search(summary)
    if match is None:
        return None
    return ReviewFacts.model_validate_json(match.group(1))


# --- the claims -----------------------------------------------------------------------------------------

BACKGROUND_DE = 10.0
"""ΔE within which a background pixel of a rendered frame agrees with a real reference frame."""
BACKGROUND_MIN = 0.8
"""Smallest fraction of agreeing background pixels, per camera and keyframe."""
MIN_BACKGROUND_SHARE = 0.1
"""Smallest share of the frame that must lie outside every region for the background to be judged."""
VIEW_MARGIN = 0.25
"""How much better (edge-structure correlation) a video must match its own camera's reference than any other camera's."""
CHROMA_MAX = 0.1
"""Largest chromaticity distance between an object's rendered and real colour (pure red to pure
green is 1.41; a hue shift of a quarter turn on a saturated colour is about 0.3)."""
BRIGHTNESS_RATIO = 2.0
"""Largest factor between an object's rendered and real brightness (shading and exposure change it)."""
MATCH_CHROMA = 0.08
"""Chromaticity distance within which a pixel is taken as the object's colour when locating it."""
MIN_VISIBLE = 0.5
"""Smallest unoccluded share of an object's box for its colour to be measured in that frame."""
OBJECT_GROW, OBJECT_PAD = 0.25, 3
"""Object boxes are grown by this fraction of their size plus these pixels (contact shadows, rims) before masking."""
ROBOT_GROW, ROBOT_PAD = 0.05, 3
"""Robot link boxes are grown by this fraction plus these pixels before masking."""
PLACE_GROW, PLACE_PAD = 0.35, 4
"""An object is where the sim puts it when its colour's centroid lies in its box grown by this much."""
OCCLUDER_GROW, OCCLUDER_PAD = 0.05, 2
"""Boxes of objects that may stand in front of another are grown by this much before they are left out."""
LIKENESS_DE = 10.0
"""Largest ΔE between the mean colours of an object's box in a rendered and a real frame, for an object
whose colour stands out from its surroundings in no reference frame (compared whole)."""
MIN_FOUND = 8
"""Fewest matching pixels for an object to count as found."""
STILL_MIN = 0.8
"""Smallest share of a still object's box (outside the robot) that must look the same in the first and last keyframes."""


@dataclass
class FrameSet:
    """The frames one review fetched, decoded to RGB at the rendered resolution."""

    rendered: dict[str, dict[int, np.ndarray]]
    """Camera -> episode frame -> frame."""
    references: dict[str, dict[int, np.ndarray]]
    """Camera -> clip frame -> real reference frame."""
    refusals: dict[str, dict[int, str]]
    """Camera -> episode frame -> why fetching it was refused."""


@dataclass
class Claim:
    """One claim and its evidence, before it becomes a ReviewClaim. Its text starts with the check's
    name (`frames:`, `views:`, `background:`, `appearance:`, `motion:`)."""

    claim: str
    """The assertion, starting with the check's name."""
    holds: bool
    """Whether the frames bear it out."""
    evidence: list[Evidence]
    """Per camera, the frames looked at and what was measured there."""

    def artifact(self) -> ReviewClaim:
        """As the verdict's model (a claim that found nothing to look at still names what it tried)."""
        evidence = self.evidence or [Evidence(note="nothing could be measured")]
        return ReviewClaim(claim=self.claim, holds=self.holds, evidence=evidence)


class _Review:
    """One review's frames as Pictures (rendered ones with any allowed light change undone), and the
    masks the claims share."""

    def __init__(self, facts: ReviewFacts, frames: FrameSet) -> None:
        self.facts, self.frames = facts, frames
        self.width, self.height = facts.resolution
        self.shape = (self.height, self.width)
        self.cameras = [c.camera for c in facts.cameras]
        self.first, self.last = facts.keyframes[0], facts.keyframes[-1]
        self.tablecloth = "tablecloth" in facts.variations
        """The table top is allowed to look different (an ood tablecloth)."""
        self.relit = any(axis in facts.variations for axis in LIGHT_AXES)
        """The light is allowed to differ (an ood light colour or intensity)."""
        self.references = {c: [Picture(f) for _, f in sorted(fr.items())] for c, fr in frames.references.items()}
        self.gains: dict[str, np.ndarray] = {}
        """Per camera, the light change (R, G, B gains) undone in its rendered frames (ood light only)."""
        self.rendered: dict[str, dict[int, Picture]] = {}
        for camera, by_frame in frames.rendered.items():
            pictures = {k: Picture(f) for k, f in by_frame.items()}
            if self.relit and self.first in pictures and self.references.get(camera):
                gains = light_gains(pictures[self.first], self.references[camera][0], self.background(camera, self.first))
                self.gains[camera] = gains
                pictures = {k: Picture(np.clip(f.astype(np.float32) / gains, 0, 255)) for k, f in by_frame.items()}
            self.rendered[camera] = pictures

    def reference_frames(self, camera: str) -> list[int]:
        return sorted(self.frames.references.get(camera, {}))

    def occupied(self, regions: Regions) -> np.ndarray:
        objects = box_mask(self.shape, [b for b in regions.objects.values() if b is not None], OBJECT_GROW, OBJECT_PAD)
        return objects | self.robot(regions)

    def robot(self, regions: Regions) -> np.ndarray:
        return box_mask(self.shape, regions.robot, ROBOT_GROW, ROBOT_PAD)

    def occluders(self, regions: Regions, oid: str) -> np.ndarray:
        """The robot and every object that may stand in front of `oid` (`in_front`), grown."""
        return self.robot(regions) | box_mask(self.shape, in_front(regions, oid).values(), OCCLUDER_GROW, OCCLUDER_PAD)

    def background(self, camera: str, frame: int) -> np.ndarray:
        """Pixels of `camera` at `frame` that neither the sim's regions nor the clip's objects cover
        (nor the table top, when an ood tablecloth covers it)."""
        cam = self.facts.camera(camera)
        covered = self.occupied(cam.at(frame)) | self.occupied(cam.reference)
        if self.tablecloth:
            covered |= polygon_mask(self.shape, [cam.table, cam.reference_table], TABLE_PAD)
        return ~covered


def _relit_note(review: _Review, camera: str) -> str:
    gains = review.gains.get(camera)
    if gains is None:
        return ""
    return f" (after undoing the allowed light change, gains R G B {' '.join(f'{g:.2f}' for g in gains)})"


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def frames_claim(review: _Review) -> Claim:
    """Every camera's video has exactly the summary's number of frames."""
    n = review.facts.frames
    evidence, holds = [], True
    for camera in review.cameras:
        have = review.frames.rendered.get(camera, {})
        refused = review.frames.refusals.get(camera, {})
        missing = [k for k in review.facts.keyframes if k not in have]
        beyond = refused.get(n, "")
        ok = not missing and "does not exist" in beyond
        holds &= ok
        if missing:
            note = f"keyframes {missing} could not be fetched: {'; '.join(refused.get(k, '?') for k in missing)[:300]}"
        elif not beyond:
            note = f"frame {n} exists although the episode has {n} steps (frames 0..{n - 1})"
        else:
            note = f"frames {review.facts.keyframes} decoded; frame {n} refused as expected ({beyond[:120]})"
        evidence.append(Evidence(camera=camera, frames=[k for k in review.facts.keyframes if k in have], note=note))
    return Claim(f"frames: every camera's rendered video has one frame per control step ({n} frames)", holds, evidence)


def views_claim(review: _Review) -> Claim:
    """Each video shows its own camera's view: its background's edge structure correlates with its own
    camera's reference frames better than with any other camera's, by VIEW_MARGIN (so no two views
    are swapped or duplicated)."""
    evidence, holds = [], True
    frame = review.first
    for camera in review.cameras:
        image = review.rendered.get(camera, {}).get(frame)
        if image is None:
            holds = False
            evidence.append(Evidence(camera=camera, note=f"frame {frame} could not be fetched"))
            continue
        mask = review.background(camera, frame)
        scores = {other: max([correlation(image.edges, ref.edges, mask) for ref in review.references.get(other, [])],
                             default=-1.0)
                  for other in review.cameras}
        best = max(scores, key=lambda c: scores[c])
        rivals = [s for c, s in scores.items() if c != camera]
        margin = scores[camera] - max(rivals) if rivals else scores[camera]
        ok = best == camera and margin >= VIEW_MARGIN
        holds &= ok
        listed = ", ".join(f"{c} {s:.2f}" for c, s in scores.items())
        verdict = "its own view" if ok else f"it shows {best}'s view" if best != camera else "not distinct from another view"
        evidence.append(Evidence(camera=camera, frames=[frame], note=(
            f"edge-structure correlation of frame {frame}'s background with each camera's reference frames: {listed}; "
            f"margin {margin:.2f} (needs >= {VIEW_MARGIN:g}): {verdict}")))
    return Claim("views: each camera's video shows that camera's own view (its background matches its own real reference "
                 "frames, not another camera's; no two views swapped or duplicated)", holds, evidence)


def background_claim(review: _Review) -> Claim:
    """Outside the regions the summary implies, every keyframe agrees with the real reference frames."""
    evidence, holds = [], True
    for camera in review.cameras:
        refs = review.references.get(camera, [])
        values, frames = [], []
        for frame in review.facts.keyframes:
            image = review.rendered.get(camera, {}).get(frame)
            if image is None:
                continue
            mask = review.background(camera, frame)
            share = float(mask.mean())
            if share < MIN_BACKGROUND_SHARE:
                continue
            values.append(agreement(image, refs, mask, BACKGROUND_DE))
            frames.append(frame)
        if not refs or not values:
            holds = False
            why = "no reference frame" if not refs else "no keyframe with enough visible background"
            evidence.append(Evidence(camera=camera, note=f"cannot be judged: {why}"))
            continue
        ok = min(values) >= BACKGROUND_MIN
        holds &= ok
        per = ", ".join(f"frame {f}: {_pct(v)}" for f, v in zip(frames, values))
        evidence.append(Evidence(camera=camera, frames=frames, note=(
            f"background pixels within {BACKGROUND_DE:g} ΔE of reference frames {review.reference_frames(camera)}: {per} "
            f"(needs >= {_pct(BACKGROUND_MIN)} in every keyframe){_relit_note(review, camera)}"
            + ("; the table top is left out (ood tablecloth)" if review.tablecloth else ""))))
    return Claim("background: the static background of every camera's video agrees with its real reference frames outside the "
                 "robot and object regions the sim state implies", holds, evidence)


def reference_colours(review: _Review) -> dict[tuple[str, str], tuple[ObjectColour, int]]:
    """(object, camera) -> the object's real colour in that camera's reference frames, and the clip frame it came from."""
    out = {}
    for camera in review.cameras:
        cam = review.facts.camera(camera)
        robot = review.robot(cam.reference)
        for oid, box in cam.reference.objects.items():
            if box is None:
                continue
            for clip_frame, image in zip(review.reference_frames(camera), review.references.get(camera, [])):
                colour = object_colour(image, box, robot)
                if colour is not None and colour.visible >= MIN_VISIBLE:
                    out[(oid, camera)] = (colour, clip_frame)
                    break
    return out


def _overlap(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def in_front(regions: Regions, oid: str) -> dict[str, Box]:
    """Other objects that can hide part of `oid` in this view: their boxes overlap its box and their
    nearest point is nearer the camera than its farthest (every overlapping one when depths are not given)."""
    box, mine = regions.objects.get(oid), regions.depths.get(oid)
    if box is None:
        return {}
    out = {}
    for other, theirs_box in regions.objects.items():
        if other == oid or theirs_box is None or not _overlap(box, theirs_box):
            continue
        theirs = regions.depths.get(other)
        if mine is None or theirs is None or theirs[0] < mine[1]:
            out[other] = theirs_box
    return out


def visible_share(box: Box, hidden: np.ndarray) -> float:
    """Share of `box`'s pixels that `hidden` leaves."""
    x0, y0, x1, y1 = box
    part = hidden[y0:y1, x0:x1]
    return 1.0 - float(part.mean()) if part.size else 0.0


def _is_colour(colour: ObjectColour, truth: ObjectColour) -> bool:
    distance, ratio = colour.compare(truth)
    return distance <= CHROMA_MAX and 1 / BRIGHTNESS_RATIO <= ratio <= BRIGHTNESS_RATIO


@dataclass(frozen=True)
class Sighting:
    """An object's colour in one rendered keyframe, or why it could not be measured there."""

    colour: ObjectColour | None
    """The measured colour; None when not measured."""
    state: str
    """`measured`; `hidden` (the robot and objects that may stand in front leave less than MIN_VISIBLE of
    its box); `absent` (enough of its box is in view, yet nothing there stands out from its surroundings);
    `outside` (no frame or no box)."""
    behind: tuple[str, ...] = ()
    """Objects that may stand in front of it and were left out of the measurement."""


def sight(review: _Review, camera: str, oid: str, frame: int, truth: ObjectColour) -> Sighting:
    """`oid`'s colour in `camera`'s rendered `frame`, the robot left out. When what is measured is not
    its real colour and other objects may stand in front of it (one cup nested in another), it is
    measured again on the part they leave, or counted hidden when too little is left."""
    image = review.rendered.get(camera, {}).get(frame)
    regions = review.facts.camera(camera).at(frame)
    box = regions.objects.get(oid)
    if image is None or box is None:
        return Sighting(None, "outside")
    hidden = review.robot(regions)
    colour = object_colour(image, box, hidden)
    if colour is not None and _is_colour(colour, truth):
        return Sighting(colour, "measured")
    front = in_front(regions, oid)
    if front:
        hidden = review.occluders(regions, oid)
        colour = object_colour(image, box, hidden)
    if visible_share(box, hidden) < MIN_VISIBLE or (colour is not None and colour.visible < MIN_VISIBLE):
        return Sighting(None, "hidden", tuple(sorted(front)))
    if colour is None:
        return Sighting(None, "absent", tuple(sorted(front)))
    return Sighting(colour, "measured", tuple(sorted(front)))


def _frames_note(kind: str, frames: list[int]) -> str:
    return f"; frame{'s' if len(frames) > 1 else ''} {', '.join(map(str, frames))}: {kind}" if frames else ""


def _likeness(review: _Review, oid: str) -> tuple[bool | None, list[Evidence]]:
    """For an object whose colour stands out from its surroundings in no reference frame (a grey scale on
    a pale table): whether its box in the first keyframe looks like its box in the reference frame
    (ΔE of the mean Lab colours, robot left out). None when no camera allows the comparison."""
    if review.tablecloth:  # the box holds table top, which an ood tablecloth is allowed to change
        return None, []
    evidence, verdicts = [], []
    for camera in review.cameras:
        cam = review.facts.camera(camera)
        box, real_box = cam.at(review.first).objects.get(oid), cam.reference.objects.get(oid)
        image, references = review.rendered.get(camera, {}).get(review.first), review.references.get(camera, [])
        if box is None or real_box is None or image is None or not references:
            continue
        hidden, real_hidden = review.robot(cam.at(review.first)), review.robot(cam.reference)
        if visible_share(box, hidden) < MIN_VISIBLE or visible_share(real_box, real_hidden) < MIN_VISIBLE:
            continue
        x0, y0, x1, y1 = box
        rendered = image.lab[y0:y1, x0:x1][~hidden[y0:y1, x0:x1]].mean(axis=0)
        x0, y0, x1, y1 = real_box
        real = references[0].lab[y0:y1, x0:x1][~real_hidden[y0:y1, x0:x1]].mean(axis=0)
        difference = float(delta_e(rendered, real))
        ok = difference <= LIKENESS_DE
        verdicts.append(ok)
        evidence.append(Evidence(camera=camera, frames=[review.first], note=(
            f"{oid}: its colour stands out from its surroundings in no reference frame, so its box is compared "
            f"whole: mean colour ΔE {difference:.1f} from its box in clip frame {review.reference_frames(camera)[0]} "
            f"(needs <= {LIKENESS_DE:g}): " + ("looks as in the real frames" if ok else "does NOT look as in the real "
                                                "frames") + _relit_note(review, camera))))
    return (all(verdicts) if verdicts else None), evidence


def appearance_claim(review: _Review, real: dict[tuple[str, str], tuple[ObjectColour, int]]) -> Claim:
    """Every object has its real colour in the rendered keyframes where it is visible. Keyframes where the
    robot or objects in front hide it are left out (and named); an object that stands out from its
    surroundings in no reference frame is compared as its whole box (`_likeness`)."""
    evidence, holds = [], True
    for obj in review.facts.objects:
        measured, absent, known = 0, False, False
        for camera in review.cameras:
            if (obj.id, camera) not in real:
                continue
            known = True
            truth, clip_frame = real[(obj.id, camera)]
            worst, frames, seen, ratios = 0.0, [], [], []
            hidden_at, absent_at, behind = [], [], set()
            for frame in review.facts.keyframes:
                sighting = sight(review, camera, obj.id, frame, truth)
                behind.update(sighting.behind)
                if sighting.state == "hidden":
                    hidden_at.append(frame)
                elif sighting.state == "absent":
                    absent_at.append(frame)
                if sighting.colour is None:
                    continue
                distance, ratio = sighting.colour.compare(truth)
                worst = max(worst, distance)
                ratios.append(ratio)
                frames.append(frame)
                seen.append(sighting.colour)
            skipped = (_frames_note("hidden by the robot" + (f" or by {', '.join(sorted(behind))} in front" if behind
                                                             else ""), hidden_at)
                       + _frames_note("nothing of its colour stands out in its box", absent_at))
            if not frames:
                absent |= bool(absent_at)
                if hidden_at or absent_at:
                    evidence.append(Evidence(camera=camera, frames=hidden_at + absent_at,
                                             note=f"{obj.id}: not measured" + skipped))
                continue
            measured += 1
            ok = worst <= CHROMA_MAX and all(1 / BRIGHTNESS_RATIO <= r <= BRIGHTNESS_RATIO for r in ratios)
            holds &= ok
            evidence.append(Evidence(camera=camera, frames=frames, note=(
                f"{obj.id}: real colour RGB {truth.rgb255()} (clip frame {clip_frame}); rendered RGB "
                f"{[c.rgb255() for c in seen]}; largest chromaticity distance {worst:.3f} (needs <= {CHROMA_MAX:g}), "
                f"brightness ratios {min(ratios):.2f}-{max(ratios):.2f} (needs {1 / BRIGHTNESS_RATIO:g}-{BRIGHTNESS_RATIO:g}): "
                + ("its real colour" if ok else "NOT its real colour") + skipped + _relit_note(review, camera))))
        if measured:
            continue
        if not known:
            alike, notes = _likeness(review, obj.id)
            evidence.extend(notes)
            if alike is None:
                evidence.append(Evidence(note=f"{obj.id}: not judged: its colour stands out from its surroundings in "
                                              "no reference frame and no camera allows comparing its box whole"))
            holds &= alike is not False
        elif absent:
            holds = False
            evidence.append(Evidence(note=f"{obj.id}: its colour could be measured in no camera: where the sim puts it, "
                                          "enough of its box is in view but nothing there stands out from its "
                                          "surroundings (not drawn)"))
        else:
            evidence.append(Evidence(note=f"{obj.id}: not judged: hidden by the robot or by objects in front of it in "
                                          "every keyframe of every camera"))
    return Claim("appearance: every object has its real colour (as the reference frames show it) in the rendered frames",
                 holds, evidence)


def _hidden_by_objects(review: _Review, camera: str, oid: str, frame: int, box: Box) -> bool:
    """Whether objects that may stand in front of `oid` (and the robot) leave less than MIN_VISIBLE of its box."""
    regions = review.facts.camera(camera).at(frame)
    return bool(in_front(regions, oid)) and visible_share(box, review.occluders(regions, oid)) < MIN_VISIBLE


def motion_claim(review: _Review, real: dict[tuple[str, str], tuple[ObjectColour, int]]) -> Claim:
    """Each object the sim moved is found, by its real colour among the pixels that changed between
    the first and last keyframes, at the sim's place in each of them and displaced accordingly; each
    still object's box looks the same in both and still holds its colour."""
    evidence, holds = [], True
    first, last = review.first, review.last
    width, height = review.width, review.height
    for obj in review.facts.objects:
        checked = 0
        for camera in review.cameras:
            if (obj.id, camera) not in real:
                continue
            cam = review.facts.camera(camera)
            b0, b1 = cam.at(first).objects.get(obj.id), cam.at(last).objects.get(obj.id)
            i0, i1 = review.rendered.get(camera, {}).get(first), review.rendered.get(camera, {}).get(last)
            if b0 is None or b1 is None or i0 is None or i1 is None:
                continue
            colour = real[(obj.id, camera)][0]
            expected = centre(b1) - centre(b0)
            size = min(b0[2] - b0[0], b0[3] - b0[1])
            hidden_at = [frame for frame, box in ((first, b0), (last, b1))
                         if _hidden_by_objects(review, camera, obj.id, frame, box)]
            if hidden_at:
                # an object in front covers it there (a block shut in a drawer): that place cannot be seen,
                # so the object is looked for only at the keyframe where it is in view
                behind = sorted({o for f in hidden_at for o in in_front(cam.at(f), obj.id)})
                note = (f"{obj.id}{' (moved)' if obj.moved else ''}: in frame{'s' if len(hidden_at) > 1 else ''} "
                        f"{', '.join(map(str, hidden_at))} the sim puts {', '.join(behind)} in front of it, leaving "
                        f"less than {_pct(MIN_VISIBLE)} of its box in view")
                if len(hidden_at) == 2:
                    evidence.append(Evidence(camera=camera, frames=hidden_at, note=note + ": not checked in this view"))
                    continue
                checked += 1
                frame, box, image = (last, b1, i1) if hidden_at == [first] else (first, b0, i0)
                place = grow(box, PLACE_GROW, PLACE_PAD, width, height)
                found = locate_colour(image, colour, place, MATCH_CHROMA, BRIGHTNESS_RATIO)
                ok = found.pixels >= MIN_FOUND and inside(found.centroid, place)
                holds &= ok
                evidence.append(Evidence(camera=camera, frames=[first, last], note=(
                    f"{note}; its real colour found in frame {frame}: {found.pixels} px at {found.centroid} "
                    f"(sim box {list(box)}): " + ("as the sim says" if ok else "not where the sim puts it"))))
                continue
            checked += 1
            if obj.moved and float(np.linalg.norm(expected)) >= max(6.0, 0.5 * size):
                window = grow(union([b0, b1]), 0.5, 4, width, height)
                f0 = locate_colour(i0, colour, window, MATCH_CHROMA, BRIGHTNESS_RATIO, changed_from=i1)
                f1 = locate_colour(i1, colour, window, MATCH_CHROMA, BRIGHTNESS_RATIO, changed_from=i0)
                at0 = f0.pixels >= MIN_FOUND and inside(f0.centroid, grow(b0, PLACE_GROW, PLACE_PAD, width, height))
                at1 = f1.pixels >= MIN_FOUND and inside(f1.centroid, grow(b1, PLACE_GROW, PLACE_PAD, width, height))
                ok, seen = at0 and at1, ""
                if f0.centroid is not None and f1.centroid is not None:
                    shift = np.subtract(f1.centroid, f0.centroid)
                    seen = f"; seen displaced by ({shift[0]:.0f}, {shift[1]:.0f}) px"
                    ok &= float(np.dot(shift, expected) / np.dot(expected, expected)) >= 0.5
                note = (f"{obj.id} (moved {obj.moved_m:.3f} m in the sim, ({expected[0]:.0f}, {expected[1]:.0f}) px in "
                        f"this view): among the pixels that changed, its real colour is found in frame {first}: "
                        f"{f0.pixels} px at {f0.centroid} (sim box {list(b0)}), in frame {last}: {f1.pixels} px at "
                        f"{f1.centroid} (sim box {list(b1)}){seen}: ")
            else:
                place = grow(b1, PLACE_GROW, PLACE_PAD, width, height)
                found = locate_colour(i1, colour, place, MATCH_CHROMA, BRIGHTNESS_RATIO)
                ok = found.pixels >= MIN_FOUND and inside(found.centroid, place)
                note = f"{obj.id} ({'moved along this view' if obj.moved else 'still'}): its real colour found in frame {last}: "
                note += f"{found.pixels} px at {found.centroid} (sim box {list(b1)})"
                if not obj.moved:
                    hidden = review.robot(cam.at(first)) | review.robot(cam.at(last))
                    same = unchanged_share(i0, i1, union([b0, b1]), hidden)
                    ok &= same >= STILL_MIN
                    note += f"; {_pct(same)} of its box unchanged since frame {first} (needs >= {_pct(STILL_MIN)})"
                note += ": "
            holds &= ok
            evidence.append(Evidence(camera=camera, frames=[first, last],
                                     note=note + ("as the sim says" if ok else "not where the sim puts it")))
        if checked == 0 and obj.moved:
            holds = False
            evidence.append(Evidence(note=f"{obj.id} moved {obj.moved_m:.3f} m in the sim but could be seen at neither "
                                          "keyframe in any camera"))
    return Claim("motion: every object sits where the sim puts it in the first and last keyframes; each object the sim "
                 "moved appears displaced accordingly, each still one stays", holds, evidence)


def review_claims(facts: ReviewFacts, frames: FrameSet) -> list[ReviewClaim]:
    """The reviewer's claims, one per check, each with its evidence: frames, views, background,
    appearance (object colours), motion (objects displaced as the sim says)."""
    review = _Review(facts, frames)
    real = reference_colours(review)
    claims = [frames_claim(review), views_claim(review), background_claim(review), appearance_claim(review, real),
              motion_claim(review, real)]
    return [c.artifact() for c in claims]
