"""The evidence a rendered episode is verified against, gathered once per episode:

- the sim projection: the episode's recorded states replayed through the render passes
  (datafarm.sim.render_passes) with the episode's cameras, giving per camera and frame which pixels
  belong to the robot and to each object (segmentation classes) and the outlines of every sim
  surface (table, robot, objects);
- the sim's scene as the clip shows it (G's object poses through the clip's cameras), i.e. where the
  real reference frames have each object;
- the real reference frames R names and the clip's median frame per camera; each object's colour
  model measured on its real pixels there (times the ood light cast the episode applied);
- the episode's sim motion (object positions and speeds from the recorded poses), its contact
  events, and the render's chunk seams (render.json).

None of it comes from the rendered video, so corrupting the video never changes the evidence:
calibration gathers it once and verifies every corrupted copy against it.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from datafarm.artifacts.episode import ContactEvent
from datafarm.artifacts.io import load_artifact
from datafarm.errors import InputError, Problem
from datafarm.renderers.control import segment_outlines
from datafarm.renderers.record import RENDER_RECORD, RenderRecord
from datafarm.renderers.scene import BACKGROUND
from datafarm.taskdir import TaskDir
from datafarm.verifiers.colour import (
    ColourModel,
    apply_gains,
    model_from_colour,
    model_from_pixels,
    to_lab,
)
from datafarm.verifiers.spec import VerifierSpec

RING_SHARE = 0.4
"""A colour covering at least this share of the ring around an object's reference mask is the
object's surroundings; an object colour prototype that close to it is dropped."""
RING_DISTANCE = 12.0
"""How close (weighted Lab) an object prototype may come to its surroundings' colours."""


def dilate(mask: np.ndarray, radius: float) -> np.ndarray:
    """A bool mask grown by `radius` pixels (elliptical element)."""
    r = round(radius)
    if r <= 0:
        return mask.astype(bool).copy()
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1))
    return cv2.dilate(mask.astype(np.uint8), kernel).astype(bool)


def erode(mask: np.ndarray, radius: float) -> np.ndarray:
    """A bool mask shrunk by `radius` pixels."""
    r = round(radius)
    if r <= 0:
        return mask.astype(bool).copy()
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1))
    return cv2.erode(mask.astype(np.uint8), kernel).astype(bool)


@dataclass
class ObjectTrack:
    """Where the sim projects one object in one camera, per frame."""

    areas: np.ndarray
    """(T,) projected pixels."""
    centroids: np.ndarray
    """(T, 2) projected centroid (x, y), NaN where not projected."""

    @property
    def typical_area(self) -> float:
        """Median area over the frames it is projected in (0 if never)."""
        seen = self.areas[self.areas > 0]
        return float(np.median(seen)) if len(seen) else 0.0

    @property
    def diameter(self) -> float:
        """Typical size in pixels: the diameter of a disc of the typical area."""
        return float(2.0 * np.sqrt(self.typical_area / np.pi))


@dataclass
class CameraEvidence:
    """One camera's evidence."""

    name: str
    """Camera name."""
    classes: np.ndarray
    """(T, H, W) uint8 sim segmentation classes: 0 background, 1 robot, 2 + k object k."""
    outline_frames: list[int]
    """Frames whose sim outlines are kept (spread over the episode)."""
    outlines: np.ndarray
    """(len(outline_frames), H, W) bool: outlines of every sim surface at those frames."""
    reference_classes: np.ndarray
    """(H, W) uint8 classes of G's scene as the clip shows it (objects at their clip places), seen
    from the episode's camera pose (warped through the table plane when z moved the camera)."""
    reference_image: np.ndarray
    """(H, W, 3) uint8 R's first real reference frame of this camera, seen from the episode's camera pose."""
    clip_median: np.ndarray
    """(H, W, 3) uint8 median of the clip's frames (the real scene, objects at their clip places), seen
    from the episode's camera pose."""
    tracks: dict[str, ObjectTrack]
    """Object id -> its projection per frame."""
    colours: dict[str, ColourModel]
    """Object id -> its colour model in this view (real pixels times the episode's light cast)."""
    reference_lab: dict[str, np.ndarray] = field(default_factory=dict)
    """Object id -> (N, 3) weighted Lab of its real reference pixels (for colour statistics)."""
    cache: dict[tuple, np.ndarray] = field(default_factory=dict, repr=False)
    """Masks derived from the evidence alone, kept for the next video verified against it."""

    def grown(self, margin: float) -> np.ndarray:
        """(T, H, W) bool: the sim's foreground (robot and objects) grown by `margin` pixels (cached)."""
        key = ("grown", margin)
        if key not in self.cache:
            self.cache[key] = np.stack([dilate(self.classes[t] != BACKGROUND, margin) for t in range(len(self.classes))])
        return self.cache[key]

    def object_mask(self, k: int, frame: int) -> np.ndarray:
        """bool (H, W) sim mask of object index k at `frame`."""
        return self.classes[frame] == 2 + k

    def foreground(self, frame: int) -> np.ndarray:
        """bool (H, W) sim mask of everything that is not background at `frame`."""
        return self.classes[frame] != BACKGROUND


