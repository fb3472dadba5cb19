"""The builtin author's expert stage (stage 5): write C, `expert/controller.py`, for the grounded
scene and the contract's family, try it on B's dev seeds, and revise its parameters from the
verdicts until the dev pass rate in B is reached or the budget is spent.

The controller is generated, never keyed to an example: from G it takes the arms' bases and K's
kinematic table of the PiPER, every object's kind and sizes (and a drawer's handle and cavity), from
T the family, which object plays which role, the arm a `grasped` condition names, and the numbers it
asks for (strikes, how far the drawer opens). The program itself (`controllers/runtime.py` and
`controllers/families.py`, inlined) is the same for every scene: it reads every pose with
`observe()` at run time (S moves objects per seed), plans each motion with the arm's kinematics
before making it (nearest arm first, least tilted gripper, clear of the other objects, a hand-over
between two arms when one cannot do it alone) and drives K's harness API (`datafarm_expert`).

    source = write_controller(grounding, contract, default_params(grounding, contract))
    params = revise(params, verdicts)          # next parameters from dev verdicts, None when out of ideas
    result = run_expert_stage(tools, grounding, contract, batch, budget)

The stage acts only through the author's tools. `run_expert_stage(tools, ...)` is written as
straight-line code against one callable, `tools(calls) -> answers` (`ExpertTools`: a batch of
(tool name, arguments) in, each tool's result text out), using the author's own tools:
`write_controller`, `read_artifact` (C, to copy the harness's dev-run record), `write_artifact` (C)
and `request_rollout(dev_seed)`. Two implementations:

- `respond(request, info)`, the builtin role function the author's dispatcher calls for the expert
  stage: it replays the stage against the conversation (`ReplayTools`: every batch the stage makes is
  answered by the tool results already in the conversation, in order) and answers the model turn with
  the first batch that has no results yet, as tool calls. The stage is deterministic, so each turn
  re-runs it to the same point; every step is a real tool call in the transcript and the ledger. One
  controller version takes three turns (write the controller and read C; write C; all dev seeds).
  It reads G and T with `read_artifact`, the dev seeds from the `request_rollout` tool's description,
  and the pass rate and version budget from the stage's instructions when they say (`plan_from_request`;
  else 0.8 and 5).
- `DirectTools(toolbox, context)`, which runs the calls on a Toolbox directly (tests, scripts).
"""

from __future__ import annotations

import json
import math
import pprint
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import yaml
from pydantic import ValidationError

from datafarm.agents.builtin.common import BuiltinRefusal
from datafarm.agents.builtin.controllers import inline_source
from datafarm.agents.messages import (
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCall,
    ToolResult,
)
from datafarm.artifacts.contract import TaskContract
from datafarm.artifacts.grounding import Grounding
from datafarm.capability.bundle import latest_with
from datafarm.harness.server import API_MODULE
from datafarm.hashing import sha256_bytes
from datafarm.sim.qualification.grasping import (
    FINGER_HALF_WIDTH,
    GRIP_MARGIN,
    HOUSING_FRONT,
    HOUSING_HALF,
    PAD_HALF_LENGTH,
    TABLE_CLEARANCE,
)
from datafarm.sim.robots.piper import (
    ARM_JOINTS,
    FINGER_THICKNESS,
    GRIPPER_MAX_WIDTH,
    PIPER_TABLE,
    TCP_IN_LINK6,
)
from datafarm.sim.world.frames import pose_to_matrix
from datafarm.sim.world.shapes import drawer_geometry

HARNESS_API = f"harness_api/{API_MODULE}"
"""The K file of the harness API the generated controllers use: they are written against the newest
release that ships it (the write tool names the task's own K when that differs)."""

FAMILIES = ("place_in", "nest", "place_on", "place_on_scale", "strike_drum", "drawer_put_inside")
"""Task families the builtin expert can write a controller for."""

SKILLS: dict[str, list[str]] = {
    "place_in": ["approach", "grasp", "lift", "insert"],
    "nest": ["approach", "grasp", "lift", "insert"],
    "place_on": ["approach", "grasp", "lift", "place"],
    "place_on_scale": ["approach", "grasp", "lift", "place"],
    "strike_drum": ["approach", "strike"],
    "drawer_put_inside": ["pull_handle", "approach", "grasp", "lift", "place", "push_handle"],
}
"""K motion skills each family's controller composes (for the manifest C)."""

DEFAULT_STRIKES = 3
"""Strikes when the contract asks for repeated strikes without a number."""


class ExpertError(ValueError):
    """The builtin expert cannot write a controller for this contract and scene."""


# --- what the controller is told: G's geometry and T's roles ----------------------------------------


def _centre(obj: Any) -> list[float]:
    """The middle of an object's body in its own frame (the frame's origin is on its resting face)."""
    kind = obj.kind
    if kind == "box" or kind == "drawer_cabinet":
        return [0.0, 0.0, obj.size.z.value / 2]
    if kind == "sphere":
        return [0.0, 0.0, obj.radius.value]
    if kind in ("cylinder", "cup", "drum"):
        return [0.0, 0.0, obj.height.value / 2]
    if kind == "scale":
        return [0.0, 0.0, (obj.body_height.value + obj.plate.z.value) / 2]
    return [0.0, 0.0, 0.0]


