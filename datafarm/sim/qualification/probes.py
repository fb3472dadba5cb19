"""The probe scripts: what the harness does with the robot in a world built from G to show that the
simulator can perform a skill, and what it measures. K's probe library (`probes.yaml`) names the
probes, the task families that need them and their thresholds; each script here reads exactly the
thresholds its `ProbeScript` declares.

Every probe uses the arm that can perform its whole motion (the one nearest to the object first),
with a gripper orientation chosen before moving: the least tilted one from which every waypoint has
an inverse-kinematics solution (a PiPER pointing straight down reaches only low and near; leaning
the gripper forward, about its closing axis so the finger pads stay upright, reaches further). A
probe whose motion has no solution fails as `unreachable`, which no simulator variant can change.

Probes move objects only through the robot, and every control step is recorded (`Recorder`), so
the measurements come from the same state and contact records an expert's rollout produces.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from datafarm.artifacts.grounding import Grounding
from datafarm.sim.qualification.grasping import (
    EZ,
    FINGER_HALF_WIDTH,
    PAD_HALF_LENGTH,
    GripFrame,
    Waypoint,
    arms_by_distance,
    centre_heights,
    choose,
    extent_along,
    fingertip_tcp_height,
    grasp_plan,
    grasp_tcp,
    heading_from,
    lean_frames,
    max_width,
    object_axes,
    object_centre,
    roll_frames,
    table_height_at,
    unit,
)
from datafarm.sim.qualification.library import ProbeCall
from datafarm.sim.qualification.motion import MotionError, ScriptedArm
from datafarm.sim.qualification.report import ProbeResult
from datafarm.sim.recording import Recorder, merged_contacts
from datafarm.sim.world import World, WorldSettings, build_world
from datafarm.sim.world.frames import quat_to_matrix
from datafarm.sim.world.shapes import drawer_geometry

CONTROL_HZ = 50.0
"""Control rate of the probes' scripted motions (a drum strike lasts a few control steps)."""
APPROACH_DISTANCE = 0.07
"""Pre-grasp stand-off along the approach axis, metres."""
LIFT_HEIGHT = 0.08
"""How far grasp-and-lift raises the item, metres (the threshold asks for less)."""
PULL_FRACTION = 0.97
"""How far the drawer probe pulls, as a fraction of the drawer's travel (short of its end stop; the
threshold asks for less)."""


@dataclass
class Outcome:
    """What a probe script found: pass/fail, measured values and a sentence saying why."""

    passed: bool
    """Whether every threshold was met."""
    measured: dict[str, float]
    """Measured values by name."""
    reason: str
    """Why it passed or failed."""


@dataclass
class ProbeContext:
    """What a probe script gets: the world, its objects by role, its thresholds and a recorder."""

    world: World
    """The world built from G under the variant being tried."""
    objects: dict[str, str]
    """Probe role -> G object id."""
    thresholds: dict[str, float]
    """K's thresholds for this probe."""
    recorder: Recorder
    """Records every control step of the probe."""
    seed: int = 0
    """Seed of the IK restarts."""
    arm: str | None = None
    """The arm the script chose (set by the script)."""


@dataclass(frozen=True)
class ProbeScript:
    """A probe's script and what it reads from K."""

    name: str
    """Probe name (as in K)."""
    roles: tuple[str, ...]
    """Roles its ProbeCall must fill."""
    thresholds: tuple[str, ...]
    """Threshold names it reads."""
    run: Callable[[ProbeContext], Outcome]
    """The script."""


# --- shared motions --------------------------------------------------------------------------------


@dataclass
class Grasped:
    """A held object: the arm, its carry orientation and the object's offset from the TCP."""

    arm: ScriptedArm
    """The arm holding it."""
    frame: GripFrame
    """The orientation the gripper keeps while carrying."""
    offset: np.ndarray
    """object frame origin - TCP, world axes (constant while the orientation is)."""


