"""The builtin author's contract stage: task text + G -> the task contract T, with the default
sampler S (and, for compile, the default batch config B).

    reading = read_task(request.task, grounding)          # family, roles, parameters
    contract = contract_for(reading, grounding, request.task)
    sampler = sampler_for(reading, grounding, ood_axes)
    batch = default_batch(request)

As a role function (`respond`), the stage reads G with `read_artifact`, then writes T and S with
`write_artifact`; a request outside the families is refused (BuiltinRefusal) with a message naming
the families. Conditions use K's predicate vocabulary; stage and role names are the family's
(`skills/contract.md` documents them), never a scene's.
"""

from __future__ import annotations

import json
import math
from typing import Any

from datafarm.agents.builtin.common import (
    BuiltinRefusal,
    answer,
    last_result,
    mode_and_axes,
    refused_writes,
    task_text,
)
from datafarm.agents.builtin.linking import world_extent
from datafarm.agents.builtin.reading import TaskNotSupported, TaskReading, read_task
from datafarm.agents.messages import ModelRequest, ModelResponse
from datafarm.agents.providers.function import FunctionInfo
from datafarm.artifacts.batch import BatchConfig
from datafarm.artifacts.contract import TaskContract
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.judge import ARM_SHORTCUTS
from datafarm.artifacts.request import Request
from datafarm.artifacts.sampler import SamplerSpec

CONTROL_HZ = 20.0
"""Control rate of every family but drumming, steps per second."""
DRUM_CONTROL_HZ = 50.0
"""Control rate of drumming: strikes are short contacts."""
GRASP_HOLD_S = 0.2
"""How long a grasp must hold before its stage completes, seconds."""
PLACE_HOLD_S = 0.3
"""How long a placed object must stay placed and released before its stage completes, seconds."""
STABLE_S = 0.5
"""How long a placed object must have been still for success, seconds."""
LIFT_M = 0.02
"""How far above the table a grasped object must be for the grasp to count (lifted, not dragged), metres."""
CUP_MARGIN = 0.002
"""How far inside a cup's cavity (walls and rim) a nested object must stay, metres."""
DRAWER_CLOSED_M = 0.005
"""Drawer opening (m) that counts as closed (K's drawer probe `max_closed_m`)."""
DRAWER_CLEARANCE = 0.002
"""Gap between the drawer box and the carcass, metres (the judge geometry's value)."""
TIME_LIMITS = {"nest": 40.0, "place_in": 40.0, "place_on_scale": 40.0, "drawer_put_inside": 60.0, "strike_drum": 30.0}
"""Longest episode per family, seconds (strike_drum adds 1.5 s per strike)."""


def _pred(name: str, **args: Any) -> dict[str, Any]:
    return {"predicate": name, **args}


def _all(*conds: dict[str, Any]) -> dict[str, Any]:
    return {"all": list(conds)}


def _not(cond: dict[str, Any]) -> dict[str, Any]:
    return {"not": cond}


def _stage(name: str, description: str, done_when: dict[str, Any], hold_s: float = 0.0) -> dict[str, Any]:
    return {"name": name, "description": description, "done_when": done_when, "hold_s": hold_s}


def _grasp_stage(item: str, what: str) -> dict[str, Any]:
    """Grasp and lift `item`: held by both fingers of one gripper and clear of the table."""
    return _stage(f"grasp_{what}", f"grasp {item} and lift it off the table",
                  _all(_pred("grasped", object=item), _pred("above", object=item, target="table", min_height=LIFT_M)),
                  GRASP_HOLD_S)


def contained(item: Any, container: Any) -> dict[str, Any]:
    """`item` is in cup `container`: `inside` when it fits below the rim, else its bottom below the rim
    and its origin over the cavity's floor (a tall item sticking out of a cup)."""
    wall = container.wall_thickness.value
    depth = container.height.value - wall
    height = float(world_extent(item)[2])
    if height <= depth - CUP_MARGIN:
        return _pred("inside", object=item.id, container=container.id, margin=CUP_MARGIN)
    radius = float(max(world_extent(item)[:2])) / 2
    play = max(container.outer_radius.value - wall - radius, 0.0)
    return _all(
        _pred("above", object=item.id, target=container.id, min_height=-depth - 0.005, max_height=-0.01),
        _pred("near", a=item.id, b=container.id, max_distance=round(math.hypot(play, wall) + 0.005, 4)),
    )


