"""The task families' controller programs, composed from the runtime's guarded motions.

Like `runtime.py`, this file is copied (below the INLINE marker) into `expert/controller.py`; each
family function takes the `Scene` and the `TASK` dict the builtin author bakes from T and G (object
ids by role, the numbers the contract asks for, part geometry) and ends the rollout with `done`.
Positions come from `observe()` at run time: S moves objects per seed.
"""

from __future__ import annotations

import math

import numpy as np

from datafarm.agents.builtin.controllers.runtime import (
    EZ,
    StepFailed,
    attempt,
    box_region,
    circle_region,
    fingertip_drop,
    first_feasible,
    go,
    lean_frames,
    log,
    lower_and_release,
    move_to,
    park,
    pick_and_place,
    pick_for,
    roll_frames,
    yawed,
)

# ==== INLINE BELOW: copied into expert/controller.py (no imports below: the controller has them) ====


def hand_extent(scene, item_extent):
    """How far a held item and the fingers around it reach sideways from the item's middle."""
    return max(item_extent, 0.5 * scene.gripper["max_width"] + scene.gripper["finger_thickness"])


def finish(scene, arms):
    """Park the arms that worked, let everything settle, and claim done (the judge decides)."""
    for arm in arms:
        park(scene, arm)
    scene.robot.wait(scene.params["settle_seconds"])
    scene.robot.done(success=True, note="task carried out")


def place_in(scene, task):
    """nest / place_in: pick the item (the smaller object), carry it over the container's opening,
    centred on the container's axis, lower it into the opening as deep as the fingers allow (they
    stay `finger_clearance` above the rim; never lower than `release_clearance` above the rim for
    its bottom when `insert` is off) and let go: the walls guide it down."""
    params = scene.params
    c_p, c_r = scene.pose(task["container"])
    rim = c_p + c_r @ np.array([0.0, 0.0, task["container_height"]])
    shift = np.asarray(params["place_offset"], dtype=float)

    def goal_for(grip, offset):
        above = rim + (params["release_clearance"] + task["item_half_height"]) * EZ + shift
        if not params["insert"]:
            return above
        # the TCP may go down until the lowest fingertip is finger_clearance above the rim
        lowest_tcp = float(rim[2]) + params["finger_clearance"] + fingertip_drop(grip.carry, scene.gripper)
        depth_goal = lowest_tcp + float(offset[2])
        return np.array([above[0], above[1], min(float(above[2]), depth_goal)])

    travel = (float(rim[2]) + params["carry_clearance"] + task["item_half_height"],
              circle_region(rim, task["container_radius"] + hand_extent(scene, task["item_extent"]) + params["carry_clearance"]))
    held, goal = pick_and_place(scene, task["item"], task.get("prefer_arm"), goal_for, params["carry_clearance"], travel,
                                task.get("item_arm"), touch=(task["container"],))
    if not lower_and_release(scene, held, goal, open_width=min(scene.gripper["max_width"],
                                                                held.grip.plan.width + params["release_gap"])):
        raise StepFailed(f"{held.arm} cannot lower {task['item']} into {task['container']}")
    finish(scene, [held.arm])


def place_on(scene, task):
    """place_on / place_on_scale: pick the item and set it down on the support's top (a scale's
    plate), towards the holding arm by `place_shift` of the room there is but wholly on it; release
    gently (hold still first), back away and let it settle."""
    params = scene.params
    s_p, s_r = scene.pose(task["support"])
    top = s_p + s_r @ np.array([0.0, 0.0, task["support_top"]])
    hx, hy = task["support_half"]

    def goal_for(grip, _offset):
        heading = scene.heading(grip.arm, top)
        half = abs(float(np.dot(s_r[:, 0], heading))) * hx + abs(float(np.dot(s_r[:, 1], heading))) * hy
        shift = max(0.0, half - task["item_extent"] - params["edge_margin"]) * params["place_shift"]
        return (top - shift * heading + (task["item_half_height"] + params["release_clearance"]) * EZ
                + np.asarray(params["place_offset"], dtype=float))

    held, goal = pick_and_place(scene, task["item"], task.get("prefer_arm"), goal_for, params["carry_clearance"],
                                required_arm=task.get("item_arm"), touch=(task["support"],))
    if not lower_and_release(scene, held, goal):
        raise StepFailed(f"{held.arm} cannot set {task['item']} down on {task['support']}")
    finish(scene, [held.arm])