def pick_up(ctx: ProbeContext, oid: str, carry: Callable[[str, GripFrame, np.ndarray], list[np.ndarray]],
            lift: float = LIFT_HEIGHT) -> Grasped:
    """Grasp `oid` and lift it by `lift`. `carry(arm, frame, planned_offset)` lists the TCP positions the
    held object must then be carried through, which must be reachable from the chosen orientation."""
    world = ctx.world
    p0 = np.asarray(world.object_pose(oid).p, dtype=np.float64)
    plans = {arm: grasp_plan(world, oid, arm, max_width(world, arm)) for arm in arms_by_distance(world, p0)}
    table_z = table_height_at(world, p0)

    def waypoints(arm: str, option: tuple[GripFrame, GripFrame]) -> list[Waypoint] | None:
        grip, hold = option
        tcp = grasp_tcp(plans[arm], grip, table_z)
        if tcp is None:
            return None
        lifted = tcp + lift * EZ
        # the object turns with the gripper about the TCP between grip and carry
        offset = _turn(grip, hold) @ (p0 - tcp)
        return [(tcp - APPROACH_DISTANCE * hold.approach, hold), (tcp, grip), (lifted, hold),
                *[(p, hold) for p in carry(arm, hold, offset)]]

    arm, (grip, hold) = choose(world, list(plans), lambda a: plans[a].options, waypoints, ctx.seed,
                               f"grasp and lift {oid}")
    ctx.arm = arm
    plan = plans[arm]
    tcp = grasp_tcp(plan, grip, table_z)
    assert tcp is not None
    mover = ScriptedArm(ctx.recorder, arm, ctx.seed)
    mover.move(tcp - APPROACH_DISTANCE * hold.approach, hold.quaternion, 1.2, width=plan.open_width)
    mover.line(tcp, 0.8, quaternion=grip.quaternion)
    mover.grip(0.0, 0.6)
    mover.line(tcp + lift * EZ, 1.0, quaternion=hold.quaternion)
    offset = np.asarray(world.object_pose(oid).p, dtype=np.float64) - mover.tcp()
    return Grasped(mover, hold, offset)


def _turn(a: GripFrame, b: GripFrame) -> np.ndarray:
    """The rotation (world axes) taking orientation `a` to `b`."""
    ra, rb = quat_to_matrix(a.quaternion), quat_to_matrix(b.quaternion)
    return rb @ ra.T


def _tilt_of(quaternion: np.ndarray) -> float:
    return math.acos(max(-1.0, min(1.0, float(quat_to_matrix(quaternion)[2, 2]))))


# --- the probes ------------------------------------------------------------------------------------


def probe_grasp_lift(ctx: ProbeContext) -> Outcome:
    """Grasp the item, lift it by LIFT_HEIGHT and hold for `hold_s`; measure the lowest height gained."""
    oid = ctx.objects["item"]
    z0 = float(object_centre(ctx.world, oid)[2])
    held = pick_up(ctx, oid, lambda arm, frame, offset: [])
    start = ctx.recorder.steps
    held.arm.hold(ctx.thresholds["hold_s"])
    recording = ctx.recorder.finish()
    lift = float(centre_heights(ctx.world, recording, oid)[start:].min()) - z0
    width = float(recording.gripper_openings[-1, recording.grippers.index(held.arm.arm)])
    measured = {"lift_m": lift, "hold_s": (recording.steps - start) / CONTROL_HZ, "gripper_opening_m": width}
    need = ctx.thresholds["min_lift_m"]
    if lift >= need:
        return Outcome(True, measured, f"{oid} held {lift * 100:.1f} cm up for {ctx.thresholds['hold_s']:g} s "
                                       f"(>= {need * 100:.1f} cm)")
    return Outcome(False, measured, f"{oid} was only {lift * 100:.1f} cm up at its lowest during the "
                                    f"{ctx.thresholds['hold_s']:g} s hold (needs >= {need * 100:.1f} cm): the grasp slipped "
                                    f"or missed (gripper closed to {width * 1000:.0f} mm)")


