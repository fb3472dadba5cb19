"""Global invariants: the forbidden shortcuts a judge checks over the whole trajectory.

Each check returns `Violation`s, at most one per body (or pair, or joint) and kind of evidence:
the first time it happened, with what was measured against the threshold. `success_too_brief` and
`stage_skipped` need the stages and live in `evaluate`.

teleport. An object's pose may change between two steps only as its recorded velocity allows (at
most the larger of the two speeds times dt, plus `max_displacement`; likewise for rotation). It may
gain speed freely only while it touches the robot or a moving body; otherwise only as gravity
allows: at most g·dt per step in all, at most `SIDEWAYS_G`·g·dt sideways while getting faster
(tipping; a bounce may turn a fall sideways but not speed it up), nothing upwards while touching
nothing, and once at rest it may not start sliding (`DRIFT_SPEED`) until something moving touches
it. A pose set by hand shows up as a jump the velocity does not explain; a velocity set by hand as
speed gained with nobody pushing.

penetration. Three kinds of evidence, any of which fires: a contact event whose simulator-reported
penetration exceeds `max_depth`; geometric interpenetration of two objects' solids (or an object and
the table top) deeper than `max_depth`, from G's shapes and the recorded poses; and an object passing
through a container's wall, i.e. entering (or leaving) a cup's cavity or a drawer's interior from
the side or below instead of through its opening, which thin walls would otherwise hide.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.judge import (
    EpisodeGap,
    JointLimit,
    Penetration,
    Stuck,
    Teleport,
    VelocityLimit,
    Violation,
)
from datafarm.harness.judge.geometry import quat_angle
from datafarm.harness.judge.predicates import held_for
from datafarm.harness.judge.scene import Scene

GRAVITY = 9.81
"""m/s²: the most speed falling adds per second."""
SPEED_SLACK = 0.05
"""m/s of speed gain tolerated per step beyond gravity (solver noise, a settling bounce)."""
SIDEWAYS_G = 0.25
"""Fraction of g an object may gain sideways with nothing moving touching it (tipping, sliding off an edge)."""
VELOCITY_SLACK = 0.25
"""Relative slack on speed x dt when bounding a step's displacement (the speed may peak mid-step)."""
REST_SPEED = 0.01
"""m/s below which an object is still."""
REST_HOLD_S = 0.2
"""How long an object must have been still to count as at rest (not just turning round in a bounce), s."""
JOINT_LIMIT_TOLERANCE = 1e-3
"""Occupancy beyond `max_fraction` forgiven (the simulator's soft limits overshoot slightly)."""
DRIFT_SPEED = 0.05
"""m/s of sideways speed an object at rest may not reach unless something moving touches it."""
ROTATION_TOLERANCE = 0.1
"""Radians of rotation per step allowed beyond what the angular velocity explains."""
TABLE_SLAB = 0.05
"""How far below the table top (m) a point still counts as inside the table (not under it)."""
PASS_THROUGH_REACH = 0.05
"""How close (m) to a container's outside a point must have been for a move into its interior to be a
pass-through (farther means it jumped there: a teleport, not a penetration)."""
STILL_STEP = 1e-4
"""Per-step change (m or rad) below which a body counts as not moving, for `stuck`."""


def _t(scene: Scene, i: int) -> float:
    return max(0.0, float(scene.traj.times[i]))


# --- teleport -----------------------------------------------------------------------------------------


