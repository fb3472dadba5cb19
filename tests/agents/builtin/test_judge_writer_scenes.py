"""Scenes for the builtin contract and judge-writer tests: groundings G built from a few parameters
(kinds, colours, sizes, positions, ids, nouns, one or two arms), and for any builtin contract T on
such a G a scripted good trajectory computed from G's geometry (grasp, lift clear of everything,
carry, lower into place, release, wait), so a judge can be checked to pass good work and reject
the harness's canned shortcuts on scenes that are not the paper's."""

from __future__ import annotations

import random
from typing import Any


from datafarm.agents.builtin.text import _UNITS
from datafarm.artifacts.grounding import Grounding
from datafarm.harness.judge import evaluate
from datafarm.harness.judge.reference_episode import good_episode
from tests.artifacts.test_schemas import rigid, scene, tagged

HZ = 20.0


# --- groundings --------------------------------------------------------------------------------------


def cup(oid: str, colour: list[float], radius: float, height: float, xy: tuple[float, float],
        nouns: list[str] | None = None) -> dict[str, Any]:
    """A cup standing on the table."""
    obj = rigid(oid, "cup", colour, xy, outer_radius=radius, height=height)
    obj["wall_thickness"] = tagged(0.003, "assumed", 0.3)
    obj["nouns"] = nouns if nouns is not None else obj["nouns"]
    return obj


def thing(oid: str, kind: str, colour: list[float], xy: tuple[float, float], nouns: list[str] | None = None,
          **dims: Any) -> dict[str, Any]:
    """A rigid object of `kind` with its dimensions (metres)."""
    obj = rigid(oid, kind, colour, xy, **{k: v for k, v in dims.items() if not isinstance(v, dict)})
    obj.update({k: v for k, v in dims.items() if isinstance(v, dict)})
    if nouns is not None:
        obj["nouns"] = nouns
    return obj


def block(oid: str, colour: list[float], edge: float, xy: tuple[float, float], nouns: list[str] | None = None) -> dict[str, Any]:
    """A cube."""
    return thing(oid, "box", colour, xy, nouns, size={"x": tagged(edge), "y": tagged(edge), "z": tagged(edge)})


def scale_obj(oid: str, xy: tuple[float, float], nouns: list[str] | None = None, plate: float = 0.18) -> dict[str, Any]:
    """A kitchen scale."""
    obj = thing(oid, "scale", [0.9, 0.9, 0.9], xy, nouns, body_height=0.025, capacity=5.0)
    obj["plate"] = {"x": tagged(plate), "y": tagged(plate), "z": tagged(0.006)}
    obj["display"] = {"pose": {"position": [0.1, 0.0, 0.015], "quaternion": [0.707, 0.0, 0.707, 0.0]},
                      "width": 0.05, "height": 0.02}
    return obj


def drum_obj(oid: str, xy: tuple[float, float], radius: float = 0.12, height: float = 0.15,
             nouns: list[str] | None = None) -> dict[str, Any]:
    """A drum."""
    return thing(oid, "drum", [0.9, 0.85, 0.7], xy, nouns, head_radius=radius, height=height)


def stick(oid: str, xy: tuple[float, float], radius: float = 0.01, length: float = 0.3,
          nouns: list[str] | None = None, colour: list[float] | None = None) -> dict[str, Any]:
    """A stick lying on the table (its axis one radius up)."""
    obj = thing(oid, "cylinder", colour or [0.6, 0.45, 0.3], xy, nouns, radius=radius, height=length)
    obj["pose"] = {"position": [*xy, radius], "quaternion": [0.707, 0.707, 0.0, 0.0]}
    return obj