def probe_slide(ctx: ProbeContext) -> Outcome:
    """Push the item along the table, away from the arm's base, with the closed gripper's fingers low."""
    world, oid = ctx.world, ctx.objects["item"]
    p0 = np.asarray(world.object_pose(oid).p, dtype=np.float64)
    c0 = object_centre(world, oid)
    table_z = table_height_at(world, p0)
    push = 0.02 + 0.07  # close the 2 cm gap, then push 7 cm

    sphere = world.grounding.object(oid).kind == "sphere"

    def start_tcp(arm: str, frame: GripFrame) -> np.ndarray:
        heading = heading_from(world, arm, p0)
        if sphere:
            # a ball is pushed by the fingertips' end face, the gripper pointing (nearly) along the
            # push: the face then meets it near its equator. Pushed by the sloping side of leaning
            # fingers instead, it would climb onto them (or be wedged against the table)
            radius = extent_along(world, oid, heading)
            return c0 - (radius + PAD_HALF_LENGTH) * frame.approach - 0.02 * heading
        y = np.cross(frame.approach, frame.closing)
        front = PAD_HALF_LENGTH * abs(float(np.dot(frame.approach, heading))) + FINGER_HALF_WIDTH * abs(float(np.dot(y, heading)))
        tcp = p0 - (extent_along(world, oid, heading) + 0.02 + front) * heading
        tcp[2] = table_z + fingertip_tcp_height(frame)
        return tcp

    def frames(arm: str) -> list[GripFrame]:
        heading = heading_from(world, arm, p0)
        tilts = (90.0, 80.0, 70.0, 60.0) if sphere else (45.0, 30.0, 60.0, 15.0, 75.0)
        return lean_frames(heading, [np.cross(EZ, heading)], tilts)

    def waypoints(arm: str, frame: GripFrame) -> list[Waypoint]:
        tcp = start_tcp(arm, frame)
        heading = heading_from(world, arm, p0)
        path = [tcp + 0.06 * EZ, tcp, tcp + push * heading, tcp + push * heading + 0.06 * EZ]
        return [(p, frame) for p in path]

    arm, frame = choose(world, arms_by_distance(world, p0), frames, waypoints, ctx.seed, f"push {oid} along the table")
    ctx.arm = arm
    heading = heading_from(world, arm, p0)
    tcp = start_tcp(arm, frame)
    mover = ScriptedArm(ctx.recorder, arm, ctx.seed)
    mover.move(tcp + 0.06 * EZ, frame.quaternion, 1.2, width=0.0)
    mover.line(tcp, 0.6)
    mover.line(tcp + push * heading, 1.5)
    mover.line(tcp + push * heading + 0.06 * EZ, 0.6)
    mover.hold(0.5)
    c1 = object_centre(world, oid)  # the centre: a rolling ball's frame origin turns with it
    moved = float(np.dot(c1 - c0, heading))
    dz = abs(float(c1[2] - c0[2]))
    measured = {"pushed_m": moved, "height_change_m": dz}
    need, max_dz = ctx.thresholds["min_push_m"], ctx.thresholds["max_height_change_m"]
    if moved >= need and dz <= max_dz:
        return Outcome(True, measured, f"{oid} slid {moved * 100:.1f} cm along the table (>= {need * 100:.1f} cm)")
    if moved < need:
        return Outcome(False, measured, f"{oid} moved only {moved * 100:.1f} cm along the push (needs >= {need * 100:.1f} cm)")
    return Outcome(False, measured, f"{oid} left the table plane by {dz * 1000:.1f} mm while pushed (allowed {max_dz * 1000:.1f} mm)")


