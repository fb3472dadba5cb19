"""Grasp geometry for the probes: gripper orientations that keep the finger pads upright while the
gripper leans to reach further, where the TCP goes to grip an object of each kind (clear of the
table, the gripper housing clear of the object, the pads on the part of the object that can be
gripped), and whether an arm can follow a sequence of straight-line waypoints.

Gripper dimensions are the PiPER's (`datafarm.sim.robots.piper`): the probes drive the builtin arms.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TypeVar

import numpy as np
import sapien

from datafarm.sim.qualification.motion import MAX_WAYPOINT_JUMP, MotionError, slerp
from datafarm.sim.recording import Recording
from datafarm.sim.robots.piper import FINGER_LENGTH, FINGER_THICKNESS, FINGER_WIDTH
from datafarm.sim.world import World
from datafarm.sim.world.frames import matrix_to_quat, quat_to_matrix

T = TypeVar("T")

PAD_HALF_LENGTH = FINGER_LENGTH / 2
"""Half the finger pad length along the approach axis: the fingertips lie this far beyond the TCP."""
FINGER_HALF_WIDTH = FINGER_WIDTH / 2
"""Half the finger width across the closing axis."""
TABLE_CLEARANCE = 0.006
"""Lowest the fingertips go above the table top, metres."""
GRIP_MARGIN = 0.012
"""Extra opening around an object's width before a grasp, metres (the fingers open at most fully)."""
HOUSING_FRONT = 0.025
"""Distance from the TCP back to the gripper housing's front face along the approach (PiPER link6:
the pads start at 0.135 m, the housing box ends at 0.13 m, the TCP is at 0.155 m)."""
HOUSING_HALF = (0.045, 0.025, 0.0625)
"""Half extents of the housing box along the closing axis, across it, and along the approach."""
TILTS_DEG = (0.0, 15.0, 30.0, 45.0, 60.0, 75.0)
"""Gripper lean angles tried for a grasp, least tilted first."""

EZ = np.array([0.0, 0.0, 1.0])


def unit(v: np.ndarray) -> np.ndarray:
    """`v` scaled to length 1."""
    return v / np.linalg.norm(v)


def tcp_quaternion(approach: np.ndarray, closing: np.ndarray) -> np.ndarray:
    """TCP quaternion whose z axis is `approach` (out of the gripper) and x axis `closing` (the
    direction the fingers open along; made perpendicular to `approach`)."""
    z = unit(np.asarray(approach, dtype=np.float64))
    x = np.asarray(closing, dtype=np.float64)
    x = unit(x - z * float(np.dot(z, x)))
    return matrix_to_quat(np.column_stack([x, np.cross(z, x), z]))


@dataclass(frozen=True)
class GripFrame:
    """A gripper orientation: approach axis, closing axis and its quaternion."""

    approach: np.ndarray
    """Unit vector out of the gripper (TCP z)."""
    closing: np.ndarray
    """Unit vector the fingers open along (TCP x)."""
    tilt: float
    """Lean from straight down, radians."""

    @property
    def quaternion(self) -> np.ndarray:
        """The TCP quaternion (w, x, y, z)."""
        return tcp_quaternion(self.approach, self.closing)


def lean_frames(heading: np.ndarray, closings: Sequence[np.ndarray], tilts_deg: Iterable[float]) -> list[GripFrame]:
    """Grip frames whose approach leans from straight down by each tilt about a horizontal closing
    axis (the pads stay upright), towards `heading` (away from the arm's base); least tilted first."""
    frames = []
    for tilt_deg in tilts_deg:
        t = math.radians(tilt_deg)
        for closing in closings:
            c = unit(np.array([closing[0], closing[1], 0.0]))
            lean = np.cross(EZ, c)
            if float(np.dot(lean, heading)) < 0:
                lean = -lean
            approach = -math.cos(t) * EZ + math.sin(t) * lean
            # the gripper is symmetric: turned half a turn about its approach it grips the same way,
            # but the wrist may be far from its limit in only one of the two
            frames += [GripFrame(approach, c, t), GripFrame(approach, -c, t)]
    return frames


def roll_frames(axis: np.ndarray, heading: np.ndarray, tilts_deg: Iterable[float]) -> list[GripFrame]:
    """Grip frames for a horizontal bar or lying cylinder along `axis`: the approach turns about the
    axis (down, leaning towards `heading`), the fingers close across it."""
    u = unit(np.array([axis[0], axis[1], 0.0]))
    lean = np.cross(EZ, u)
    if float(np.dot(lean, heading)) < 0:
        lean = -lean
    frames = []
    for tilt_deg in tilts_deg:
        t = math.radians(tilt_deg)
        a = -math.cos(t) * EZ + math.sin(t) * lean
        c = unit(np.cross(u, a))
        frames += [GripFrame(a, c, t), GripFrame(a, -c, t)]
    return frames


