"""The builtin judge-writer: T + G -> J, in K's predicate vocabulary.

J formalizes T: each of T's stages, in order, with its completion condition, hold and time limit;
the success condition, with what the family's success always means added from G where T leaves it
out (`FAMILY_SUCCESS` below); and one global invariant per forbidden shortcut (T's list, and every
arm task's defaults), with K's thresholds and `success_too_brief` at T's hold.

| family | success J demands (at least) |
| --- | --- |
| nest | inner contained in outer, inner still, outer upright |
| place_in | item in the container (upright, if a cup) or on the support, item still |
| place_on_scale | item on the scale's plate, item still, reading within G's mass range of the item (+-10% and 5 g) |
| drawer_put_inside | item inside the drawer; the drawer closed when T closes it |
| strike_drum | at least N contacts between the drum head and the tool (or the robot) |

As a role function (`respond`) it reads T and G with its tools, then writes J with `write_judge`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import yaml

from datafarm.agents.builtin.common import (
    BuiltinRefusal,
    answer,
    last_result,
    refused_writes,
)
from datafarm.agents.builtin.contract import STABLE_S, contained, scale_range_g
from datafarm.agents.messages import ModelRequest, ModelResponse
from datafarm.agents.providers.function import FunctionInfo
from datafarm.artifacts.contract import TaskContract, judge_gaps
from datafarm.artifacts.grounding import ARM_KINDS, Grounding
from datafarm.artifacts.judge import ARM_SHORTCUTS, JudgeSpec

PARTS: dict[str, tuple[str, ...]] = {
    "drawer_cabinet": ("drawer", "handle"),
    "scale": ("plate",),
    "drum": ("head",),
}
"""Parts a body reference may name, per G object kind (datafarm.harness.judge.geometry)."""
REFERENCE_ARGS = ("object", "container", "support", "target", "a", "b", "body", "scale", "by", "viewer")
"""Predicate arguments that hold body references."""

INVARIANTS: dict[str, dict[str, Any]] = {
    "teleport": {"max_displacement": 0.005},
    "penetration": {"max_depth": 0.005},
    "joint_limit": {"max_fraction": 1.0},
    "velocity_limit": {"max_fraction": 1.0},
    "episode_gap": {"tolerance_s": 1e-6},
    "stage_skipped": {},
    "stuck": {"max_still_s": 1.0},
}
"""Thresholds of each invariant (`success_too_brief` takes T's hold)."""


# --- conditions as JSON ------------------------------------------------------------------------------


def leaves(cond: dict[str, Any], positive: bool = True) -> Iterator[tuple[dict[str, Any], bool]]:
    """Every predicate of a condition (JSON form) with whether it must be true (not under a `not`)."""
    if "all" in cond:
        for c in cond["all"]:
            yield from leaves(c, positive)
    elif "any" in cond:
        for c in cond["any"]:
            yield from leaves(c, positive)
    elif "not" in cond:
        yield from leaves(cond["not"], not positive)
    else:
        yield cond, positive


def _has(cond: dict[str, Any], predicate: str, **args: Any) -> bool:
    return any(positive and leaf.get("predicate") == predicate and all(leaf.get(k) == v for k, v in args.items())
               for leaf, positive in leaves(cond))


def _conj(cond: dict[str, Any], extra: list[dict[str, Any]]) -> dict[str, Any]:
    if not extra:
        return cond
    if "all" in cond:
        return {"all": [*cond["all"], *extra]}
    return {"all": [cond, *extra]}


def reference_problems(contract: TaskContract, grounding: Grounding) -> list[str]:
    """Body references of T (roles and conditions) that name nothing in G."""
    kinds = {o.id: o.kind for o in grounding.objects}
    arms = {a.name for a in grounding.robot.arms}
    problems = [f"role {role}: G has no object {oid!r}" for role, oid in contract.roles.items() if oid not in kinds]
    conds = [(f"stages[{i}] ({s.name})", s.done_when) for i, s in enumerate(contract.stages)]
    conds.append(("success", contract.success.condition))
    for where, cond in conds:
        for leaf, _ in leaves(cond.model_dump(mode="json", by_alias=True)):
            for arg in REFERENCE_ARGS:
                ref = leaf.get(arg)
                if not isinstance(ref, str):
                    continue
                head, _, part = ref.partition(".")
                if head in ("robot", "table", "agent") and not part:
                    continue
                if head in arms and part in ("", "gripper"):
                    continue
                if head not in kinds:
                    problems.append(f"{where}: {leaf['predicate']} names {ref!r}, which is not an object of G")
                elif part and part not in PARTS.get(kinds[head], ()):
                    problems.append(f"{where}: {leaf['predicate']} names part {part!r} of {head} ({kinds[head]}), "
                                    f"which has parts: {', '.join(PARTS.get(kinds[head], ())) or 'none'}")
    return problems


# --- what each family's success always means ---------------------------------------------------------


def _strike_count(contract: TaskContract) -> int:
    counts = [leaf.get("at_least", 1) for s in contract.stages
              for leaf, positive in leaves(s.done_when.model_dump(mode="json", by_alias=True))
              if positive and leaf.get("predicate") == "contact_count"]
    return max(counts or [1])


def family_success(contract: TaskContract, grounding: Grounding, success: dict[str, Any]) -> list[dict[str, Any]]:
    """Conditions the family's success always includes that `success` (T's, as JSON) leaves out."""
    roles, family = contract.roles, contract.family
    add: list[dict[str, Any]] = []

    def need(cond: dict[str, Any]) -> None:
        if not _has(success, cond["predicate"], **{k: v for k, v in cond.items() if k in REFERENCE_ARGS}):
            add.append(cond)

    def still(oid: str) -> None:
        if not _has(success, "stable_for", object=oid):
            add.append({"predicate": "stable_for", "object": oid, "duration_s": STABLE_S})

    def placed(oid: str, container: str) -> None:
        if not (_has(success, "inside", object=oid, container=container) or _has(success, "above", object=oid, target=container)):
            add.append(contained(grounding.object(oid), grounding.object(container)))

    if family == "nest" and {"inner", "outer"} <= set(roles):
        placed(roles["inner"], roles["outer"])
        still(roles["inner"])
        need({"predicate": "upright", "object": roles["outer"]})
    elif family == "place_in" and "item" in roles:
        if "container" in roles:
            container = grounding.object(roles["container"])
            if container.kind == "cup":
                placed(roles["item"], container.id)
                need({"predicate": "upright", "object": container.id})
        elif "support" in roles and not _has(success, "on", object=roles["item"]):
            target = grounding.object(roles["support"])
            part = {"scale": ".plate", "drum": ".head"}.get(target.kind, "")
            add.append({"predicate": "on", "object": roles["item"], "support": target.id + part})
        still(roles["item"])
    elif family == "place_on_scale" and {"item", "scale"} <= set(roles):
        item, scale = roles["item"], roles["scale"]
        need({"predicate": "on", "object": item, "support": f"{scale}.plate"})
        still(item)
        if not _has(success, "scale_reading_in_range", scale=scale):
            low, high = scale_range_g(grounding.object(item))
            add.append({"predicate": "scale_reading_in_range", "scale": scale, "min_g": low, "max_g": high})
    elif family == "drawer_put_inside" and {"item", "container"} <= set(roles):
        item, drawer = roles["item"], f"{roles['container']}.drawer"
        need({"predicate": "inside", "object": item, "container": drawer})
        closes = any(_has(s.done_when.model_dump(mode="json", by_alias=True), "joint_value", body=roles["container"], compare="<=")
                     for s in contract.stages)
        if closes and not _has(success, "joint_value", body=roles["container"], compare="<="):
            closing = next(leaf for s in contract.stages for leaf, pos in leaves(s.done_when.model_dump(mode="json", by_alias=True))
                           if pos and leaf.get("predicate") == "joint_value" and leaf.get("compare") == "<=")
            add.append(copy.deepcopy(closing))
    elif family == "strike_drum" and "instrument" in roles:
        head = f"{roles['instrument']}.head"
        if not _has(success, "contact_count", a=head):
            add.append({"predicate": "contact_count", "a": head, "b": roles.get("tool", "robot"),
                        "at_least": _strike_count(contract)})
    return add


# --- J -----------------------------------------------------------------------------------------------


def judge_for(contract: TaskContract, grounding: Grounding) -> JudgeSpec:
    """J for T and G. ValueError naming every body T refers to that G lacks, or anything of T that J
    would leave out."""
    problems = reference_problems(contract, grounding)
    if problems:
        raise ValueError("the contract refers to what the grounding does not have:\n" + "\n".join(f"- {p}" for p in problems))
    stages = [{"name": s.name, "condition": s.done_when.model_dump(mode="json", by_alias=True), "hold_s": s.hold_s,
               "time_limit_s": s.time_limit_s} for s in contract.stages]
    success = contract.success.condition.model_dump(mode="json", by_alias=True)
    success = _conj(success, family_success(contract, grounding, success))
    shortcuts = list(contract.forbidden)
    if grounding.robot.kind in ARM_KINDS:
        shortcuts += [s for s in ARM_SHORTCUTS if s not in shortcuts]
    invariants = []
    for shortcut in shortcuts:
        if shortcut == "success_too_brief":
            invariants.append({"shortcut": shortcut, "min_hold_s": contract.success.hold_s})
        else:
            invariants.append({"shortcut": shortcut, **INVARIANTS[shortcut]})
    spec = JudgeSpec.model_validate({"stages": stages, "success": success, "invariants": invariants,
                                     "time_limit_s": contract.time_limit_s})
    gaps = judge_gaps(contract, spec)
    if gaps:  # a bug here, not the contract's fault
        raise RuntimeError("the builtin judge leaves part of the contract out: " + "; ".join(gaps))
    return spec


# --- the role function -------------------------------------------------------------------------------


def respond(request: ModelRequest, info: FunctionInfo) -> ModelResponse:
    """The builtin judge-writer: read T and G, then write J."""
    refused = refused_writes(request, ("write_judge",))
    if refused:
        raise BuiltinRefusal("the builtin judge was refused:\n" + "\n".join(r.text for r in refused), stage="judge",
                             kind="refused")
    t_result, g_result = last_result(request, "read_contract"), last_result(request, "read_grounding")
    if t_result is None or g_result is None:
        return answer(request, "Reading the task contract T and the grounding G.",
                      ("read_contract", {}), ("read_grounding", {}))
    try:
        contract = TaskContract.model_validate(yaml.safe_load(t_result.text))
    except Exception as e:  # noqa: BLE001 - any unreadable T is the contract stage's failure
        raise BuiltinRefusal(f"the judge stage needs a valid task contract T: {t_result.text[:300]} ({e})", stage="judge",
                             route_to="contract", kind="needs_input") from None
    try:
        grounding = Grounding.model_validate(json.loads(g_result.text))
    except Exception as e:  # noqa: BLE001
        raise BuiltinRefusal(f"the judge stage needs a valid grounding G: {g_result.text[:300]} ({e})", stage="judge",
                             route_to="grounding", kind="needs_input") from None
    try:
        spec = judge_for(contract, grounding)
    except ValueError as e:
        raise BuiltinRefusal(str(e), stage="judge", route_to="contract") from None
    added = len(spec.success.all) - len(getattr(contract.success.condition, "all", [contract.success.condition])) \
        if hasattr(spec.success, "all") else 0
    text = (f"J formalizes the {len(spec.stages)} stages of T ({', '.join(s.name for s in spec.stages)}), its success "
            f"({added} family check(s) added from G) and {len(spec.invariants)} invariants.")
    return answer(request, text, ("write_judge", {"content": spec.model_dump(mode="json", by_alias=True)}))