def probe_nest(ctx: ProbeContext) -> Outcome:
    """Pick the inner cup, release it just above the outer cup's rim, centred, and let it settle."""
    world = ctx.world
    inner_id, outer_id = ctx.objects["inner"], ctx.objects["outer"]
    inner, outer = world.grounding.object(inner_id), world.grounding.object(outer_id)
    outer_p, outer_r = object_axes(world, outer_id)
    rim = outer_p + outer_r @ np.array([0.0, 0.0, outer.height.value])
    drop_at = rim + np.array([0.0, 0.0, 0.015])  # the inner cup's bottom, over the outer's axis

    def carry(arm: str, frame: GripFrame, offset: np.ndarray) -> list[np.ndarray]:
        over = drop_at - offset
        return [over + 0.04 * EZ, over, over + 0.06 * EZ]

    held = pick_up(ctx, inner_id, carry)
    over = drop_at - held.offset
    held.arm.line(over + 0.04 * EZ, 2.0)  # a straight carry: a joint-space one can dip into the cup
    held.arm.line(over, 0.6)
    held.arm.hold(0.3)
    held.arm.grip(held.arm.max_width, 0.4)
    held.arm.line(over + 0.06 * EZ, 0.6)
    start = ctx.recorder.steps
    settle = max(1.0, ctx.thresholds["stable_s"] + 0.5)
    held.arm.hold(settle)
    recording = ctx.recorder.finish()
    poses = recording.object_poses(inner_id)
    final = poses[-1]
    o_p, o_r = object_axes(world, outer_id)
    local = o_r.T @ (final[:3] - o_p)  # the inner cup's bottom centre in the outer cup's frame
    radial = float(np.hypot(local[0], local[1]))
    play = outer.outer_radius.value - outer.wall_thickness.value - inner.outer_radius.value
    top = local[2] + inner.height.value
    window = max(1, round(ctx.thresholds["stable_s"] * CONTROL_HZ))
    speeds = np.linalg.norm(recording.objects[-window:, recording.object_ids.index(inner_id), 7:10], axis=1)
    speed = float(speeds.max())
    tilt = _tilt_of(final[3:7])
    measured = {"radial_offset_m": radial, "radial_play_m": play, "bottom_above_outer_base_m": float(local[2]),
                "top_below_rim_m": outer.height.value - top, "tilt_rad": tilt, "max_speed_m_s": speed,
                "settle_s": (recording.steps - start) / CONTROL_HZ}
    problems = []
    if radial > play + 0.001 or local[2] > outer.height.value:
        problems.append(f"{inner_id} is not inside {outer_id} (axis {radial * 1000:.1f} mm off, play "
                        f"{play * 1000:.1f} mm; bottom {local[2] * 1000:.0f} mm above the outer base)")
    if top > outer.height.value:
        problems.append(f"its top is {(top - outer.height.value) * 1000:.1f} mm above the rim")
    if tilt > ctx.thresholds["max_tilt_rad"]:
        problems.append(f"it tilts {tilt:.2f} rad (allowed {ctx.thresholds['max_tilt_rad']:g})")
    if speed > ctx.thresholds["max_speed_m_s"]:
        problems.append(f"it still moves at {speed * 1000:.1f} mm/s (allowed {ctx.thresholds['max_speed_m_s'] * 1000:g})")
    if problems:
        return Outcome(False, measured, "; ".join(problems))
    return Outcome(True, measured, f"{inner_id} rests inside {outer_id}, {measured['top_below_rim_m'] * 1000:.0f} mm below "
                                   f"the rim, upright and still")