def fingertip_tcp_height(frame: GripFrame, clearance: float = TABLE_CLEARANCE) -> float:
    """Lowest TCP height above the table that keeps the fingertips `clearance` above it."""
    y = np.cross(frame.approach, frame.closing)
    return clearance + PAD_HALF_LENGTH * abs(float(frame.approach[2])) + FINGER_HALF_WIDTH * abs(float(y[2])) \
        + FINGER_THICKNESS * abs(float(frame.closing[2]))


@dataclass(frozen=True)
class GraspPlan:
    """How to grasp one object: its shape as the gripper sees it, the candidate orientations and
    how wide to open."""

    point: np.ndarray
    """World point the TCP aims at: on the object's axis, at the height its sides are gripped."""
    options: list[tuple[GripFrame, GripFrame]]
    """Candidate (grip, carry) orientations, least tilted first: the gripper closes in the grip
    orientation and turns to the carry orientation as it lifts (they differ only for a lying
    cylinder, gripped with the pads upright and then rolled about its own axis, which reaches higher)."""
    open_width: float
    """Gripper opening on the way in, metres."""
    radius: float
    """Radius of a vertical cylinder around the object's axis that contains it, metres."""
    top: float
    """Height of the object's top, world z."""
    band: tuple[float, float]
    """Heights between which the finger pads must touch the object (a sphere: around its equator)."""
    round: bool = False
    """The object is a ball of `radius` around `point`'s axis at its equator (else an upright cylinder
    of `radius` up to `top`), for the housing clearance check."""


def object_axes(world: World, oid: str) -> tuple[np.ndarray, np.ndarray]:
    """World position of an object's frame and its rotation matrix."""
    pose = world.object_pose(oid)
    return np.asarray(pose.p, dtype=np.float64), quat_to_matrix(pose.q)


def heading_from(world: World, arm: str, point: np.ndarray) -> np.ndarray:
    """Horizontal unit vector from `arm`'s base towards `point`."""
    base = np.asarray(world.robot.base_pose(arm).p, dtype=np.float64)
    d = np.array([point[0] - base[0], point[1] - base[1], 0.0])
    return unit(d) if np.linalg.norm(d) > 1e-9 else np.array([1.0, 0.0, 0.0])


def _same(frames: list[GripFrame]) -> list[tuple[GripFrame, GripFrame]]:
    return [(f, f) for f in frames]


def object_centre(world: World, oid: str) -> np.ndarray:
    """The middle of an object's body (its frame origin lies on the face it rests on), world."""
    obj = world.grounding.object(oid)
    p, r = object_axes(world, oid)
    half = {"box": lambda: obj.size.z.value / 2, "sphere": lambda: obj.radius.value,
            "cylinder": lambda: obj.height.value / 2, "cup": lambda: obj.height.value / 2}
    return p + r @ np.array([0.0, 0.0, half.get(obj.kind, lambda: 0.0)()])


def centre_heights(world: World, recording: Recording, oid: str) -> np.ndarray:
    """(steps,) recorded height of the object's centre (see `object_centre`)."""
    p, r = object_axes(world, oid)
    local = r.T @ (object_centre(world, oid) - p)
    poses = recording.object_poses(oid)
    return np.array([row[2] + (quat_to_matrix(row[3:7]) @ local)[2] for row in poses])