def cabinet(oid: str, xy: tuple[float, float], facing_robot: bool = True, nouns: list[str] | None = None,
            depth: float = 0.3, width: float = 0.35, travel: float = 0.2) -> dict[str, Any]:
    """A drawer cabinet whose front faces the robot (-x) or away from it."""
    return {
        "id": oid, "kind": "drawer_cabinet", "nouns": nouns if nouns is not None else ["drawer"],
        "pose": {"position": [*xy, 0.0], "quaternion": [0.0, 0.0, 0.0, 1.0] if facing_robot else [1.0, 0.0, 0.0, 0.0]},
        "pose_tag": "fitted", "colour": [0.55, 0.38, 0.22], "observations": [],
        "mass": tagged(4.0, "assumed", 0.5), "friction": tagged(0.6, "assumed", 0.3),
        "size": {"x": tagged(depth), "y": tagged(width), "z": tagged(0.25)},
        "wall_thickness": tagged(0.012, "assumed"), "drawer_height": tagged(0.1), "drawer_bottom": tagged(0.1),
        "drawer_travel": tagged(travel, "assumed"), "handle_length": tagged(0.1), "handle_protrusion": tagged(0.025),
        "initial_opening": {"value": 0.0, "tag": "fitted", "range": [0.0, 0.005]},
    }


def grounding(objects: list[dict[str, Any]], arms: int = 2) -> Grounding:
    """G with these objects, on a dual PiPER (or a single one)."""
    data = scene(objects)
    if arms == 1:
        data["robot"] = {"kind": "piper", "arms": [{"name": "arm", "base": {"position": [-0.45, 0.0, 0.0]},
                                                    "base_tag": "measured"}]}
    return Grounding.model_validate(data)


# --- random fresh scenes and phrasings ---------------------------------------------------------------

PALETTE = {"red": (0.8, 0.1, 0.1), "blue": (0.1, 0.2, 0.8), "green": (0.1, 0.6, 0.2), "yellow": (0.95, 0.85, 0.1),
           "purple": (0.5, 0.15, 0.6), "orange": (0.95, 0.5, 0.1), "white": (0.92, 0.92, 0.9), "black": (0.08, 0.08, 0.08),
           "pink": (1.0, 0.6, 0.7), "teal": (0.0, 0.5, 0.5)}
WORDS = {v: k for k, v in _UNITS.items()}

def shade(rgb: tuple[float, float, float], rnd: random.Random) -> list[float]:
    """A colour darkened by 0-40% (a clip's shading)."""
    f = rnd.uniform(0.6, 1.0)
    return [round(c * f, 3) for c in rgb]

