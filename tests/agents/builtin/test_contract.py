"""The builtin contract: task text + G -> family, roles and parameters, for many phrasings per family
(synonyms, free word order, numbers as words, colour/kind/size words instead of G's names), the T
and S it writes, the default B, and the requests it must refuse (outside the families, deformable,
objects G lacks or cannot tell apart, objects that cannot do the task)."""

from __future__ import annotations

import pytest

from datafarm.agents.builtin import (
    FAMILIES,
    TaskNotSupported,
    contract_for,
    default_batch,
    read_task,
    sampler_for,
)
from datafarm.agents.builtin.text import (
    hold_seconds,
    repeat_count,
    split_success,
    tokens,
)
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.request import Request
from tests.agents.builtin.test_judge_writer_scenes import (
    block,
    cabinet,
    cup,
    fresh_case,
    grounding,
    thing,
)
from tests.artifacts.test_schemas import (
    drawer_grounding,
    drum_grounding,
    nest_grounding,
    weigh_grounding,
)


def place_grounding() -> Grounding:
    """A white bowl, an orange cube and a brown crate, linked to no nouns (an LLM grounding may not link them)."""
    return grounding([
        cup("bowl_1", [0.92, 0.92, 0.9], 0.07, 0.06, (0.15, 0.05), nouns=[]),
        block("obj_7", [0.95, 0.5, 0.1], 0.03, (-0.05, -0.2), nouns=[]),
        thing("obj_3", "box", [0.45, 0.3, 0.15], (0.15, -0.25), nouns=[],
              size={"x": {"value": 0.2, "tag": "measured"}, "y": {"value": 0.2, "tag": "measured"},
                    "z": {"value": 0.08, "tag": "measured"}}),
    ])


NEST = [
    "Pick up the red cup and place it inside the blue cup. Success: the red cup is fully nested in the blue cup.",
    "Nest the small cup in the big cup.",
    "Stack the red cup on the blue cup.",
    "Into the blue cup, put the red one.",
    "Put the crimson mug inside the navy mug",
    "nest a cup in another",
    "Stack the cups.",
    "The red cup goes into the blue cup.",
    "Place the smaller cup into the larger one, please",
    "insert the scarlet cup into the cobalt cup",
]
PLACE_IN = [
    "Put the orange cube into the white bowl.",
    "Drop the cube in the bowl.",
    "Into the bowl, place the block.",
    "The orange block goes inside the bowl.",
    "Place the small cube in the white container, then let go",
    "put the cube within the bowl",
]
PLACE_ON = [
    "Put the cube on the crate.",
    "Set the orange cube on top of the brown box",
    "Place the block onto the box.",
    "On the big box, lay the little cube.",
    "the cube should end up on the crate",
    "stack the orange block on the brown crate",
]
WEIGH = [
    "Weigh the apple on the scale.",
    "Put the apple on the scale",
    "Place the red apple onto the weighing scale",
    "weigh the apple",
    "On the scale, set the apple.",
    "Use the scale to weigh the fruit",
    "Set the apple on the kitchen scale and leave it there.",
]
DRAWER_CLOSE = [
    "Open the drawer, put the red block inside, and close it.",
    "Open the drawer and place the red cube inside, then shut the drawer.",
    "Place the block into the drawer and close it",
    "Pull the drawer open, drop the block in, and push it closed",
    "Close the drawer after putting the red block inside it.",
    "Put the red block inside the cabinet's drawer. Success: block inside and drawer closed.",
]
DRAWER_OPEN = ["Put the block in the drawer.", "open the drawer and put the cube in it"]
DRUM = [
    ("Beat the drum three times with the stick.", 3, "stick"),
    ("Strike the drum repeatedly.", 3, "stick"),  # G's one stick, though the text does not name it
    ("Hit the drum 5 times using the stick", 5, "stick"),
    ("Tap the drum twice with the gripper", 2, None),
    ("With the stick, bang on the drum four times.", 4, "stick"),
    ("Pick up the stick and hit the drum head seven times", 7, "stick"),
    ("Knock on the drum a dozen times with your gripper", 12, None),
    ("Play the drum several times with your fingers. Success: repeated strikes on the drum head.", 3, None),
    ("hammer the drum twenty times with the drumstick", 20, "stick"),
]


@pytest.mark.parametrize("text", NEST)
def test_nest_phrasings(text: str) -> None:
    r = read_task(text, nest_grounding())
    assert (r.family, r.roles) == ("nest", {"inner": "red_cup", "outer": "blue_cup"})


@pytest.mark.parametrize("text", PLACE_IN)
def test_place_in_phrasings(text: str) -> None:
    r = read_task(text, place_grounding())
    assert (r.family, r.relation, r.roles) == ("place_in", "in", {"item": "obj_7", "container": "bowl_1"})


