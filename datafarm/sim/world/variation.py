"""`sample_variation`: draw z for one episode from G, S and a seed (deterministic: same inputs, same z).

What is drawn, each uniformly:
- physics: every G quantity S.physics lists, plus every quantity G tags `unknown` (it must be
  randomized whether or not S lists it), within its G range. Robot and camera quantities are never
  drawn (the robot stays put; cameras vary by S.camera_jitter).
- table: the height offset in S.table_height, and a tilt about world x and about world y in
  S.table_tilt (added to G's own tilt).
- objects: offsets (x, y, yaw) from G's pose for each object S.objects lists; an object whose
  footprint comes closer than S.min_clearance to another's is redrawn (pairs that were already that
  close in G only have to stay as far apart as they were). Every object's pose then moves with the
  sampled table change (height offset and extra tilt about the top's centre), so it rests on the top.
- cameras: each camera's pose jittered by S.camera_jitter (translation per axis, and a rotation
  vector per axis, applied about the camera's centre).
- appearance: one value per S.appearance axis.

Each group draws from its own stream (seeded by the seed and the group), so adding an object to S
does not change the table or camera draws of the same seed.
"""

from __future__ import annotations

import itertools

import numpy as np

from datafarm.artifacts.common import Pose, Provenance
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.sampler import SamplerSpec, Variation
from datafarm.errors import InputError, Problem
from datafarm.sim.world.frames import (
    matrix_to_pose,
    pose_to_matrix,
    rotation_z,
    rotvec_to_matrix,
    table_top_matrix,
)
from datafarm.sim.world.shapes import footprint_radius

MAX_PLACEMENT_ATTEMPTS = 200
"""Redraws of the object offsets before giving up on S.min_clearance."""
_NEVER_DRAWN = ("robot.", "cameras.")
_STREAMS = {"physics": 1, "table": 2, "objects": 3, "cameras": 4, "appearance": 5}


def _rng(seed: int, stream: str) -> np.random.Generator:
    return np.random.default_rng([seed, _STREAMS[stream]])


def drawn_paths(grounding: Grounding, sampler: SamplerSpec) -> list[str]:
    """The G quantity paths a variation draws, in G order: S.physics plus every `unknown` quantity."""
    quantities = grounding.tagged_quantities()
    unknown_listed = [p for p in sampler.physics if p not in quantities]
    if unknown_listed:
        raise InputError([Problem(f"S.physics names {p!r}, which is not a quantity of G", field="physics",
                                  expected="a path from Grounding.tagged_quantities(), e.g. objects.<id>.mass")
                          for p in unknown_listed])
    listed = set(sampler.physics)
    return [path for path, q in quantities.items()
            if not path.startswith(_NEVER_DRAWN) and (path in listed or q.tag is Provenance.unknown) and q.range is not None]


def sample_variation(grounding: Grounding, sampler: SamplerSpec, seed: int) -> Variation:
    """Draw z for `seed` (see the module docstring); InputError when S names what G lacks, or when no
    placement satisfies S.min_clearance."""
    quantities = grounding.tagged_quantities()
    rng = _rng(seed, "physics")
    physics = {path: float(rng.uniform(*quantities[path].range)) for path in drawn_paths(grounding, sampler)}  # type: ignore[misc]
    drawn = grounding.with_values(physics)

    rng = _rng(seed, "table")
    height_offset = float(rng.uniform(*sampler.table_height))
    tilt = (float(rng.uniform(*sampler.table_tilt)), float(rng.uniform(*sampler.table_tilt)))

    poses = _place_objects(drawn, sampler, _rng(seed, "objects"))
    if drawn.table is not None:
        nominal, table = grounding.table, drawn.table
        assert nominal is not None
        before = table_top_matrix(nominal.center, 0.0, nominal.tilt_x.value, nominal.tilt_y.value)
        after = table_top_matrix(table.center, height_offset, table.tilt_x.value + tilt[0], table.tilt_y.value + tilt[1])
        carry = after @ np.linalg.inv(before)
        poses = {oid: matrix_to_pose(carry @ pose_to_matrix(p)) for oid, p in poses.items()}

    rng = _rng(seed, "cameras")
    jitter = sampler.camera_jitter
    cameras: dict[str, Pose] = {}
    for camera in grounding.cameras:
        t = pose_to_matrix(camera.world_from_camera)
        t[:3, 3] += rng.uniform(-jitter.translation, jitter.translation, 3)
        t[:3, :3] = rotvec_to_matrix(rng.uniform(-jitter.rotation, jitter.rotation, 3)) @ t[:3, :3]
        cameras[camera.name] = matrix_to_pose(t)

    rng = _rng(seed, "appearance")
    appearance = {axis: values[int(rng.integers(len(values)))] for axis, values in sorted(sampler.appearance.items())}
    return Variation(seed=seed, object_poses=poses, table_height_offset=height_offset, table_tilt=tilt,
                     camera_poses=cameras, physics=physics, appearance=appearance)


def _place_objects(grounding: Grounding, sampler: SamplerSpec, rng: np.random.Generator) -> dict[str, Pose]:
    """Object poses after S's offsets, redrawn until the clearance rule holds."""
    ids = [o.id for o in grounding.objects]
    missing = [p.object for p in sampler.objects if p.object not in ids]
    if missing:
        raise InputError([Problem(f"S.objects names {m!r}, which is not an object of G", field="objects",
                                  expected=f"one of {ids}") for m in missing])
    placements = {p.object: p for p in sampler.objects}
    radius = {o.id: footprint_radius(o) for o in grounding.objects}
    nominal = {o.id: pose_to_matrix(o.pose) for o in grounding.objects}

    def gap(a: np.ndarray, b: np.ndarray, ia: str, ib: str) -> float:
        return float(np.linalg.norm(a[:2, 3] - b[:2, 3])) - radius[ia] - radius[ib]

    required = {(a, b): min(sampler.min_clearance, gap(nominal[a], nominal[b], a, b))
                for a, b in itertools.combinations(ids, 2) if a in placements or b in placements}
    for _ in range(MAX_PLACEMENT_ATTEMPTS):
        poses = dict(nominal)
        for oid in ids:  # G order, so the draws do not depend on S's listing order
            if oid not in placements:
                continue
            p = placements[oid]
            dx, dy, dyaw = rng.uniform(p.x[0], p.x[1]), rng.uniform(p.y[0], p.y[1]), rng.uniform(p.yaw[0], p.yaw[1])
            t = nominal[oid].copy()
            t[:3, :3] = rotation_z(dyaw) @ t[:3, :3]
            t[:2, 3] += (dx, dy)
            poses[oid] = t
        if all(gap(poses[a], poses[b], a, b) >= need - 1e-9 for (a, b), need in required.items()):
            return {oid: matrix_to_pose(t) for oid, t in poses.items()}
    raise InputError([Problem(
        f"no placement of the objects kept them {sampler.min_clearance} m apart in {MAX_PLACEMENT_ATTEMPTS} draws",
        field="objects", expected="smaller offsets, fewer moving objects, or a smaller min_clearance")])