@dataclass
class SimEvidence:
    """Everything a rendered episode is verified against (see the module docstring)."""

    episode_id: str
    """The episode."""
    frames: int
    """Frames in every video (= control steps)."""
    fps: float
    """Video frame rate."""
    width: int
    """Camera video width."""
    height: int
    """Camera video height."""
    object_ids: list[str]
    """Object ids, in the order of the class numbers (class 2 + k is object k)."""
    cameras: dict[str, CameraEvidence]
    """Camera name -> its evidence, in R's order."""
    positions: np.ndarray
    """(T, objects, 3) recorded object positions, metres."""
    speeds: np.ndarray
    """(T, objects) object speed from the recorded poses, m/s (row 0 is 0)."""
    contacts: list[ContactEvent]
    """The episode's contact events."""
    seams: list[int]
    """Frames where one rendered chunk hands over to the next (render.json joins)."""
    mode: str
    """sim2real or ood (as rendered)."""
    variations: dict[str, object]
    """ood values the render applied."""
    light_gains: np.ndarray
    """(3,) per-channel light cast of the applied ood values (ones in sim2real)."""

    def object_index(self, object_id: str) -> int:
        """Class offset of an object."""
        return self.object_ids.index(object_id)

    def contact_frames(self, object_id: str) -> list[tuple[int, int | None, str]]:
        """(start, end, other body) of the contact events an object (or one of its parts) takes part in."""
        out = []
        for e in self.contacts:
            for mine, other in ((e.a, e.b), (e.b, e.a)):
                if mine == object_id or mine.startswith(f"{object_id}."):
                    out.append((e.start_step, e.end_step, other))
        return out


def _light_gains(variations: dict[str, object]) -> np.ndarray:
    """The light cast of ood values, as K's render vocabulary defines it (ones when none applies)."""
    from datafarm.renderers.composite.ood import light_gains

    return np.asarray(light_gains(variations), dtype=np.float64)


def _colour_model(oid: str, k: int, reference_classes: np.ndarray, references: list[np.ndarray],
                  clip_median: np.ndarray, gains: np.ndarray, width: int) -> tuple[ColourModel | None, np.ndarray]:
    """An object's colour model from its real pixels in one view (None when too few)."""
    mask = erode(reference_classes == 2 + k, max(1, round(width / 320)))
    if mask.sum() < 10:
        return None, np.zeros((0, 3), np.float32)
    pixels = np.concatenate([apply_gains(ref, gains)[mask] for ref in references])
    ring = dilate(reference_classes == 2 + k, max(3, round(4 * width / 320))) & (reference_classes == BACKGROUND)
    exclude = None
    if ring.sum() >= 10:
        surroundings = model_from_pixels(apply_gains(clip_median, gains)[ring], "ring")
        if surroundings is not None:
            exclude = surroundings.prototypes[surroundings.shares >= RING_SHARE]
    model = model_from_pixels(pixels, "real pixels in R's reference frames", exclude, RING_DISTANCE)
    return model, to_lab(pixels).reshape(-1, 3)


