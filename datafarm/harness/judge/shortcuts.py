"""Canned shortcut trajectories: from one trajectory that does the task properly, the harness makes
the cheats a judge must reject (DESIGN stage 4):

| name | what the cheat does |
| --- | --- |
| `teleport` | the goal object is let go early and appears at its final place: its pose jumps, with no contact |
| `stage_skipped` | an intermediate stage is left out (the grasp: only one finger ever touches the object, it is pushed along), yet later stages' conditions are reached |
| `success_too_brief` | the episode ends at the first step success holds: success for one frame |
| `penetration` | the goal object is carried on a straight line from where it was picked to where it ends, through whatever lies between (a container's wall, a scale's housing) |

The goal object is the first object the contract's success condition places (`inside`, `on`,
`above`), else the first one it has `grasped`, else the first one it counts contacts with (a struck
drum). A goal object that is only touched teleports by jumping up to meet the robot just before the
first touch. A one-stage contract (strike the drum) has no intermediate stage, so no `stage_skipped`. Every shortcut is checked against a reference judge
made from T (K's default thresholds) to really show its cheat; a trajectory from which a shortcut
cannot be made raises ValueError naming why.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.contract import TaskContract
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.judge import (
    Above,
    AllOf,
    AnyOf,
    ContactCount,
    Grasped,
    Inside,
    JudgeSpec,
    JudgeVerdict,
    NotOf,
    On,
)
from datafarm.harness.judge.evaluate import evaluate
from datafarm.harness.judge.predicates import Conditions, run_starts
from datafarm.harness.judge.scene import Scene
from datafarm.harness.judge.trajectory import Contact, ObjectTrack, Trajectory

SHORTCUT_NAMES = ("teleport", "stage_skipped", "success_too_brief", "penetration")
"""The canned shortcuts, in the order `canned_shortcuts` returns them."""
STILL_M = 0.005
"""A goal object that never moves further than this from its start is only touched, not carried."""
JUMP_M = 0.03
"""How far a touched-only goal object jumps in the `teleport` shortcut, metres."""
_REFERENCE_INVARIANTS = [
    {"shortcut": "teleport"}, {"shortcut": "penetration"}, {"shortcut": "stage_skipped"},
]


def canned_shortcuts(good: Trajectory, grounding: Grounding, contract: TaskContract) -> list[tuple[str, Trajectory]]:
    """The canned shortcut trajectories made from `good` (which must pass T's own stages and success):
    all four, less `stage_skipped` for a one-stage contract."""
    reference = evaluate(contract_judge(contract), good)
    if not reference.passed:
        raise ValueError(f"the good trajectory does not do the task as the contract states it: {reference.reason}")
    goal = goal_object(contract, grounding)
    out = [("teleport", _teleport(good, goal, reference, contract))]
    if len(contract.stages) > 1:  # a one-stage contract has no intermediate stage to leave out
        out.append(("stage_skipped", _stage_skipped(good, contract)))
    out += [
        ("success_too_brief", _success_too_brief(good, contract, reference)),
        ("penetration", _penetration(good, goal, contract)),
    ]
    return out


def contract_judge(contract: TaskContract, invariants: list[dict] | None = None) -> JudgeSpec:
    """A judge made literally from T's stages and success (what the shortcuts are measured against)."""
    invariants = list(invariants or []) + [{"shortcut": "success_too_brief", "min_hold_s": contract.success.hold_s}]
    return JudgeSpec.model_validate({
        "stages": [{"name": s.name, "condition": s.model_dump(mode="json", by_alias=True)["done_when"], "hold_s": s.hold_s,
                    "time_limit_s": s.time_limit_s} for s in contract.stages],
        "success": contract.success.model_dump(mode="json", by_alias=True)["condition"],
        "invariants": invariants,
        "time_limit_s": contract.time_limit_s,
    })


def goal_object(contract: TaskContract, grounding: Grounding) -> str:
    """The object the task moves into place (see the module docstring)."""
    conditions = [contract.success.condition] + [s.done_when for s in reversed(contract.stages)]
    ids = {o.id for o in grounding.objects}
    for kinds in ((Inside, On, Above), (Grasped,)):
        for cond in conditions:
            for leaf in _positive_leaves(cond):
                if isinstance(leaf, kinds):
                    obj = leaf.object.partition(".")[0]
                    if obj in ids:
                        return obj
    for cond in conditions:  # a task that only touches an object (strike a drum): the object touched
        for leaf in _positive_leaves(cond):
            if isinstance(leaf, ContactCount):
                for side in (leaf.a, leaf.b):
                    obj = side.partition(".")[0]
                    if obj in ids:
                        return obj
    raise ValueError("the contract places or touches no object (no inside/on/above/grasped/contact_count of an "
                     "object of G in its success or stages)")


def _positive_leaves(cond: Artifact) -> Iterator[Artifact]:
    """The predicates of `cond` that must be true (not under a `not`)."""
    if isinstance(cond, AllOf):
        for c in cond.all:
            yield from _positive_leaves(c)
    elif isinstance(cond, AnyOf):
        for c in cond.any:
            yield from _positive_leaves(c)
    elif not isinstance(cond, NotOf):
        yield cond


# --- contact helpers ----------------------------------------------------------------------------------


def _robot_spans(traj: Trajectory, obj: str) -> list[tuple[int, int]]:
    """[start, end) step spans during which the robot touches `obj`, merged."""
    scene = Scene(traj)
    body, robot = scene.resolve(obj), scene.resolve("robot")
    mask = scene.contact_mask(body, robot)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(int), [0]])))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2])]