def _boxes(obj: Any) -> list[dict[str, Any]]:
    """Boxes (centre and half extents in the object's frame) around an object, for the controller to
    keep the gripper clear of; a drawer's box slides out with the opening (`slides`)."""
    kind = obj.kind
    if kind in ("box", "drawer_cabinet"):
        hx, hy, hz = obj.size.x.value / 2, obj.size.y.value / 2, obj.size.z.value / 2
    elif kind == "sphere":
        hx = hy = hz = obj.radius.value
    elif kind in ("cylinder", "cup", "drum"):
        hx = hy = {"cylinder": lambda: obj.radius.value, "cup": lambda: obj.outer_radius.value,
                   "drum": lambda: obj.head_radius.value}[kind]()
        hz = obj.height.value / 2
    elif kind == "scale":
        hx, hy, hz = obj.plate.x.value / 2, obj.plate.y.value / 2, (obj.body_height.value + obj.plate.z.value) / 2
    else:
        return []
    boxes = [{"centre": [0.0, 0.0, hz], "half": [hx, hy, hz]}]
    if kind == "drawer_cabinet":  # the drawer and its handle, which slide out of the front (+x)
        travel, protrusion = obj.drawer_travel.value, obj.handle_protrusion.value
        x0, x1 = hx - travel, hx + protrusion
        z0, z1 = obj.drawer_bottom.value, obj.drawer_bottom.value + obj.drawer_height.value
        boxes.append({"centre": [(x0 + x1) / 2, 0.0, (z0 + z1) / 2], "half": [(x1 - x0) / 2, hy, (z1 - z0) / 2],
                      "slides": True})
    return boxes


def _object_spec(obj: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"kind": obj.kind, "centre": _centre(obj), "boxes": _boxes(obj), "extent": _size(obj)}
    if obj.kind in ("box", "drawer_cabinet"):
        spec["size"] = [obj.size.x.value, obj.size.y.value, obj.size.z.value]
    if obj.kind in ("sphere", "cylinder"):
        spec["radius"] = obj.radius.value
    if obj.kind in ("cylinder", "cup", "drum"):
        spec["height"] = obj.height.value
    if obj.kind == "cup":
        spec["outer_radius"] = obj.outer_radius.value
        spec["wall_thickness"] = obj.wall_thickness.value
    if obj.kind == "drum":
        spec["head_radius"] = obj.head_radius.value
    return spec


def scene_spec(grounding: Grounding) -> dict[str, Any]:
    """What the controller knows of G: arm bases, the gripper's geometry, objects' kinds and sizes."""
    arms = getattr(grounding.robot, "arms", None)
    if not arms:
        raise ExpertError(f"robot {grounding.robot.kind!r} has no arms: the builtin expert drives arms")
    chain = reach = None
    if grounding.robot.kind in ("piper", "piper-dual"):  # K's kinematic table of the PiPER
        chain = [{"xyz": list(r.xyz), "rpy": list(r.rpy), "axis": list(r.axis)} for r in PIPER_TABLE if r.joint in ARM_JOINTS]
        rows = {r.joint: r for r in PIPER_TABLE}
        # the wrist centre lies (about) this far behind the TCP along the approach, and at most the
        # upper arm plus the forearm from the shoulder (joint2, above the base)
        reach = {"shoulder_height": rows["joint1"].xyz[2],
                 "wrist_offset": TCP_IN_LINK6[2] + float(np.linalg.norm(rows["joint6"].xyz)),
                 "radius": float(np.linalg.norm(rows["joint3"].xyz) + np.linalg.norm(rows["joint4"].xyz)) - 0.008}

    def arm_spec(arm: Any) -> dict[str, Any]:
        spec: dict[str, Any] = {"base": [float(v) for v in arm.base.position]}
        if chain is not None:
            spec.update(base_matrix=[[round(float(v), 12) for v in row] for row in pose_to_matrix(arm.base)],
                        chain=chain, tcp=list(TCP_IN_LINK6), reach=reach)
        return spec

    return {
        "arms": {arm.name: arm_spec(arm) for arm in arms},
        "gripper": {
            "max_width": GRIPPER_MAX_WIDTH, "pad_half_length": PAD_HALF_LENGTH, "finger_half_width": FINGER_HALF_WIDTH,
            "finger_thickness": FINGER_THICKNESS, "table_clearance": TABLE_CLEARANCE, "grip_margin": GRIP_MARGIN,
            "housing_front": HOUSING_FRONT, "housing_half": list(HOUSING_HALF),
        },
        "objects": {obj.id: _object_spec(obj) for obj in grounding.objects if obj.kind != "actor"},
    }


def _conditions(contract: TaskContract) -> list[dict[str, Any]]:
    """Every condition of T (stages, then success) as plain JSON."""
    data = contract.model_dump(mode="json", by_alias=True)
    return [s["done_when"] for s in data["stages"]] + [data["success"]["condition"]]