def grasp_plan(world: World, oid: str, arm: str, max_width: float) -> GraspPlan:
    """Grasp point, orientations and opening for object `oid` with `arm` (box across a side that fits;
    cylinder, cup and sphere across their diameter; a lying cylinder across its axis)."""
    obj = world.grounding.object(oid)
    p, r = object_axes(world, oid)
    heading = heading_from(world, arm, p)
    perpendicular = np.cross(EZ, heading)
    spread = [perpendicular] + [_rotate_z(perpendicular, math.radians(a)) for a in (30, -30, 60, -60)]
    bottom = float(p[2])
    if obj.kind == "box":
        sx, sy, sz = obj.size.x.value, obj.size.y.value, obj.size.z.value
        sides = sorted([(sx, r[:, 0]), (sy, r[:, 1])], key=lambda s: -abs(float(np.dot(np.cross(EZ, s[1]), heading))))
        closings = [axis for width, axis in sides if width + 0.004 <= max_width]
        width = min((w for w, _ in sides if w + 0.004 <= max_width), default=min(sx, sy))
        return GraspPlan(p + r @ np.array([0.0, 0.0, sz / 2]), _same(lean_frames(heading, closings, TILTS_DEG)),
                         min(max_width, width + GRIP_MARGIN), 0.5 * math.hypot(sx, sy), bottom + sz, (bottom, bottom + sz))
    if obj.kind == "sphere":
        radius = obj.radius.value
        equator = bottom + radius
        return GraspPlan(p + np.array([0.0, 0.0, radius]), _same(lean_frames(heading, spread, TILTS_DEG)),
                         min(max_width, 2 * radius + GRIP_MARGIN), radius, bottom + 2 * radius,
                         (equator - 0.2 * radius, equator + 0.2 * radius), round=True)
    if obj.kind == "cup":
        radius, height = obj.outer_radius.value, obj.height.value
        return GraspPlan(p + r @ np.array([0.0, 0.0, 0.65 * height]), _same(lean_frames(heading, spread, TILTS_DEG)),
                         min(max_width, 2 * radius + GRIP_MARGIN), radius, bottom + height, (bottom, bottom + height))
    if obj.kind == "cylinder":
        radius, height = obj.radius.value, obj.height.value
        centre = p + r @ np.array([0.0, 0.0, height / 2])
        axis = r[:, 2]
        if abs(float(axis[2])) > math.cos(math.radians(30)):  # standing
            return GraspPlan(centre, _same(lean_frames(heading, spread, TILTS_DEG)), min(max_width, 2 * radius + GRIP_MARGIN),
                             radius, bottom + height, (bottom, bottom + height))
        # lying: grip with the pads upright, reaching down beside it; then roll it about its own axis
        grips = roll_frames(axis, heading, (0.0,))
        carries = roll_frames(axis, heading, TILTS_DEG)
        options = [(grips[k % 2], carry) for k, carry in enumerate(carries)]  # same closing sign
        axis_z = float(centre[2])
        return GraspPlan(centre, options, max_width, 0.0, axis_z + radius, (axis_z - 0.5 * radius, axis_z + 0.5 * radius))
    raise ValueError(f"object {oid} of kind {obj.kind} cannot be grasped by a probe")


