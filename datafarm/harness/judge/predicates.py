"""K's predicate vocabulary evaluated over a trajectory: every condition becomes a per-step boolean
array (N,), vectorized over steps.

Semantics beyond the schema's docstrings (datafarm.artifacts.judge):
- `inside`: every point of the object's hull lies in the container's interior (a cup's cavity, a
  drawer's box; bounded by the rim), at least `margin` from the side walls and below the rim by
  `margin`; the floor is allowed `FLOOR_TOLERANCE` of contact slack.
- `on`: the object touches the support (any part of the support's object, or `table`), its lowest
  point is within `ON_TOLERANCE` of the support's top, and its centre is over the support's top face.
- `above`: heights only (bottom of object minus top of target), as the schema says.
- `grasped`: the object touches both finger links of one arm's gripper (`by` = an arm, `<arm>.gripper`,
  or `robot` for any arm).
- `contact_count`: touches are contact events merged when they overlap (two links at once count once).
- `stable_for`: speed below `max_speed` at every step of the last `duration_s` seconds.
- `facing`: the viewer's forward axis is its frame's +x (the UE agent convention).
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable

import numpy as np

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.judge import (
    Above,
    AllOf,
    AnyOf,
    ContactCount,
    Facing,
    Grasped,
    Inside,
    JointValue,
    Near,
    NotOf,
    On,
    ScaleReadingInRange,
    SpeedBelow,
    StableFor,
    Upright,
)
from datafarm.harness.judge.geometry import Box, Cylinder
from datafarm.harness.judge.scene import TIME_EPS, Body, Scene, UnknownBody

ON_TOLERANCE = 0.005
"""How far (m) an object's bottom may be from the support's top and still be `on` it."""
FLOOR_TOLERANCE = 0.002
"""How far (m) below a container's floor a contained object's hull may reach (contact slack)."""

_COMPARE: dict[str, Callable[[np.ndarray, float], np.ndarray]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}


def run_starts(mask: np.ndarray) -> np.ndarray:
    """For each step, the index where the run of True containing it began (meaningless where False)."""
    idx = np.arange(len(mask))
    begins = mask & ~np.concatenate([[False], mask[:-1]])
    return np.maximum.accumulate(np.where(begins, idx, 0))


def held_for(mask: np.ndarray, times: np.ndarray, since: int = 0) -> np.ndarray:
    """(N,) how long (s) the condition has held continuously at each step, counting from `since` at
    the earliest; -1 where it does not hold."""
    start = np.maximum(run_starts(mask), since)
    return np.where(mask, times - times[start], -1.0)


def describe(cond: Artifact) -> str:
    """A short human form of a condition, e.g. `inside(red_cup, blue_cup)`, `not grasped(red_cup)`."""
    if isinstance(cond, AllOf):
        return " and ".join(_paren(c) for c in cond.all)
    if isinstance(cond, AnyOf):
        return " or ".join(_paren(c) for c in cond.any)
    if isinstance(cond, NotOf):
        return "not " + _paren(cond.not_)
    data = cond.model_dump(mode="json")
    name = data.pop("predicate")
    args = ", ".join(str(v) if k in _POSITIONAL else f"{k}={v}" for k, v in data.items() if v is not None)
    return f"{name}({args})"


_POSITIONAL = {"object", "container", "support", "target", "a", "b", "body", "scale", "viewer"}


def _paren(cond: Artifact) -> str:
    text = describe(cond)
    return f"({text})" if isinstance(cond, (AllOf, AnyOf)) else text


def depends_on_stage(cond: Artifact) -> bool:
    """True when the condition's value depends on when the stage began (`contact_count` without a window)."""
    if isinstance(cond, AllOf):
        return any(depends_on_stage(c) for c in cond.all)
    if isinstance(cond, AnyOf):
        return any(depends_on_stage(c) for c in cond.any)
    if isinstance(cond, NotOf):
        return depends_on_stage(cond.not_)
    return isinstance(cond, ContactCount) and cond.window_s is None