def _predicates(node: Any) -> list[dict[str, Any]]:
    """Every predicate inside a condition tree (negated ones included)."""
    found: list[dict[str, Any]] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "predicate" in item:
                found.append(item)
            stack.extend(v for v in item.values() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _positive_predicates(node: Any, negated: bool = False) -> list[dict[str, Any]]:
    """Predicates that must hold (not under a `not`)."""
    if isinstance(node, dict):
        if "predicate" in node:
            return [] if negated else [node]
        if "not" in node:
            return _positive_predicates(node["not"], not negated)
        out: list[dict[str, Any]] = []
        for key in ("all", "any"):
            for child in node.get(key, []):
                out += _positive_predicates(child, negated)
        return out
    return []


def _mentions(pred: Mapping[str, Any], oid: str) -> bool:
    return any(isinstance(v, str) and (v == oid or v.startswith(oid + ".")) for k, v in pred.items() if k != "predicate")


def _arm_for(contract: TaskContract, oid: str, arms: Sequence[str]) -> str | None:
    """The arm a `grasped` condition of T names for `oid`, if any."""
    for cond in _conditions(contract):
        for pred in _positive_predicates(cond):
            if pred.get("predicate") == "grasped" and pred.get("object") == oid:
                by = str(pred.get("by", "robot")).split(".")[0]
                if by in arms:
                    return by
    return None


_ROLE_WORDS: dict[str, tuple[str, ...]] = {
    "item": ("item", "inner", "object", "source", "block", "thing", "moved", "small"),
    "container": ("container", "outer", "target", "destination", "receptacle", "large", "cabinet", "drawer"),
    "support": ("support", "scale", "target", "surface", "destination", "platform"),
    "instrument": ("instrument", "drum", "target"),
    "tool": ("tool", "stick", "mallet", "striker", "beater"),
}


def _by_role_word(roles: Mapping[str, str], words: Sequence[str], exclude: Sequence[str] = ()) -> str | None:
    for word in words:
        for role, oid in roles.items():
            if oid not in exclude and (role == word or word in role.split("_")):
                return oid
    return None


def _size(obj: Any) -> float:
    """A footprint radius, to tell the smaller of two objects."""
    kind = obj.kind
    if kind in ("box", "drawer_cabinet"):
        return 0.5 * math.hypot(obj.size.x.value, obj.size.y.value)
    if kind == "cup":
        return obj.outer_radius.value
    if kind == "drum":
        return obj.head_radius.value
    if kind == "scale":
        return 0.5 * math.hypot(obj.plate.x.value, obj.plate.y.value)
    return obj.radius.value


def _half_height(obj: Any) -> float:
    return _centre(obj)[2]


def _extent(obj: Any) -> float:
    """Half the widest horizontal extent of an object (for keeping it on a support)."""
    return _size(obj)


def _role_objects(grounding: Grounding, contract: TaskContract) -> list[Any]:
    ids = {o.id for o in grounding.objects}
    missing = sorted(oid for oid in contract.roles.values() if oid not in ids)
    if missing:
        raise ExpertError(f"T's roles name objects that G lacks: {', '.join(missing)}")
    return [grounding.object(oid) for oid in contract.roles.values()]


def _strike_count(contract: TaskContract, drum: str) -> tuple[int, int | None]:
    """(strikes the contract asks for, the most it allows) from its `contact_count` conditions on the drum."""
    least, most = 0, None
    for cond in _conditions(contract):
        for pred in _positive_predicates(cond):
            if pred.get("predicate") == "contact_count" and (_mentions(pred, drum)):
                least = max(least, int(pred.get("at_least", 1)))
                if pred.get("at_most") is not None:
                    most = int(pred["at_most"]) if most is None else min(most, int(pred["at_most"]))
    return (least or DEFAULT_STRIKES), most


def _opening_needed(contract: TaskContract, cabinet: str) -> float:
    """The largest opening T asks the drawer to reach (`joint_value >= v`), metres (0 when none)."""
    needed = 0.0
    for cond in _conditions(contract):
        for pred in _positive_predicates(cond):
            if (pred.get("predicate") == "joint_value" and pred.get("body") == cabinet
                    and pred.get("compare") in (">", ">=")):
                needed = max(needed, float(pred["value"]))
    return needed


def task_spec(grounding: Grounding, contract: TaskContract) -> dict[str, Any]:
    """What the controller must do, from T's family and roles and G's geometry: object ids by role,
    the arm T names for an object, counts, and the parts' geometry (rim height, plate top, handle)."""
    family = contract.family
    if family not in FAMILIES:
        raise ExpertError(f"the builtin expert has no controller for family {family!r}; it writes: {', '.join(FAMILIES)}")
    objects = _role_objects(grounding, contract)
    arms = [a.name for a in getattr(grounding.robot, "arms", [])]
    roles = dict(contract.roles)
    task: dict[str, Any] = {"family": family}

    def kind_of(*kinds: str) -> list[Any]:
        return [o for o in objects if o.kind in kinds]

    if family == "place_in" and "container" not in roles and _by_role_word(roles, _ROLE_WORDS["support"]) is not None:
        family = "place_on"  # `put X on Y` reads as place_in with a support: set it down on Y's top
        task["family"] = family
    if family in ("place_in", "nest"):
        cups = kind_of("cup")
        container = _by_role_word(roles, _ROLE_WORDS["container"])
        if container is None or grounding.object(container).kind != "cup":
            container = max(cups, key=_size).id if cups else container
        if container is None:
            raise ExpertError(f"family {family}: no container among T's roles {roles}")
        movable = [o for o in objects if o.id != container and o.kind in ("box", "sphere", "cylinder", "cup")]
        item = _by_role_word(roles, _ROLE_WORDS["item"], exclude=[container])
        if item is None and movable:
            item = min(movable, key=_size).id
        if item is None:
            raise ExpertError(f"family {family}: no object to put into {container} among T's roles {roles}")
        c = grounding.object(container)
        height = c.height.value if c.kind in ("cup", "cylinder", "drum") else c.size.z.value
        task.update(item=item, container=container, container_height=height, container_radius=_size(c),
                    item_half_height=_half_height(grounding.object(item)), item_extent=_extent(grounding.object(item)),
                    item_arm=_arm_for(contract, item, arms))
    elif family in ("place_on", "place_on_scale"):
        scales = kind_of("scale")
        support = scales[0].id if scales and family == "place_on_scale" else _by_role_word(roles, _ROLE_WORDS["support"])
        support = support or (scales[0].id if scales else None)
        if support is None:
            raise ExpertError(f"family {family}: no support (scale) among T's roles {roles}")
        item = _by_role_word(roles, _ROLE_WORDS["item"], exclude=[support])
        if item is None:
            others = [o for o in objects if o.id != support]
            item = min(others, key=_size).id if others else None
        if item is None:
            raise ExpertError(f"family {family}: nothing to put on {support} among T's roles {roles}")
        s = grounding.object(support)
        if s.kind == "scale":
            top, half = s.body_height.value + s.plate.z.value, [s.plate.x.value / 2, s.plate.y.value / 2]
        elif s.kind in ("box",):
            top, half = s.size.z.value, [s.size.x.value / 2, s.size.y.value / 2]
        elif s.kind in ("cylinder", "drum", "cup"):
            r = {"cylinder": lambda: s.radius.value, "drum": lambda: s.head_radius.value,
                 "cup": lambda: s.outer_radius.value}[s.kind]()
            top, half = s.height.value, [r / math.sqrt(2), r / math.sqrt(2)]
        else:
            raise ExpertError(f"family {family}: cannot set things on a {s.kind} ({support})")
        it = grounding.object(item)
        task.update(item=item, support=support, support_top=top, support_half=half, item_extent=_extent(it),
                    item_half_height=_half_height(it), item_arm=_arm_for(contract, item, arms))
    elif family == "strike_drum":
        drums = kind_of("drum") or [o for o in grounding.objects if o.kind == "drum"]
        if not drums:
            raise ExpertError(f"family {family}: no drum in G among T's roles {roles}")
        drum = drums[0]
        tool = _by_role_word(roles, _ROLE_WORDS["tool"], exclude=[drum.id])
        if tool is None:
            sticks = [o for o in kind_of("cylinder") if o.id != drum.id]
            tool = sticks[0].id if sticks else None
        if tool is not None and not any(_mentions(p, tool) for c in _conditions(contract) for p in _predicates(c)):
            tool = None  # a stick in the roles that no condition uses: strike with the gripper
        strikes, most = _strike_count(contract, drum.id)
        if most is not None and most < strikes:
            raise ExpertError(f"T asks for at least {strikes} and at most {most} strikes")
        task.update(instrument=drum.id, head_height=drum.height.value, head_radius=drum.head_radius.value,
                    strikes=strikes, tool=tool, arm=_arm_for(contract, tool, arms) if tool else None)
        if tool is not None:
            t = grounding.object(tool)
            if t.kind != "cylinder":
                raise ExpertError(f"the tool {tool} is a {t.kind}; the builtin expert strikes with a stick (cylinder)")
            task.update(tool_length=t.height.value, tool_radius=t.radius.value)
    elif family == "drawer_put_inside":
        cabinets = kind_of("drawer_cabinet")
        if not cabinets:
            raise ExpertError(f"family {family}: no drawer cabinet among T's roles {roles}")
        cab = cabinets[0]
        others = [o for o in objects if o.id != cab.id]
        item = _by_role_word(roles, _ROLE_WORDS["item"], exclude=[cab.id]) or (min(others, key=_size).id if others else None)
        if item is None:
            raise ExpertError(f"family {family}: nothing to put into {cab.id} among T's roles {roles}")
        geometry = drawer_geometry(cab)
        bar = next(s for s in geometry.drawer if s.part == "handle")
        sx = cab.size.x.value
        task.update(cabinet=cab.id, item=item, item_arm=_arm_for(contract, item, arms), cabinet_radius=_size(cab),
                    open_at_least=_opening_needed(contract, cab.id),
                    item_extent=_extent(grounding.object(item)),
                    item_half_height=_half_height(grounding.object(item)), travel=cab.drawer_travel.value,
                    handle_centre=list(bar.position), handle_half_depth=float(bar.size[0]),
                    handle_room=cab.handle_protrusion.value - float(bar.size[0]), pad_half_length=PAD_HALF_LENGTH,
                    front_x=sx / 2, interior_min=list(geometry.interior_min), interior_max=list(geometry.interior_max),
                    drawer_top=cab.drawer_bottom.value + cab.drawer_height.value, half_width=cab.size.y.value / 2,
                    )
    return task


# --- parameters ----------------------------------------------------------------------------------------

_COMMON: dict[str, Any] = {
    "arm": None,  # the arm to try first for the main work (None: the nearest; T's `grasped by` always wins)
    "single_arm": False,
    "plan_candidates": 400,
    "limit_margin": 0.04,
    "plan_alternatives": 3,
    "grasp_attempts": 3,
    "grip_width_tolerance": 0.01,
    "obstacle_margin": 0.01,
    "park_lift": 0.05,
    "relay": True,
    "relay_gap": 0.03,
    "release_clearance_relay": 0.002,
    "relay_settle": 0.5,
    "approach_distance": 0.07,
    "pre_grasp_above": False,
    "grasp_tilts": [0.0, 15.0, 30.0, 45.0, 60.0, 75.0],
    "grasp_offset": [0.0, 0.0, 0.0],
    "cup_grip_fraction": 0.65,
    "lift_height": 0.08,
    "close_seconds": 0.8,
    "min_grip_width": 0.004,
    "carry_clearance": 0.04,
    "carry_yaws": [0.0, 30.0, -30.0, 60.0, -60.0],
    "carry_pulls": [0.06, 0.12],
    "place_offset": [0.0, 0.0, 0.0],
    "release_clearance": 0.004,
    "lower_seconds": None,
    "hold_before_release": 0.4,
    "open_seconds": 0.5,
    "retreat": 0.06,
    "settle_seconds": 1.5,
}

_FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "place_in": {"release_clearance": 0.01, "carry_clearance": 0.012, "cup_grip_fraction": 0.5, "insert": True,
                 "finger_clearance": 0.006, "release_gap": 0.008},
    "nest": {"release_clearance": 0.01, "carry_clearance": 0.012, "cup_grip_fraction": 0.5, "insert": True,
             "finger_clearance": 0.006, "release_gap": 0.008},
    # set down gently: lower slowly onto the top, hold still there, then open (a ball released
    # with any spin rolls away)
    "place_on": {"edge_margin": 0.015, "place_shift": 1.0, "release_clearance": 0.0, "lower_seconds": 1.0,
                 "hold_before_release": 1.0},
    "place_on_scale": {"edge_margin": 0.015, "place_shift": 1.0, "release_clearance": 0.0, "lower_seconds": 1.0,
                       "hold_before_release": 1.0},
    "strike_drum": {"strike_spot": 0.5, "strike_height": 0.06, "strike_depth": 0.01,
                    "strike_tilts": [45.0, 30.0, 60.0, 15.0, 75.0, 0.0], "stroke_down_seconds": 0.34,
                    "stroke_up_seconds": 0.24, "stroke_pause": 0.1, "grip_along": 0.2},
    "drawer_put_inside": {"drawer_arm": None, "release_clearance": 0.02, "handle_tilts": [0.0, 90.0, 45.0, 30.0, 60.0, 15.0, 75.0],
                          "handle_open_margin": 0.006, "drawer_speed": 0.1, "handle_hold": 0.3, "open_fraction": 0.75,
                          "open_margin": 0.012, "handle_release_gap": 0.004, "close_by_pushing": True, "closed_below": 0.002, "close_overshoot": 0.003,
                          "push_gap": 0.004, "push_depth": 0.015, "push_rise": 0.05,
                          "push_tilts": [45.0, 30.0, 60.0, 15.0, 0.0, 75.0],
                          "drawer_place_x": 0.0, "drawer_carry_clearance": 0.012, "drawer_toward_arm": 1.0,
                          "drawer_wall_gap": 0.006},
}