# --- per family --------------------------------------------------------------------------------------


def _nest(r: TaskReading, g: Grounding) -> tuple[list[dict], dict, str]:
    inner, outer = g.object(r.roles["inner"]), g.object(r.roles["outer"])
    nested = contained(inner, outer)
    stages = [
        _grasp_stage(inner.id, "inner"),
        _stage("insert_inner", f"lower {inner.id} into {outer.id} and let go of it",
               _all(nested, _not(_pred("grasped", object=inner.id))), PLACE_HOLD_S),
    ]
    success = _all(nested, _pred("stable_for", object=inner.id, duration_s=STABLE_S),
                   _pred("upright", object=inner.id), _pred("upright", object=outer.id))
    return stages, success, f"{inner.id} nested in {outer.id}, both upright, {inner.id} still"


def _place(r: TaskReading, g: Grounding) -> tuple[list[dict], dict, str]:
    item = g.object(r.roles["item"])
    if "container" in r.roles:
        target = g.object(r.roles["container"])
        placed, how = contained(item, target), "in"
    else:
        target = g.object(r.roles["support"])
        support = f"{target.id}.plate" if target.kind == "scale" else f"{target.id}.head" if target.kind == "drum" else target.id
        placed, how = _pred("on", object=item.id, support=support), "on"
    stages = [
        _grasp_stage(item.id, "item"),
        _stage("place_item", f"put {item.id} {how} {target.id} and let go of it",
               _all(placed, _not(_pred("grasped", object=item.id))), PLACE_HOLD_S),
    ]
    extra = [_pred("upright", object=target.id)] if target.kind == "cup" else []
    success = _all(placed, _pred("stable_for", object=item.id, duration_s=STABLE_S), *extra)
    return stages, success, f"{item.id} resting {how} {target.id}, still"


def scale_range_g(item: Any, relative: float = 0.1, absolute_g: float = 5.0) -> tuple[float, float]:
    """Readings (grams) that weigh `item`: its G mass range widened by `relative` and `absolute_g`."""
    mass = item.mass
    low, high = (mass.range if mass.range is not None else (mass.value, mass.value))
    return (round(max(0.0, low * 1000 * (1 - relative) - absolute_g), 1), round(high * 1000 * (1 + relative) + absolute_g, 1))


def _scale(r: TaskReading, g: Grounding) -> tuple[list[dict], dict, str]:
    item, scale = g.object(r.roles["item"]), g.object(r.roles["scale"])
    high_kg = item.mass.range[1] if item.mass.range is not None else item.mass.value
    if high_kg > scale.capacity.value:
        raise TaskNotSupported(f"{item.id} may weigh up to {high_kg:g} kg, more than {scale.id}'s capacity "
                               f"{scale.capacity.value:g} kg", route_to="grounding")
    on = _pred("on", object=item.id, support=f"{scale.id}.plate")
    low_g, high_g = scale_range_g(item)
    stages = [
        _grasp_stage(item.id, "item"),
        _stage("place_on_scale", f"set {item.id} on the plate of {scale.id} and let go of it",
               _all(on, _not(_pred("grasped", object=item.id))), PLACE_HOLD_S),
    ]
    success = _all(on, _pred("stable_for", object=item.id, duration_s=STABLE_S),
                   _pred("scale_reading_in_range", scale=scale.id, min_g=low_g, max_g=high_g))
    return stages, success, f"{item.id} resting on {scale.id}, which reads its weight ({low_g:g}-{high_g:g} g)"


def drawer_interior(cabinet: Any) -> tuple[float, float, float]:
    """(length along the slide, width, height) of the drawer's interior, metres (G's nominal sizes)."""
    wall = cabinet.wall_thickness.value
    length = cabinet.size.x.value - wall - DRAWER_CLEARANCE - 2 * wall
    width = cabinet.size.y.value - 2 * wall - 2 * DRAWER_CLEARANCE - 2 * wall
    height = cabinet.drawer_height.value - 2 * DRAWER_CLEARANCE - wall
    return length, width, height