def _rotate_z(v: np.ndarray, angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([c * v[0] - s * v[1], s * v[0] + c * v[1], v[2]])


def housing_points(tcp: np.ndarray, frame: GripFrame) -> np.ndarray:
    """(n, 3) points on the gripper housing (PiPER link6's box) for a TCP at `tcp` in `frame`."""
    y = np.cross(frame.approach, frame.closing)
    grid = np.array([(i, j, k) for i in (-1, 0, 1) for j in (-1, 0, 1) for k in (0, 1)], dtype=np.float64)
    local = grid * np.array([HOUSING_HALF[0], HOUSING_HALF[1], HOUSING_HALF[2]])
    local[:, 2] = -HOUSING_FRONT - 2 * HOUSING_HALF[2] * grid[:, 2]  # front face, then the back
    return tcp + local[:, :1] * frame.closing + local[:, 1:2] * y + local[:, 2:] * frame.approach


def grasp_tcp(plan: GraspPlan, frame: GripFrame, table_z: float) -> np.ndarray | None:
    """The TCP position of a grasp in `frame`: on the object's axis, as deep as the gripper housing
    allows (it must stay above the object's top over its footprint) with the fingertips above the
    table and the pads covering the band where the object must be gripped; None when no height
    satisfies all three."""
    axis_xy = plan.point[:2]
    pad_reach = PAD_HALF_LENGTH * abs(float(frame.approach[2]))  # pads span +-this in z around the TCP
    lowest = max(plan.band[0] - pad_reach, table_z + fingertip_tcp_height(frame))
    highest = plan.band[1] + pad_reach - 0.004
    z = max(float(plan.point[2]), lowest)
    while z <= highest + 1e-9:
        tcp = np.array([axis_xy[0], axis_xy[1], z])
        points = housing_points(tcp, frame)
        if plan.round:
            centre = np.array([axis_xy[0], axis_xy[1], plan.top - plan.radius])
            clear = bool(np.linalg.norm(points - centre, axis=1).min() >= plan.radius + 0.002)
        else:
            over = np.linalg.norm(points[:, :2] - axis_xy, axis=1) < plan.radius + 0.002
            clear = not over.any() or bool(points[over, 2].min() >= plan.top + 0.002)
        if clear:
            return tcp
        z += 0.002
    return None


Waypoint = tuple[np.ndarray, GripFrame]
"""A TCP position and the gripper orientation there."""


def reachable(world: World, arm: str, waypoints: Sequence[Waypoint], seed: int) -> bool:
    """Whether the arm can go to the first waypoint and then along straight lines (orientation
    turning evenly) through the others: IK every centimetre, each solved from the previous joints,
    with no joint jumping more than `MAX_WAYPOINT_JUMP`, as `ScriptedArm.line` will go."""
    robot = world.robot
    q = robot.qpos(arm)

    def solve(position: np.ndarray, quaternion: np.ndarray, restarts: int) -> np.ndarray | None:
        pose = sapien.Pose(np.asarray(position, dtype=np.float64), quaternion)
        result = robot.ik(arm, pose, q_init=q, restarts=0, seed=seed)
        if not result.success and restarts:
            result = robot.ik(arm, pose, q_init=q, restarts=restarts, seed=seed)
        return np.asarray(result.q, dtype=np.float64) if result.success else None

    first = solve(waypoints[0][0], waypoints[0][1].quaternion, 16)
    if first is None:
        return False
    q = first
    for (p0, f0), (p1, f1) in pairwise(waypoints):
        q0, q1 = f0.quaternion, f1.quaternion
        n = max(1, math.ceil(max(float(np.linalg.norm(p1 - p0)) / 0.01, _angle(q0, q1) / 0.1)))
        for k in range(1, n + 1):
            s = k / n
            solution = solve(p0 + s * (p1 - p0), slerp(q0, q1, s), 8)
            if solution is None or np.abs(solution - q).max() > MAX_WAYPOINT_JUMP:
                return False
            q = solution
    return True


def _angle(q0: np.ndarray, q1: np.ndarray) -> float:
    return 2.0 * math.acos(min(1.0, abs(float(np.dot(q0, q1)))))


def choose(world: World, arms: Sequence[str], options_for: Callable[[str], Sequence[T]],
           waypoints_for: Callable[[str, T], list[Waypoint] | None], seed: int, what: str) -> tuple[str, T]:
    """The first (arm, option) for which every waypoint is reachable, arms in the order given and
    options (orientations) in their order (`waypoints_for` returns None for an option that cannot
    work at all); MotionError naming `what` when there is none."""
    for arm in arms:
        for option in options_for(arm):
            waypoints = waypoints_for(arm, option)
            if waypoints is not None and reachable(world, arm, waypoints, seed):
                return arm, option
    raise MotionError(f"no arm of the robot can {what} from any gripper orientation tried "
                      f"(tilts {', '.join(f'{t:g}' for t in TILTS_DEG)} deg)")


def arms_by_distance(world: World, point: np.ndarray) -> list[str]:
    """The robot's arms with a gripper, nearest base (in the table plane) first."""
    arms = [a for a in world.robot.arms if world.robot.gripper(a) is not None]
    return sorted(arms, key=lambda a: float(np.linalg.norm(np.asarray(world.robot.base_pose(a).p)[:2] - point[:2])))


def table_height_at(world: World, point: np.ndarray) -> float:
    """Height of the table top under `point` (world z)."""
    top = world.world_from_table_top
    normal, origin = top[:3, 2], top[:3, 3]
    return float(origin[2] - (normal[0] * (point[0] - origin[0]) + normal[1] * (point[1] - origin[1])) / normal[2])


def max_width(world: World, arm: str) -> float:
    """The arm's widest gripper opening."""
    gripper = world.robot.gripper(arm)
    return float(gripper.max_width) if gripper is not None else 0.0


def extent_along(world: World, oid: str, direction: np.ndarray) -> float:
    """Half the object's footprint along a horizontal direction, metres."""
    obj = world.grounding.object(oid)
    _, r = object_axes(world, oid)
    if obj.kind == "box":
        return 0.5 * (abs(float(np.dot(r[:, 0], direction))) * obj.size.x.value
                      + abs(float(np.dot(r[:, 1], direction))) * obj.size.y.value)
    if obj.kind == "cup":
        return obj.outer_radius.value
    if obj.kind == "cylinder" and abs(float(r[2, 2])) < math.cos(math.radians(30)):  # lying
        axis = r[:, 2]
        return 0.5 * abs(float(np.dot(axis, direction))) * obj.height.value + obj.radius.value
    return obj.radius.value
