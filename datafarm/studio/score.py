"""Scoring a grounding G against a studio truth: how far each object, camera and arm base is from
where it really is, how wrong the sizes are, and whether each real object was identified.

Objects are matched one to one, nearest first (3D distance between object frames, at most
`MATCH_RADIUS`). A match is an identity match when the kinds agree and G's colour is nearer to its
real object's colour than to any other real object's. Sizes are compared as extents (footprint
long side, short side, height), which every kind has, so a cup grounded as a cylinder still gets a
size error. Cameras and arms are matched by name.

The issue's acceptance figures are the defaults of `Criteria`: object position <= 20 mm, size <= 20%,
fitted camera pose <= 20 mm and 2 degrees.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from pydantic import Field

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.io import load_artifact
from datafarm.errors import InputError, Problem
from datafarm.sim.world.frames import quat_to_matrix
from datafarm.studio.truth import StudioTruth, load_truth

MATCH_RADIUS = 0.10
"""Largest distance (metres) at which a grounded object can stand for a real one."""
GROUNDING_FILE = "grounding.json"
"""G's file name in a task folder."""


class Criteria(Artifact):
    """Acceptance thresholds of a grounding (issue 6: builtin grounding on studio scenes)."""

    position_mm: float = 20.0
    """Largest object position error, millimetres."""
    size_pct: float = 20.0
    """Largest object size error (any extent), percent."""
    camera_position_mm: float = 20.0
    """Largest camera position error, millimetres."""
    camera_rotation_deg: float = 2.0
    """Largest camera rotation error, degrees."""


class ObjectScore(Artifact):
    """One real object and the grounded object matched to it."""

    truth_id: str
    """The real object's id."""
    truth_kind: str
    """The real object's kind."""
    matched_id: str | None
    """The grounded object matched to it, or null when none lies within MATCH_RADIUS."""
    matched_kind: str | None
    """Its kind."""
    position_error_mm: float | None
    """Distance between the two object frames' origins, millimetres."""
    size_errors_pct: dict[str, float] = Field(default_factory=dict)
    """Signed relative error of each extent (`long`, `short`, `height`), percent."""
    colour_distance: float | None = None
    """Euclidean distance between the colours (RGB, 0-1)."""
    kind_ok: bool = False
    """The kinds agree."""
    colour_ok: bool = False
    """G's colour is nearer to this object's colour than to any other real object's."""
    identity_ok: bool = False
    """Matched, same kind, right colour."""

    @property
    def size_error_pct(self) -> float | None:
        """The largest absolute extent error, percent."""
        return max((abs(v) for v in self.size_errors_pct.values()), default=None)


class CameraScore(Artifact):
    """One camera's grounded pose against its real pose."""

    name: str
    """Camera name."""
    found: bool
    """G has a camera of that name."""
    position_error_mm: float | None = None
    """Distance between the camera centres, millimetres."""
    rotation_error_deg: float | None = None
    """Angle of the rotation between the two orientations, degrees."""
    focal_error_pct: float | None = None
    """Relative error of fx, percent."""
    extrinsics_tag: str | None = None
    """How G says it got the pose (measured, fitted...)."""


class ArmScore(Artifact):
    """One arm base's grounded pose against its real pose."""

    name: str
    """Arm name."""
    found: bool
    """G has an arm of that name."""
    position_error_mm: float | None = None
    """Distance between the base origins, millimetres."""
    yaw_error_deg: float | None = None
    """Difference of heading about world z, degrees."""