def drawer_open_m(cabinet: Any, item: Any) -> float:
    """How far the drawer must be open to lower `item` into it from above, metres."""
    travel = cabinet.drawer_travel.range[0] if cabinet.drawer_travel.range is not None else cabinet.drawer_travel.value
    need = float(max(world_extent(item)[:2])) + cabinet.wall_thickness.value + 0.02
    if need > 0.95 * travel:
        raise TaskNotSupported(f"{item.id} needs the drawer open {need * 1000:.0f} mm to go in from above, but "
                               f"{cabinet.id}'s drawer travels only {travel * 1000:.0f} mm")
    return round(max(0.6 * travel, need), 4)


def _drawer(r: TaskReading, g: Grounding) -> tuple[list[dict], dict, str]:
    cabinet, item = g.object(r.roles["container"]), g.object(r.roles["item"])
    length, width, height = drawer_interior(cabinet)
    ex = world_extent(item)
    if ex[2] > height - 0.002 or min(ex[0], ex[1]) > min(length, width) - 0.005 or max(ex[0], ex[1]) > max(length, width) - 0.005:
        raise TaskNotSupported(
            f"{item.id} ({ex[0] * 1000:.0f} x {ex[1] * 1000:.0f} x {ex[2] * 1000:.0f} mm) does not fit in {cabinet.id}'s drawer "
            f"(inside {length * 1000:.0f} x {width * 1000:.0f} x {height * 1000:.0f} mm)")
    open_m = drawer_open_m(cabinet, item)
    drawer = f"{cabinet.id}.drawer"
    inside = _pred("inside", object=item.id, container=drawer)
    closed = _pred("joint_value", body=cabinet.id, joint="drawer", compare="<=", value=DRAWER_CLOSED_M)
    stages = [
        _stage("open_drawer", f"pull {cabinet.id}'s drawer open by at least {open_m * 1000:.0f} mm",
               _pred("joint_value", body=cabinet.id, joint="drawer", compare=">=", value=open_m), GRASP_HOLD_S),
        _grasp_stage(item.id, "item"),
        _stage("place_in_drawer", f"lower {item.id} into the open drawer and let go of it",
               _all(inside, _not(_pred("grasped", object=item.id))), PLACE_HOLD_S),
    ]
    if r.close:
        stages.append(_stage("close_drawer", f"push {cabinet.id}'s drawer closed with {item.id} inside",
                             _all(closed, inside), 0.5))
        return stages, _all(inside, closed), f"{item.id} inside {cabinet.id}'s drawer and the drawer closed"
    return stages, _all(inside, _pred("stable_for", object=item.id, duration_s=STABLE_S)), \
        f"{item.id} inside {cabinet.id}'s drawer, still"


def _strike(r: TaskReading, g: Grounding) -> tuple[list[dict], dict, str]:
    drum = g.object(r.roles["instrument"])
    n = int(r.strikes or 1)
    head = f"{drum.id}.head"
    tool = r.roles.get("tool")
    hits = _pred("contact_count", a=head, b=tool or "robot", at_least=n)
    times = "once" if n == 1 else f"{n} times"
    stages = []
    if tool is not None:
        stages.append(_grasp_stage(tool, "tool"))
    stages.append(_stage("strike_drum", f"strike the head of {drum.id} {times}" + (f" with {tool}" if tool else " with the gripper"),
                         hits))
    return stages, hits, f"{n} strike(s) on the head of {drum.id}" + (f" with {tool}" if tool else "")


_FAMILY = {"nest": _nest, "place_in": _place, "place_on_scale": _scale, "drawer_put_inside": _drawer,
           "strike_drum": _strike}


def contract_for(reading: TaskReading, grounding: Grounding, task: str) -> TaskContract:
    """T for a reading of `task` (the request's text, kept verbatim). TaskNotSupported when the
    objects cannot do it (too big for the drawer, too heavy for the scale...)."""
    stages, success, said = _FAMILY[reading.family](reading, grounding)
    limit = TIME_LIMITS[reading.family] + (1.5 * (reading.strikes or 0) if reading.family == "strike_drum" else 0.0)
    description = reading.success.rstrip(". ") or said
    if reading.success:
        description += f" (formally: {said})"
    return TaskContract.model_validate({
        "task": task,
        "family": reading.family,
        "roles": reading.roles,
        "stages": stages,
        "success": {"description": description, "condition": success, "hold_s": reading.hold_s},
        "forbidden": list(ARM_SHORTCUTS),
        "time_limit_s": limit,
        "control_hz": DRUM_CONTROL_HZ if reading.family == "strike_drum" else CONTROL_HZ,
    })