def fresh_case(seed: int) -> tuple[str, Grounding, str, tuple[str, dict[str, str]]]:
    """A random scene of a random family (ids, colours, sizes, positions, nouns or none, one or two arms), a
    phrasing of its task, and the (family, roles) the text means."""
    rnd = random.Random(seed)
    fam = rnd.choice(["nest", "place", "scale", "drawer", "drum"])
    c1, c2, c3 = rnd.sample(list(PALETTE), 3)
    ids = [f"obj_{rnd.randrange(100)}_{i}" for i in range(3)]
    nouns = rnd.random() < 0.5
    xy = [(rnd.uniform(-0.1, 0.2), y) for y in (-0.25, 0.0, 0.25)]
    rnd.shuffle(xy)
    if fam == "nest":
        n1, n2 = rnd.choice(["cup", "mug", "glass"]), rnd.choice(["cup", "mug", "glass"])
        objs = [cup(ids[0], shade(PALETTE[c1], rnd), rnd.uniform(0.025, 0.032), rnd.uniform(0.05, 0.08), xy[0], [f"{c1} cup"] if nouns else []),
                cup(ids[1], shade(PALETTE[c2], rnd), rnd.uniform(0.045, 0.06), rnd.uniform(0.085, 0.12), xy[1], [f"{c2} cup"] if nouns else [])]
        text = rnd.choice([f"Put the {c1} {n1} into the {c2} {n2}.", f"Nest the {c1} {n1} inside the {c2} one.",
                           f"Into the {c2} {n2}, place the {c1} {n1}.", "Stack the small cup in the big cup.",
                           f"The {c1} {n1} goes in the {c2} {n2}. Success: nested and still for {WORDS[rnd.randint(1,3)]} seconds.",
                           f"Pick up the {c1} {n1} and stack it on the {c2} {n2}."])
        want = ("nest", {"inner": ids[0], "outer": ids[1]})
    elif fam == "place":
        item = rnd.choice(["block", "cube", "ball"])
        objs = [cup(ids[0], shade(PALETTE[c1], rnd), rnd.uniform(0.06, 0.08), 0.06, xy[0], [f"{c1} bowl"] if nouns else []),
                (block(ids[1], shade(PALETTE[c2], rnd), 0.03, xy[1], [f"{c2} {item}"] if nouns else []) if item != "ball"
                 else thing(ids[1], "sphere", shade(PALETTE[c2], rnd), xy[1], [f"{c2} ball"] if nouns else [], radius=0.025)),
                (block(ids[2], shade(PALETTE[c3], rnd), 0.03, xy[2], []) if item != "ball"
                 else thing(ids[2], "sphere", shade(PALETTE[c3], rnd), xy[2], [], radius=0.025))]
        text = rnd.choice([f"Put the {c2} {item} into the {c1} bowl.", f"Drop the {c2} {item} in the bowl.",
                           f"Into the {c1} bowl, place the {c2} {item}.", f"Place the {c2} {item} inside the bowl, then let go."])
        want = ("place_in", {"item": ids[1], "container": ids[0]})
    elif fam == "scale":
        item = rnd.choice(["apple", "ball", "block"])
        objs = [scale_obj(ids[0], xy[0], ["scale"] if nouns else []),
                (thing(ids[1], "sphere", shade(PALETTE[c2], rnd), xy[1], [f"{c2} {item}"] if nouns else [], radius=0.03) if item != "block"
                 else block(ids[1], shade(PALETTE[c2], rnd), 0.04, xy[1], [f"{c2} block"] if nouns else [])),
                block(ids[2], shade(PALETTE[c3], rnd), 0.03, xy[2], [])]
        text = rnd.choice([f"Weigh the {c2} {item} on the scale.", f"Put the {c2} {item} on the scale.",
                           f"On the scale, set the {c2} {item}.", f"weigh the {c2} {item}"])
        want = ("place_on_scale", {"item": ids[1], "scale": ids[0]})
    elif fam == "drawer":
        objs = [cabinet(ids[0], (0.25, rnd.uniform(-0.2, 0.2)), nouns=["drawer"] if nouns else []),
                block(ids[1], shade(PALETTE[c2], rnd), 0.035, (-0.1, 0.28), [f"{c2} block"] if nouns else []),
                block(ids[2], shade(PALETTE[c3], rnd), 0.035, (-0.1, -0.28), [])]
        close = rnd.random() < 0.6
        text = rnd.choice([f"Open the drawer, put the {c2} block inside" + (", and close it." if close else "."),
                           f"Put the {c2} cube in the drawer" + (" and shut it." if close else "."),
                           ("Close the drawer after putting the " if close else "Put the ") + f"{c2} block inside it" + ("." if close else " drawer.")])
        want = ("drawer_put_inside", {"container": ids[0], "item": ids[1]})
    else:
        n = rnd.randint(1, 9)
        count = rnd.choice([f"{n} times", f"{WORDS[n]} times"])
        objs = [drum_obj(ids[0], xy[0], nouns=["drum"] if nouns else []), stick(ids[1], (-0.05, -0.3), nouns=[])]
        text = rnd.choice([f"Beat the drum {count} with the stick.", f"With the stick, strike the drum {count}.",
                           f"Hit the drum {count} using the stick", f"Pick up the stick and tap the drum {count}."])
        want = ("strike_drum", {"instrument": ids[0], "tool": ids[1]})
    return fam, grounding(objs, arms=1 + seed % 2), text, want


# --- scripted good trajectories ----------------------------------------------------------------------


def test_scripted_episodes_pass_the_contracts_own_stages() -> None:
    from datafarm.agents.builtin import contract_for, read_task
    from datafarm.harness.judge import contract_judge

    cases = [
        (grounding([cup("tall_cup", [0.1, 0.6, 0.2], 0.05, 0.1, (0.1, 0.2)), cup("short_cup", [0.9, 0.8, 0.1], 0.03, 0.07, (0.0, -0.2))]),
         "Nest the yellow cup in the green cup."),
        (grounding([cabinet("chest", (0.2, 0.1)), block("cube", [0.2, 0.3, 0.9], 0.035, (-0.1, -0.25))]),
         "Open the drawer, put the blue cube inside and close it."),
    ]
    for g, text in cases:
        t = contract_for(read_task(text, g), g, text)
        verdict = evaluate(contract_judge(t), good_episode(g, t))
        assert verdict.passed, (text, verdict.reason)