def default_params(grounding: Grounding, contract: TaskContract) -> dict[str, Any]:
    """The first parameters for this scene and family (approach, grasp, carry, release, timing)."""
    family = task_spec(grounding, contract)["family"]  # refuses a family or roles it cannot handle
    return json.loads(json.dumps({**_COMMON, **_FAMILY_DEFAULTS[family]}))


# --- the controller source -----------------------------------------------------------------------------

_MAIN = '''

def main():
    """Connect, run the family's program, and report a phase that could not be done on stderr."""
    robot = Harness()
    scene = Scene(robot, SCENE, PARAMS)
    try:
        FAMILIES[TASK["family"]](scene, TASK)
    except StepFailed as failure:
        # exiting without done makes the harness quote this line in the verdict's reason
        sys.exit(f"expert failed: {failure}")


main()
'''


def _literal(name: str, value: Any) -> str:
    return f"{name} = {pprint.pformat(value, width=110, sort_dicts=False)}\n"


def write_controller(grounding: Grounding, contract: TaskContract, params: Mapping[str, Any]) -> str:
    """The source of `expert/controller.py` for this scene, contract family and parameters: one
    self-contained program (K's `datafarm_expert`, the standard library and numpy only)."""
    task = task_spec(grounding, contract)
    merged = {**default_params(grounding, contract), **dict(params)}
    task["prefer_arm"] = merged.get("arm")  # a revision's choice of the arm that does the main work
    header = (
        f'"""Expert controller C for the task: {contract.task.strip()!r}\n\n'
        f"Family {contract.family}; roles {dict(contract.roles)}. Written by datafarm's builtin author from G and T\n"
        "(nothing here is specific to one scene: object poses are read with observe() at run time).\n"
        "SCENE is G's geometry, TASK what T asks for, PARAMS the tunable parameters.\n"
        '"""\n\n'
    )
    return (
        header
        + "from datafarm_expert import Harness, HarnessError, RolloutEnded  # first: it takes over stdout\n\n"
        + "import math\nimport sys\nimport time\n\nimport numpy as np\n\n"
        + _literal("SCENE", scene_spec(grounding))
        + _literal("TASK", task)
        + _literal("PARAMS", merged)
        + "\n# --- runtime: gripper geometry and guarded motions ---\n"
        + inline_source("runtime")
        + "\n# --- the family programs ---\n"
        + inline_source("families")
        + _MAIN
    )