# --- S and B -----------------------------------------------------------------------------------------

MOVED_ROLES = ("item", "inner", "tool")
"""Roles whose object the robot picks up (varied more, and their physics drawn per episode)."""


def sampler_for(reading: TaskReading, grounding: Grounding, ood_axes: dict[str, list[Any]] | None = None) -> SamplerSpec:
    """S: the task's objects shifted a little per episode (picked objects +-2 cm and, for boxes, +-15
    degrees of yaw; the others +-1 cm), the picked objects' uncertain mass and friction drawn from G's
    ranges, the table and cameras varied by S's defaults, and the request's ood axes, if any."""
    placements = []
    physics = []
    quantities = grounding.tagged_quantities()
    for role, oid in reading.roles.items():
        obj = grounding.object(oid)
        if role in MOVED_ROLES:
            yaw = 0.26 if obj.kind == "box" else 0.0
            placements.append({"object": oid, "x": [-0.02, 0.02], "y": [-0.02, 0.02], "yaw": [-yaw, yaw]})
            for quantity in ("mass", "friction"):
                path = f"objects.{oid}.{quantity}"
                if path in quantities and quantities[path].range is not None:
                    physics.append(path)
        else:
            placements.append({"object": oid, "x": [-0.01, 0.01], "y": [-0.01, 0.01]})
    return SamplerSpec.model_validate({"objects": placements, "physics": physics, "appearance": dict(ood_axes or {})})


def default_batch(request: Request, dev_seeds: int = 5) -> BatchConfig:
    """B for a request: its episode count, `dev_seeds` dev seeds, half as many admission seeds again
    (at least 2) to absorb rejections, default retry budgets, and the request's backends."""
    n = request.episodes
    return BatchConfig(
        n=n,
        dev_seeds=list(range(dev_seeds)),
        admission_seed_count=n + max(2, math.ceil(n / 2)),
        executor=request.executor,
        sandbox=request.sandbox,
        renderer=request.renderer,
    )


# --- the role function -------------------------------------------------------------------------------


def respond(request: ModelRequest, info: FunctionInfo) -> ModelResponse:
    """The builtin author's contract stage: read G, then write T and S."""
    refused = refused_writes(request, ("write_artifact",))
    if refused:
        raise BuiltinRefusal("the builtin contract was refused by a checker:\n" + "\n".join(r.text for r in refused),
                             stage="contract", kind="refused")
    grounding_result = last_result(request, "read_artifact")
    if grounding_result is None:
        return answer(request, "Reading the grounding G to link the task's nouns to its objects.",
                      ("read_artifact", {"artifact": "G"}))
    try:
        grounding = Grounding.model_validate(json.loads(grounding_result.text))
    except (ValueError, TypeError) as e:
        raise BuiltinRefusal(f"the contract stage needs a valid grounding G first: {grounding_result.text[:300]} ({e})",
                             stage="contract", route_to="grounding", kind="needs_input") from None
    text = task_text(request)
    _, axes = mode_and_axes(request)
    try:
        reading = read_task(text, grounding)
        contract = contract_for(reading, grounding, text)
    except TaskNotSupported as e:
        raise BuiltinRefusal(str(e), stage="contract", route_to=e.route_to) from None
    sampler = sampler_for(reading, grounding, axes)
    roles = ", ".join(f"{k}={v}" for k, v in reading.roles.items())
    notes = "".join(f"\n- {n}" for n in reading.notes)
    return answer(
        request,
        f"Task family {reading.family} ({roles}); stages: {', '.join(s.name for s in contract.stages)}.{notes}",
        ("write_artifact", {"artifact": "T", "content": contract.model_dump(mode="json", by_alias=True)}),
        ("write_artifact", {"artifact": "S", "content": sampler.model_dump(mode="json", by_alias=True)}),
    )