class Conditions:
    """Evaluates conditions on one scene, caching each predicate's array."""

    def __init__(self, scene: Scene) -> None:
        self.scene = scene
        """The scene evaluated."""
        self._cache: dict[tuple[str, int], np.ndarray] = {}

    def evaluate(self, cond: Artifact, stage_start: int = 0) -> np.ndarray:
        """(N,) bool: where `cond` holds; `stage_start` is the step index the current stage began at."""
        if isinstance(cond, AllOf):
            return np.logical_and.reduce([self.evaluate(c, stage_start) for c in cond.all])
        if isinstance(cond, AnyOf):
            return np.logical_or.reduce([self.evaluate(c, stage_start) for c in cond.any])
        if isinstance(cond, NotOf):
            return ~self.evaluate(cond.not_, stage_start)
        key = (json.dumps(cond.model_dump(mode="json"), sort_keys=True), stage_start if depends_on_stage(cond) else 0)
        if key not in self._cache:
            handler = _HANDLERS.get(type(cond))
            if handler is None:
                raise UnknownBody(f"predicate {type(cond).__name__} is not implemented by this judge runtime")
            value = np.asarray(handler(self.scene, cond, stage_start), dtype=bool)
            value.setflags(write=False)
            self._cache[key] = value
        return self._cache[key]

    def never_held(self, cond: Artifact, start: int, stop: int) -> list[str]:
        """The parts of `cond` (its conjuncts when it is an `all`) that were false at every step of
        [start, stop]: why a stage could not complete."""
        parts = cond.all if isinstance(cond, AllOf) else [cond]
        return [describe(p) for p in parts if not self.evaluate(p, start)[start:stop + 1].any()]


# --- the predicates -----------------------------------------------------------------------------------


def _in_cavity(cavity: Box | Cylinder, p: np.ndarray, margin: float) -> np.ndarray:
    """(..., ) True where piece-frame points lie in a bounded cavity, `margin` from walls and rim."""
    z = p[..., 2]
    vertical = (z >= _floor(cavity) - FLOOR_TOLERANCE) & (z <= cavity.top_z() - margin)
    if isinstance(cavity, Cylinder):
        return vertical & (np.hypot(p[..., 0], p[..., 1]) <= cavity.r - margin)
    lo, hi = cavity.lo, cavity.hi
    return (vertical & (p[..., 0] >= lo[0] + margin) & (p[..., 0] <= hi[0] - margin)
            & (p[..., 1] >= lo[1] + margin) & (p[..., 1] <= hi[1] - margin))


def _floor(cavity: Box | Cylinder) -> float:
    return float(cavity.z0 if isinstance(cavity, Cylinder) else cavity.lo[2])


def _object(scene: Scene, ref: str, role: str) -> Body:
    body = scene.resolve(ref)
    if body.kind != "object":
        raise UnknownBody(f"{role} {ref!r} must be an object or a part of one")
    return body


def inside(scene: Scene, p: Inside, _: int) -> np.ndarray:
    obj, cont = _object(scene, p.object, "object"), _object(scene, p.container, "container")
    if obj.name == cont.name:
        raise UnknownBody(f"inside: {p.object!r} cannot be inside its own object {p.container!r}")
    pieces = [piece for piece in scene.shape(cont).select(cont.part) if piece.cavity is not None]
    if not pieces:
        raise UnknownBody(f"container {p.container!r} has no interior (cups and drawers do)")
    points = scene.points(obj)
    result = np.zeros(scene.traj.n_steps, bool)
    for piece in pieces:
        local = scene.to_piece(cont.name, piece, points)
        result |= _in_cavity(piece.cavity, local, p.margin).all(axis=1)  # type: ignore[arg-type]
    return result


def on(scene: Scene, p: On, _: int) -> np.ndarray:
    obj, support = _object(scene, p.object, "object"), scene.resolve(p.support)
    bottom = scene.bottom(obj)
    centre = scene.points(obj).mean(axis=1)
    if support.kind == "table":
        table = scene.traj.geometry.table
        over = np.ones(scene.traj.n_steps, bool) if table is None else table.covers(centre)
        level = np.abs(bottom - scene.table_top) <= ON_TOLERANCE
        return scene.contact_mask(obj, support) & level & over
    if support.kind != "object":
        raise UnknownBody(f"support {p.support!r} must be an object, a part of one, or `table`")
    touching = scene.contact_mask(obj, scene.resolve(support.name))
    result = np.zeros(scene.traj.n_steps, bool)
    for piece in scene.shape(support).select(support.part):
        top = scene.to_world(support.name, piece, piece.hull_points())[..., 2].max(axis=1)
        over = piece.outer.contains_xy(scene.to_piece(support.name, piece, centre[:, None, :])[:, 0, :])
        result |= (np.abs(bottom - top) <= ON_TOLERANCE) & over
    return touching & result


def above(scene: Scene, p: Above, _: int) -> np.ndarray:
    obj, target = _object(scene, p.object, "object"), scene.resolve(p.target)
    if target.kind not in ("object", "table"):
        raise UnknownBody(f"target {p.target!r} must be an object, a part of one, or `table`")
    clearance = scene.bottom(obj) - scene.top(target)
    ok = clearance >= p.min_height
    return ok if p.max_height is None else ok & (clearance <= p.max_height)