@pytest.mark.parametrize("text", PLACE_ON)
def test_place_on_phrasings(text: str) -> None:
    r = read_task(text, place_grounding())
    assert (r.family, r.relation, r.roles) == ("place_in", "on", {"item": "obj_7", "support": "obj_3"})


@pytest.mark.parametrize("text", WEIGH)
def test_weigh_phrasings(text: str) -> None:
    r = read_task(text, weigh_grounding())
    assert (r.family, r.roles) == ("place_on_scale", {"item": "apple", "scale": "scale"})


@pytest.mark.parametrize("text", DRAWER_CLOSE + DRAWER_OPEN)
def test_drawer_phrasings(text: str) -> None:
    r = read_task(text, drawer_grounding())
    assert (r.family, r.roles) == ("drawer_put_inside", {"container": "cabinet", "item": "red_block"})
    assert r.close == (text in DRAWER_CLOSE)
    t = contract_for(r, drawer_grounding(), text)
    assert [s.name for s in t.stages][-1] == ("close_drawer" if r.close else "place_in_drawer")


@pytest.mark.parametrize(("text", "strikes", "tool"), DRUM)
def test_drum_phrasings(text: str, strikes: int, tool: str | None) -> None:
    r = read_task(text, drum_grounding())
    assert (r.family, r.strikes, r.roles.get("tool"), r.roles["instrument"]) == ("strike_drum", strikes, tool, "drum")
    t = contract_for(r, drum_grounding(), text)
    hits = t.stages[-1].done_when
    assert (hits.a, hits.b, hits.at_least) == ("drum.head", tool or "robot", strikes)  # type: ignore[union-attr]
    assert t.time_limit_s == 30.0 + 1.5 * strikes


def test_fresh_scene_by_colour_and_size_words_without_g_nouns() -> None:
    g = grounding([
        cup("k1", [0.55, 0.05, 0.1], 0.034, 0.07, (0.0, -0.2), nouns=[]),  # a shaded crimson
        cup("k2", [0.1, 0.1, 0.35], 0.05, 0.1, (0.1, 0.2), nouns=[]),  # a dark navy
        cup("k3", [0.1, 0.5, 0.15], 0.025, 0.06, (0.25, 0.0), nouns=[]),  # green, smallest
    ], arms=1)
    assert read_task("Put the crimson mug in the navy one.", g).roles == {"inner": "k1", "outer": "k2"}
    assert read_task("nest the green glass inside the blue glass", g).roles == {"inner": "k3", "outer": "k2"}
    assert read_task("Put the smallest cup into the biggest cup.", g).roles == {"inner": "k3", "outer": "k2"}
    assert read_task("put the green cup in the red cup", g).roles == {"inner": "k3", "outer": "k1"}


def test_contract_and_sampler_are_complete_and_valid() -> None:
    g = nest_grounding()
    text = NEST[0] + " Both stay still for two seconds."
    r = read_task(text, g)
    t = contract_for(r, g, text)
    assert t.task == text and t.family == "nest" and t.roles == {"inner": "red_cup", "outer": "blue_cup"}
    assert [s.name for s in t.stages] == ["grasp_inner", "insert_inner"]
    assert t.success.hold_s == 2.0 and t.control_hz == 20.0
    assert set(t.forbidden) >= {"teleport", "penetration", "stage_skipped", "success_too_brief"}
    assert "fully nested" in t.success.description
    s = sampler_for(r, g, {"tablecloth": ["red_check"]})
    placements = {p.object: p for p in s.objects}
    assert set(placements) == {"red_cup", "blue_cup"}
    assert placements["red_cup"].x == (-0.02, 0.02) and placements["blue_cup"].x == (-0.01, 0.01)
    assert s.physics == ["objects.red_cup.mass", "objects.red_cup.friction"]
    assert s.appearance == {"tablecloth": ["red_check"]}
    assert s.table_height[1] > 0  # S's defaults vary the table


def test_default_batch_follows_the_request() -> None:
    request = Request.model_validate({"task": "nest the cups", "clip": "clip", "episodes": 10, "mode": "sim2real",
                                      "sandbox": "docker", "renderer": "minimax"})
    b = default_batch(request)
    assert (b.n, b.admission_seed_count, b.dev_seeds, b.sandbox, b.renderer) == (10, 15, [0, 1, 2, 3, 4], "docker", "minimax")
    assert default_batch(request.model_copy(update={"episodes": 1})).admission_seed_count == 3