class Stroke:
    """One way to strike: the arm, its orientation, the TCP above the head and at the bottom of a stroke."""

    def __init__(self, arm, frame, above, down):
        self.arm, self.frame, self.above, self.down = arm, frame, above, down
        self.joints = None


def stroke_waypoints(option, drum):
    """Above the head (point to point, clear of everything), down into it, back up (straight)."""
    r = option.frame.matrix
    return [(option.above, r, False, ()), (option.down, r, True, {drum}), (option.above, r, True, {drum})]


def strike_drum(scene, task):
    """strike_drum: strike the drum head `strikes` times, one contact each, with the closed gripper's
    fingertips (or the held stick's tip when the contract names a tool): from above the head,
    straight down into it (the head stops the stroke) and back up."""
    if task.get("tool"):
        strike_with_tool(scene, task)
        return
    params = scene.params
    robot = scene.robot
    d_p, d_r = scene.pose(task["instrument"])
    head = d_p + d_r @ np.array([0.0, 0.0, task["head_height"]])
    pad = scene.gripper["pad_half_length"]
    options = []
    for arm in scene.arms_for(head, task.get("arm") or task.get("prefer_arm")):
        heading = scene.heading(arm, head)
        spot = head - params["strike_spot"] * task["head_radius"] * heading
        for frame in lean_frames(heading, [np.cross(EZ, heading)], params["strike_tilts"]):
            options.append(Stroke(arm, frame, spot + params["strike_height"] * EZ - pad * frame.approach,
                                  spot - params["strike_depth"] * EZ - pad * frame.approach))
    drum = task["instrument"]
    for option in first_feasible(scene, options, lambda o: o.arm, lambda o: stroke_waypoints(o, drum), f"strike {drum}"):
        attempt(robot.gripper, 0.0, arm=option.arm, duration=0.0)
        if not go(scene, option.arm, stroke_waypoints(option, drum)[0], option.joints[0] if option.joints else None):
            continue
        hits = strokes(scene, option.arm, option.above, option.down, option.frame, task["strikes"])
        if hits == 0:
            continue
        if hits < task["strikes"]:
            raise StepFailed(f"{option.arm} struck {hits} of {task['strikes']} times, then a stroke was refused")
        finish(scene, [option.arm])
        return
    raise StepFailed(f"no arm reaches {task['instrument']}'s head to strike it")


def strokes(scene, arm, above, down, frame, count):
    """Strike `count` times between `above` and `down`; how many strokes ran (0: the first was refused)."""
    params, robot = scene.params, scene.robot
    for k in range(count):
        if not attempt(robot.move_ee, [float(v) for v in down], frame.quaternion, arm=arm, linear=True,
                       duration=params["stroke_down_seconds"]):
            return k
        if not move_to(robot, arm, above, frame.quaternion, linear=True, duration=params["stroke_up_seconds"]):
            return k + 1
        if params["stroke_pause"] > 0:
            robot.wait(params["stroke_pause"])
    return count


