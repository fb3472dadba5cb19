"""Runtime library of the builtin expert controllers: gripper geometry and the guarded motions every
family composes (pick an object, carry it, release it, move an arm back to where it started).

This file is not imported by datafarm at run time: `datafarm.agents.builtin.expert.write_controller`
copies everything below the INLINE marker into `expert/controller.py`, which runs in the sandbox with
only the standard library, numpy and K's `datafarm_expert` module, and imports what this file
imports above the marker. Above the marker are also host-only stand-ins for K's exceptions, so the
pure geometry can be imported and tested here.

Every motion goes through K's harness API. Before moving, a motion is planned: the candidate arms
and gripper orientations (nearest arm first, least tilted first) are checked with the arm's own
kinematic model (`Kinematics`, from K's table of the PiPER baked into the controller): every
waypoint needs an inverse-kinematics solution inside the joint limits, straight lines are followed
in small steps without joint jumps (as the harness checks them), and the gripper (and what it holds)
must stay clear of the other objects' boxes. The first candidate that checks out is executed; a
command the harness still refuses (`HarnessError`) changes nothing and the next candidate is tried.
When no single arm can pick and place an object, a two-arm robot hands it over (one arm sets it
down where the other can finish). `RolloutEnded` (the harness ended the rollout) always propagates.

Geometry is that of the harness's qualification probes (datafarm/sim/qualification/grasping.py), so
a controller moves the way the probes showed the simulator can: the TCP is the point between the
finger pads, its z axis the approach (out of the gripper), its x axis the closing direction.
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np


class HarnessError(Exception):
    """Host stand-in for `datafarm_expert.HarnessError` (the controller imports the real one)."""

    def __init__(self, code: str = "error", message: str = "") -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class RolloutEnded(HarnessError):
    """Host stand-in for `datafarm_expert.RolloutEnded`."""


# ==== INLINE BELOW: copied into expert/controller.py (no imports below: the controller has them) ====
EZ = np.array([0.0, 0.0, 1.0])


class StepFailed(Exception):
    """A phase of the task could not be carried out (no reachable arm or orientation, nothing caught)."""


def log(text):
    """One line to the log (stderr: stdout belongs to the harness protocol)."""
    print(f"[expert] {text}", file=sys.stderr, flush=True)


def unit(v):
    """`v` scaled to length 1."""
    v = np.asarray(v, dtype=float)
    return v / np.linalg.norm(v)


def quat_to_matrix(q):
    """3x3 rotation of a unit quaternion (w, x, y, z)."""
    w, x, y, z = (float(c) for c in q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def matrix_to_quat(m):
    """Unit quaternion (w, x, y, z), w >= 0, of a 3x3 rotation (Shepperd's method)."""
    m = np.asarray(m, dtype=float)
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    if trace > 0:
        s = 2.0 * math.sqrt(trace + 1.0)
        q = [0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s]
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        q = [(m[2, 1] - m[1, 2]) / s, 0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s]
    elif m[1, 1] > m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
        q = [(m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s]
    else:
        s = 2.0 * math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
        q = [(m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s]
    out = np.array(q) / np.linalg.norm(q)
    return -out if out[0] < 0 else out


def rotate_z(v, angle):
    """`v` turned by `angle` radians about world z."""
    c, s = math.cos(angle), math.sin(angle)
    return np.array([c * v[0] - s * v[1], s * v[0] + c * v[1], v[2]])


class Frame:
    """A gripper orientation: approach axis (TCP z, out of the gripper), closing axis (TCP x, the
    direction the fingers open along) and its lean from straight down."""

    def __init__(self, approach, closing, tilt=0.0):
        self.approach = unit(approach)
        c = np.asarray(closing, dtype=float)
        self.closing = unit(c - self.approach * float(np.dot(self.approach, c)))
        self.tilt = float(tilt)

    @property
    def matrix(self):
        """World rotation of the TCP (columns x = closing, y, z = approach)."""
        return np.column_stack([self.closing, np.cross(self.approach, self.closing), self.approach])

    @property
    def quaternion(self):
        """The TCP quaternion (w, x, y, z) as a list."""
        return [float(v) for v in matrix_to_quat(self.matrix)]

    def __repr__(self):
        return f"Frame(tilt={math.degrees(self.tilt):.0f}deg, closing={np.round(self.closing, 2).tolist()})"


def lean_frames(heading, closings, tilts_deg):
    """Orientations whose approach leans from straight down by each tilt about a horizontal closing
    axis (the pads stay upright), towards `heading` (away from the arm's base); least tilted first,
    each closing axis both ways round (the wrist may be far from its limit in only one of the two)."""
    frames = []
    for tilt_deg in tilts_deg:
        t = math.radians(tilt_deg)
        for closing in closings:
            c = unit([closing[0], closing[1], 0.0])
            lean = np.cross(EZ, c)
            if float(np.dot(lean, heading)) < 0:
                lean = -lean
            approach = -math.cos(t) * EZ + math.sin(t) * lean
            frames += [Frame(approach, c, t), Frame(approach, -c, t)]
    return frames


def roll_frames(axis, heading, tilts_deg):
    """Orientations for a horizontal bar or lying cylinder along `axis`: the approach turns about the
    axis (from straight down, leaning towards `heading`), the fingers close across it."""
    u = unit([axis[0], axis[1], 0.0])
    lean = np.cross(EZ, u)
    if float(np.dot(lean, heading)) < 0:
        lean = -lean
    frames = []
    for tilt_deg in tilts_deg:
        t = math.radians(tilt_deg)
        a = -math.cos(t) * EZ + math.sin(t) * lean
        c = unit(np.cross(u, a))
        frames += [Frame(a, c, t), Frame(a, -c, t)]
    return frames


def fingertip_tcp_height(frame, gripper, clearance):
    """Lowest TCP height above a surface that keeps the fingertips `clearance` above it."""
    y = np.cross(frame.approach, frame.closing)
    return (clearance + gripper["pad_half_length"] * abs(float(frame.approach[2]))
            + gripper["finger_half_width"] * abs(float(y[2])) + gripper["finger_thickness"] * abs(float(frame.closing[2])))


def housing_points(tcp, frame, gripper):
    """(n, 3) points on the gripper housing for a TCP at `tcp` in `frame`."""
    y = np.cross(frame.approach, frame.closing)
    hx, hy, hz = gripper["housing_half"]
    points = []
    for i in (-1, 0, 1):
        for j in (-1, 0, 1):
            for k in (0, 1):
                along = -gripper["housing_front"] - 2 * hz * k
                points.append(tcp + i * hx * frame.closing + j * hy * y + along * frame.approach)
    return np.array(points)


# --- the scene as the controller knows it ----------------------------------------------------------


class CachedRobot:
    """The harness connection with `observe()` remembered until the next command: planning reads
    the state many times, and every request counts against the harness's message budget."""

    def __init__(self, robot):
        self._robot = robot
        self._state = None

    def observe(self):
        """The state now (the harness is asked again only after a command)."""
        if self._state is None:
            self._state = self._robot.observe()
        return self._state

    def __getattr__(self, name):
        value = getattr(self._robot, name)
        if not callable(value):
            return value

        def command(*args, **kwargs):
            self._state = None
            return value(*args, **kwargs)

        command.__name__ = name
        return command


class Scene:
    """G's geometry baked into the controller (`spec`: arms, gripper, objects with kind and sizes)
    plus the state the harness reports now (`observe`): objects move per seed, so every motion is
    planned from observed poses, never from G's nominal ones."""

    def __init__(self, robot, spec, params):
        robot = CachedRobot(robot)
        self.robot = robot
        self.spec = spec
        self.params = params
        self.arms = [a for a in spec["arms"] if a in robot.arms]
        self.gripper = dict(spec["gripper"])
        widths = [robot.info["arms"][a].get("gripper_max_width") for a in self.arms]
        widths = [float(w) for w in widths if w]
        if widths:  # the harness knows the robot's real opening
            self.gripper["max_width"] = min(widths)
        self.home = {}
        self.seen = {}
        self.assumed = {}
        self.models = {}
        state = robot.observe()
        for arm in self.arms:
            self.home[arm] = list(state["arms"][arm]["q"])

    def load_points(self, oid, tcp, rotation):
        """Corners of `oid`'s boxes relative to a TCP at (`tcp`, `rotation`) that holds it now, in the
        TCP's frame (they move with the gripper while it is held)."""
        p, r = self.pose(oid)
        points = []
        for box in self.object(oid).get("boxes", []):
            c, h = np.asarray(box["centre"], dtype=float), np.asarray(box["half"], dtype=float)
            for sx in (-1, 1):
                for sy in (-1, 1):
                    for sz in (-1, 1):
                        points.append(p + r @ (c + h * np.array([sx, sy, sz])))
        return (np.array(points) - tcp) @ rotation if points else None

    def object(self, oid):
        """G's description of object `oid` (kind and sizes)."""
        return self.spec["objects"][oid]

    def pose(self, oid):
        """Observed (position, rotation matrix) of object `oid` now (or the pose assumed for it
        while planning a later step, see `assume`)."""
        if oid in self.assumed:
            return self.assumed[oid]
        obj = self.robot.observe()["objects"][oid]
        return np.array(obj["position"]), quat_to_matrix(obj["quaternion"])

    def obstacles(self, skip=None):
        """Every object's collision boxes now, as (object id, centre, rotation, half extents) in the
        world, with `obstacle_margin` added (a drawer's box slides out with its opening); `skip` is
        left out."""
        margin = self.params["obstacle_margin"]
        state = self.robot.observe()
        out = []
        for oid, spec in self.spec["objects"].items():
            if oid == skip:
                continue
            obj = state["objects"][oid]
            p, r = np.array(obj["position"]), quat_to_matrix(obj["quaternion"])
            for box in spec.get("boxes", []):
                centre = np.array(box["centre"], dtype=float)
                if box.get("slides"):
                    centre[0] += float(state["drawers"].get(oid, 0.0))
                out.append((oid, p + r @ centre, r, np.array(box["half"], dtype=float) + margin))
        # the other arms' grippers, where they are now (an arm plans around the other's hand)
        hx, hy, hz = self.gripper["housing_half"]
        for arm in self.arms:
            tcp = state["arms"][arm]["tcp"]
            p, r = np.array(tcp["position"]), quat_to_matrix(tcp["quaternion"])
            reach = self.gripper["housing_front"] + hz  # housing middle, behind the TCP
            half = np.array([max(hx, 0.5 * self.gripper["max_width"]), hy, hz + 0.5 * reach]) + margin
            out.append((f"arm:{arm}", p + r @ np.array([0.0, 0.0, -0.5 * reach]), r, half))
        return out

    def assume(self, oid, pose):
        """Plan as if `oid` stood at `pose` (position, rotation); None: where it really is."""
        if pose is None:
            self.assumed.pop(oid, None)
        else:
            self.assumed[oid] = pose

    def remember(self, oid):
        """Note where `oid` is now (see `moved`)."""
        self.seen[oid] = self.pose(oid)[0]

    def moved(self, oid):
        """Whether `oid` moved more than 5 mm since it was last remembered."""
        return oid in self.seen and float(np.linalg.norm(self.pose(oid)[0] - self.seen[oid])) > 0.005

    def centre(self, oid):
        """Observed world position of the middle of object `oid`'s body (its frame origin lies on
        the face it rests on; G says where the middle is in that frame)."""
        p, r = self.pose(oid)
        return p + r @ np.asarray(self.object(oid)["centre"], dtype=float)

    def drawer_opening(self, oid):
        """Observed opening of drawer cabinet `oid`, metres."""
        return float(self.robot.observe()["drawers"][oid])

    def tcp(self, arm):
        """Measured TCP (position, rotation matrix) of `arm`."""
        tcp = self.robot.observe()["arms"][arm]["tcp"]
        return np.array(tcp["position"]), quat_to_matrix(tcp["quaternion"])

    def base(self, arm):
        """Position of `arm`'s base (G)."""
        return np.array(self.spec["arms"][arm]["base"], dtype=float)

    def heading(self, arm, point):
        """Horizontal unit vector from `arm`'s base towards `point`."""
        d = np.asarray(point, dtype=float) - self.base(arm)
        d[2] = 0.0
        return unit(d) if np.linalg.norm(d) > 1e-9 else np.array([1.0, 0.0, 0.0])

    def arms_for(self, point, preferred=None):
        """Arms to try for work at `point`: the preferred one (a parameter or the contract's choice)
        first, then by distance of their base from the point."""
        order = sorted(self.arms, key=lambda a: float(np.linalg.norm((self.base(a) - point)[:2])))
        if preferred in order:
            order.remove(preferred)
            order.insert(0, preferred)
        if self.params.get("single_arm") and preferred in self.arms:
            return [preferred]
        return order


# --- guarded motions ---------------------------------------------------------------------------------


def attempt(call, *args, **kwargs):
    """Run one harness command; True when it ran, False when the harness refused it (nothing moved)."""
    try:
        call(*args, **kwargs)
        return True
    except RolloutEnded:
        raise
    except HarnessError as error:
        log(f"refused {getattr(call, '__name__', 'command')}: {error}")
        return False


def move_to(robot, arm, position, quaternion, linear=False, duration=None):
    """Move the TCP; on a refused straight line, try a joint-space move (curved path). True if it ran."""
    pos = [float(v) for v in position]
    if attempt(robot.move_ee, pos, quaternion, arm=arm, linear=linear, duration=duration):
        return True
    if linear:
        return attempt(robot.move_ee, pos, quaternion, arm=arm, linear=False, duration=duration)
    return False


def go(scene, arm, waypoint, joints=None):
    """Go to one planned waypoint (position, rotation, linear): a point-to-point move goes to the
    planned joints when there are some (the configuration the kinematic check found, so the straight
    lines after it start where the check started them; by way of the configurations of a detour
    when the check planned one, see `Kinematics.detour`). True if it ran."""
    position, rotation, linear = waypoint[:3]
    # planned joints: one configuration, or a detour (configurations on the way, the last one the goal)
    if not linear and joints is not None and all(
            attempt(scene.robot.move_joints, [float(v) for v in q], arm=arm) for q in np.atleast_2d(joints)):
        return True
    return move_to(scene.robot, arm, position, [float(v) for v in matrix_to_quat(rotation)], linear=linear)


def park(scene, arm):
    """Take `arm` back to where it started (clear of the workspace): lift the TCP first, then go home
    directly or by way of a point drawn back towards the arm's base; when the kinematic model says
    every way would sweep the gripper through an object, stay (lifted)."""
    robot = scene.robot
    p, _ = scene.tcp(arm)
    attempt(robot.move_ee, [float(v) for v in p + scene.params["park_lift"] * EZ], None, arm=arm, linear=True)
    kin = arm_kinematics(scene, arm)
    home = np.asarray(scene.home[arm], dtype=float)
    if kin is None:
        attempt(robot.move_joints, scene.home[arm], arm=arm)
        return
    obstacles = [o for o in scene.obstacles() if o[0] != f"arm:{arm}"]
    here = np.asarray(robot.observe()["arms"][arm]["target"], dtype=float)
    if not kin.sweeps(here, home, obstacles, scene.gripper, samples=20):
        attempt(robot.move_joints, scene.home[arm], arm=arm)
        return
    p, r = scene.tcp(arm)
    back = scene.base(arm) - p
    back[2] = 0.0
    out = -r[:, 2] * np.array([1.0, 1.0, 0.0])  # backwards along the approach, level
    out = unit(out) if np.linalg.norm(out) > 1e-6 else unit(back)
    vias = [p + d * u + h * EZ for d in (0.06, 0.1) for u in (out, unit(back)) for h in (0.03, 0.0)]
    for via in vias:
        q = kin.path(here, [(via, r, True, ())], obstacles, scene.gripper)
        if (q is not None and not kin.sweeps(q[0], home, obstacles, scene.gripper, samples=20)
                and move_to(robot, arm, via, [float(v) for v in matrix_to_quat(r)], linear=True)):
            attempt(robot.move_joints, scene.home[arm], arm=arm)
            return
    # by way of joints: some joints home first (the shoulder and elbow draw the hand back and up)
    for joints in ((1,), (1, 2), (2,), (1, 2, 3, 4)):
        via = here.copy()
        via[list(joints)] = home[list(joints)]
        if (not kin.sweeps(here, via, obstacles, scene.gripper, samples=20)
                and not kin.sweeps(via, home, obstacles, scene.gripper, samples=20)
                and attempt(robot.move_joints, [float(v) for v in via], arm=arm)):
            attempt(robot.move_joints, scene.home[arm], arm=arm)
            return
    log(f"{arm} stays where it is: every way back would sweep through an object")


class GraspPlan:
    """How to grasp one object: where the TCP aims, which orientations to try, how wide to open."""

    def __init__(self, point, frames, open_width, radius, top, band, round_=False, carry=None, width=None):
        self.point = np.asarray(point, dtype=float)
        self.width = float(open_width if width is None else width)  # the object across the fingers
        self.frames = frames
        self.open_width = float(open_width)
        self.radius = float(radius)
        self.top = float(top)
        self.band = band
        self.round = round_
        self.carry = carry  # per frame index: the orientation to lift and carry in (None: the same)


def grasp_plan(scene, oid, arm, tilts):
    """Grasp point, orientations and opening for `oid` with `arm` (a box across a side that fits; a
    cylinder, cup or sphere across its diameter; a lying cylinder across its axis)."""
    obj = scene.object(oid)
    p, r = scene.pose(oid)
    heading = scene.heading(arm, p)
    width_max = scene.gripper["max_width"]
    margin = scene.gripper["grip_margin"]
    perpendicular = np.cross(EZ, heading)
    spread = [perpendicular] + [rotate_z(perpendicular, math.radians(a)) for a in (30, -30, 60, -60)]
    bottom = float(p[2])
    kind = obj["kind"]
    if kind == "box":
        sx, sy, sz = obj["size"]
        sides = sorted([(sx, r[:, 0]), (sy, r[:, 1])], key=lambda s: -abs(float(np.dot(np.cross(EZ, s[1]), heading))))
        closings = [axis for width, axis in sides if width + 0.004 <= width_max]
        width = min((w for w, _ in sides if w + 0.004 <= width_max), default=min(sx, sy))
        return GraspPlan(p + r @ np.array([0.0, 0.0, sz / 2]), lean_frames(heading, closings or [sides[0][1]], tilts),
                         min(width_max, width + margin), 0.5 * math.hypot(sx, sy), bottom + sz, (bottom, bottom + sz),
                         width=max(w for w, _ in sides if w + 0.004 <= width_max) if closings else width)
    if kind == "sphere":
        radius = obj["radius"]
        equator = bottom + radius
        return GraspPlan(p + np.array([0.0, 0.0, radius]), lean_frames(heading, spread, tilts),
                         min(width_max, 2 * radius + margin), radius, bottom + 2 * radius,
                         (equator - 0.2 * radius, equator + 0.2 * radius), round_=True, width=2 * radius)
    if kind == "cup":
        radius, height = obj["outer_radius"], obj["height"]
        return GraspPlan(p + r @ np.array([0.0, 0.0, scene.params["cup_grip_fraction"] * height]),
                         lean_frames(heading, spread, tilts), min(width_max, 2 * radius + margin), radius,
                         bottom + height, (bottom, bottom + height), width=2 * radius)
    if kind == "cylinder":
        radius, height = obj["radius"], obj["height"]
        axis = r[:, 2]
        if abs(float(axis[2])) > math.cos(math.radians(30)):  # standing
            centre = p + r @ np.array([0.0, 0.0, height / 2])
            return GraspPlan(centre, lean_frames(heading, spread, tilts), min(width_max, 2 * radius + margin),
                             radius, bottom + height, (bottom, bottom + height), width=2 * radius)
        # lying: grip with the pads upright beside it, then roll it about its own axis while lifting
        grip_at = scene.params.get("grip_along", 0.5)
        ends = (p, p + r[:, 2] * height)
        if np.linalg.norm((ends[1] - scene.base(arm))[:2]) < np.linalg.norm((ends[0] - scene.base(arm))[:2]):
            grip_at = 1.0 - grip_at  # hold it nearer the end nearer the arm
        centre = p + r @ np.array([0.0, 0.0, grip_at * height])
        # grip with the pads upright (straight down) and roll the stick up as it lifts, or grip
        # already leaning about its axis (reaching further)
        carries = roll_frames(axis, heading, tilts)
        grips = roll_frames(axis, heading, (0.0,))
        frames = [grips[k % 2] for k in range(len(carries))] + carries
        carries = carries + carries
        axis_z = float(centre[2])
        return GraspPlan(centre, frames, width_max, 0.0, axis_z + radius,
                         (axis_z - 0.5 * radius, axis_z + 0.5 * radius), carry=carries, width=2 * radius)
    raise StepFailed(f"object {oid} of kind {kind} cannot be grasped")


def grasp_tcp(plan, frame, table_z, gripper):
    """The TCP position of a grasp in `frame`: on the object's axis, as deep as the housing allows
    (it must stay above the object's top), the fingertips above the table and the pads on the band
    where the object must be gripped; None when no height satisfies all three."""
    axis_xy = plan.point[:2]
    pad_reach = gripper["pad_half_length"] * abs(float(frame.approach[2]))
    lowest = max(plan.band[0] - pad_reach, table_z + fingertip_tcp_height(frame, gripper, gripper["table_clearance"]))
    highest = plan.band[1] + pad_reach - 0.004
    z = max(float(plan.point[2]), lowest)
    while z <= highest + 1e-9:
        tcp = np.array([axis_xy[0], axis_xy[1], z])
        points = housing_points(tcp, frame, gripper)
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


class Held:
    """An object held by an arm: the middle of the object relative to the TCP, fixed while it is held
    (measured once it is lifted, so a grasp that slid or turned it is accounted for)."""

    def __init__(self, scene, arm, oid, frame):
        self.scene, self.arm, self.oid, self.frame = scene, arm, oid, frame
        tcp_p, tcp_r = scene.tcp(arm)
        _, obj_r = scene.pose(oid)
        self.local = tcp_r.T @ (scene.centre(oid) - tcp_p)  # the object's middle in the TCP frame
        self.local_rotation = tcp_r.T @ obj_r

    def tcp_for(self, goal, frame_matrix):
        """TCP position that puts the object's middle at `goal` with the TCP oriented `frame_matrix`."""
        return np.asarray(goal, dtype=float) - frame_matrix @ self.local


class Grip:
    """One way to grasp an object: the arm, the orientation to close in, the one to lift and carry
    in, where the TCP closes, and (once planned) the joints of the whole motion."""

    def __init__(self, oid, arm, index, plan, frame, carry, tcp):
        self.oid, self.arm, self.index, self.plan, self.frame, self.carry, self.tcp = oid, arm, index, plan, frame, carry, tcp
        self.joints = None
        self.then = []
        self.load = None
        self.from_above = False
        self.pull = 0.0  # how far the carry first draws the object back towards the arm (see place_waypoints)


def yawed(frame, degrees):
    """`frame` turned about world z by `degrees` (a held object turns with it and stays upright)."""
    a = math.radians(degrees)
    c, s = math.cos(a), math.sin(a)
    rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    return Frame(rz @ frame.approach, rz @ frame.closing, frame.tilt)


def grips(scene, oid, preferred_arm=None, arms=None, yaws=(0.0,)):
    """Every candidate grasp of `oid` from its observed pose: arms in `Scene.arms_for` order (only
    `arms` when given), orientations least tilted first, each carried as gripped or turned about the
    vertical by each of `yaws` degrees."""
    params = scene.params
    out = []
    p0, _ = scene.pose(oid)
    scene.remember(oid)
    obj = scene.object(oid)
    for arm in scene.arms_for(p0, preferred_arm):
        if arms is not None and arm not in arms:
            continue
        plan = grasp_plan(scene, oid, arm, params["grasp_tilts"])
        table_z = float(p0[2])
        if plan.carry is not None:  # a lying cylinder: its frame origin is on its axis
            table_z = float(plan.point[2]) - obj["radius"]
        for k, frame in enumerate(plan.frames):
            tcp = grasp_tcp(plan, frame, table_z, scene.gripper)
            if tcp is None:
                continue
            for yaw in yaws if plan.carry is None else (0.0,):
                carry = plan.carry[k] if plan.carry is not None else (yawed(frame, yaw) if yaw else frame)
                grip = Grip(oid, arm, (k, yaw), plan, frame, carry, tcp + np.asarray(params["grasp_offset"], dtype=float))
                out.append(grip)
    # then the same grasps approached from straight above (a leaning gripper's pre-grasp, backed
    # off along its approach, can be out of reach near the arm's base)
    if params["pre_grasp_above"]:
        for grip in list(out):
            above = Grip(grip.oid, grip.arm, grip.index + ("above",), grip.plan, grip.frame, grip.carry, grip.tcp)
            above.from_above = True
            out.append(above)
    return out


def grip_waypoints(scene, grip):
    """The pick motion of a grip as waypoints (see `Kinematics.path`): pre-grasp, grasp, lift; the
    gripper keeps clear of every other object on the way, and so does the object once lifted."""
    params = scene.params
    if grip.from_above:
        pre = grip.tcp + params["approach_distance"] * EZ
    else:
        pre = grip.tcp - params["approach_distance"] * grip.frame.approach
    lifted = grip.tcp + params["lift_height"] * EZ
    skip = {grip.oid}
    return [(pre, grip.frame.matrix, False, ()), (grip.tcp, grip.frame.matrix, True, skip),
            (lifted, grip.carry.matrix, True, skip, grip_load(scene, grip))]


def grip_load(scene, grip):
    """The grasped object's corner points in the TCP frame once lifted (carry orientation)."""
    if grip.load is None:
        points = scene.load_points(grip.oid, grip.tcp, grip.frame.matrix)
        grip.load = points if points is not None else np.zeros((0, 3))
    return grip.load


def held_offset(scene, grip, oid):
    """Where the object's middle will be relative to the TCP (world axes, carry orientation)."""
    turn = grip.carry.matrix @ grip.frame.matrix.T
    return turn @ (scene.centre(oid) - grip.tcp)


def first_feasible(scene, options, arm_of, waypoints_of, what):
    """The options whose motion (`waypoints_of(option)`: (position, rotation, linear) waypoints from
    the arm's current joints, or None when the option cannot work) the arm's kinematic model allows
    and whose point-to-point moves sweep nothing, in their order, each with `.joints` (the planned
    configuration at every waypoint), at most `plan_alternatives` of them (none when no option checks
    out). Without a model for an arm, every option in order (their motions are then tried one by one)."""
    params = scene.params
    models, starts, found = {}, {}, []
    state = scene.robot.observe()
    everything = scene.obstacles()
    began = time.monotonic()
    for n, option in enumerate(options[:params["plan_candidates"]]):
        arm = arm_of(option)
        if arm not in models:
            models[arm] = arm_kinematics(scene, arm)
            starts[arm] = state["arms"][arm]["target"]
        if models[arm] is None:
            return options
        waypoints = waypoints_of(option)
        if waypoints is None:
            continue
        obstacles = [o for o in everything if o[0] != f"arm:{arm}"]
        joints = models[arm].path(starts[arm], waypoints, obstacles, scene.gripper)
        if joints is not None:
            option.joints = joints
            found.append(option)
            if len(found) >= params["plan_alternatives"]:
                break
    took = time.monotonic() - began
    if found:
        log(f"planned: {what} with {arm_of(found[0])} ({len(found)} plan(s) from {n + 1} of {len(options)} options, {took:.2f} s)")
        return found
    log(f"no option to {what} passes the kinematic check ({took:.2f} s)")
    return []


def try_grip(scene, oid, grip):
    """Make one grasp: pre-grasp, straight descent, close, straight lift. A `Held`, or None (nothing
    caught, or a motion refused; the arm is then back at the pre-grasp)."""
    robot, params = scene.robot, scene.params
    arm, frame = grip.arm, grip.frame
    waypoints = grip_waypoints(scene, grip)
    joints = grip.joints or [None] * len(waypoints)
    attempt(robot.gripper, grip.plan.open_width, arm=arm, duration=0.0)
    if not go(scene, arm, waypoints[0], joints[0]):
        return None
    if not go(scene, arm, waypoints[1]):
        return None
    width = float(robot.close_gripper(arm, params["close_seconds"])["width"])
    expected = grip.plan.width
    if width < params["min_grip_width"] or width > expected + params["grip_width_tolerance"]:
        log(f"{arm} did not catch {oid} at {np.round(grip.tcp, 3).tolist()} (gap {width * 1000:.1f} mm, "
            f"expected about {expected * 1000:.0f})")
        attempt(robot.gripper, grip.plan.open_width, arm=arm, duration=0.4)
        move_to(robot, arm, waypoints[0][0], frame.quaternion, linear=True)
        return None
    if not go(scene, arm, waypoints[2]):
        log(f"{arm} cannot lift {oid} from {np.round(grip.tcp, 3).tolist()}")
        attempt(robot.gripper, grip.plan.open_width, arm=arm, duration=0.4)
        move_to(robot, arm, waypoints[0][0], frame.quaternion, linear=True)
        return None
    log(f"{arm} holds {oid} (gap {width * 1000:.1f} mm, {grip.carry})")
    return Held(scene, arm, oid, grip.carry)


def place_waypoints(scene, grip, offset, goal, clearance, travel=None, touch=()):
    """The carry and placing waypoints of a grip: from the lift, across to `clearance` above `goal`,
    down to it (into or onto the objects `touch` names). `travel` = (height, inside): over the region where
    `inside(xy)` holds (around the goal) the object's middle must be at least at `height` (to pass over
    a rim or a wall): when the straight carry would be lower where it enters the region, it goes by
    way of that point raised to the height (or straight up first, when it starts inside). A grip with
    a `pull` first draws the object that far back towards its arm's base, level: an item standing
    beside a tall object, level with its front, clips that object's corner on the straight carry."""
    r = grip.carry.matrix
    start = grip.tcp + scene.params["lift_height"] * EZ + offset  # the object's middle after the lift
    over = goal + clearance * EZ
    waypoints = []
    if grip.pull > 0:
        back = (scene.base(grip.arm) - start) * np.array([1.0, 1.0, 0.0])
        if np.linalg.norm(back) > grip.pull:
            start = start + grip.pull * unit(back)
            waypoints.append(start.copy())
    if travel is not None:
        height, inside = travel
        over[2] = max(float(over[2]), height)
        if inside(start[:2]):
            if float(start[2]) < height:
                waypoints.append(np.array([start[0], start[1], height]))
        else:
            lo, hi = 0.0, 1.0  # where the straight carry enters the region
            for _ in range(30):
                mid = 0.5 * (lo + hi)
                if inside((start + mid * (over - start))[:2]):
                    hi = mid
                else:
                    lo = mid
            entry = start + hi * (over - start)
            if float(entry[2]) < height:
                back = 0.02 * unit((start - over) * np.array([1.0, 1.0, 0.0])) if np.linalg.norm((start - over)[:2]) > 1e-6 else 0.0
                waypoints.append(np.array([entry[0], entry[1], height]) + back)
    down = goal - offset
    load = grip_load(scene, grip)
    carry = {grip.oid}  # on the way the object and gripper keep clear of everything else ...
    near = carry | set(touch)  # ... and go down into (or onto) what they touch at the goal
    return ([(w - offset, r, True, carry, load) for w in waypoints]
            + [(over - offset, r, True, carry, load), (down, r, True, near, load)])


def circle_region(centre, radius):
    """`inside(xy)` of a circle around `centre` (for `place_waypoints`' travel)."""
    c = np.asarray(centre, dtype=float)[:2]
    return lambda xy: float(np.linalg.norm(np.asarray(xy) - c)) <= radius


def box_region(centre, rotation, half):
    """`inside(xy)` of a rectangle: `half` (x, y) extents about `centre` along `rotation`'s x and y."""
    c = np.asarray(centre, dtype=float)[:2]
    axes = np.asarray(rotation, dtype=float)[:2, :2]
    return lambda xy: bool(np.all(np.abs((np.asarray(xy) - c) @ axes) <= np.asarray(half)))


def planned(options):
    """Whether `first_feasible` found a plan (its first option carries planned joints)."""
    return bool(options) and getattr(options[0], "joints", None) is not None


def plan_pick(scene, oid, preferred_arm, then, arms=None, exclude=(), yaws=True, adjust=None, pulls=(0.0,)):
    """The grips of `oid` ranked by `first_feasible` for the pick followed by `then(grip, offset)`;
    each of `pulls` (a grip's `pull`, for a `then` that carries with `place_waypoints`) is tried only
    when the ones before it gave no plan."""

    def waypoints(grip):
        extra = then(grip, held_offset(scene, grip, oid))
        if extra is None:
            return None
        grip.then = extra
        return grip_waypoints(scene, grip) + extra

    ranked = []
    for pull in pulls:
        for turns in ((0.0,), scene.params["carry_yaws"])[:2 if yaws else 1]:
            candidates = [g for g in grips(scene, oid, preferred_arm, arms, turns)
                          if (g.arm, g.index, pull) not in exclude]
            for grip in candidates:
                grip.pull = pull
            if adjust is not None:
                candidates = [adjust(g) for g in candidates]
            ranked = first_feasible(scene, candidates, lambda g: g.arm, waypoints, f"grasp {oid}")
            if planned(ranked):
                return ranked
    return ranked


def pick_for(scene, oid, preferred_arm, then, arms=None, adjust=None, pulls=(0.0,)):
    """Grasp `oid` and lift it, with a grip that can then also make the motion `then(grip, offset)`
    lists (waypoints; None when that grip cannot); `adjust(grip)` may change a candidate first (its
    carry orientation); `pulls` as for `plan_pick`. Each try re-reads the object's pose (a miss can
    move it). Returns the `Held` (with `.grip`); StepFailed after `grasp_attempts` tries."""
    params = scene.params
    tried = set()
    for _ in range(params["grasp_attempts"]):
        for grip in plan_pick(scene, oid, preferred_arm, then, arms, tried, adjust=adjust, pulls=pulls):
            tried.add((grip.arm, grip.index, grip.pull))
            held = try_grip(scene, oid, grip)
            if held is not None:
                held.grip = grip
                return held
            if scene.moved(oid):
                break  # the object was pushed: plan again from where it is now
    raise StepFailed(f"could not grasp {oid} in {params['grasp_attempts']} tries")


def relay_spots(scene, oid, goal):
    """Places on the table to hand `oid` over between arms on its way to `goal`: along the way,
    pulled towards the arms' bases, clear of the other objects; its middle at its height now."""
    start = scene.centre(oid)
    bases = np.mean([scene.base(a) for a in scene.arms], axis=0)
    extent = scene.object(oid)["extent"]
    others = [(scene.centre(o), scene.object(o)["extent"]) for o in scene.spec["objects"] if o != oid]
    spots = []
    for fraction in (0.5, 0.35, 0.65):
        p = start + fraction * (np.asarray(goal) - start)
        p[2] = start[2]
        towards = bases - p
        towards[2] = 0.0
        for pull in (0.0, 0.06, 0.12):
            q = p + pull * unit(towards)
            if all(float(np.linalg.norm((q - c)[:2])) > e + extent + scene.params["relay_gap"] for c, e in others):
                spots.append(q)
    return spots


def relay_plan(scene, oid, then_for_goal, first_arms=None):
    """(first arm, spot) for a hand-over: the first arm (one of `first_arms`, default any) can pick
    `oid` and set it down at the spot, and another arm can pick it up there and do `then_for_goal`;
    None when no spot works."""
    params = scene.params
    p, r = scene.pose(oid)
    centre = scene.centre(oid)
    probe = grips(scene, oid)
    finish = then_for_goal(probe[0], held_offset(scene, probe[0], oid)) if probe else None
    if finish is None:
        return None
    target = finish[-1][0] + held_offset(scene, probe[0], oid)  # about where the object's middle ends
    for spot in relay_spots(scene, oid, target):
        for first in (first_arms or scene.arms):
            second = [a for a in scene.arms if a != first]

            def leg1(grip, offset, spot=spot):
                return place_waypoints(scene, grip, offset, spot + params["release_clearance_relay"] * EZ,
                                       params["carry_clearance"])

            if not second:
                continue
            scene.assume(oid, (p + (spot - centre), r))
            try:  # the second leg first: it fails more often
                ok = planned(plan_pick(scene, oid, None, then_for_goal, arms=second, yaws=False))
            finally:
                scene.assume(oid, None)
            if ok and planned(plan_pick(scene, oid, None, leg1, arms=[first], yaws=False)):
                return first, spot
    return None


def hand_over(scene, oid, first, spot):
    """The first leg of a hand-over: `first` picks `oid`, sets it down at `spot`, and parks."""
    params = scene.params
    lifted = spot + params["release_clearance_relay"] * EZ

    def leg1(grip, offset):
        return place_waypoints(scene, grip, offset, lifted, params["carry_clearance"])

    held = pick_for(scene, oid, first, leg1, arms=[first])
    for position, *_rest in leg1(held.grip, held.frame.matrix @ held.local)[:-1]:
        if not move_to(scene.robot, held.arm, position, held.frame.quaternion, linear=True):
            raise StepFailed(f"{held.arm} cannot carry {oid} to the hand-over spot")
    if not lower_and_release(scene, held, lifted):
        raise StepFailed(f"{held.arm} cannot set {oid} down at the hand-over spot")
    park(scene, held.arm)
    scene.robot.wait(params["relay_settle"])


def pick_and_place(scene, oid, preferred_arm, goal_for, clearance, travel=None, required_arm=None, touch=()):
    """Grasp `oid` with a grip that can also carry it to `goal_for(grip, offset)` (where its middle
    goes, for that grip and the object's middle relative to the TCP; None when that grip cannot place
    it), by way of `clearance` straight above the goal (and `travel`, see `place_waypoints`); carry it
    there. `required_arm` (the contract names who grasps) must make the grasp. When no one arm can do
    it all, and the robot has two, hand it over: one arm sets it down where the other can pick it up
    and finish. When no grip can carry it straight, carries that first draw it back towards the arm
    by each of `carry_pulls` are tried. Returns (held, goal)."""
    params = scene.params

    def then(grip, offset):
        goal = goal_for(grip, offset)
        return None if goal is None else place_waypoints(scene, grip, offset, goal, clearance, travel, touch)

    arms = [required_arm] if required_arm in scene.arms else None
    if params["relay"] and len(scene.arms) > 1 and not planned(plan_pick(scene, oid, preferred_arm, then, arms)):
        relay = relay_plan(scene, oid, then, arms)
        if relay is not None:
            first, spot = relay
            log(f"no arm can do it alone: {first} hands {oid} over at {np.round(spot, 3).tolist()}")
            hand_over(scene, oid, first, spot)
            arms = [a for a in scene.arms if a != first]
    held = pick_for(scene, oid, preferred_arm, then, arms, pulls=(0.0, *params.get("carry_pulls", ())))
    offset = held.frame.matrix @ held.local  # as actually held
    goal = goal_for(held.grip, offset)
    if goal is None:
        raise StepFailed(f"{held.arm} holds {oid} but cannot place it")
    for position, *_rest in place_waypoints(scene, held.grip, offset, goal, clearance, travel, touch)[:-1]:
        if not move_to(scene.robot, held.arm, position, held.frame.quaternion, linear=True):
            raise StepFailed(f"{held.arm} cannot carry {oid} over {np.round(goal, 3).tolist()}")
    return held, goal


def fingertip_drop(frame, gripper):
    """How far the lowest fingertip reaches below the TCP in `frame`."""
    return fingertip_tcp_height(frame, gripper, 0.0)


def lower_and_release(scene, held, goal, open_width=None):
    """Lower the held object straight down until its middle is at `goal`, wait for the arm to settle,
    open and go back up. Returns False if the descent was refused."""
    robot, arm, params = scene.robot, held.arm, scene.params
    frame = held.frame
    target = held.tcp_for(goal, frame.matrix)
    if not move_to(robot, arm, target, frame.quaternion, linear=True, duration=params["lower_seconds"]):
        return False
    robot.wait(params["hold_before_release"])
    width = scene.gripper["max_width"] if open_width is None else open_width
    robot.gripper(width, arm=arm, duration=params["open_seconds"])
    # straight up out of the container (backing along a leaning approach could drag its wall)
    if not move_to(robot, arm, target + params["retreat"] * EZ, frame.quaternion, linear=True):
        move_to(robot, arm, target - params["retreat"] * frame.approach, frame.quaternion, linear=True)
    return True


# --- the arm's kinematics, to check a motion before making it ---------------------------------------


def rpy_matrix(rpy):
    """URDF roll-pitch-yaw to a rotation: Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = (float(a) for a in rpy)
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return rz @ ry @ rx


def axis_rotation(axis, angle):
    """Rotation of `angle` about the unit `axis` (Rodrigues)."""
    x, y, z = axis
    c, s = math.cos(angle), math.sin(angle)
    k = np.array([[0, -z, y], [z, 0, -x], [-y, x, 0]])
    return np.eye(3) + s * k + (1 - c) * (k @ k)


def rotation_error(target, current):
    """Rotation vector taking `current` to `target` (both 3x3), world axes."""
    r = target @ current.T
    cos = max(-1.0, min(1.0, (np.trace(r) - 1.0) / 2.0))
    angle = math.acos(cos)
    if angle < 1e-9:
        return np.zeros(3)
    v = np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
    if angle > math.pi - 1e-4:  # near half a turn the formula above degenerates
        w, vecs = np.linalg.eigh(0.5 * (r + r.T))
        return vecs[:, int(np.argmax(w))] * angle
    return v * (angle / (2.0 * math.sin(angle)))


class Kinematics:
    """Forward and inverse kinematics of one arm from its kinematic chain (G's robot and K's table
    of its joints): used to choose an arm and a gripper orientation whose whole motion is possible
    before moving. The harness solves its own IK; this one only predicts what it will accept."""

    def __init__(self, chain, base, tcp, lower, upper, reach=None, limit_margin=0.0):
        self.origins = []
        self.axes = []
        for joint in chain:
            t = np.eye(4)
            t[:3, :3] = rpy_matrix(joint["rpy"])
            t[:3, 3] = joint["xyz"]
            self.origins.append(t)
            self.axes.append(unit(joint["axis"]))
        self.base = np.asarray(base, dtype=float)
        self.tcp = np.eye(4)
        self.tcp[:3, 3] = tcp
        # plan a little inside the limits: the harness's own IK near a limit can land elsewhere
        span = np.asarray(upper, dtype=float) - np.asarray(lower, dtype=float)
        margin = np.minimum(limit_margin, 0.1 * span)
        self.lower = np.asarray(lower, dtype=float) + margin
        self.upper = np.asarray(upper, dtype=float) - margin
        self.rng = np.random.default_rng(7)
        self.memo = {}
        self.reach = reach
        if reach is not None:
            self.shoulder = self.base[:3, 3] + self.base[:3, 2] * reach["shoulder_height"]

    def within_reach(self, position, rotation):
        """A quick necessary condition: the wrist (behind the TCP along the approach) must be within
        the upper arm's and forearm's length of the shoulder."""
        if self.reach is None:
            return True
        wrist = np.asarray(position, dtype=float) - self.reach["wrist_offset"] * np.asarray(rotation)[:, 2]
        return float(np.linalg.norm(wrist - self.shoulder)) <= self.reach["radius"]

    def forward(self, q):
        """(TCP 4x4 world pose, joint axes world (6,3), joint origins world (6,3))."""
        t = self.base
        axes, points = [], []
        for origin, axis, angle in zip(self.origins, self.axes, q):
            t = t @ origin
            axes.append(t[:3, :3] @ axis)
            points.append(t[:3, 3].copy())
            rot = np.eye(4)
            rot[:3, :3] = axis_rotation(axis, angle)
            t = t @ rot
        return t @ self.tcp, np.array(axes), np.array(points)

    def solve(self, position, rotation, q_init, restarts=2, iterations=80, seeds=True):
        """Joint positions within the limits putting the TCP at (`position`, `rotation`), or None:
        damped least squares from `q_init`, then (with `seeds`) from a few arm postures turned
        towards the target and `restarts` seeded random configurations."""
        position = np.asarray(position, dtype=float)
        starts = [np.clip(np.asarray(q_init, dtype=float), self.lower, self.upper)]
        if seeds:
            inverse = np.linalg.inv(self.base)
            local = inverse[:3, :3] @ position + inverse[:3, 3]
            azimuth = math.atan2(local[1], local[0])
            for q2, q3, q5 in ((1.2, -1.2, 0.6), (0.6, -0.8, 1.0), (1.8, -1.8, 0.3), (1.2, -1.2, -0.6)):
                starts.append(np.array([azimuth, q2, q3, 0.0, q5, 0.0]))
            starts += [self.rng.uniform(self.lower, self.upper) for _ in range(restarts)]
        for q in starts:
            q = np.clip(q, self.lower, self.upper)
            for it in range(iterations):
                pose, axes, points = self.forward(q)
                dp = position - pose[:3, 3]
                dr = rotation_error(rotation, pose[:3, :3])
                if np.linalg.norm(dp) < 8e-4 and np.linalg.norm(dr) < 8e-3:
                    return q
                if it == 30 and np.linalg.norm(dp) > 0.02:
                    break  # far off after 30 steps: this start will not converge
                jac = np.vstack([np.cross(axes, pose[:3, 3] - points).T, 0.3 * axes.T])
                err = np.concatenate([dp, 0.09 * dr])
                step = jac.T @ np.linalg.solve(jac @ jac.T + 1e-4 * np.eye(6), err)
                largest = float(np.abs(step).max())
                if largest > 0.3:
                    step *= 0.3 / largest
                q = np.clip(q + step, self.lower, self.upper)
        return None

    def path(self, q_start, waypoints, obstacles=(), gripper=None):
        """The joints at each of `waypoints` if the arm can go through them from `q_start`, else None.
        A waypoint is (position, rotation, linear[, skip[, load]]). A point-to-point move needs an IK
        solution (its joints: one configuration, or the rows of a detour ending in it when the direct
        joint-space move would sweep through an obstacle, see `detour`); a straight line one every 2 cm, each from the previous, with no joint jumping (as the
        harness checks). On the way, the gripper (and `load`: points of a held object in the TCP
        frame) must stay clear of the `obstacles` of objects not in `skip`; a waypoint whose `skip` is
        None is not checked (a straight line defaults to None, a point-to-point move to checking all)."""
        if not all(self.within_reach(w[0], w[1]) for w in waypoints):
            return None
        q = np.asarray(q_start, dtype=float)
        here = self.forward(q)[0]
        p0, r0 = here[:3, 3], here[:3, :3]
        joints = []
        # candidates often share their first waypoints (the same grasp carried differently): a
        # prefix already checked from the same start among the same obstacles is not checked again
        key = (tuple(np.round(q, 4)), tuple((o[0], tuple(np.round(o[1], 3))) for o in obstacles))
        for waypoint in waypoints:
            key = key + (_waypoint_key(waypoint),)
            if key in self.memo:
                known = self.memo[key]
                if known is None:
                    return None
                joints, q = list(known), np.atleast_2d(known[-1])[-1]
                p0, r0 = np.asarray(waypoint[0], dtype=float), waypoint[1]
                continue
            self.memo[key] = None  # until it checks out
            position, rotation, linear = waypoint[:3]
            skip = waypoint[3] if len(waypoint) > 3 else (None if linear else ())
            load = waypoint[4] if len(waypoint) > 4 else None
            check = [] if gripper is None or skip is None else [o for o in obstacles if o[0] not in skip]
            position = np.asarray(position, dtype=float)
            if not linear:
                q_next = self.solve(position, rotation, q)
                if q_next is None:
                    return None
                if check and self.sweeps(q, q_next, check, gripper, load=load):
                    vias = self.detour(q, q_next, position, rotation, check, gripper, load)
                    if vias is None:
                        return None
                    joints.append(np.vstack([*vias, q_next]))  # go() moves through the rows in turn
                    q = q_next
                    self.memo[key] = tuple(joints)
                    p0, r0 = position, rotation
                    continue
                q = q_next
            else:
                rv = rotation_error(rotation, r0)
                angle = float(np.linalg.norm(rv))
                n = max(1, math.ceil(float(np.linalg.norm(position - p0)) / 0.02), math.ceil(angle / 0.15))
                leaving = self.touching(q, check, gripper, load) if check else []
                for k in range(1, n + 1):
                    s = k / n
                    turn = axis_rotation(rv / angle, angle * s) @ r0 if angle > 1e-9 else r0
                    q_next = self.solve(p0 + s * (position - p0), turn, q, iterations=40, seeds=False)
                    if q_next is None or float(np.abs(q_next - q).max()) > 0.3:
                        return None
                    q = q_next
                    if check and any(hit and not left for hit, left in zip(self.touching(q, check, gripper, load), leaving)):
                        return None
            joints.append(q)
            self.memo[key] = tuple(joints)
            p0, r0 = position, rotation
        return joints

    def detour(self, q0, q1, position, rotation, obstacles, gripper, load=None):
        """Configurations to pass through on the way q0 -> q1 when the direct joint-space move sweeps
        the gripper through an obstacle (an arm folded at its start, behind an opened drawer or a
        tall object, swings its hand through it): some joints moved first (the base turned towards
        the goal, or the wrist set), or the hand raised over the goal first and lowered onto it;
        the first detour whose every leg sweeps nothing, or None."""
        q0, q1 = np.asarray(q0, dtype=float), np.asarray(q1, dtype=float)
        options = []
        for first in ((0,), (0, 3, 4, 5), (3, 4, 5), (1, 2)):  # joints moved in the first leg
            via = q0.copy()
            via[list(first)] = q1[list(first)]
            options.append([via])
        start = self.forward(q0)[0][:3, 3]
        for rise in (0.06, 0.12):
            above = np.asarray(position, dtype=float) + rise * EZ
            high = self.solve(above, rotation, q1, seeds=False)
            if high is None or float(np.abs(high - q1).max()) > 0.6:
                continue  # not the same posture as the goal's: lowering onto it could swing too
            options.append([high])
            turned = q0.copy()
            turned[0] = high[0]
            options.append([turned, high])
            if float(start[2]) < float(above[2]):
                lifted = self.solve(np.array([start[0], start[1], above[2]]), self.forward(q0)[0][:3, :3], q0, seeds=False)
                if lifted is not None:
                    options.append([lifted, high])
        for vias in options:
            legs = [q0, *vias, q1]
            if not any(self.sweeps(legs[k], legs[k + 1], obstacles, gripper, load=load) for k in range(len(legs) - 1)):
                return vias
        return None

    def touching(self, q, obstacles, gripper, load=None):
        """For each obstacle box, whether the gripper (or the held load) is in it at joints `q`."""
        pose = self.forward(q)[0]
        points = gripper_points(pose[:3, 3], pose[:3, :3], gripper)
        if load is not None:
            points = np.vstack([points, pose[:3, 3] + load @ pose[:3, :3].T])
        return [bool(np.any(np.all(np.abs((points - c) @ r) <= h, axis=1))) for _oid, c, r, h in obstacles]

    def sweeps(self, q0, q1, obstacles, gripper, samples=10, load=None):
        """Whether the gripper (or the held load) passes through an obstacle box on the joint-space
        move q0 -> q1 (a box it is already in at q0, one it is leaving, does not count)."""
        if not obstacles:
            return False
        q0, q1 = np.asarray(q0, dtype=float), np.asarray(q1, dtype=float)
        leaving = self.touching(q0, obstacles, gripper, load)
        for k in range(1, samples + 1):
            s = k / samples
            s = s * s * (3.0 - 2.0 * s)
            hits = self.touching(q0 + s * (q1 - q0), obstacles, gripper, load)
            if any(hit and not left for hit, left in zip(hits, leaving)):
                return True
        return False


def _waypoint_key(waypoint):
    """A hashable summary of a waypoint (for `Kinematics.path`'s memo)."""
    position, rotation, linear = waypoint[:3]
    skip = waypoint[3] if len(waypoint) > 3 else None
    load = waypoint[4] if len(waypoint) > 4 else None
    return (tuple(np.round(np.asarray(position, dtype=float), 4)), tuple(np.round(np.asarray(rotation, dtype=float), 4).ravel()),
            bool(linear), None if skip is None else tuple(sorted(skip)),
            None if load is None else (len(load), tuple(np.round(np.asarray(load, dtype=float).sum(axis=0), 4))))


def gripper_points(tcp, rotation, gripper):
    """Points on the gripper (housing corners and middles, fingertips wide open) for a TCP pose."""
    closing, side, approach = rotation[:, 0], rotation[:, 1], rotation[:, 2]
    hx, hy, hz = gripper["housing_half"]
    points = []
    for i in (-1, 0, 1):
        for j in (-1, 0, 1):
            for along in (-gripper["housing_front"], -gripper["housing_front"] - 2 * hz):
                points.append(tcp + i * hx * closing + j * hy * side + along * approach)
    tip = gripper["pad_half_length"]
    for i in (-1, 1):
        for along in (0.0, tip):
            points.append(tcp + i * 0.5 * gripper["max_width"] * closing + along * approach)
    return np.array(points)


def arm_kinematics(scene, arm):
    """The arm's `Kinematics` when G's robot has a known chain (else None: motions are then tried)."""
    spec = scene.spec["arms"][arm]
    if not spec.get("chain"):
        return None
    info = scene.robot.info["arms"][arm]
    n = len(spec["chain"])
    if arm not in scene.models:
        scene.models[arm] = Kinematics(spec["chain"], spec["base_matrix"], spec["tcp"], info["lower"][:n],
                                       info["upper"][:n], spec.get("reach"), scene.params["limit_margin"])
    return scene.models[arm]