def gather_evidence(task_dir: Path | str, episode_id: str, spec: VerifierSpec, *, outline_frames: int = 12,
                    templates: object | None = None) -> SimEvidence:
    """Replay `episodes/<episode_id>` of a task folder through the render passes and gather the
    evidence (see the module docstring). Needs a render device (the passes render); InputError when
    the episode has no render record or its render does not fit the spec (cameras, resolution)."""
    from datafarm.intake.request import load_request
    from datafarm.renderers.pipeline import prepare_episode

    paths = TaskDir(Path(task_dir))
    folder = paths.episode(episode_id)
    render_path = folder / RENDER_RECORD
    if not render_path.is_file():
        raise InputError([Problem("the episode has no render record: render it before verifying", file=render_path)])
    render = load_artifact(RenderRecord, render_path)
    if render.cameras != spec.cameras or tuple(render.resolution) != tuple(spec.resolution):
        raise InputError([Problem(f"the episode was rendered with cameras {render.cameras} at {render.resolution}, "
                                  f"the verifier spec expects {spec.cameras} at {tuple(spec.resolution)}",
                                  file=render_path, hint="derive the spec again from the task's current R")])
    request = load_request(paths.request)
    if templates is None and paths.capability_lock.is_file():
        from datafarm.admission.record import load_capability_lock
        from datafarm.capability.bundle import load as load_bundle

        templates = load_bundle(load_capability_lock(paths).k_version)
    work = Path(tempfile.mkdtemp(prefix="datafarm-verify-"))
    try:
        prepared = prepare_episode(folder, grounding=paths.grounding, contract=paths.render_contract,
                                   clip_dir=request.clip, task=request.task, work_dir=work, templates=templates,
                                   seed=render.seed)
        return _gather(prepared, render, spec, outline_frames)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _gather(prepared: object, render: RenderRecord, spec: VerifierSpec, outline_count: int) -> SimEvidence:
    job = prepared.job  # type: ignore[attr-defined]
    recording = job.recording
    steps, (width, height) = recording.steps, tuple(render.resolution)
    names = list(job.layout.cameras)
    object_ids = list(job.segments.object_ids)
    keep = sorted(set(np.linspace(0, steps - 1, min(steps, outline_count)).round().astype(int).tolist()))
    classes = {n: np.zeros((steps, height, width), np.uint8) for n in names}
    outlines = {n: np.zeros((len(keep), height, width), bool) for n in names}
    for i, state in enumerate(prepared.states):  # type: ignore[attr-defined]
        frames = prepared.passes.render(state)  # type: ignore[attr-defined]
        for n in names:
            classes[n][i] = job.segments.classify(frames[n].segmentation)
            if i in keep:
                outlines[n][keep.index(i)] = segment_outlines(frames[n].segmentation)
    gains = _light_gains(dict(job.variations))
    references = {c.camera: c.frames for c in job.contract.cameras}
    cameras: dict[str, CameraEvidence] = {}
    clip_views: dict[str, tuple[np.ndarray, list[np.ndarray], np.ndarray]] = {}
    for n in names:
        clip = job.clip.camera(n, references[n])
        clip_classes = job.segments.classify(job.nominal[n].segmentation)
        clip_median = np.median(clip.plate, axis=0).astype(np.uint8)
        to_episode = _clip_to_episode(job, n)
        tracks = {}
        for k, oid in enumerate(object_ids):
            masks = classes[n] == 2 + k
            areas = masks.sum(axis=(1, 2))
            ys, xs = np.mgrid[0:height, 0:width]
            with np.errstate(invalid="ignore", divide="ignore"):
                cx = (masks * xs).sum(axis=(1, 2)) / areas
                cy = (masks * ys).sum(axis=(1, 2)) / areas
            tracks[oid] = ObjectTrack(areas=areas.astype(np.int64), centroids=np.stack([cx, cy], axis=1))
        cameras[n] = CameraEvidence(
            name=n, classes=classes[n], outline_frames=keep, outlines=outlines[n],
            reference_classes=_warp(clip_classes, to_episode, nearest=True),
            reference_image=_warp(clip.references[0], to_episode), clip_median=_warp(clip_median, to_episode),
            tracks=tracks, colours={})
        clip_views[n] = (clip_classes, list(clip.references), clip_median)
    _fit_colours(cameras, clip_views, object_ids, spec, gains, width)
    positions = recording.objects[:, :, :3].astype(np.float64)
    speeds = np.zeros(positions.shape[:2])
    if steps > 1:
        speeds[1:] = np.linalg.norm(np.diff(positions, axis=0), axis=2) * recording.control_hz
    seams = [j.frame for j in render.joins]
    return SimEvidence(episode_id=render.episode_id, frames=steps, fps=float(render.fps), width=width, height=height,
                       object_ids=object_ids, cameras=cameras, positions=positions, speeds=speeds,
                       contacts=list(recording.contacts), seams=seams, mode=render.mode,
                       variations=dict(render.variations), light_gains=gains)