def grasped(scene: Scene, p: Grasped, _: int) -> np.ndarray:
    obj = _object(scene, p.object, "object")
    by = scene.resolve(p.by)
    if by.kind == "robot":
        arms = sorted(scene.arm_names)
    elif by.kind in ("arm", "gripper") and by.part in (None, "gripper"):
        arms = [by.name]
    else:
        raise UnknownBody(f"grasped: `by` must be an arm, `<arm>.gripper` or `robot`, got {p.by!r}")
    result = np.zeros(scene.traj.n_steps, bool)
    for arm in arms:
        first, second = (_finger_mask(scene, obj, finger) for finger in scene.finger_links(arm))
        result |= first & second
    return result


def _finger_mask(scene: Scene, obj: Body, finger: str) -> np.ndarray:
    """(N,) True where `obj` touches the finger link named exactly `finger`."""
    mask = np.zeros(scene.traj.n_steps, bool)
    for c in scene.traj.contacts:
        if (c.a == finger and scene.matches(obj, c.b)) or (c.b == finger and scene.matches(obj, c.a)):
            start, end = scene.contact_span(c)
            mask[start:end] = True
    return mask


def contact_count(scene: Scene, p: ContactCount, stage_start: int) -> np.ndarray:
    a, b = scene.resolve(p.a), scene.resolve(p.b)
    starts = scene.contact_starts(a, b)
    times = scene.traj.times
    low = times - p.window_s if p.window_s is not None else np.full_like(times, times[stage_start])
    count = np.searchsorted(starts, times + TIME_EPS, side="right") - np.searchsorted(starts, low - TIME_EPS, side="left")
    ok = count >= p.at_least
    return ok if p.at_most is None else ok & (count <= p.at_most)


def joint_value(scene: Scene, p: JointValue, _: int) -> np.ndarray:
    body = scene.resolve(p.body)
    if body.kind == "object":
        key = f"{body.name}.{p.joint}"
        shape = scene.shape(body)
        if p.joint not in shape.joints and key not in scene.traj.joint_values:
            raise UnknownBody(f"object {body.name!r} ({shape.kind}) has no joint {p.joint!r}")
        values = scene.joint(body.name, p.joint)
    elif body.kind == "arm":
        track = scene.traj.arms.get(body.name)
        if track is None or p.joint not in track.joint_names:
            raise UnknownBody(f"arm {body.name!r} has no recorded joint {p.joint!r}")
        values = track.positions[:, track.joint_names.index(p.joint)]
    else:
        raise UnknownBody(f"joint_value: {p.body!r} is neither an articulated object nor an arm")
    return _COMPARE[p.compare](values, p.value)


def upright(scene: Scene, p: Upright, _: int) -> np.ndarray:
    body = scene.resolve(p.object)
    return scene.orientation(body)[:, 2, 2] >= np.cos(p.max_tilt)


def stable_for(scene: Scene, p: StableFor, _: int) -> np.ndarray:
    obj = _object(scene, p.object, "object")
    still = scene.speed(obj.name) < p.max_speed
    return held_for(still, scene.traj.times) >= p.duration_s - TIME_EPS


def speed_below(scene: Scene, p: SpeedBelow, _: int) -> np.ndarray:
    obj = _object(scene, p.object, "object")
    return scene.speed(obj.name) < p.max_speed


def scale_reading_in_range(scene: Scene, p: ScaleReadingInRange, _: int) -> np.ndarray:
    body = _object(scene, p.scale, "scale")
    if scene.shape(body).kind != "scale":
        raise UnknownBody(f"{p.scale!r} is a {scene.shape(body).kind}, not a scale")
    reading = scene.traj.scale_readings.get(body.name)
    if reading is None:
        raise UnknownBody(f"the trajectory records no reading for scale {body.name!r}")
    return (reading >= p.min_g) & (reading <= p.max_g)


def near(scene: Scene, p: Near, _: int) -> np.ndarray:
    a, b = scene.resolve(p.a), scene.resolve(p.b)
    return np.linalg.norm(scene.origin(a) - scene.origin(b), axis=1) <= p.max_distance


def facing(scene: Scene, p: Facing, _: int) -> np.ndarray:
    viewer, target = scene.resolve(p.viewer), scene.resolve(p.target)
    forward = scene.orientation(viewer)[:, :, 0]
    to_target = scene.origin(target) - scene.origin(viewer)
    norm = np.linalg.norm(to_target, axis=1)
    cos = np.einsum("ni,ni->n", forward, to_target) / np.maximum(norm, 1e-12)
    return (norm > 1e-9) & (cos >= np.cos(p.max_angle))


_HANDLERS: dict[type, Callable[[Scene, Artifact, int], np.ndarray]] = {
    Inside: inside, On: on, Above: above, Grasped: grasped, ContactCount: contact_count, JointValue: joint_value,
    Upright: upright, StableFor: stable_for, SpeedBelow: speed_below, ScaleReadingInRange: scale_reading_in_range,
    Near: near, Facing: facing,
}