# --- revising the parameters from dev verdicts ----------------------------------------------------------

_FAILURE_WORDS: list[tuple[str, tuple[str, ...]]] = [
    ("speed", ("velocity_limit", "too_fast")),
    ("penetration", ("penetration",)),
    ("time", ("sim_time_limit", "longer than the", "time limit")),
    ("reach", ("cannot carry", "cannot lower", "cannot set", "no arm", "cannot slide", "cannot bring", "hand-over",
               "could not grasp", "ik_failed")),
    ("strike", ("contact_count", "struck")),
    ("drawer", ("joint_value",)),
    ("grasp", ("grasped(", "above(")),
    ("settle", ("stable_for", "success_too_brief", "speed_below")),
    ("place", ("inside(", "on(", "near(", "scale_reading_in_range", "upright(")),
]
"""Failure kinds, by words of a verdict's reason, most specific first."""


def failure_kind(verdict: Mapping[str, Any]) -> str | None:
    """What went wrong in one dev verdict (a `VerdictSummary` as JSON): one of `_FAILURE_WORDS`' kinds,
    `other`, or None when it passed."""
    if verdict.get("passed"):
        return None
    reason = str(verdict.get("reason", ""))
    for kind, words in _FAILURE_WORDS:
        if any(w in reason for w in words):
            return kind
    return "other"


def _vec_is_zero(value: Any) -> bool:
    return not value or all(abs(float(v)) < 1e-9 for v in value)