def probe_drawer(ctx: ProbeContext) -> Outcome:
    """Grasp the handle bar, pull the drawer out to `PULL_FRACTION` of its travel, push it closed, let go."""
    world, cid = ctx.world, ctx.objects["cabinet"]
    obj = world.object(cid)
    cabinet = world.grounding.object(cid)
    assert obj.articulation is not None
    geometry = drawer_geometry(cabinet)
    bar = next(s for s in geometry.drawer if s.part == "handle")
    link = obj.articulation.links[1]
    link_pose = link.entity_pose.to_transformation_matrix()
    bar_world = (link_pose @ np.array([*bar.position, 1.0]))[:3]
    out = unit(link_pose[:3, 0])  # the drawer slides out along its +x
    along = link_pose[:3, 1]  # the bar runs along the drawer's y
    travel = cabinet.drawer_travel.value
    opening0 = world.joint_value(f"{cid}.drawer")
    pull = max(0.0, PULL_FRACTION * travel - opening0)
    gap = float(bar.size[0])  # half the bar's depth
    # how far the fingertips may go past the bar's centre towards the drawer front
    room = cabinet.handle_protrusion.value - gap

    def tcp_for(frame: GripFrame) -> np.ndarray:
        """The TCP on the bar's centre, backed off along the approach so that the fingertips stop
        3 mm short of the drawer front."""
        inward = float(np.dot(frame.approach, -out))  # how much the approach points into the front
        overshoot = PAD_HALF_LENGTH * inward - (room - 0.003)
        if overshoot <= 0 or inward <= 1e-6:
            return bar_world
        return bar_world - overshoot / inward * frame.approach

    def frames(arm: str) -> list[GripFrame]:
        # the approach turns about the bar, from straight down to pointing into the drawer front
        return roll_frames(along, -out, (0.0, 90.0, 45.0, 30.0, 60.0, 15.0, 75.0))

    def waypoints(arm: str, frame: GripFrame) -> list[Waypoint]:
        tcp = tcp_for(frame)
        path = [tcp - 0.06 * frame.approach, tcp, tcp + pull * out, tcp, tcp - 0.06 * frame.approach]
        return [(p, frame) for p in path]

    arm, frame = choose(world, arms_by_distance(world, bar_world), frames, waypoints, ctx.seed,
                        f"pull {cid}'s handle")
    ctx.arm = arm
    tcp = tcp_for(frame)
    # open just enough around the bar's square section (the inner finger must fit between bar and front)
    open_width = min(max_width(world, arm), 2 * gap * (abs(frame.closing @ out) + abs(frame.closing[2])) + 0.006)
    mover = ScriptedArm(ctx.recorder, arm, ctx.seed)
    mover.move(tcp - 0.06 * frame.approach, frame.quaternion, 1.2, width=open_width)
    mover.line(tcp, 0.6)
    mover.grip(0.0, 0.5)
    mover.line(tcp + pull * out, 2.0)
    mover.hold(0.3)
    opened = float(ctx.recorder.finish().joint_values[-1, ctx.recorder.joint_value_names.index(f"{cid}.drawer")])
    mover.line(tcp, 2.0)
    mover.grip(open_width, 0.4)
    mover.line(tcp - 0.06 * frame.approach, 0.6)
    mover.hold(0.5)
    recording = ctx.recorder.finish()
    values = recording.joint_values[:, recording.joint_value_names.index(f"{cid}.drawer")]
    peak, final = float(values.max()), float(values[-1])
    fraction = peak / travel
    measured = {"max_opening_m": peak, "open_fraction": fraction, "opening_after_pull_m": opened,
                "final_opening_m": final, "travel_m": travel}
    need, closed = ctx.thresholds["min_open_fraction"], ctx.thresholds["max_closed_m"]
    problems = []
    if fraction < need:
        problems.append(f"the drawer opened only {fraction * 100:.0f}% of its travel (needs >= {need * 100:.0f}%)")
    if final > closed:
        problems.append(f"it ended {final * 1000:.1f} mm open after closing (allowed {closed * 1000:.1f} mm)")
    if problems:
        return Outcome(False, measured, "; ".join(problems))
    return Outcome(True, measured, f"the drawer opened to {fraction * 100:.0f}% of its travel and closed to "
                                   f"{final * 1000:.1f} mm")


