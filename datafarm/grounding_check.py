"""Stage 1's checker (harness side, not agent code): does a grounding G reproduce the clip?

G's objects are drawn through G's cameras (the simulator's own shapes, with G's robot at rest in
front of or behind them) and compared, view by view, with what classic vision finds in the clip
itself (datafarm.agents.builtin.vision: segmentation against the table and the robot, objects
matched across views):

- per view, the IoU of G's object pixels and the clip's object pixels must reach `MIN_VIEW_IOU`;
- every G object seen in a view must be covered by clip foreground (`MIN_COVERAGE`), so a G object
  that is not there, or not where G says, fails;
- every object the clip shows must be covered by G's objects in the views that see it
  (`MIN_EXPLAINED`), so an object G leaves out fails;
- cameras: where clip.yaml gives a camera's calibration (or a board lets the check fit it), G's
  camera must agree with it (`CAMERA_MM`, `CAMERA_DEG`); the clip's masks are made with these cameras;
- scale sanity: every ScaleCheck's ratio within `SCALE_TOLERANCE` of 1, every object's size within
  `SIZE_LIMITS_M`, resting on the table plane, inside the table's extent.

    report = check_grounding(task_dir / "grounding.json", clip_dir)
    report.passed, report.reason

The clip's frames are read directly (the checker is not an agent and has no path guard).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import yaml
from pydantic import Field

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.clip import ClipSpec
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.io import load_artifact

FRAMES = 4
"""Frames read per view (spread over the clip; their median is segmented)."""
MIN_VIEW_IOU = 0.6
"""Smallest IoU of G's and the clip's object pixels in a view."""
MIN_COVERAGE = 0.6
"""Smallest fraction of a G object's pixels in a view that must be clip foreground."""
MIN_EXPLAINED = 0.5
"""Smallest fraction of a clip object's pixels in a view that G's objects must cover."""
MIN_PIXELS = 30
"""Fewest pixels an object needs in a view to be judged there."""
CAMERA_MM = 30.0
"""Largest disagreement of G's camera position with the clip's calibration, millimetres."""
CAMERA_DEG = 3.0
"""Largest disagreement of G's camera orientation with the clip's calibration, degrees."""
SCALE_TOLERANCE = 0.1
"""Largest relative deviation of a ScaleCheck's ratio from 1."""
SIZE_LIMITS_M = (0.005, 1.5)
"""Smallest and largest extent of a tabletop object, metres."""
REST_TOLERANCE_M = 0.02
"""How far above or below the table plane an object's frame may be, metres."""
TABLE_MARGIN_M = 0.05
"""How far beyond G's table top an object's centre may be, metres."""


class ObjectCoverage(Artifact):
    """How well one G object is supported by the clip in one view."""

    object: str
    """G object id."""
    pixels: int
    """Pixels of the object G draws in the view (where they can be judged)."""
    coverage: float
    """Fraction of them that the clip shows as foreground."""


class ViewReport(Artifact):
    """One view's comparison."""

    camera: str
    """Camera name."""
    iou: float | None
    """IoU of G's and the clip's object pixels; null when neither has enough pixels."""
    grounding_pixels: int
    """Object pixels G draws (judged pixels only)."""
    clip_pixels: int
    """Object pixels the clip shows."""
    objects: list[ObjectCoverage] = Field(default_factory=list)
    """Per G object seen in the view."""
    unexplained: list[list[int]] = Field(default_factory=list)
    """Bounding boxes [x0, y0, x1, y1] of clip objects G does not cover."""


class CameraAgreement(Artifact):
    """G's camera against the clip's calibration."""

    camera: str
    """Camera name."""
    reference: str
    """Where the reference came from: `clip.yaml` or `board`."""
    position_mm: float
    """Distance between the camera centres."""
    rotation_deg: float
    """Angle between the orientations."""


class GroundingCheckReport(Artifact):
    """Stage 1's verdict on a grounding."""

    passed: bool
    """Every test below passed."""
    reason: str
    """Why it failed (every failure, `; `-joined), or a one-line summary when it passed."""
    views: list[ViewReport]
    """Per view."""
    cameras: list[CameraAgreement] = Field(default_factory=list)
    """G's cameras against the clip's calibration, where there is one."""
    scale: list[str] = Field(default_factory=list)
    """Scale-sanity findings (empty when all is sane)."""