def _fixes(kind: str, p: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Candidate changes for a failure kind, in the order to try them: (name, changed parameters).
    A change that would not change anything is left out by `revise`."""
    def scaled(key: str, factor: float, low: float | None = None, high: float | None = None) -> dict[str, Any]:
        if p.get(key) is None:
            return {}
        value = float(p[key]) * factor
        value = max(low, value) if low is not None else value
        value = min(high, value) if high is not None else value
        return {key: round(value, 4)}

    undo_grasp = {} if _vec_is_zero(p.get("grasp_offset")) else {"grasp_offset": [0.0, 0.0, 0.0]}
    undo_place = {} if _vec_is_zero(p.get("place_offset")) else {"place_offset": [0.0, 0.0, 0.0]}
    timing = {"hold_before_release": round(min(2.0, float(p.get("hold_before_release", 0.4)) + 0.4), 3),
              "lower_seconds": max(1.0, float(p.get("lower_seconds") or 0.0) + 0.5)}
    table: dict[str, list[tuple[str, dict[str, Any]]]] = {
        "grasp": [("undo grasp offset", undo_grasp),
                  ("standard approach", {"approach_distance": 0.07, "lift_height": 0.08}),
                  ("close slower", scaled("close_seconds", 1.5, high=2.0)),
                  ("lean the gripper first", {"grasp_tilts": [30.0, 45.0, 15.0, 60.0, 0.0, 75.0]}),
                  ("allow a hand-over", {"relay": True})],
        "place": [("undo place offset", undo_place),
                  ("release gently", timing),
                  ("release lower", scaled("release_clearance", 0.5)),
                  ("settle longer", scaled("settle_seconds", 1.5, high=4.0)),
                  ("undo grasp offset", undo_grasp)],
        "settle": [("settle longer", scaled("settle_seconds", 2.0, high=5.0)),
                   ("release gently", timing),
                   ("undo place offset", undo_place)],
        "reach": [("undo offsets", {**undo_grasp, **undo_place}),
                  ("allow a hand-over", {"relay": True}),
                  ("also approach from above", {"pre_grasp_above": True}),
                  ("plan closer to the joint limits", scaled("limit_margin", 0.5)),
                  ("lean the gripper first", {"grasp_tilts": [30.0, 45.0, 15.0, 60.0, 0.0, 75.0]}),
                  ("carry lower", {**scaled("carry_clearance", 0.6, low=0.005),
                                   **scaled("drawer_carry_clearance", 0.6, low=0.005)}),
                  ("lift less", scaled("lift_height", 0.6, low=0.03))],
        "speed": [("move slower", {**scaled("stroke_down_seconds", 1.5), **scaled("stroke_up_seconds", 1.5),
                                   **scaled("drawer_speed", 0.7), "lower_seconds": max(1.0, float(p.get("lower_seconds") or 0.0))})],
        "penetration": [("strike softer", scaled("strike_depth", 0.5)),
                        ("release higher", {"release_clearance": round(float(p.get("release_clearance", 0.0)) + 0.005, 4)}),
                        ("undo place offset", undo_place)],
        "time": [("settle shorter", scaled("settle_seconds", 0.5, low=0.6)),
                 ("wait less before letting go", scaled("hold_before_release", 0.5, low=0.2))],
        "strike": [("strike from higher", scaled("strike_height", 1.4, high=0.1)),
                   ("strike deeper", scaled("strike_depth", 1.5, high=0.02)),
                   ("pause longer between strikes", {"stroke_pause": round(float(p.get("stroke_pause", 0.1)) + 0.15, 3)})],
        "drawer": [("open wider", {"open_margin": round(float(p.get("open_margin", 0.0)) + 0.01, 4)}),
                   ("push further", {"close_overshoot": round(float(p.get("close_overshoot", 0.0)) + 0.003, 4)}),
                   ("close by the handle", {"close_by_pushing": not p.get("close_by_pushing", True)})],
        "other": [("undo offsets", {**undo_grasp, **undo_place}), ("release gently", timing)],
    }
    return table.get(kind, table["other"])


def revise(params: Mapping[str, Any], verdicts: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The next parameters to try after dev verdicts (`VerdictSummary`s as JSON), or None when there is
    no idea left. Looks at the most common kind of failure (see `failure_kind`) and applies the first
    change for it not tried yet; `revisions` in the parameters records what was changed, in order."""
    kinds = [k for k in (failure_kind(v) for v in verdicts) if k is not None]
    if not kinds:
        return None
    tried = set(params.get("revisions", []))
    order = sorted(set(kinds), key=lambda k: (-kinds.count(k), kinds.index(k)))
    for kind in order:
        for name, change in _fixes(kind, params):
            label = f"{kind}: {name}"
            if label in tried or not change or all(params.get(k) == v for k, v in change.items()):
                continue
            revised = json.loads(json.dumps({**params, **change}))
            revised["revisions"] = [*params.get("revisions", []), label]
            return revised
    return None


# --- the stage, through the author's tools -----------------------------------------------------------


@dataclass(frozen=True)
class DevPlan:
    """What the expert stage needs of B: the dev seeds it may ask rollouts on and the pass rate to reach."""

    dev_seeds: tuple[int, ...]
    """B's dev seeds."""
    pass_rate: float = 0.8
    """B's dev pass rate."""

    @classmethod
    def of(cls, batch: Any) -> DevPlan:
        """From a BatchConfig (or anything with `dev_seeds` and `dev_pass_rate`), or a DevPlan."""
        if isinstance(batch, DevPlan):
            return batch
        return cls(tuple(int(s) for s in batch.dev_seeds), float(getattr(batch, "dev_pass_rate", 0.8)))


ToolCallSpec = tuple[str, dict[str, Any]]
"""(tool name, arguments) of one call of the author's tools."""


@dataclass(frozen=True)
class ToolAnswer:
    """What a tool call returned: its text and whether it was refused."""

    text: str
    """The tool result's text (JSON for data)."""
    is_error: bool = False
    """True when the tool refused the call."""


class ExpertTools(Protocol):
    """The author's tools as the expert stage uses them: `tools(calls)` runs the calls (tool name,
    arguments) in order and returns their answers. The calls are the author's own tools:
    `read_artifact` {artifact}, `write_controller` {code}, `write_artifact` {artifact, content} and
    `request_rollout` {dev_seed}. `ReplayTools` plays them through a builtin conversation."""

    def __call__(self, calls: Sequence[ToolCallSpec]) -> list[ToolAnswer]: ...


@dataclass
class VersionRecord:
    """One controller version tried on the dev seeds."""

    params: dict[str, Any]
    """Its parameters."""
    controller_sha256: str
    """sha256 of its controller source."""
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    """The dev verdicts (VerdictSummary JSON), in seed order."""

    @property
    def passed(self) -> int:
        """How many dev rollouts passed."""
        return sum(1 for v in self.verdicts if v.get("passed"))


@dataclass
class ExpertStageResult:
    """How the expert stage went: every version tried, and whether B's dev pass rate was reached."""

    versions: list[VersionRecord]
    """Every controller version, in order."""
    reached: bool
    """True when the final version reached B's dev pass rate."""
    pass_rate: float
    """The final version's dev pass rate."""
    params: dict[str, Any]
    """The final version's parameters (what expert/controller.py holds now)."""

    def summary(self) -> str:
        """A paragraph for the transcript: what was tried and how it did."""
        lines = [f"version {i + 1}: {v.passed}/{len(v.verdicts)} dev rollouts passed"
                 + (f" (after: {v.params['revisions'][-1]})" if v.params.get("revisions") else "")
                 for i, v in enumerate(self.versions)]
        head = ("reached" if self.reached else "did not reach") + f" the dev pass rate: {self.pass_rate:.0%}"
        return head + "; " + "; ".join(lines)


_K_VERSION_HINT = re.compile(r"k_version: must be '([^']+)'")


def _json_of(answer: ToolAnswer, what: str) -> Any:
    if answer.is_error:
        raise ExpertError(f"{what} was refused: {answer.text[:500]}")
    try:
        return json.loads(answer.text)
    except json.JSONDecodeError as error:
        raise ExpertError(f"{what} did not return JSON: {answer.text[:200]}") from error


def _manifest(grounding: Grounding, contract: TaskContract, params: Mapping[str, Any], code: str, k_version: str,
              dev_runs: list[Any], history: Sequence[VersionRecord]) -> dict[str, Any]:
    family = task_spec(grounding, contract)["family"]
    tried = "; ".join(f"v{i + 1} {v.passed}/{len(v.verdicts)}" for i, v in enumerate(history)) or "none yet"
    return {
        "entry": "controller.py",
        "sha256": sha256_bytes(code.encode("utf-8")),
        "k_version": k_version,
        "parameters": dict(params),
        "skills": SKILLS[family],
        "dev_runs": dev_runs,
        "notes": (f"builtin expert for family {family}: plans each motion with the arm's kinematics from observed "
                  f"poses (nearest arm, least tilted gripper, hand-over between arms when one cannot reach); "
                  f"versions so far: {tried}; revisions: {', '.join(params.get('revisions', [])) or 'none'}"),
    }


def _write_version(tools: ExpertTools, grounding: Grounding, contract: TaskContract, params: dict[str, Any],
                   k_version: str, history: Sequence[VersionRecord]) -> tuple[str, str]:
    """Write the controller and its manifest C; returns (controller sha256, the K version used)."""
    code = write_controller(grounding, contract, params)
    written, current = tools([("write_controller", {"code": code}), ("read_artifact", {"artifact": "C"})])
    if written.is_error:
        raise ExpertError(f"write_controller was refused: {written.text[:500]}")
    dev_runs: list[Any] = []
    if not current.is_error and current.text.lstrip().startswith("{"):
        dev_runs = json.loads(current.text).get("dev_runs", [])
    for _ in range(2):
        (saved,) = tools([("write_artifact", {"artifact": "C", "content": _manifest(grounding, contract, params, code,
                                                                                    k_version, dev_runs, history)})])
        if not saved.is_error:
            return sha256_bytes(code.encode("utf-8")), k_version
        hint = _K_VERSION_HINT.search(saved.text)
        if hint is None or hint.group(1) == k_version:
            raise ExpertError(f"the expert manifest C was refused: {saved.text[:800]}")
        k_version = hint.group(1)  # the task runs under another K than this module was written for
    raise ExpertError("the expert manifest C was refused twice")


def run_expert_stage(tools: ExpertTools, grounding: Grounding, contract: TaskContract, batch: Any,
                     budget: int = 5, params: Mapping[str, Any] | None = None) -> ExpertStageResult:
    """The expert stage, acting only through the author's tools: write C for the default parameters
    (or `params`), run it on every dev seed (`request_rollout`), and while the dev pass rate (`batch`:
    a BatchConfig or a DevPlan) is not reached and `budget` controller versions are not spent, revise
    the parameters (`revise`) and try again. When no version reaches the rate, the best one is
    written back as C. Raises ExpertError for a family or scene it cannot handle."""
    plan = DevPlan.of(batch)
    seeds = list(plan.dev_seeds)
    need = math.ceil(plan.pass_rate * len(seeds) - 1e-9)
    params = {**default_params(grounding, contract), **dict(params or {})}
    k_version = latest_with(HARNESS_API).version
    versions: list[VersionRecord] = []
    while True:
        sha, k_version = _write_version(tools, grounding, contract, params, k_version, versions)
        record = VersionRecord(params=params, controller_sha256=sha)
        versions.append(record)
        # every dev seed in one batch: one model turn per version, whatever the verdicts
        for answer in tools([("request_rollout", {"dev_seed": s}) for s in seeds]):
            record.verdicts.append(_json_of(answer, "request_rollout"))
        if record.passed >= need:
            return ExpertStageResult(versions, True, record.passed / len(seeds), params)
        revised = revise(params, record.verdicts) if len(versions) < budget else None
        if revised is None:
            break
        params = revised
    best = max(versions, key=lambda v: v.passed)
    if best is not versions[-1]:
        _write_version(tools, grounding, contract, best.params, k_version, versions)
    return ExpertStageResult(versions, False, best.passed / len(seeds), best.params)


class DirectTools:
    """`ExpertTools` that run the calls on a role's `Toolbox` directly (no model conversation): for
    callers that drive the stage themselves, such as tests. `context` is the ToolContext the tools see."""

    def __init__(self, toolbox: Any, context: Any) -> None:
        self.toolbox = toolbox
        self.context = context
        self.calls = 0

    def __call__(self, calls: Sequence[ToolCallSpec]) -> list[ToolAnswer]:
        out = []
        for name, arguments in calls:
            self.calls += 1
            call = ToolCall(f"direct_{self.calls}", name, dict(arguments), json.dumps(arguments, sort_keys=True))
            result, _write = self.toolbox.run(call, self.context)
            out.append(ToolAnswer(result.text, result.is_error))
        return out


# --- the builtin author's role function for the expert stage -------------------------------------------


class PendingCalls(Exception):
    """The stage needs these tool calls answered before it can go on (the next model turn)."""

    def __init__(self, calls: Sequence[ToolCallSpec]) -> None:
        super().__init__(f"{len(calls)} tool call(s) pending")
        self.calls = list(calls)


class ReplayTools:
    """`ExpertTools` over a builtin conversation: the stage is re-run from the start every model turn
    (it is deterministic), each batch of calls it makes is answered from the results the conversation
    already holds, and the first batch without results raises `PendingCalls`, which the role function
    turns into its answer. So every step the stage takes is a real tool call in the transcript."""

    def __init__(self, answered: Sequence[tuple[str, dict[str, Any], ToolAnswer]]) -> None:
        self.answered = list(answered)
        self.position = 0

    @classmethod
    def from_request(cls, request: ModelRequest) -> ReplayTools:
        """The calls the conversation made and their results, in order."""
        results = {p.call_id: p for m in request.messages if m.role == "user" for p in m.parts if isinstance(p, ToolResult)}
        answered = []
        for message in request.messages:
            if message.role != "assistant":
                continue
            for call in message.tool_calls:
                result = results.get(call.id)
                if result is not None:
                    answered.append((call.name, call.arguments or {}, ToolAnswer(result.text, result.is_error)))
        return cls(answered)

    def __call__(self, calls: Sequence[ToolCallSpec]) -> list[ToolAnswer]:
        out = []
        for name, arguments in calls:
            if self.position >= len(self.answered):
                if out:
                    raise ExpertError("the conversation answered only part of a batch of tool calls")
                raise PendingCalls(calls)
            done_name, done_args, answer = self.answered[self.position]
            if done_name != name or (name == "request_rollout" and done_args.get("dev_seed") != arguments.get("dev_seed")):
                raise ExpertError(f"the conversation does not replay: call {self.position + 1} was {done_name}, "
                                  f"the stage now makes {name}")
            self.position += 1
            out.append(answer)
        return out


_DEV_SEEDS = re.compile(r"Dev seeds: ([0-9, ]+)")
_PASS_RATE = re.compile(r"pass rate[^0-9]{0,40}([0-9]+(?:\.[0-9]+)?)\s*(%?)", re.IGNORECASE)
_BUDGET = re.compile(r"(?:at most|budget of|up to)\s+([0-9]+)\s+(?:controller )?versions", re.IGNORECASE)


def plan_from_request(request: ModelRequest) -> tuple[DevPlan, int]:
    """B's dev seeds (from the `request_rollout` tool's description), the dev pass rate and the
    version budget (from the stage's instructions, when they say; else 0.8 and 5)."""
    seeds: tuple[int, ...] = ()
    for tool in request.tools:
        if tool.name == "request_rollout":
            found = _DEV_SEEDS.search(tool.description)
            if found:
                seeds = tuple(int(s) for s in found.group(1).replace(" ", "").split(",") if s)
    if not seeds:
        raise ExpertError("the author has no request_rollout tool naming its dev seeds")
    text = "\n".join(p.text for m in request.messages if m.role == "user" for p in m.parts if isinstance(p, TextPart))
    rate, budget = 0.8, 5
    found = _PASS_RATE.search(text)
    if found:
        rate = float(found.group(1)) / (100.0 if found.group(2) or float(found.group(1)) > 1 else 1.0)
    found = _BUDGET.search(text)
    if found:
        budget = max(1, int(found.group(1)))
    return DevPlan(seeds, rate), budget


def _call_parts(turn: int, calls: Sequence[ToolCallSpec]) -> list[ToolCall]:
    return [ToolCall(f"expert_{turn}_{i}", name, dict(arguments), json.dumps(arguments, sort_keys=True))
            for i, (name, arguments) in enumerate(calls)]


def respond(request: ModelRequest, info: Any = None) -> ModelResponse:
    """The builtin author's role function for the expert stage (what `author.author` dispatches to):
    read G and T with `read_artifact`, then run `run_expert_stage` through `ReplayTools`, answering
    each turn with the tool calls the stage makes next, and finally with a summary and no calls."""
    del info
    tools = ReplayTools.from_request(request)
    turn = 1 + sum(1 for m in request.messages if m.role == "assistant")
    try:
        g_text, t_text = tools([("read_artifact", {"artifact": "G"}), ("read_artifact", {"artifact": "T"})])
        grounding = Grounding.model_validate(_json_of(g_text, "read_artifact G"))
        if t_text.is_error:
            raise ExpertError(f"read_artifact T was refused: {t_text.text[:300]}")
        contract = TaskContract.model_validate(yaml.safe_load(t_text.text))
        plan, budget = plan_from_request(request)
        result = run_expert_stage(tools, grounding, contract, plan, budget)
    except PendingCalls as pending:
        what = ", ".join(sorted({name for name, _ in pending.calls}))
        return ModelResponse.of(f"Expert stage: calling {what}.", *_call_parts(turn, pending.calls))
    except (ExpertError, ValidationError, yaml.YAMLError) as error:
        # deterministic: asking again gives the same answer, so the stage fails with the reason
        raise BuiltinRefusal(f"the builtin expert cannot work this task: {error}", stage="expert",
                             kind="unsupported") from error
    return ModelResponse.of(f"Expert stage done: {result.summary()}")