def strike_with_tool(scene, task):
    """strike_drum with a stick: pick the stick up (planned so that the strokes are reachable too),
    then strike the head with its far end, the stick kept in the orientation it was lifted in: the
    tip goes straight down onto the head and back up."""
    params = scene.params
    tool = task["tool"]
    d_p, d_r = scene.pose(task["instrument"])
    head = d_p + d_r @ np.array([0.0, 0.0, task["head_height"]])
    radius = task["tool_radius"]

    def tip_now():
        t_p, t_r = scene.pose(tool)
        return [t_p, t_p + t_r[:, 2] * task["tool_length"]]

    def strike_points(arm, tip_offset):
        heading = scene.heading(arm, head)
        spot = head - params["strike_spot"] * task["head_radius"] * heading
        return (spot + (params["strike_height"] + radius) * EZ - tip_offset,
                spot + (radius - params["strike_depth"]) * EZ - tip_offset)

    def aim(grip):
        """Turn the grip's carry orientation about the vertical so the stick's far end points from
        the arm towards the drum."""
        turn = grip.carry.matrix @ grip.frame.matrix.T
        tip = max(tip_now(), key=lambda e: float(np.linalg.norm(e - grip.tcp)))
        offset = turn @ (tip - grip.tcp)
        want = scene.heading(grip.arm, head)
        yaw = math.atan2(want[1], want[0]) - math.atan2(offset[1], offset[0])
        grip.carry = yawed(grip.carry, math.degrees(yaw))
        return grip

    def then(grip, _offset):
        turn = grip.carry.matrix @ grip.frame.matrix.T
        tip = max(tip_now(), key=lambda e: float(np.linalg.norm(e - grip.tcp)))
        above, down = strike_points(grip.arm, turn @ (tip - grip.tcp))
        r = grip.carry.matrix
        return [(above, r, True), (down, r, True), (above, r, True)]  # the stick touches the drum: unchecked

    held = pick_for(scene, tool, task.get("prefer_arm"), then, [task["arm"]] if task.get("arm") else None,
                    adjust=aim)
    tcp_p, _ = scene.tcp(held.arm)
    tip = max(tip_now(), key=lambda e: float(np.linalg.norm(e - tcp_p)))
    above, down = strike_points(held.arm, tip - tcp_p)
    if not move_to(scene.robot, held.arm, above, held.frame.quaternion, linear=True):
        raise StepFailed(f"{held.arm} holds {tool} but cannot bring its tip over {task['instrument']}'s head")
    hits = strokes(scene, held.arm, above, down, held.frame, task["strikes"])
    if hits < task["strikes"]:
        raise StepFailed(f"{held.arm} struck {hits} of {task['strikes']} times with {tool}, then a stroke was refused")
    scene.robot.wait(params["settle_seconds"])
    scene.robot.done(success=True, note="struck with the tool")


class HandleGrip:
    """One way to take the drawer's handle: the arm, its orientation, the TCP on the bar, the opening."""

    def __init__(self, arm, frame, tcp, width):
        self.arm, self.frame, self.tcp, self.width = arm, frame, tcp, width
        self.joints = None


def handle_tcp(task, frame, bar_world, out):
    """TCP on the bar's middle, backed off along the approach so the fingertips stop short of the
    drawer front."""
    inward = float(np.dot(frame.approach, -out))
    overshoot = task["pad_half_length"] * inward - (task["handle_room"] - 0.003)
    if overshoot <= 0 or inward <= 1e-6:
        return bar_world
    return bar_world - overshoot / inward * frame.approach


def riders(scene, cid):
    """The objects resting in `cid`'s drawer now (their middle inside its sliding box): they move with
    the drawer, so a hand that slides it does not close on them, and planning its motion against
    where they are now would refuse every push."""
    c_p, c_r = scene.pose(cid)
    opening = scene.drawer_opening(cid)
    inside = set()
    for box in scene.object(cid).get("boxes", []):
        if not box.get("slides"):
            continue
        centre = np.asarray(box["centre"], dtype=float) + np.array([opening, 0.0, 0.0])
        half = np.asarray(box["half"], dtype=float)
        for oid in scene.spec["objects"]:
            if oid != cid and bool(np.all(np.abs(c_r.T @ (scene.centre(oid) - c_p) - centre) <= half)):
                inside.add(oid)
    return inside