def _board(clip_dir: Path, spec: ClipSpec) -> dict | None:
    extra = getattr(spec, "board", None)
    if extra:
        return extra if isinstance(extra, dict) else extra.model_dump(mode="json")
    path = clip_dir / "board.yaml"
    return yaml.safe_load(path.read_text()) if path.is_file() else None


def _frames(video: Path, count: int) -> list[np.ndarray]:
    from datafarm.agents.images import read_frame
    from datafarm.intake.video import probe_video

    total = probe_video(video).frames
    indices = sorted({round(v) for v in np.linspace(0, max(total - 1, 0), min(count, max(total, 1)))})
    return [read_frame(video, i) for i in indices]


def _reference_cameras(g: Grounding, spec: ClipSpec, clip_dir: Path,
                       frames: dict[str, list[np.ndarray]]) -> dict[str, tuple[Any, str]]:
    """Per G camera: (the camera to segment the clip with, where it came from: `clip.yaml`, `board`, or
    "" when the clip has no calibration for it and G's is used)."""
    from datafarm.agents.builtin.vision.camera import Camera
    from datafarm.agents.builtin.vision.charuco import Board, fit_camera

    board_doc = _board(clip_dir, spec)
    board = Board.parse(board_doc) if board_doc else None
    out: dict[str, tuple[Any, str]] = {}
    for cam in g.cameras:
        try:
            given = spec.camera(cam.name)
        except KeyError:
            given = None
        intrinsics = given.intrinsics if given is not None and given.intrinsics is not None else cam.intrinsics
        if given is not None and given.extrinsics is not None:
            out[cam.name] = (Camera.of(cam.name, intrinsics, given.extrinsics), "clip.yaml")
            continue
        if board is not None and cam.name in frames:
            K = np.array([[intrinsics.fx, 0, intrinsics.cx], [0, intrinsics.fy, intrinsics.cy], [0, 0, 1]])
            dist = np.asarray(intrinsics.distortion, float)
            fit = fit_camera(board, frames[cam.name], K, dist)
            if fit is not None:
                out[cam.name] = (Camera(cam.name, K, dist, fit.world_from_camera, intrinsics.width, intrinsics.height),
                                 "board")
                continue
        out[cam.name] = (Camera.of(cam.name, cam.intrinsics, cam.world_from_camera), "")
    return out


def _scale_findings(g: Grounding) -> list[str]:
    from datafarm.studio.score import extents

    findings = []
    for check in g.scale_checks:
        if abs(check.ratio - 1.0) > SCALE_TOLERANCE:
            findings.append(f"scale check {check.reference!r}: measured {check.estimated:.4f} m for {check.expected:.4f} m "
                            f"(ratio {check.ratio:.3f})")
    lo, hi = SIZE_LIMITS_M
    table = g.table
    for obj in g.objects:
        if obj.kind == "actor":
            continue
        size = extents(obj)
        if min(size) < lo or max(size) > hi:
            findings.append(f"{obj.id}: extents {', '.join(f'{v * 1000:.0f}' for v in size)} mm are not a tabletop "
                            f"object's ({lo * 1000:.0f} mm to {hi * 1000:.0f} mm)")
        x, y, z = obj.pose.position
        if abs(z) > REST_TOLERANCE_M:
            findings.append(f"{obj.id}: its frame is {z * 1000:.0f} mm off the table plane (objects rest on it)")
        if table is not None:
            cx, cy = table.center
            if abs(x - cx) > table.size_x.value / 2 + TABLE_MARGIN_M or abs(y - cy) > table.size_y.value / 2 + TABLE_MARGIN_M:
                findings.append(f"{obj.id}: at ({x:.2f}, {y:.2f}) it is off the table top")
    return findings