def _clip_to_episode(job: object, camera: str) -> np.ndarray | None:
    """Homography from the clip's view of `camera` to the episode's (through the table plane), None
    when z did not move the camera."""
    from datafarm.renderers.scene import Projector

    clip_view = Projector.of(job.clip_cameras[camera])  # type: ignore[attr-defined]
    episode_view = Projector.of(job.cameras[camera])  # type: ignore[attr-defined]
    if np.allclose(clip_view.camera_from_world, episode_view.camera_from_world, atol=1e-9):
        return None
    table = job.clip_world_from_table_top  # type: ignore[attr-defined]
    return episode_view.plane_homography(table) @ np.linalg.inv(clip_view.plane_homography(table))


def _warp(image: np.ndarray, homography: np.ndarray | None, nearest: bool = False) -> np.ndarray:
    """`image` seen from the episode's camera pose (unchanged when the pose is the clip's)."""
    if homography is None:
        return image
    h, w = image.shape[:2]
    return cv2.warpPerspective(image, homography, (w, h), flags=cv2.INTER_NEAREST if nearest else cv2.INTER_LINEAR,
                               borderMode=cv2.BORDER_REPLICATE)


def _fit_colours(cameras: dict[str, CameraEvidence], clip_views: dict[str, tuple[np.ndarray, list[np.ndarray], np.ndarray]],
                 object_ids: list[str], spec: VerifierSpec, gains: np.ndarray, width: int) -> None:
    """Each object's colour model per view: its own view's real pixels, else those of the view with the
    most of them, else the spec's stated colour (R's target, else G's) under the episode's light."""
    known = {o.id: o for o in spec.objects}
    for k, oid in enumerate(object_ids):
        own: dict[str, ColourModel] = {}
        pixels: list[np.ndarray] = []
        for n, cam in cameras.items():
            clip_classes, references, clip_median = clip_views[n]
            model, lab = _colour_model(oid, k, clip_classes, references, clip_median, gains, width)
            cam.reference_lab[oid] = lab
            if model is not None and model.pixels >= 30:
                own[n] = model
                pixels.append(lab)
        pooled = None
        if own:
            best = max(own.values(), key=lambda m: m.pixels)
            pooled = ColourModel(prototypes=best.prototypes, shares=best.shares, median=best.median, pixels=best.pixels,
                                 source=f"real pixels in R's reference frames of another view ({best.source})")
        for n, cam in cameras.items():
            if n in own:
                cam.colours[oid] = own[n]
            elif pooled is not None:
                cam.colours[oid] = pooled
                cam.reference_lab[oid] = np.concatenate(pixels)
            else:
                expectation = known.get(oid)
                colour = expectation.colour if expectation is not None else (0.5, 0.5, 0.5)
                lit = tuple(float(np.clip(c * g, 0, 1)) for c, g in zip(colour, gains, strict=True))
                source = f"the spec's stated colour ({expectation.colour_source if expectation else 'none'})"
                cam.colours[oid] = model_from_colour(lit, source)  # type: ignore[arg-type]
                cam.reference_lab[oid] = cam.colours[oid].prototypes