def teleport(scene: Scene, inv: Teleport) -> list[Violation]:
    """Pose jumps the velocity does not explain, and speed gained without a pusher."""
    traj = scene.traj
    if traj.n_steps < 2:
        return []
    dt, out = traj.dt, []
    for obj, track in traj.objects.items():
        pos, speed = track.pose[:, :3], np.linalg.norm(track.linear_velocity, axis=1)
        disp = np.linalg.norm(np.diff(pos, axis=0), axis=1)
        # A step may also hold a short free fall that starts and ends at rest (an object released a few
        # mm above its support lands within one control step): at most g dt^2 / 2 beyond what the speeds show.
        allowed = (
            np.maximum(speed[:-1], speed[1:]) * dt * (1 + VELOCITY_SLACK) + 0.5 * GRAVITY * dt * dt + inv.max_displacement
        )
        spin = np.linalg.norm(track.angular_velocity, axis=1)
        turn = quat_angle(track.pose[:-1, 3:], track.pose[1:, 3:])
        turn_allowed = np.maximum(spin[:-1], spin[1:]) * dt * (1 + VELOCITY_SLACK) + ROTATION_TOLERANCE
        jumps = np.flatnonzero((disp > allowed) | (turn > turn_allowed))
        if jumps.size:
            i = int(jumps[0])
            out.append(Violation(shortcut="teleport", time_s=_t(scene, i + 1), detail=(
                f"{obj} jumped {disp[i]:.3f} m and {turn[i]:.2f} rad in one step at {_t(scene, i + 1):.2f} s; "
                f"its recorded velocity allows {allowed[i]:.3f} m and {turn_allowed[i]:.2f} rad"
                + _more(jumps.size))))
        if obj == "agent":
            continue  # the UE agent propels itself
        pushed, touched = _pushed(scene, obj)
        explained = pushed[:-1] | pushed[1:]
        free = ~(touched[:-1] | touched[1:])
        v = track.linear_velocity
        gain = speed[1:] - speed[:-1]
        flat = np.linalg.norm(v[:, :2], axis=1)
        gain_flat = flat[1:] - flat[:-1]
        gain_up = v[1:, 2] - v[:-1, 2]
        unexplained = np.flatnonzero(~explained & (
            (gain > GRAVITY * dt + SPEED_SLACK)  # faster than falling
            | ((gain_flat > SIDEWAYS_G * GRAVITY * dt + SPEED_SLACK) & (gain > SPEED_SLACK))  # sideways and faster:
            # more than tipping gives (a bounce may turn a fall sideways, but not speed it up)
            | (free & (gain_up > SPEED_SLACK))  # upwards in free flight
        ))
        # From rest, with nothing moving touching it since, an object cannot start sliding: this
        # catches a slow, smooth drag that no single step's speed gain gives away.
        idx = np.arange(traj.n_steps)
        last_push = np.maximum.accumulate(np.where(pushed, idx, -1))
        rested = held_for(speed < REST_SPEED, traj.times) >= REST_HOLD_S - 1e-9
        last_rest = np.maximum.accumulate(np.where(rested, idx, -1))
        drifting = np.flatnonzero((last_rest > last_push) & (flat > DRIFT_SPEED))
        if unexplained.size:
            i = int(unexplained[0])
            out.append(Violation(shortcut="teleport", time_s=_t(scene, i + 1), detail=(
                f"{obj} sped up from {speed[i]:.3f} to {speed[i + 1]:.3f} m/s at {_t(scene, i + 1):.2f} s "
                "with no contact with the robot or a moving body" + _more(unexplained.size))))
        elif drifting.size:
            i = int(drifting[0])
            out.append(Violation(shortcut="teleport", time_s=_t(scene, i), detail=(
                f"{obj} started moving from rest (at {flat[i]:.3f} m/s sideways by {_t(scene, i):.2f} s) "
                "with no contact with the robot or a moving body")))
    return out


def _pushed(scene: Scene, obj: str) -> tuple[np.ndarray, np.ndarray]:
    """(N,) masks: where `obj` touches the robot or a moving body, and where it touches anything."""
    body = scene.resolve(obj)
    pushed = np.zeros(scene.traj.n_steps, bool)
    touched = np.zeros(scene.traj.n_steps, bool)
    for c in scene.traj.contacts:
        for mine, other in ((c.a, c.b), (c.b, c.a)):
            if scene.matches(body, mine) and not scene.matches(body, other):
                start, end = scene.contact_span(c)
                touched[start:end] = True
                pushed[start:end] |= scene.body_moving(other)[start:end]
    return pushed, touched


def _more(count: int) -> str:
    return f" (and {count - 1} later steps)" if count > 1 else ""


# --- penetration --------------------------------------------------------------------------------------


def penetration(scene: Scene, inv: Penetration) -> list[Violation]:
    """Reported contact penetration, geometric interpenetration, and passing through container walls."""
    out: list[Violation] = []
    for c in scene.traj.contacts:
        if c.max_penetration is not None and c.max_penetration > inv.max_depth:
            out.append(Violation(shortcut="penetration", time_s=max(0.0, c.start_t), detail=(
                f"{c.a} and {c.b} interpenetrated {c.max_penetration * 1000:.1f} mm "
                f"(limit {inv.max_depth * 1000:.1f} mm), reported by the simulator")))
    out.extend(_solid_overlaps(scene, inv.max_depth))
    out.extend(_pass_throughs(scene, inv.max_depth))
    return out