def _is_robot_contact(traj: Trajectory, c: Contact, obj: str) -> bool:
    scene = Scene(traj)
    body, robot = scene.resolve(obj), scene.resolve("robot")
    return (scene.matches(body, c.a) and scene.matches(robot, c.b)) or (scene.matches(body, c.b) and scene.matches(robot, c.a))


def _cut_robot_contacts(traj: Trajectory, obj: str, after: int) -> list[Contact]:
    """The contacts, the robot's with `obj` ended before step `after` (later ones dropped)."""
    last = float(traj.times[after - 1]) if after > 0 else -1.0
    out = []
    for c in traj.contacts:
        if not _is_robot_contact(traj, c, obj):
            out.append(c)
        elif c.start_t <= last + 1e-9:
            end = last if c.end_t is None or c.end_t > last else c.end_t
            out.append(Contact(c.a, c.b, c.start_t, end, c.max_impulse, c.max_penetration))
    return out


def _with_object(traj: Trajectory, obj: str, pose: np.ndarray, lin: np.ndarray, ang: np.ndarray,
                 contacts: list[Contact] | None = None) -> Trajectory:
    objects = dict(traj.objects)
    objects[obj] = ObjectTrack(pose, lin, ang)
    return traj.copy(objects=objects, contacts=contacts if contacts is not None else list(traj.contacts))


def _shows(traj: Trajectory, contract: TaskContract, want: str) -> bool:
    """True when a reference judge built from T sees the shortcut `want` in `traj`."""
    verdict = evaluate(contract_judge(contract, _REFERENCE_INVARIANTS), traj)
    return any(v.shortcut == want for v in verdict.violations)


def _check(name: str, traj: Trajectory, contract: TaskContract, want: str) -> Trajectory:
    """`traj`, once a reference judge built from T confirms it shows its cheat; ValueError otherwise."""
    if not _shows(traj, contract, want):
        raise ValueError(f"could not make the {name!r} shortcut from this trajectory: a reference judge built "
                         f"from the contract sees no {want} in it")
    return traj


# --- the shortcuts ------------------------------------------------------------------------------------


def _teleport(good: Trajectory, goal: str, reference: JudgeVerdict, contract: TaskContract) -> Trajectory:
    spans = _robot_spans(good, goal)
    if not spans:
        raise ValueError(f"the robot never touches the goal object {goal!r}: nothing to teleport")
    n = good.n_steps
    track = good.objects[goal]
    pose, lin, ang = track.pose.copy(), track.linear_velocity.copy(), track.angular_velocity.copy()
    if np.linalg.norm(track.pose[:, :3] - track.pose[0, :3], axis=1).max() < STILL_M:
        # Only touched, never carried (a drum that is struck): it jumps up to meet the robot just
        # before the first touch and back, untouched at the jump.
        touch = spans[0][0]
        jump = max(1, touch - 3)
        if touch - jump < 1:
            raise ValueError(f"the robot touches {goal!r} from the first step: no untouched moment to jump in")
        pose[jump:touch, 2] += JUMP_M
        lin[jump:touch] = 0.0
        ang[jump:touch] = 0.0
        return _check("teleport", _with_object(good, goal, pose, lin, ang), contract, "teleport")
    release = spans[-1][1]
    if release < n:
        # Let go right after the stage before the placing one completed; the object appears where it
        # would have been released.
        ends = [good.index_at(s.end_s) for s in reference.stages if s.end_s is not None]
        placing = next((k for k, e in enumerate(ends) if e >= release - 1), len(ends) - 1)
        begin = good.index_at(reference.stages[placing].start_s)
        jump = min(max(begin + 2, spans[-1][0] + 2), release - 1)
        pose[jump:release] = pose[release]
        lin[jump:release] = 0.0
        ang[jump:release] = 0.0
        contacts = _cut_robot_contacts(good, goal, jump - 1)  # untouched on both sides of the jump
        return _check("teleport", _with_object(good, goal, pose, lin, ang, contacts), contract, "teleport")
    # Never let go (a tool kept in hand): it freezes in the gripper, then jumps to where it should be.
    start, stop = spans[-1][0] + 1, (spans[-1][0] + n) // 2
    pose[start:stop] = pose[start]
    lin[start:stop] = 0.0
    ang[start:stop] = 0.0
    return _check("teleport", _with_object(good, goal, pose, lin, ang), contract, "teleport")