def probe_weigh(ctx: ProbeContext) -> Outcome:
    """Pick the item, set it on the middle of the scale's plate, let go, wait; compare the reading."""
    world = ctx.world
    item_id, scale_id = ctx.objects["item"], ctx.objects["scale"]
    item, scale = world.grounding.object(item_id), world.grounding.object(scale_id)
    s_p, s_r = object_axes(world, scale_id)
    plate_top = s_p + s_r @ np.array([0.0, 0.0, scale.body_height.value + scale.plate.z.value])

    def place_at(arm: str) -> np.ndarray:
        """Where the item's frame origin (on its resting face) goes: just above the plate, on the
        plate's side nearest the arm, but with the whole item on the plate."""
        heading = heading_from(world, arm, plate_top)
        half = 0.5 * (abs(float(np.dot(s_r[:, 0], heading))) * scale.plate.x.value
                      + abs(float(np.dot(s_r[:, 1], heading))) * scale.plate.y.value)
        shift = max(0.0, half - extent_along(world, item_id, heading) - 0.015)
        return plate_top - shift * heading + np.array([0.0, 0.0, 0.004])

    def carry(arm: str, frame: GripFrame, offset: np.ndarray) -> list[np.ndarray]:
        over = place_at(arm) - offset
        return [over + 0.05 * EZ, over, over + 0.05 * EZ - 0.03 * frame.approach]

    held = pick_up(ctx, item_id, carry)
    over = place_at(held.arm.arm) - held.offset
    held.arm.line(over + 0.05 * EZ, 2.0)  # a straight carry: a joint-space one can dip into the scale
    held.arm.line(over, 0.6)
    held.arm.hold(0.2)
    held.arm.grip(held.arm.max_width, 0.5)
    held.arm.line(over + 0.05 * EZ - 0.03 * held.frame.approach, 0.6)
    settle = ctx.thresholds["settle_s"]
    held.arm.hold(settle)
    recording = ctx.recorder.finish()
    window = max(1, round(ctx.thresholds["window_s"] * CONTROL_HZ))
    reading = float(recording.scale_readings[-window:, recording.scale_ids.index(scale_id)].mean())
    expected = 1000.0 * item.mass.value
    error = abs(reading - expected) / expected
    measured = {"reading_g": reading, "expected_g": expected, "relative_error": error}
    limit = ctx.thresholds["max_relative_error"]
    if error <= limit:
        return Outcome(True, measured, f"the scale read {reading:.1f} g for {item_id} ({expected:.1f} g expected, "
                                       f"{error * 100:.1f}% off)")
    return Outcome(False, measured, f"the scale read {reading:.1f} g for {item_id}, {error * 100:.1f}% off the expected "
                                    f"{expected:.1f} g (allowed {limit * 100:.0f}%)")


def probe_strike(ctx: ProbeContext) -> Outcome:
    """Strike the drum head with the fingertips `strikes` times; count the recorded contacts per strike."""
    world, did = ctx.world, ctx.objects["instrument"]
    drum = world.grounding.object(did)
    p, r = object_axes(world, did)
    head_centre = p + r @ np.array([0.0, 0.0, drum.height.value])
    strikes = int(ctx.thresholds["strikes"])

    def spot(arm: str) -> np.ndarray:
        # halfway from the head's centre towards the arm: inside the head, nearer the arm
        return head_centre - 0.5 * drum.head_radius.value * heading_from(world, arm, head_centre)

    def tip_tcp(arm: str, frame: GripFrame, height: float) -> np.ndarray:
        return spot(arm) + height * EZ - PAD_HALF_LENGTH * frame.approach

    def frames(arm: str) -> list[GripFrame]:
        heading = heading_from(world, arm, head_centre)
        return lean_frames(heading, [np.cross(EZ, heading)], (45.0, 30.0, 60.0, 15.0, 75.0, 0.0))

    def waypoints(arm: str, frame: GripFrame) -> list[Waypoint]:
        return [(tip_tcp(arm, frame, 0.06), frame), (tip_tcp(arm, frame, -0.01), frame)]

    arm, frame = choose(world, arms_by_distance(world, head_centre), frames, waypoints, ctx.seed, f"strike {did}'s head")
    ctx.arm = arm
    mover = ScriptedArm(ctx.recorder, arm, ctx.seed)
    mover.move(tip_tcp(arm, frame, 0.06), frame.quaternion, 1.2, width=0.0)
    windows = []
    for _ in range(strikes):
        first = ctx.recorder.steps
        mover.line(tip_tcp(arm, frame, -0.01), 0.34)  # down into the head: the head stops the fingers
        mover.line(tip_tcp(arm, frame, 0.06), 0.24)
        windows.append((first, ctx.recorder.steps - 1))
    mover.hold(0.2)
    recording = ctx.recorder.finish()
    aliases = world.body_aliases()
    gripper = aliases[f"{arm}.gripper"]
    head = {f"{did}.head"}
    contacts = merged_contacts(recording.contacts, gripper, head)
    per_strike = [sum(1 for s, e in contacts if first <= s and (e if e is not None else recording.steps) <= last)
                  for first, last in windows]
    other = [e for e in recording.contacts if f"{did}.head" in (e.a, e.b) and not ({e.a, e.b} - head) <= gripper]
    measured = {"strikes": float(strikes), "contacts": float(len(contacts)),
                "strikes_with_one_contact": float(sum(1 for n in per_strike if n == 1)),
                "other_head_contacts": float(len(other))}
    if len(contacts) == strikes and all(n == 1 for n in per_strike):
        return Outcome(True, measured, f"{strikes} strikes of {arm}.gripper on {did}.head gave {strikes} contacts, one per strike")
    return Outcome(False, measured, f"{strikes} strikes gave {len(contacts)} gripper contacts on {did}.head "
                                    f"(per strike: {per_strike}; exactly one each is required)")