def _solid_overlaps(scene: Scene, max_depth: float) -> Iterable[Violation]:
    traj = scene.traj
    shapes = traj.geometry.shapes
    ids = sorted(shapes)
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            if a not in traj.objects and b not in traj.objects:
                continue  # two fixed objects: G's business
            depth = _pair_depth(scene, a, b)
            bad = np.flatnonzero(depth > max_depth)
            if bad.size:
                k = int(bad[0])
                yield Violation(shortcut="penetration", time_s=_t(scene, k), detail=(
                    f"{a} and {b} overlap by {depth[k] * 1000:.1f} mm at {_t(scene, k):.2f} s "
                    f"(limit {max_depth * 1000:.1f} mm; deepest {depth.max() * 1000:.1f} mm)"))
    table = traj.geometry.table
    if table is None:
        return
    for obj in sorted(set(traj.objects) & set(shapes)):
        pts = scene.points(scene.resolve(obj), "surface")
        below = table.top_z - pts[..., 2]
        inside = table.covers(pts) & (below > 0) & (below < TABLE_SLAB)
        depth = np.where(inside, below, 0.0).max(axis=1)
        bad = np.flatnonzero(depth > max_depth)
        if bad.size:
            k = int(bad[0])
            yield Violation(shortcut="penetration", time_s=_t(scene, k), detail=(
                f"{obj} is {depth[k] * 1000:.1f} mm into the table at {_t(scene, k):.2f} s (limit {max_depth * 1000:.1f} mm)"))


def _pair_depth(scene: Scene, a: str, b: str) -> np.ndarray:
    """(N,) deepest point of either object's surface inside the other's solid, metres (0 when apart)."""
    depth = np.zeros(scene.traj.n_steps)
    ta, tb = scene.object_frame(a)[1], scene.object_frame(b)[1]
    close = np.flatnonzero(np.linalg.norm(ta - tb, axis=1) <= scene.reach(a) + scene.reach(b))
    if not close.size:
        return depth
    shapes = scene.traj.geometry.shapes
    for src, dst in ((a, b), (b, a)):
        pts = scene.points(scene.resolve(src), "surface")[close]
        R, t = scene.object_frame(dst)
        local = np.matmul(pts - t[close][:, None, :], R[close])
        for piece in shapes[dst].pieces:
            sdf = piece.sdf(local - scene.piece_offset(dst, piece)[close][:, None, :])
            depth[close] = np.maximum(depth[close], np.maximum(-sdf, 0.0).max(axis=1))
    return depth


def _pass_throughs(scene: Scene, max_depth: float) -> Iterable[Violation]:
    traj = scene.traj
    n = traj.n_steps
    for owner, shape in sorted(traj.geometry.shapes.items()):
        for piece in shape.pieces:
            if piece.cavity is None:
                continue
            name = owner if piece.part is None else f"{owner}.{piece.part}"
            for obj in sorted(set(traj.objects) & set(traj.geometry.shapes) - {owner}):
                # material points only: a cup's hull has a phantom lid over its opening
                local = scene.to_piece(owner, piece, scene.points(scene.resolve(obj), "surface"))
                hull_sdf = piece.outer.sdf(local)
                label = np.where(piece.cavity.sdf(local) < 0, 2, np.where(hull_sdf > 0, 1, 0))
                over_rim = local[..., 2] >= piece.cavity.top_z() - max_depth
                near = hull_sdf <= PASS_THROUGH_REACH
                idx = np.arange(n)[:, None]
                last = np.maximum.accumulate(np.where(label != 0, idx, -1), axis=0)
                prev = np.vstack([np.full((1, label.shape[1]), -1), last[:-1]])
                has_prev = prev >= 0
                p = np.maximum(prev, 0)
                prev_label = np.take_along_axis(label, p, axis=0)
                entering = (label == 2) & has_prev & (prev_label == 1) & ~np.take_along_axis(over_rim, p, axis=0) \
                    & np.take_along_axis(near, p, axis=0)
                leaving = (label == 1) & has_prev & (prev_label == 2) & ~over_rim & near
                steps = np.flatnonzero((entering | leaving).any(axis=1))
                if steps.size:
                    k = int(steps[0])
                    way = "into" if entering[k].any() else "out of"
                    yield Violation(shortcut="penetration", time_s=_t(scene, k), detail=(
                        f"{obj} passed through the wall of {name} at {_t(scene, k):.2f} s: it moved {way} the interior "
                        "from the side or below, not through the opening"))


# --- joints, continuity, stuck ------------------------------------------------------------------------


def joint_limit(scene: Scene, inv: JointLimit) -> list[Violation]:
    """Arm joints beyond `max_fraction` of their position range's half-width from its centre."""
    out = []
    for arm, track in sorted(scene.traj.arms.items()):
        centre, half = (track.upper + track.lower) / 2, np.maximum((track.upper - track.lower) / 2, 1e-12)
        frac = np.abs(track.positions - centre) / half
        for j, joint in enumerate(track.joint_names):
            bad = np.flatnonzero(frac[:, j] > inv.max_fraction + JOINT_LIMIT_TOLERANCE)
            if bad.size:
                k = int(bad[0])
                out.append(Violation(shortcut="joint_limit", time_s=_t(scene, k), detail=(
                    f"{arm}.{joint} at {track.positions[k, j]:.4f} outside [{track.lower[j]:.4f}, {track.upper[j]:.4f}] "
                    f"scaled by {inv.max_fraction} (occupancy {frac[k, j]:.3f})" + _more(bad.size))))
    return out