class ScoreReport(Artifact):
    """How well a grounding matches a studio truth."""

    scene: str
    """The truth's scene name."""
    objects: list[ObjectScore]
    """One entry per real object."""
    extra_objects: list[str]
    """Grounded objects that stand for no real object."""
    cameras: list[CameraScore]
    """One entry per real camera."""
    arms: list[ArmScore]
    """One entry per real arm."""
    criteria: Criteria
    """Thresholds used for `passed`."""
    max_position_error_mm: float | None
    """Largest object position error among matched objects."""
    max_size_error_pct: float | None
    """Largest object size error among matched objects."""
    max_camera_position_error_mm: float | None
    """Largest camera position error."""
    max_camera_rotation_error_deg: float | None
    """Largest camera rotation error."""
    identities_ok: bool
    """Every real object has an identity match."""
    passed: bool
    """All criteria met: every object identified and within the position and size limits, every camera within its limits."""


def extents(obj: object) -> tuple[float, float, float]:
    """(footprint long side, footprint short side, height) of a grounded object, metres."""
    kind = obj.kind
    if kind in ("box", "drawer_cabinet", "actor"):
        s = obj.size  # type: ignore[attr-defined]
        x, y, h = s.x.value, s.y.value, s.z.value
    elif kind == "scale":
        p = obj.plate  # type: ignore[attr-defined]
        x, y, h = p.x.value, p.y.value, obj.body_height.value + p.z.value  # type: ignore[attr-defined]
    elif kind == "sphere":
        x = y = h = 2 * obj.radius.value  # type: ignore[attr-defined]
    elif kind == "cylinder":
        x = y = 2 * obj.radius.value  # type: ignore[attr-defined]
        h = obj.height.value  # type: ignore[attr-defined]
    elif kind == "cup":
        x = y = 2 * obj.outer_radius.value  # type: ignore[attr-defined]
        h = obj.height.value  # type: ignore[attr-defined]
    elif kind == "drum":
        x = y = 2 * obj.head_radius.value  # type: ignore[attr-defined]
        h = obj.height.value  # type: ignore[attr-defined]
    else:
        raise ValueError(f"no extents for object kind {kind!r}")
    return max(x, y), min(x, y), h


def _rotation_angle_deg(a: np.ndarray, b: np.ndarray) -> float:
    cos = (np.trace(a.T @ b) - 1.0) / 2.0
    return math.degrees(math.acos(max(-1.0, min(1.0, float(cos)))))


def _yaw(q: tuple[float, ...]) -> float:
    r = quat_to_matrix(q)
    return math.atan2(r[1, 0], r[0, 0])


def _match(truth: list[object], grounded: list[object]) -> dict[int, int]:
    """Truth index -> grounded index, one to one, nearest pairs first, within MATCH_RADIUS."""
    pairs = sorted(
        (math.dist(t.pose.position, g.pose.position), i, j)  # type: ignore[attr-defined]
        for i, t in enumerate(truth) for j, g in enumerate(grounded)
    )
    out: dict[int, int] = {}
    used: set[int] = set()
    for distance, i, j in pairs:
        if distance > MATCH_RADIUS:
            break
        if i not in out and j not in used:
            out[i] = j
            used.add(j)
    return out


