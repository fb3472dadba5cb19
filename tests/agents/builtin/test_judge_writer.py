"""The builtin judge-writer: for every family, on the paper's scenes and on fresh ones (other ids,
colours, sizes, positions, one or two arms), the J it writes from the builtin T covers T (no gaps),
passes a good scripted trajectory and rejects every canned shortcut, so judge acceptance takes it;
J adds the family's success checks from G when a contract (say, an LLM author's) leaves them out;
and a contract naming what G does not have is refused."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from datafarm.agents.builtin import contract_for, judge_for, read_task
from datafarm.artifacts.contract import TaskContract, judge_gaps
from datafarm.artifacts.grounding import Grounding
from datafarm.harness.judge import (
    SHORTCUT_NAMES,
    accept_judge,
    canned_shortcuts,
    evaluate,
)
from tests.agents.builtin.test_judge_writer_scenes import (
    block,
    cabinet,
    cup,
    drum_obj,
    fresh_case,
    good_episode,
    grounding,
    scale_obj,
    stick,
    thing,
)
from tests.artifacts.test_schemas import (
    drawer_grounding,
    drum_grounding,
    nest_grounding,
    weigh_grounding,
)


def _scenes() -> dict[str, tuple[Any, str]]:
    return {
        "nest-paper": (nest_grounding, ("Pick up the red cup and place it inside the blue cup. Success: the red cup is "
                                        "fully nested in the blue cup and both stay still for one second.")),
        "nest-fresh": (lambda: grounding([
            cup("cup_a", [0.2, 0.7, 0.3], 0.052, 0.11, (0.12, -0.18), nouns=[]),
            cup("cup_b", [0.95, 0.8, 0.1], 0.028, 0.06, (-0.05, 0.22), nouns=[]),
            block("distractor", [0.1, 0.1, 0.9], 0.04, (0.2, 0.3), nouns=[]),
        ], arms=1), "Stack the small yellow mug inside the green one."),
        "nest-tall-inner": (lambda: grounding([
            cup("big", [0.1, 0.2, 0.8], 0.05, 0.08, (0.1, 0.1)), cup("tall", [0.8, 0.1, 0.1], 0.03, 0.12, (0.0, -0.2)),
        ]), "nest the red cup in the blue cup"),
        "place-in-bowl": (lambda: grounding([
            cup("bowl", [0.9, 0.9, 0.9], 0.07, 0.06, (0.15, 0.05), nouns=["white bowl"]),
            block("cube", [0.9, 0.5, 0.1], 0.03, (-0.05, -0.2), nouns=["orange cube"]),
        ]), "Drop the orange cube into the white bowl."),
        "place-on-box": (lambda: grounding([
            thing("crate", "box", [0.5, 0.35, 0.2], (0.15, 0.1), size={"x": {"value": 0.2, "tag": "measured"},
                  "y": {"value": 0.2, "tag": "measured"}, "z": {"value": 0.08, "tag": "measured"}}),
            thing("ball", "sphere", [0.9, 0.1, 0.6], (-0.05, -0.2), radius=0.025),
        ]), "Place the pink ball on top of the brown box; success: the ball rests on the box for 2 seconds."),
        "weigh-paper": (weigh_grounding, "Weigh the apple on the scale."),
        "weigh-fresh": (lambda: grounding([
            scale_obj("kitchen_scale", (0.2, -0.1)), thing("lemon", "sphere", [0.95, 0.9, 0.2], (-0.05, 0.2), radius=0.03),
        ], arms=1), "Put the yellow fruit onto the scale so it can be weighed."),
        "drawer-paper": (drawer_grounding, ("Open the drawer, put the red block inside, and close it. "
                                            "Success: block inside, drawer closed.")),
        "drawer-fresh": (lambda: grounding([
            cabinet("dresser", (0.25, -0.15), width=0.4, travel=0.22),
            block("green_cube", [0.1, 0.6, 0.2], 0.035, (-0.1, 0.25), nouns=[]),
            block("red_cube", [0.8, 0.1, 0.1], 0.035, (0.0, 0.3), nouns=[]),
        ]), "Put the green cube in the drawer and shut it."),
        "drawer-left-open": (drawer_grounding, "put the block in the drawer"),
        "drum-paper": (drum_grounding, "Beat the drum three times with the stick."),
        "drum-fresh": (lambda: grounding([
            drum_obj("tom", (0.2, 0.05), radius=0.1, height=0.18), stick("mallet", (-0.05, -0.3), nouns=[]),
        ], arms=1), "With the mallet, strike the drum five times."),
    }


SCENES = _scenes()


@functools.cache
def case(name: str) -> tuple[Grounding, TaskContract, Any]:
    make, text = SCENES[name]
    g = make()
    t = contract_for(read_task(text, g), g, text)
    return g, t, judge_for(t, g)


@pytest.mark.parametrize("name", list(SCENES))
def test_the_judge_covers_the_contract_passes_good_work_and_rejects_every_shortcut(name: str) -> None:
    g, t, j = case(name)
    assert judge_gaps(t, j) == []
    assert [s.name for s in j.stages] == [s.name for s in t.stages]
    good = good_episode(g, t)
    verdict = evaluate(j, good)
    assert verdict.passed, verdict.reason
    shortcuts = canned_shortcuts(good, g, t)
    report = accept_judge(j, good, shortcuts, contract=t)
    assert report.accepted, report.reason
    assert report.ledger_details()["rejected"] == list(SHORTCUT_NAMES)


def _success_leaves(spec: Any) -> list[dict[str, Any]]:
    from datafarm.agents.builtin.judge_writer import leaves

    return [leaf for leaf, positive in leaves(spec.model_dump(mode="json", by_alias=True)["success"]) if positive]


def test_family_predicates_are_the_expected_ones() -> None:
    preds = {name: {leaf["predicate"] for leaf in _success_leaves(case(name)[2])} for name in SCENES}
    assert {"inside", "stable_for", "upright"} <= preds["nest-paper"]
    assert {"on", "scale_reading_in_range", "stable_for"} <= preds["weigh-paper"]
    assert {"inside", "joint_value"} <= preds["drawer-paper"] and "joint_value" not in preds["drawer-left-open"]
    assert preds["drum-fresh"] == {"contact_count"}
    (count,) = _success_leaves(case("drum-fresh")[2])
    assert (count["a"], count["b"], count["at_least"]) == ("tom.head", "mallet", 5)
    g, _, j = case("weigh-paper")
    (reading,) = [leaf for leaf in _success_leaves(j) if leaf["predicate"] == "scale_reading_in_range"]
    low, high = g.object("apple").mass.range  # type: ignore[misc]
    assert reading["min_g"] < low * 1000 and high * 1000 < reading["max_g"]
    stages = [s.condition.model_dump(mode="json") for s in case("drawer-paper")[2].stages]
    assert stages[0]["predicate"] == "joint_value" and stages[0]["compare"] == ">="
    assert stages[-1]["all"][0]["compare"] == "<="
    invariants = {i.shortcut for i in case("nest-paper")[2].invariants}
    assert invariants == {"teleport", "penetration", "joint_limit", "velocity_limit", "episode_gap", "success_too_brief",
                          "stage_skipped"}
    brief = next(i for i in case("place-on-box")[2].invariants if i.shortcut == "success_too_brief")
    assert brief.min_hold_s == 2.0  # type: ignore[union-attr]


def test_a_tall_inner_cup_is_judged_by_its_bottom_in_the_cavity() -> None:
    _, _, j = case("nest-tall-inner")
    preds = {leaf["predicate"] for leaf in _success_leaves(j)}
    assert "inside" not in preds and {"above", "near"} <= preds


def test_the_judge_adds_what_a_thin_contract_leaves_out() -> None:
    """A contract (from any author) whose success says only `on`: J still demands the reading and stillness."""
    g, t, _ = case("weigh-paper")
    data = t.model_dump(mode="json", by_alias=True)
    data["success"]["condition"] = {"predicate": "on", "object": "apple", "support": "scale.plate"}
    thin = TaskContract.model_validate(data)
    j = judge_for(thin, g)
    preds = [leaf["predicate"] for leaf in _success_leaves(j)]
    assert preds == ["on", "stable_for", "scale_reading_in_range"]
    good = good_episode(g, thin)
    assert evaluate(j, good).passed
    light = good.copy(scale_readings={"scale": good.scale_readings["scale"] * 0.2})
    assert not evaluate(j, light).passed  # the reading shows a fifth of the apple's weight


def test_a_contract_naming_what_g_lacks_is_refused() -> None:
    g, t, _ = case("nest-paper")
    data = t.model_dump(mode="json", by_alias=True)
    data["success"]["condition"]["all"][0]["container"] = "green_cup"
    data["stages"][0]["done_when"]["all"][0]["object"] = "red_cup.handle"
    with pytest.raises(ValueError) as info:
        judge_for(TaskContract.model_validate(data), g)
    assert "'green_cup', which is not an object of G" in str(info.value)
    assert "part 'handle' of red_cup (cup), which has parts: none" in str(info.value)


def test_drumming_with_the_gripper_is_judged_by_contacts_with_the_robot() -> None:
    """No tool in G: the strikes are the robot's own contacts with the head. J covers T and passes good
    work and rejects the canned shortcuts a strike task allows; a judge without the teleport invariant is refused."""
    g = grounding([drum_obj("drum", (0.15, 0.0)), block("cube", [0.2, 0.2, 0.8], 0.03, (0.0, 0.3), nouns=[])], arms=1)
    text = "Strike the drum repeatedly."
    t = contract_for(read_task(text, g), g, text)
    j = judge_for(t, g)
    assert "tool" not in t.roles and judge_gaps(t, j) == []
    (hits,) = _success_leaves(j)
    assert (hits["a"], hits["b"], hits["at_least"]) == ("drum.head", "robot", 3)
    good = good_episode(g, t)
    assert evaluate(j, good).passed
    strikes = [c for c in good.contacts if "drum.head" in (c.a, c.b)]
    assert len(strikes) == 3
    fewer = good.copy(contacts=[c for c in good.contacts if c is not strikes[-1]])  # only two strikes
    assert not evaluate(j, fewer).passed
    shortcuts = canned_shortcuts(good, g, t)
    # a one-stage task has no stage to skip; the struck drum jumps up to meet the gripper instead of being carried
    assert [name for name, _ in shortcuts] == ["teleport", "success_too_brief", "penetration"]
    jumped = dict(shortcuts)["teleport"].objects["drum"].pose[:, 2]
    assert jumped.max() - jumped.min() >= 0.03 - 1e-9
    assert accept_judge(j, good, shortcuts, contract=t).accepted
    lax = j.model_copy(update={"invariants": [i for i in j.invariants if i.shortcut != "teleport"]})
    report = accept_judge(lax, good, shortcuts, contract=t)
    assert not report.accepted and "teleport" in report.reason


@pytest.mark.parametrize("seed", range(0, 60, 5))
def test_judges_of_fresh_random_scenes_are_accepted(seed: int) -> None:
    _, g, text, _ = fresh_case(seed)
    t = contract_for(read_task(text, g), g, text)
    j = judge_for(t, g)
    good = good_episode(g, t)
    report = accept_judge(j, good, canned_shortcuts(good, g, t), contract=t)
    assert report.accepted, (text, report.reason)