def velocity_limit(scene: Scene, inv: VelocityLimit) -> list[Violation]:
    """Arm joints faster than `max_fraction` of their velocity limit."""
    out = []
    for arm, track in sorted(scene.traj.arms.items()):
        frac = np.abs(track.velocities) / np.maximum(track.velocity_limits, 1e-12)
        for j, joint in enumerate(track.joint_names):
            bad = np.flatnonzero(frac[:, j] > inv.max_fraction + 1e-9)
            if bad.size:
                k = int(bad[0])
                out.append(Violation(shortcut="velocity_limit", time_s=_t(scene, k), detail=(
                    f"{arm}.{joint} moved at {abs(track.velocities[k, j]):.3f}, limit {track.velocity_limits[j]:.3f} "
                    f"x {inv.max_fraction} (occupancy {frac[k, j]:.3f})" + _more(bad.size))))
    return out


def episode_gap(scene: Scene, inv: EpisodeGap) -> list[Violation]:
    """Steps missing or repeated, times off the control clock or going backwards, resets and restarts."""
    traj = scene.traj
    steps, times = traj.step_indices, traj.times
    out = []
    if steps[0] != 0:
        out.append(Violation(shortcut="episode_gap", time_s=_t(scene, 0), detail=f"the recording starts at step {steps[0]}, not 0"))
    jumps = np.flatnonzero(np.diff(steps) != 1)
    if jumps.size:
        i = int(jumps[0])
        what = "skips" if steps[i + 1] > steps[i] + 1 else "goes back"
        out.append(Violation(shortcut="episode_gap", time_s=_t(scene, i + 1), detail=(
            f"the step index {what} from {steps[i]} to {steps[i + 1]}" + _more(jumps.size))))
    backwards = np.flatnonzero(np.diff(times) <= 0)
    if backwards.size:
        i = int(backwards[0])
        out.append(Violation(shortcut="episode_gap", time_s=_t(scene, i + 1), detail=(
            f"time does not advance from {times[i]:.4f} s to {times[i + 1]:.4f} s at row {i + 1}")))
    off = np.flatnonzero(np.abs(times - steps / traj.control_hz) > inv.tolerance_s)
    if off.size:
        i = int(off[0])
        out.append(Violation(shortcut="episode_gap", time_s=_t(scene, i), detail=(
            f"step {steps[i]} is recorded at {times[i]:.4f} s, not {steps[i] / traj.control_hz:.4f} s"
            + _more(off.size))))
    resets = np.flatnonzero(traj.resets)
    if resets.size:
        i = int(resets[0])
        out.append(Violation(shortcut="episode_gap", time_s=_t(scene, i), detail=(
            f"the simulation was reset or the expert restarted before step {steps[i]}" + _more(resets.size))))
    return out


def stuck(scene: Scene, inv: Stuck) -> list[Violation]:
    """Commanded to move but frozen for longer than `max_still_s` (needs `commanded_motion`)."""
    traj = scene.traj
    if traj.commanded_motion is None or traj.n_steps < 2:
        return []
    agent = traj.objects.get("agent")
    if agent is not None:
        change = np.linalg.norm(np.diff(agent.pose[:, :3], axis=0), axis=1) + quat_angle(agent.pose[:-1, 3:], agent.pose[1:, 3:])
    elif traj.arms:
        change = np.max([np.abs(np.diff(a.positions, axis=0)).max(axis=1) for a in traj.arms.values()], axis=0)
    else:
        return []
    frozen = np.concatenate([[False], change < STILL_STEP]) & traj.commanded_motion
    held = held_for(frozen, traj.times)
    bad = np.flatnonzero(held > inv.max_still_s)
    if not bad.size:
        return []
    k = int(bad[0])
    return [Violation(shortcut="stuck", time_s=_t(scene, k), detail=(
        f"commanded to move but frozen for more than {inv.max_still_s:.2f} s at {_t(scene, k):.2f} s"))]


CHECKS: dict[str, Callable[[Scene, Artifact], list[Violation]]] = {
    "teleport": teleport,  # type: ignore[dict-item]
    "penetration": penetration,  # type: ignore[dict-item]
    "joint_limit": joint_limit,  # type: ignore[dict-item]
    "velocity_limit": velocity_limit,  # type: ignore[dict-item]
    "episode_gap": episode_gap,  # type: ignore[dict-item]
    "stuck": stuck,  # type: ignore[dict-item]
}
"""Shortcut name -> its trajectory-wide check (`success_too_brief` and `stage_skipped` are in `evaluate`)."""