def _stage_skipped(good: Trajectory, contract: TaskContract) -> Trajectory:
    for k, stage in enumerate(contract.stages[:-1]):
        for leaf in _positive_leaves(stage.done_when):
            if isinstance(leaf, Grasped):
                candidate = _one_finger(good, leaf.object)
            elif isinstance(leaf, ContactCount):
                candidate = _without_contacts(good, leaf.a, leaf.b)
            else:
                continue
            verdict = evaluate(contract_judge(contract, _REFERENCE_INVARIANTS), candidate)
            skipped = any(v.shortcut == "stage_skipped" for v in verdict.violations)
            if skipped and verdict.stages[-1].name == stage.name and verdict.stages[-1].end_s is None:
                return candidate
    raise ValueError("could not make the 'stage_skipped' shortcut: no intermediate stage needs a grasp or a contact "
                     "count that can be left out while later stages are still reached")


def _one_finger(traj: Trajectory, obj: str) -> Trajectory:
    """Only one finger of each gripper ever touches `obj` (a push, not a grasp)."""
    scene = Scene(traj)
    body = scene.resolve(obj)
    second = {scene.finger_links(arm)[1] for arm in scene.arm_names}
    contacts = [c for c in traj.contacts
                if not ((c.a in second and scene.matches(body, c.b)) or (c.b in second and scene.matches(body, c.a)))]
    return traj.copy(contacts=contacts)


def _without_contacts(traj: Trajectory, a: str, b: str) -> Trajectory:
    """No contact events between `a` and `b`."""
    scene = Scene(traj)
    ba, bb = scene.resolve(a), scene.resolve(b)
    drop = {id(c) for c in scene.contacts_between(ba, bb)}
    return traj.copy(contacts=[c for c in traj.contacts if id(c) not in drop])


def _success_too_brief(good: Trajectory, contract: TaskContract, reference: JudgeVerdict) -> Trajectory:
    conds = Conditions(Scene(good))
    last_start = good.index_at(reference.stages[-1].start_s)
    success = conds.evaluate(contract.success.condition, last_start)
    if not success[-1]:
        raise ValueError("success does not hold at the end of the good trajectory")
    first = int(run_starts(success)[-1])
    if first >= good.n_steps - 1:
        raise ValueError("success already holds for a single frame in the good trajectory")
    return good.truncated(first + 1)


def _penetration(good: Trajectory, goal: str, contract: TaskContract) -> Trajectory:
    spans = _robot_spans(good, goal)
    if not spans:
        raise ValueError(f"the robot never touches the goal object {goal!r}: nothing to push through")
    straight = _straight_carry(good, goal, spans)
    if straight is not None and _shows(straight, contract, "penetration"):
        return straight
    return _check("penetration", _sunk_into_table(good, goal, spans), contract, "penetration")


def _straight_carry(good: Trajectory, goal: str, spans: list[tuple[int, int]]) -> Trajectory | None:
    """The goal object carried on a straight line from where it rested to where it was let go."""
    track = good.objects[goal]
    pos = track.pose[:, :3]
    release = min(spans[-1][1], good.n_steps - 1)
    resting = np.flatnonzero(np.linalg.norm(pos[:release] - pos[0], axis=1) < 1e-3)
    begin = int(resting[-1]) if resting.size else spans[0][0]
    if release - begin < 2:
        return None
    pose, lin, ang = track.pose.copy(), track.linear_velocity.copy(), track.angular_velocity.copy()
    f = np.linspace(0.0, 1.0, release - begin + 1)[:, None]
    pose[begin:release + 1, :3] = (1 - f) * pose[begin, :3] + f * pose[release, :3]
    q0, q1 = pose[begin, 3:], pose[release, 3:]
    q1 = q1 if np.dot(q0, q1) >= 0 else -q1
    quats = (1 - f) * q0 + f * q1
    pose[begin:release + 1, 3:] = quats / np.linalg.norm(quats, axis=1, keepdims=True)
    lin[begin + 1:release] = (pose[release, :3] - pose[begin, :3]) / ((release - begin) * good.dt)
    ang[begin + 1:release] = 0.0
    return _with_object(good, goal, pose, lin, ang)


def _sunk_into_table(good: Trajectory, goal: str, spans: list[tuple[int, int]]) -> Trajectory:
    """Right after the robot first touches it, the goal object is pushed 2 cm down into the table and back."""
    track = good.objects[goal]
    pose, lin = track.pose.copy(), track.linear_velocity.copy()
    start, stop = spans[0]
    k = min(10, (stop - start) // 2)
    if k < 2:
        raise ValueError(f"the robot touches the goal object {goal!r} too briefly to push it through anything")
    depth = 0.02
    profile = np.concatenate([np.linspace(0.0, depth, k + 1), np.linspace(depth, 0.0, k + 1)[1:]])
    rows = slice(start, start + len(profile))
    pose[rows, 2] -= profile
    lin[rows, 2] -= np.gradient(profile, good.dt)
    return _with_object(good, goal, pose, lin, track.angular_velocity.copy())
