"""Scripted good trajectories for judge acceptance (stage 4), built from T and G alone.

Acceptance needs an episode that does the task before any expert exists: the harness scripts one
kinematically (ScriptedEpisode: the gripper approaches, contacts begin, objects move only while held,
are placed and settle) for any task of the builtin families, and derives the canned shortcuts from it.
It is trusted harness logic, not agent logic: the judge-writer never sees it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from datafarm.agents.builtin.contract import DRAWER_CLEARANCE, drawer_open_m
from datafarm.agents.builtin.linking import _quat_matrix, local_box
from datafarm.artifacts.contract import TaskContract
from datafarm.artifacts.grounding import Grounding
from datafarm.harness.judge import SceneGeometry, Trajectory
from datafarm.harness.judge.synthetic import ScriptedEpisode

HZ = 20.0
"""Control rate of the scripted episodes (the recorder's default)."""


def _bottom_offset(obj: Any) -> float:
    """Pose z minus the lowest point of the object, as it rests in G."""
    lo, hi = local_box(obj)
    corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    return float(-(corners @ _quat_matrix(obj.pose.quaternion).T)[:, 2].min())


def _top(obj: Any) -> float:
    """Highest point of the object as it rests in G (world z)."""
    lo, hi = local_box(obj)
    corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    return float(obj.pose.position[2] + (corners @ _quat_matrix(obj.pose.quaternion).T)[:, 2].max())


def _arm(g: Grounding) -> str:
    return g.robot.arms[-1].name


def _clear_height(g: Grounding, item: Any) -> float:
    """A carrying height (item's pose z) that keeps the item clear of every object."""
    return max(_top(o) for o in g.objects if o.id != item.id) + 0.03 + _bottom_offset(item)


def _carry(ep: ScriptedEpisode, g: Grounding, item: Any, to_xy: tuple[float, float], to_z: float) -> None:
    """Grasp `item` where it rests, lift it clear, carry it over `to_xy` and lower it to pose z `to_z`."""
    x0, y0, _ = item.pose.position
    high = _clear_height(g, item)
    ep.grasp(_arm(g), item.id).wait(0.3).part(item.id, "table")
    ep.advance(1.0, moves={item.id: (x0, y0, high)})
    ep.advance(1.5, moves={item.id: (*to_xy, high)})
    ep.advance(1.0, moves={item.id: (*to_xy, to_z)})


def _settle(ep: ScriptedEpisode, contract: TaskContract) -> None:
    ep.wait(contract.success.hold_s + 2.0)


def _place_episode(g: Grounding, contract: TaskContract) -> Trajectory:
    roles = contract.roles
    item = g.object(roles.get("item") or roles["inner"])
    target = g.object(roles.get("container") or roles.get("support") or roles.get("outer") or roles["scale"])
    scales = [target.id] if target.kind == "scale" else []
    ep = ScriptedEpisode(SceneGeometry.from_grounding(g), HZ, arms=[a.name for a in g.robot.arms], scales=scales)
    for obj in g.objects:
        ep.touch(obj.id, "table")
    ep.wait(1.0)
    if target.kind == "cup":
        floor, contact = target.wall_thickness.value, target.id
    elif target.kind == "scale":
        floor, contact = target.body_height.value + target.plate.z.value, f"{target.id}.plate"
    elif target.kind == "drum":
        floor, contact = target.height.value, f"{target.id}.head"
    else:
        floor, contact = _top(target) - target.pose.position[2], target.id
    _carry(ep, g, item, tuple(target.pose.position[:2]), target.pose.position[2] + floor + _bottom_offset(item))
    ep.touch(item.id, contact)
    if scales:
        ep.set_reading(target.id, item.mass.value * 1000)
    ep.wait(0.3).release(_arm(g), item.id)
    _settle(ep, contract)
    return ep.build()


def _drawer_episode(g: Grounding, contract: TaskContract) -> Trajectory:
    cab, item = g.object(contract.roles["container"]), g.object(contract.roles["item"])
    joint = f"{cab.id}.drawer"
    arms = [a.name for a in g.robot.arms]
    ep = ScriptedEpisode(SceneGeometry.from_grounding(g), HZ, arms=arms, joints={joint: 0.0})
    for obj in g.objects:
        ep.touch(obj.id, "table")
    ep.wait(0.5)
    opening = max(0.9 * cab.drawer_travel.value, drawer_open_m(cab, item) + 0.01)
    pull = arms[0]
    ep.grasp(pull, f"{cab.id}.handle").advance(1.5, joints={joint: opening}).wait(0.3)
    ep.release(pull, f"{cab.id}.handle").wait(0.2)
    sx, wall = cab.size.x.value, cab.wall_thickness.value
    local = np.array([sx / 2 + (opening - wall) / 2, 0.0, cab.drawer_bottom.value + DRAWER_CLEARANCE + wall])
    world = np.asarray(cab.pose.position) + _quat_matrix(cab.pose.quaternion) @ local
    _carry(ep, g, item, (float(world[0]), float(world[1])), float(world[2]) + _bottom_offset(item))
    ep.touch(item.id, joint).wait(0.2).release(_arm(g), item.id).wait(0.5)
    if len(contract.stages) == 4:  # it closes the drawer
        ep.grasp(pull, f"{cab.id}.handle")
        ep.advance(1.5, joints={joint: 0.0}, riders={joint: [item.id]})
        ep.release(pull, f"{cab.id}.handle")
    _settle(ep, contract)
    return ep.build()


def _drum_episode(g: Grounding, contract: TaskContract) -> Trajectory:
    drum = g.object(contract.roles["instrument"])
    n = max(leaf.at_least for s in contract.stages for leaf in [s.done_when] if hasattr(leaf, "at_least"))
    ep = ScriptedEpisode(SceneGeometry.from_grounding(g), contract.control_hz, arms=[a.name for a in g.robot.arms])
    for obj in g.objects:
        ep.touch(obj.id, "table")
    ep.wait(0.5)
    head_top = drum.pose.position[2] + drum.height.value
    xy = tuple(drum.pose.position[:2])
    tool_id = contract.roles.get("tool")
    if tool_id is None:
        striker = f"{_arm(g)}.link7"
        for _ in range(n):
            ep.wait(0.3).touch(f"{drum.id}.head", striker).wait(0.06).part(f"{drum.id}.head", striker).wait(0.3)
        _settle(ep, contract)
        return ep.build()
    tool = g.object(tool_id)
    rest, hover = head_top + _bottom_offset(tool), head_top + _bottom_offset(tool) + 0.09
    ep.grasp(_arm(g), tool.id).wait(0.3).part(tool.id, "table")
    x0, y0, _ = tool.pose.position
    ep.advance(1.0, moves={tool.id: (x0, y0, _clear_height(g, tool))})
    ep.advance(1.0, moves={tool.id: (*xy, hover)})
    for _ in range(n):
        ep.advance(0.3, moves={tool.id: (*xy, rest)})
        ep.touch(tool.id, f"{drum.id}.head").wait(0.06).part(tool.id, f"{drum.id}.head")
        ep.advance(0.25, moves={tool.id: (*xy, hover)})
    _settle(ep, contract)
    return ep.build()


def good_episode(g: Grounding, contract: TaskContract) -> Trajectory:
    """A trajectory that does the contract's task properly on G (by family)."""
    if contract.family == "drawer_put_inside":
        return _drawer_episode(g, contract)
    if contract.family == "strike_drum":
        return _drum_episode(g, contract)
    return _place_episode(g, contract)


# --- the scripts are sound ---------------------------------------------------------------------------