def score_grounding(grounding: Grounding, truth: StudioTruth, criteria: Criteria | None = None) -> ScoreReport:
    """Compare `grounding` with `truth` (see the module docstring)."""
    criteria = criteria or Criteria()
    real = truth.grounding
    real_objects, g_objects = list(real.objects), list(grounding.objects)
    matches = _match(real_objects, g_objects)
    objects: list[ObjectScore] = []
    for i, t in enumerate(real_objects):
        if i not in matches:
            objects.append(ObjectScore(truth_id=t.id, truth_kind=t.kind, matched_id=None, matched_kind=None,
                                       position_error_mm=None))
            continue
        g = g_objects[matches[i]]
        real_ext, g_ext = extents(t), extents(g)
        sizes = {name: 100.0 * (ge - te) / te for name, te, ge in zip(("long", "short", "height"), real_ext, g_ext)}
        colour_gaps = [math.dist(g.colour, other.colour) for other in real_objects]
        colour_ok = colour_gaps[i] <= min(colour_gaps) + 1e-12
        kind_ok = g.kind == t.kind
        objects.append(ObjectScore(
            truth_id=t.id, truth_kind=t.kind, matched_id=g.id, matched_kind=g.kind,
            position_error_mm=1000.0 * math.dist(t.pose.position, g.pose.position), size_errors_pct=sizes,
            colour_distance=colour_gaps[i], kind_ok=kind_ok, colour_ok=colour_ok, identity_ok=kind_ok and colour_ok))
    extra = [g_objects[j].id for j in range(len(g_objects)) if j not in set(matches.values())]

    g_cameras = {c.name: c for c in grounding.cameras}
    cameras = []
    for cam in real.cameras:
        g = g_cameras.get(cam.name)
        if g is None:
            cameras.append(CameraScore(name=cam.name, found=False))
            continue
        cameras.append(CameraScore(
            name=cam.name, found=True,
            position_error_mm=1000.0 * math.dist(cam.world_from_camera.position, g.world_from_camera.position),
            rotation_error_deg=_rotation_angle_deg(quat_to_matrix(cam.world_from_camera.quaternion),
                                                   quat_to_matrix(g.world_from_camera.quaternion)),
            focal_error_pct=100.0 * (g.intrinsics.fx * cam.intrinsics.width / g.intrinsics.width - cam.intrinsics.fx)
            / cam.intrinsics.fx,
            extrinsics_tag=g.extrinsics_tag.value))

    g_arms = {a.name: a for a in grounding.robot.arms}
    arms = []
    for arm in real.robot.arms:
        g = g_arms.get(arm.name)
        if g is None:
            arms.append(ArmScore(name=arm.name, found=False))
            continue
        yaw_gap = math.degrees(abs(math.remainder(_yaw(g.base.quaternion) - _yaw(arm.base.quaternion), 2 * math.pi)))
        arms.append(ArmScore(name=arm.name, found=True,
                             position_error_mm=1000.0 * math.dist(arm.base.position, g.base.position),
                             yaw_error_deg=yaw_gap))

    def biggest(values: list[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return max(present) if present else None

    max_pos = biggest([o.position_error_mm for o in objects])
    max_size = biggest([o.size_error_pct for o in objects])
    max_cam_pos = biggest([c.position_error_mm for c in cameras])
    max_cam_rot = biggest([c.rotation_error_deg for c in cameras])
    identities_ok = all(o.identity_ok for o in objects)
    passed = (identities_ok and all(c.found for c in cameras)
              and (max_pos is None or max_pos <= criteria.position_mm)
              and (max_size is None or max_size <= criteria.size_pct)
              and (max_cam_pos is None or max_cam_pos <= criteria.camera_position_mm)
              and (max_cam_rot is None or max_cam_rot <= criteria.camera_rotation_deg))
    return ScoreReport(scene=truth.scene, objects=objects, extra_objects=extra, cameras=cameras, arms=arms,
                       criteria=criteria, max_position_error_mm=max_pos, max_size_error_pct=max_size,
                       max_camera_position_error_mm=max_cam_pos, max_camera_rotation_error_deg=max_cam_rot,
                       identities_ok=identities_ok, passed=passed)


def grounding_path(task: Path | str) -> Path:
    """The grounding.json of a task folder, or `task` itself when it is a file."""
    path = Path(task)
    candidate = path / GROUNDING_FILE if path.is_dir() else path
    if not candidate.is_file():
        raise InputError([Problem("no grounding to score", file=candidate,
                                  expected=f"a task folder holding {GROUNDING_FILE}, or a {GROUNDING_FILE} file")])
    return candidate


def score_files(task: Path | str, truth: Path | str, criteria: Criteria | None = None) -> ScoreReport:
    """Score the grounding of a task folder (or a grounding.json) against a truth.json."""
    grounding = load_artifact(Grounding, grounding_path(task))
    return score_grounding(grounding, load_truth(truth), criteria)