def _view_report(g: Grounding, camera: Any, masks: Any, found: list[np.ndarray]) -> ViewReport:
    """Compare G drawn through `camera` with one view's masks and its found objects' masks."""
    from datafarm.agents.builtin.vision.raster import label_image
    from datafarm.agents.builtin.vision.solids import ROBOT, grounding_solids

    owners = [o.id for o in g.objects] + [ROBOT]
    labels = label_image(camera, grounding_solids(g), owners)
    care = masks.care
    drawn = (labels > 0) & (labels <= len(g.objects)) & care
    clip_objects = np.zeros(care.shape, bool)
    for obj_mask in found:
        clip_objects |= obj_mask
    clip_objects &= care
    union = int((drawn | clip_objects).sum())
    iou = float((drawn & clip_objects).sum()) / union if union >= MIN_PIXELS else None
    coverage = []
    for i, obj in enumerate(g.objects):
        mine = (labels == i + 1) & care
        n = int(mine.sum())
        if n >= MIN_PIXELS:
            coverage.append(ObjectCoverage(object=obj.id, pixels=n, coverage=float((mine & masks.foreground).sum()) / n))
    grown = cv2.dilate(drawn.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
    unexplained = []
    for obj_mask in found:
        m = obj_mask & care
        n = int(m.sum())
        if n >= MIN_PIXELS and float((m & grown).sum()) / n < MIN_EXPLAINED:
            ys, xs = np.nonzero(m)
            unexplained.append([int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1])
    return ViewReport(camera=camera.name, iou=iou, grounding_pixels=int(drawn.sum()), clip_pixels=int(clip_objects.sum()),
                      objects=coverage, unexplained=unexplained)


@dataclass
class ClipEvidence:
    """What classic vision finds in the clip: the views (segmented with the clip's own calibration where
    it has one), the objects, and each camera's reference calibration."""

    names: list[str]
    """Camera names, in the order of the views."""
    segmentation: Any
    """The segmentation (datafarm.agents.builtin.vision.segment.Segmentation)."""
    found: list[Any]
    """The objects found (datafarm.agents.builtin.vision.objects.FoundObject)."""
    references: dict[str, tuple[Any, str]]
    """Camera name -> (reference Camera, where it came from: `clip.yaml` or `board`), where there is one."""
    problems: list[str] = field(default_factory=list)
    """What could not be read (a camera G names that the clip lacks)."""


def clip_evidence(grounding: Grounding, clip: Path | str) -> ClipEvidence:
    """Segment the clip and find its objects, with the clip's calibration where it has one (else G's
    cameras) and clip.yaml's robot bases (else G's). Reusable for other groundings of the same clip
    with the same cameras."""
    from datafarm.agents.builtin.vision.charuco import Board
    from datafarm.agents.builtin.vision.objects import find_objects
    from datafarm.agents.builtin.vision.robot import robot_solids
    from datafarm.agents.builtin.vision.scene import BOARD_MARGIN, on_the_table
    from datafarm.agents.builtin.vision.segment import PlaneGrid, View, segment
    from datafarm.sim.world.frames import pose_to_matrix

    g = grounding
    clip_dir = Path(clip)
    spec = load_artifact(ClipSpec, clip_dir / "clip.yaml")
    problems: list[str] = []
    frames = {}
    for cam in g.cameras:
        try:
            video = cam.video or spec.camera(cam.name).video
        except KeyError:
            problems.append(f"camera {cam.name} is not a camera of the clip")
            continue
        frames[cam.name] = _frames(clip_dir / video, FRAMES)
    references = _reference_cameras(g, spec, clip_dir, frames)
    bases = list(spec.robot_base) if spec.robot_base is not None else [a.base for a in g.robot.arms]
    robot = robot_solids([pose_to_matrix(b) for b in bases]) if g.robot.kind in ("piper", "piper-dual") else []
    names = [c.name for c in g.cameras if c.name in frames]
    views = [View.of(references[n][0], frames[n], robot) for n in names]
    grid = PlaneGrid.around_origin()
    flat = None
    board_doc = _board(clip_dir, spec)
    if board_doc:
        board = Board.parse(board_doc)
        cells = grid.cell_of(board.outline_in_world(BOARD_MARGIN)[:, :2])
        flat_img = np.zeros((grid.ny, grid.nx), np.uint8)
        cv2.fillConvexPoly(flat_img, np.round(cells * 16).astype(np.int32), 1, shift=4)
        flat = flat_img > 0
    seg = segment(views, grid, flat)
    refs = {n: (cam, source) for n, (cam, source) in references.items() if source}
    # what stands past the table's edge (the floor seen beyond it) or over an arm base is no object
    found, _ = on_the_table(find_objects(seg), seg, bases)
    return ClipEvidence(names, seg, found, refs, problems)


def check_grounding(grounding: Grounding | Path | str, clip: Path | str,
                    evidence: ClipEvidence | None = None) -> GroundingCheckReport:
    """Stage 1's check of G against the calibration clip `clip` (see the module docstring). `evidence`
    (from `clip_evidence` on the same clip, with the same cameras where the clip has no calibration)
    saves segmenting the clip again."""
    from datafarm.agents.builtin.vision.camera import Camera, rotation_error_deg

    g = grounding if isinstance(grounding, Grounding) else load_artifact(Grounding, Path(grounding))
    clip_dir = Path(clip)
    spec = load_artifact(ClipSpec, clip_dir / "clip.yaml")
    evidence = evidence or clip_evidence(g, clip_dir)
    failures: list[str] = list(evidence.problems)
    by_name = {c.name: c for c in g.cameras}
    agreements = []
    for name, (reference, source) in evidence.references.items():
        if name not in by_name:
            continue
        mine = Camera.of(name, by_name[name].intrinsics, by_name[name].world_from_camera)
        a = CameraAgreement(camera=name, reference=source,
                            position_mm=1000.0 * float(np.linalg.norm(reference.centre - mine.centre)),
                            rotation_deg=rotation_error_deg(reference.world_from_camera, mine.world_from_camera))
        agreements.append(a)
        if a.position_mm > CAMERA_MM or a.rotation_deg > CAMERA_DEG:
            failures.append(f"camera {a.camera} is {a.position_mm:.0f} mm and {a.rotation_deg:.1f} deg from its "
                            f"{a.reference} calibration")
    missing = [c.name for c in g.cameras if c.name not in evidence.names]
    failures += [f"camera {n} has no view in the clip evidence" for n in missing if not any(n in p for p in failures)]
    if spec.robot_base is not None:
        if len(spec.robot_base) != len(g.robot.arms):
            failures.append(f"G has {len(g.robot.arms)} arm(s) but clip.yaml gives {len(spec.robot_base)} robot base(s)")
        for arm, base in zip(g.robot.arms, spec.robot_base):
            gap = float(np.linalg.norm(np.subtract(arm.base.position, base.position)))
            if gap > CAMERA_MM / 1000.0:
                failures.append(f"arm {arm.name}'s base is {gap * 1000:.0f} mm from clip.yaml's robot_base")
    seg = evidence.segmentation
    view_reports = []
    for vi, (name, view, masks) in enumerate(zip(evidence.names, seg.views, seg.masks)):
        if name not in by_name:
            continue
        camera = Camera.of(name, by_name[name].intrinsics, by_name[name].world_from_camera).scaled(view.camera.width,
                                                                                                  view.camera.height)
        report = _view_report(g, camera, masks, [f.masks[vi] for f in evidence.found if vi in f.masks])
        view_reports.append(report)
        if report.iou is not None and report.iou < MIN_VIEW_IOU:
            failures.append(f"view {name}: G's objects overlap the clip's objects by IoU {report.iou:.2f} "
                            f"(at least {MIN_VIEW_IOU} needed)")
        for c in report.objects:
            if c.coverage < MIN_COVERAGE:
                failures.append(f"view {name}: only {c.coverage:.0%} of {c.object} as G draws it is an object in the "
                                f"clip (it is not there, or not where G puts it)")
        for box in report.unexplained:
            failures.append(f"view {name}: the clip shows an object at pixels {box} that G does not have")
    scale = _scale_findings(g)
    failures += scale
    if failures:
        reason = "; ".join(failures)
    else:
        ious = [f"{v.camera} {v.iou:.2f}" for v in view_reports if v.iou is not None]
        reason = f"G reprojects onto the clip's objects (IoU {', '.join(ious)}); scale sane"
    return GroundingCheckReport(passed=not failures, reason=reason, views=view_reports, cameras=agreements, scale=scale)