def move_drawer(scene, task, to_opening, preferred=None):
    """Grip the drawer's handle, slide it until the drawer is `to_opening` open, let go and back
    away. Returns the arm that did it; StepFailed when no arm and orientation can."""
    params, robot = scene.params, scene.robot
    cid = task["cabinet"]
    c_p, c_r = scene.pose(cid)
    opening = scene.drawer_opening(cid)
    out, along = c_r[:, 0], c_r[:, 1]
    bar_world = c_p + c_r @ np.asarray(task["handle_centre"], dtype=float) + opening * out
    travel = to_opening - opening
    half = task["handle_half_depth"]
    back = params["approach_distance"]
    options = []
    for arm in scene.arms_for(bar_world, preferred):
        for frame in roll_frames(along, -out, params["handle_tilts"]):
            width = min(scene.gripper["max_width"],
                        2 * half * (abs(float(frame.closing @ out)) + abs(float(frame.closing[2]))) + params["handle_open_margin"])
            options.append(HandleGrip(arm, frame, handle_tcp(task, frame, bar_world, out), width))

    def waypoints(o):
        r = o.frame.matrix
        end = o.tcp + travel * out
        own = {cid} | riders(scene, cid)  # the gripper takes the handle: only the cabinet (and what it holds) may be touched
        return [(o.tcp - back * o.frame.approach, r, False, ()), (o.tcp, r, True, own), (end, r, True, own),
                (end - back * o.frame.approach, r, True, own)]

    for o in first_feasible(scene, options, lambda o: o.arm, waypoints, f"slide {cid}'s drawer"):
        path = waypoints(o)
        attempt(robot.gripper, o.width, arm=o.arm, duration=0.0)
        if not go(scene, o.arm, path[0], o.joints[0] if o.joints else None):
            continue
        if not go(scene, o.arm, path[1]):
            continue
        robot.gripper(0.0, arm=o.arm, duration=params["close_seconds"])
        seconds = max(1.0, abs(travel) / params["drawer_speed"])
        if not attempt(robot.move_ee, [float(v) for v in path[2][0]], o.frame.quaternion, arm=o.arm, linear=True,
                       duration=seconds):
            robot.gripper(o.width, arm=o.arm, duration=0.4)
            move_to(robot, o.arm, path[0][0], o.frame.quaternion, linear=True)
            continue
        robot.wait(params["handle_hold"])
        # let go (a little wider than around the bar: wide open, the inner finger would push the front)
        robot.gripper(min(scene.gripper["max_width"], o.width + params["handle_release_gap"]), arm=o.arm, duration=0.4)
        go(scene, o.arm, path[3])
        log(f"{o.arm} moved the drawer from {opening:.3f} to {scene.drawer_opening(cid):.3f} m")
        return o.arm
    raise StepFailed(f"no arm can slide {cid}'s drawer to {to_opening:.3f} m")


class Push:
    """One way to push the drawer shut: the arm, its orientation, and the TCP above the contact, at
    it, at the end of the push and back up."""

    def __init__(self, arm, frame, above, start, end, lift):
        self.arm, self.frame, self.above, self.start, self.end, self.lift = arm, frame, above, start, end, lift
        self.joints = None

    def waypoints(self, moving):
        """The push's waypoints; `moving`: the cabinet and what rides in its drawer (may be touched)."""
        r = self.frame.matrix
        return [(self.above, r, False, ()), (self.start, r, True, moving), (self.end, r, True, moving),
                (self.lift, r, True, moving)]


def push_drawer(scene, task, preferred=None):
    """Push the drawer shut with the closed fingers' tips, from the robot's side: against the
    handle bar's outer face, or against the drawer front above the handle. Returns the arm, or None
    when no arm and orientation can."""
    params, robot = scene.params, scene.robot
    cid = task["cabinet"]
    c_p, c_r = scene.pose(cid)
    opening = scene.drawer_opening(cid)
    if opening <= params["closed_below"]:
        return preferred or scene.arms[0]
    out, along = c_r[:, 0], c_r[:, 1]
    bar = c_p + c_r @ np.asarray(task["handle_centre"], dtype=float) + opening * out
    gap = scene.gripper["finger_thickness"] / 2 + params["push_gap"]
    contacts = [bar + (task["handle_half_depth"] + gap) * out,  # the handle's outer face
                c_p + c_r @ np.array([task["front_x"] + gap, 0.0, task["drawer_top"] - params["push_depth"]])
                + opening * out]  # the drawer front's outer face, above the handle
    push = (opening + params["close_overshoot"]) * -out
    pad = scene.gripper["pad_half_length"]
    options = []
    for arm in scene.arms_for(bar, preferred):
        for contact in contacts:
            for frame in lean_frames(-out, [along], params["push_tilts"]):
                start = contact - pad * frame.approach
                above = start + params["push_rise"] * EZ
                options.append(Push(arm, frame, above, start, start + push, start + push + params["push_rise"] * EZ))
    moving = {cid} | riders(scene, cid)
    for o in first_feasible(scene, options, lambda o: o.arm, lambda o: o.waypoints(moving), f"push {cid}'s drawer shut"):
        path = o.waypoints(moving)
        attempt(robot.gripper, 0.0, arm=o.arm, duration=0.0)
        if not go(scene, o.arm, path[0], o.joints[0] if o.joints else None):
            continue
        if not go(scene, o.arm, path[1]):
            continue
        seconds = max(1.0, opening / params["drawer_speed"])
        if not attempt(robot.move_ee, [float(v) for v in path[2][0]], o.frame.quaternion, arm=o.arm, linear=True,
                       duration=seconds):
            go(scene, o.arm, (path[0][0], path[0][1], True))
            continue
        robot.wait(params["handle_hold"])
        go(scene, o.arm, path[3])
        log(f"{o.arm} pushed the drawer from {opening:.3f} to {scene.drawer_opening(cid):.3f} m")
        return o.arm
    return None