def test_success_clause_sets_the_hold() -> None:
    g = weigh_grounding()
    assert read_task("Weigh the apple. Success: it rests on the scale for 3 seconds.", g).hold_s == 3.0
    assert read_task("Weigh the apple. Success: it rests on the scale for half a second.", g).hold_s == 0.5
    r = read_task("Weigh the apple.", g)
    assert r.hold_s == 1.0 and any("default" in n for n in r.notes)


def test_numbers_and_clauses() -> None:
    def count(text: str) -> int | None:
        return repeat_count(tokens(text), 3)[0]

    assert [count(t) for t in ("three times", "twenty one times", "a dozen times", "twice", "4 strikes", "6x",
                               "repeatedly", "over and over", "with one hand")] == [3, 21, 12, 2, 4, 6, 3, 3, None]
    assert [hold_seconds(tokens(t)) for t in ("for 1.5 s", "for at least two seconds", "for 500 ms", "for a second",
                                              "for half a second", "for ever")] == [1.5, 2.0, 0.5, 1.0, 0.5, None]
    assert split_success("Nest them. Success: nested.") == ("Nest them.", "nested.")
    assert split_success("Nest them; the task is done when they are nested") == ("Nest them;", "they are nested")


# --- refusals ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["Fold the towel twice.", "Put the cloth in the bowl", "fold the napkin in half",
                                  "Drape the blanket over the box"])
def test_deformable_tasks_need_a_deformable_simulator(text: str) -> None:
    with pytest.raises(TaskNotSupported) as info:
        read_task(text, place_grounding())
    message = str(info.value)
    assert "deformable-capable simulator" in message
    assert all(family in message for family in FAMILIES)


@pytest.mark.parametrize("text", ["Pick up the red cup.", "Wave at the camera.", "Push the red cup to the left",
                                  "Open the drawer."])
def test_unsupported_requests_name_the_families(text: str) -> None:
    g = drawer_grounding() if "drawer" in text else nest_grounding()
    with pytest.raises(TaskNotSupported) as info:
        read_task(text, g)
    assert info.value.route_to == "contract"
    assert "The builtin agent compiles these task families" in str(info.value)
    assert all(family in str(info.value) for family in FAMILIES)


def test_objects_g_lacks_are_sent_back_to_grounding() -> None:
    with pytest.raises(TaskNotSupported) as info:
        read_task("Put the green cup in the blue cup", nest_grounding())
    assert info.value.route_to == "grounding" and "'green cup'" in str(info.value) and "red_cup" in str(info.value)
    with pytest.raises(TaskNotSupported) as info:
        read_task("Weigh the red cup", nest_grounding())
    assert info.value.route_to == "grounding" and "a scale" in str(info.value)


def test_ambiguous_and_impossible_requests_say_why() -> None:
    two = grounding([block("b1", [0.8, 0.1, 0.1], 0.03, (0.0, -0.2)), block("b2", [0.1, 0.2, 0.8], 0.03, (0.0, 0.2)),
                     cup("bowl", [0.9, 0.9, 0.9], 0.07, 0.06, (0.2, 0.0), nouns=[])])
    with pytest.raises(TaskNotSupported, match="name them by colour or size"):
        read_task("Put the block in the bowl", two)
    assert read_task("Put the blue block in the bowl", two).roles == {"item": "b2", "container": "bowl"}
    with pytest.raises(TaskNotSupported, match="too wide for the gripper"):
        read_task("Put the blue cup in the red cup", nest_grounding())
    with pytest.raises(TaskNotSupported, match="more than the 20"):
        read_task("Beat the drum 50 times", drum_grounding())
    tall = {"x": {"value": 0.05, "tag": "measured"}, "y": {"value": 0.05, "tag": "measured"}, "z": {"value": 0.12, "tag": "measured"}}
    big = grounding([cabinet("cab", (0.2, 0.0)), thing("brick", "box", [0.8, 0.1, 0.1], (0.0, -0.25), size=tall)])
    with pytest.raises(TaskNotSupported, match="does not fit in cab's drawer"):
        contract_for(read_task("put the brick in the drawer", big), big, "put the brick in the drawer")


def test_fresh_random_scenes_and_phrasings_are_read_right() -> None:
    """300 random scenes (ids, colours shaded by up to 40%, sizes, positions, G nouns or none, one or two
    arms) with a phrasing of their task each: the family and every role come out right."""
    wrong = []
    for seed in range(300):
        _, g, text, want = fresh_case(seed)
        try:
            r = read_task(text, g)
            contract_for(r, g, text)
            got: tuple = (r.family, r.roles)
        except TaskNotSupported as e:
            got = ("refused", str(e))
        if got != want:
            wrong.append((seed, text, want, got))
    assert wrong == []