PROBES: dict[str, ProbeScript] = {
    "grasp_lift": ProbeScript("grasp_lift", ("item",), ("min_lift_m", "hold_s"), probe_grasp_lift),
    "slide": ProbeScript("slide", ("item",), ("min_push_m", "max_height_change_m"), probe_slide),
    "nest": ProbeScript("nest", ("inner", "outer"), ("max_tilt_rad", "max_speed_m_s", "stable_s"), probe_nest),
    "drawer": ProbeScript("drawer", ("cabinet",), ("min_open_fraction", "max_closed_m"), probe_drawer),
    "weigh": ProbeScript("weigh", ("item", "scale"), ("max_relative_error", "settle_s", "window_s"), probe_weigh),
    "strike": ProbeScript("strike", ("instrument",), ("strikes",), probe_strike),
}
"""Every probe script, by name."""


def run_probe(grounding: Grounding, call: ProbeCall, thresholds: dict[str, float],
              settings: WorldSettings | None = None, seed: int = 0) -> ProbeResult:
    """Build a fresh world from `grounding` with `settings`, run one probe in it and report.

    A probe whose motion has no IK solution fails as `unreachable`; one whose measurements miss a
    threshold fails as `measured`."""
    script = PROBES.get(call.probe)
    if script is None:
        raise KeyError(f"no probe script {call.probe!r}; scripts: {sorted(PROBES)}")
    missing = sorted(set(script.roles) - set(call.objects))
    if missing:
        raise ValueError(f"probe {call.probe} needs roles {missing}")
    world = build_world(grounding, settings=settings)
    recorder = Recorder(world, control_hz=CONTROL_HZ)
    ctx = ProbeContext(world, dict(call.objects), dict(thresholds), recorder, seed)
    try:
        outcome = script.run(ctx)
    except MotionError as err:
        return ProbeResult(probe=call.probe, objects=call.objects, arm=ctx.arm, passed=False, failure="unreachable",
                           thresholds=thresholds, reason=f"the scripted motion is impossible here: {err}",
                           sim_seconds=recorder.steps / CONTROL_HZ)
    return ProbeResult(probe=call.probe, objects=call.objects, arm=ctx.arm, passed=outcome.passed,
                       failure=None if outcome.passed else "measured",
                       measured={k: float(v) for k, v in outcome.measured.items()}, thresholds=thresholds,
                       reason=outcome.reason, sim_seconds=recorder.steps / CONTROL_HZ)