def drawer_put_inside(scene, task):
    """drawer_put_inside: pull the handle to open the drawer, pick the item, lower it into the open
    part of the drawer and let go, then push the handle to close the drawer."""
    params = scene.params
    cid = task["cabinet"]
    wanted = max(params["open_fraction"] * task["travel"], task["open_at_least"] + params["open_margin"])
    opener = move_drawer(scene, task, min(wanted, task["travel"]), params.get("drawer_arm"))
    park(scene, opener)

    def goal_for(grip, offset):
        """A spot in the open part of the drawer's cavity, from where the drawer is now: midway
        between the carcass front and the drawer front, and across the drawer towards the arm that
        holds the item (by `drawer_toward_arm` of the way from the middle to as near as the open
        fingers can go to the side wall): a far corner of the cavity can be out of that arm's reach."""
        c_p, c_r = scene.pose(cid)
        opening = scene.drawer_opening(cid)
        x0 = task["front_x"]  # the carcass front ...
        x1 = task["interior_max"][0] + opening  # ... to the drawer front's inner face
        if x1 - x0 < 2 * task["item_extent"]:
            return None
        lo, hi = task["interior_min"][1], task["interior_max"][1]
        middle = 0.5 * (lo + hi)
        # the fingers open wide to let go, around the item whichever way they close
        room = max(task["item_extent"], 0.5 * scene.gripper["max_width"] + scene.gripper["finger_thickness"])
        room += params["drawer_wall_gap"]
        across = middle
        if hi - lo > 2 * room:
            arm_y = float((c_r.T @ (scene.base(grip.arm) - c_p))[1])
            nearest = min(max(arm_y, lo + room), hi - room)
            across = middle + params["drawer_toward_arm"] * (nearest - middle)
        local = np.array([0.5 * (x0 + x1) + params["drawer_place_x"], across,
                          task["interior_min"][2] + task["item_half_height"] + params["release_clearance"]])
        return c_p + c_r @ local + np.asarray(params["place_offset"], dtype=float)

    # pass over the open drawer's walls: over its footprint (grown by the item and a margin), the
    # item's middle stays above the walls' top
    c_p, c_r = scene.pose(cid)
    opening = scene.drawer_opening(cid)
    walls = c_p + c_r @ np.array([0.0, 0.0, task["drawer_top"]])
    grow = task["item_extent"] + params["drawer_carry_clearance"]  # the fingers: the kinematic check
    x0, x1 = task["front_x"], task["front_x"] + opening + task["handle_room"] + task["handle_half_depth"] * 2
    centre = c_p + c_r @ np.array([0.5 * (x0 + x1), 0.0, 0.0])
    travel = (float(walls[2]) + params["drawer_carry_clearance"] + task["item_half_height"],
              box_region(centre, c_r, [0.5 * (x1 - x0) + grow, task["half_width"] + grow]))
    held, goal = pick_and_place(scene, task["item"], task.get("prefer_arm"), goal_for,
                                params["drawer_carry_clearance"], travel, task.get("item_arm"), touch=(cid,))
    if not lower_and_release(scene, held, goal):
        raise StepFailed(f"{held.arm} cannot lower {task['item']} into {cid}'s drawer")
    park(scene, held.arm)
    closer = push_drawer(scene, task, opener) if params["close_by_pushing"] else None
    if closer is None:
        closer = move_drawer(scene, task, -params["close_overshoot"], opener)
    finish(scene, [closer])


FAMILIES = {
    "place_in": place_in,
    "nest": place_in,
    "place_on": place_on,
    "place_on_scale": place_on,
    "strike_drum": strike_drum,
    "drawer_put_inside": drawer_put_inside,
}
