"""Simulator qualification in real SAPIEN (CPU, physics-only): every probe of K's library passes on
the default settings in its paper-task scene, moving objects only with the robot; qualification
tries variants fewest changes first, rejects one too slippery to lift and picks a passing one;
an unreachable scene stops the search; the report round-trips through `qualification.json`."""

from __future__ import annotations

import json
import math

import pytest
from pydantic import BaseModel

from datafarm.artifacts.grounding import Grounding
from datafarm.errors import InputError
from datafarm.sim.qualification import (
    DEFAULT_VARIANT,
    ProbeCall,
    ProbeResult,
    QualificationReport,
    SimVariant,
    VariantTrial,
    candidate_variants,
    load_probe_library,
    plan_probes,
    qualify,
    read_qualification,
    run_probe,
    write_qualification,
)
from datafarm.sim.qualification.library import (
    PROBES_FILE,
    ProbeLibrary,
    parse_probe_library,
)
from datafarm.sim.world import WorldSettings
from tests.sim.conftest import (
    block,
    drawer_grounding,
    drum_grounding,
    grounding_with,
    nest_grounding,
    rigid,
    weigh_grounding,
)

LIBRARY = load_probe_library()


def lying_stick() -> Grounding:
    """A 30 cm stick lying on the table, across the right arm's reach: gripped with the pads upright
    beside it, then rolled about its own axis as it is lifted."""
    stick = rigid("stick", "cylinder", [0.6, 0.45, 0.3], (-0.15, -0.25), radius=0.01, height=0.3)
    stick["pose"]["quaternion"] = [math.sqrt(0.5), math.sqrt(0.5), 0.0, 0.0]
    stick["pose"]["position"][2] = 0.01
    return grounding_with(stick)


FIXTURE_PROBES = [
    (nest_grounding, "grasp_lift", {"item": "red_cup"}),
    (nest_grounding, "nest", {"inner": "red_cup", "outer": "blue_cup"}),
    (drawer_grounding, "drawer", {"cabinet": "cabinet"}),
    (drawer_grounding, "grasp_lift", {"item": "red_block"}),
    (drawer_grounding, "slide", {"item": "red_block"}),
    (weigh_grounding, "grasp_lift", {"item": "apple"}),
    (weigh_grounding, "weigh", {"item": "apple", "scale": "scale"}),
    (weigh_grounding, "slide", {"item": "apple"}),
    (drum_grounding, "strike", {"instrument": "drum"}),
    (lying_stick, "grasp_lift", {"item": "stick"}),
]


@pytest.mark.parametrize(("make", "probe", "objects"), FIXTURE_PROBES,
                         ids=[f"{m.__name__}-{p}-{'-'.join(o.values())}" for m, p, o in FIXTURE_PROBES])
def test_each_probe_passes_on_the_default_variant_in_its_scene(make, probe, objects):
    result = run_probe(make(), ProbeCall(probe=probe, objects=objects), LIBRARY.thresholds(probe))
    assert result.passed, result.reason
    assert result.failure is None and result.arm in ("left", "right")
    assert result.thresholds == LIBRARY.thresholds(probe)
    assert result.measured and result.sim_seconds > 1.0
    t, m = result.thresholds, result.measured
    if probe == "grasp_lift":
        assert m["lift_m"] >= t["min_lift_m"] and m["hold_s"] >= t["hold_s"]
        assert m["gripper_opening_m"] > 0.01  # something is between the fingers
    elif probe == "slide":
        assert m["pushed_m"] >= t["min_push_m"] and m["height_change_m"] <= t["max_height_change_m"]
    elif probe == "nest":
        assert m["radial_offset_m"] <= m["radial_play_m"] + 1e-3 and m["top_below_rim_m"] > 0
        assert m["bottom_above_outer_base_m"] == pytest.approx(0.003, abs=1e-3)  # on the outer cup's bottom
    elif probe == "drawer":
        assert m["open_fraction"] >= t["min_open_fraction"] and m["final_opening_m"] <= t["max_closed_m"]
    elif probe == "weigh":
        assert m["expected_g"] == pytest.approx(150.0) and m["relative_error"] <= t["max_relative_error"]
    else:
        assert m["contacts"] == m["strikes"] == t["strikes"] == m["strikes_with_one_contact"]


def test_a_probe_is_deterministic():
    call = ProbeCall(probe="grasp_lift", objects={"item": "block"})
    g = grounding_with(block())
    assert run_probe(g, call, LIBRARY.thresholds("grasp_lift")) == run_probe(g, call, LIBRARY.thresholds("grasp_lift"))


SLIPPERY = SimVariant(name="slippery", changes={"friction_scale": 0.01})
SLIPPERY_STIFF = SimVariant(name="slippery_stiff", changes={"friction_scale": 0.01, "drive_stiffness": 2000.0})
GRIPPY = SimVariant(name="grippy", changes={"friction_scale": 1.5, "solver_position_iterations": 20})


@pytest.fixture(scope="module")
def slippery_first() -> QualificationReport:
    # given out of order: qualification must try the one-change variant first
    return qualify(grounding_with(block()), ["grasp_lift"], [GRIPPY, SLIPPERY_STIFF, SLIPPERY])


def test_qualification_rejects_a_variant_too_slippery_to_lift_and_chooses_a_passing_one(slippery_first):
    report = slippery_first
    assert [t.variant.name for t in report.trials] == ["slippery", "grippy"]  # fewest changes first; stops at a pass
    rejected = report.trial("slippery")
    assert not rejected.passed and rejected.settings.friction_scale == 0.01
    (lift,) = rejected.results
    assert lift.failure == "measured" and lift.measured["lift_m"] < lift.thresholds["min_lift_m"]
    assert "slipped" in lift.reason
    assert report.passed and report.chosen == GRIPPY
    assert report.settings == WorldSettings(friction_scale=1.5, solver_position_iterations=20)
    assert report.trial("grippy").results[0].measured["lift_m"] >= 0.05
    assert "grippy" in report.reason and "slippery" in report.reason
    assert report.probes == [ProbeCall(probe="grasp_lift", objects={"item": "block"})]


def test_the_report_round_trips_through_qualification_json(slippery_first, tmp_path):
    path = write_qualification(slippery_first, tmp_path)
    assert path.name == "qualification.json"
    assert read_qualification(tmp_path) == slippery_first == read_qualification(path)
    data = json.loads(path.read_text())
    assert data["chosen"] == {"name": "grippy", "changes": {"friction_scale": 1.5, "solver_position_iterations": 20}}
    assert len(data["trials"]) == 2 and data["probe_library_sha256"] == LIBRARY.sha256
    data["trials"][0]["passed"] = True  # a tampered report whose chosen variant is not the first passing one
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="first trial"):
        read_qualification(path)


def test_a_family_qualifies_on_the_default_variant_with_its_probes_from_k():
    g = drawer_grounding()
    seen: list[tuple[str, str, bool]] = []
    report = qualify(g, "drawer_put_inside", on_probe=lambda v, r: seen.append((v.name, r.probe, r.passed)))
    assert report.passed and report.chosen == DEFAULT_VARIANT and report.settings == WorldSettings()
    assert report.family == "drawer_put_inside" and report.k_version == "k2"
    assert [c.label() for c in report.probes] == ["drawer(cabinet=cabinet)", "grasp_lift(item=red_block)"]
    assert seen == [("default", "drawer", True), ("default", "grasp_lift", True)]
    assert len(report.trials) == 1


def test_an_unreachable_object_stops_the_search_and_points_at_the_grounding():
    g = grounding_with(block("far_block", (0.42, 0.0)))  # 0.87 m from both bases: out of the arms' reach
    report = qualify(g, ["grasp_lift"])  # K's full candidate list
    assert not report.passed and report.chosen is None and report.settings is None
    assert len(report.trials) == 1  # no variant changes reachability: no point trying the others
    (result,) = report.trials[0].results
    assert result.failure == "unreachable" and "grasp and lift far_block" in result.reason
    assert "reach" in report.reason and "G" in report.reason


def test_families_choose_their_probes_and_objects_from_k():
    calls, notes = plan_probes(nest_grounding(), "nest", LIBRARY)
    assert [c.label() for c in calls] == ["grasp_lift(item=red_cup)", "nest(inner=red_cup, outer=blue_cup)"]
    calls, _ = plan_probes(weigh_grounding(), "place_on_scale", LIBRARY)
    assert [c.label() for c in calls] == ["grasp_lift(item=apple)", "weigh(item=apple, scale=scale)"]
    calls, _ = plan_probes(drum_grounding(), "strike_drum", LIBRARY, roles={"instrument": "drum", "tool": "stick"})
    assert [c.label() for c in calls] == ["strike(instrument=drum)", "grasp_lift(item=stick)"]
    # an optional role no object plays leaves its probe out, with a note
    drum_only = grounding_with(rigid("drum", "drum", [0.9, 0.85, 0.7], (0.15, 0.0), head_radius=0.12, height=0.15))
    calls, notes = plan_probes(drum_only, "strike_drum", LIBRARY)
    assert [c.probe for c in calls] == ["strike"] and "tool" in notes[0]
    assert plan_probes(drum_only, "reach", LIBRARY) == ([], [])
    # a cup too wide for the gripper cannot be the one lifted; by probe name, roles come from the probe's rules
    calls, _ = plan_probes(nest_grounding(), ["nest", "slide"], LIBRARY)
    assert [c.label() for c in calls] == ["nest(inner=red_cup, outer=blue_cup)", "slide(item=blue_cup)"]
    with pytest.raises(InputError, match="unknown task family"):
        plan_probes(nest_grounding(), "juggle", LIBRARY)
    with pytest.raises(InputError, match="role 'scale'"):
        plan_probes(nest_grounding(), "place_on_scale", LIBRARY)
    with pytest.raises(InputError, match="ghost"):
        plan_probes(nest_grounding(), "nest", LIBRARY, roles={"inner": "ghost"})


def test_every_contract_family_in_the_docs_has_probes_in_k():
    families = set(LIBRARY.library.families)
    assert {"place_in", "nest", "place_on_scale", "drawer_put_inside", "strike_drum", "reach"} <= families


def test_candidate_variants_go_from_the_default_through_single_changes_to_pairs():
    singles = LIBRARY.library.variants
    candidates = candidate_variants(singles)
    assert candidates[0] == DEFAULT_VARIANT and candidates[1:1 + len(singles)] == singles
    sizes = [v.size for v in candidates]
    assert sizes == sorted(sizes) and max(sizes) == 2
    for variant in candidates:
        variant.settings()  # every combination is a valid WorldSettings
    assert not any("friction_up" in v.name and "friction_down" in v.name for v in candidates)  # one setting, one value
    assert {"friction_scale", "solver_position_iterations", "contact_offset", "drive_stiffness", "drive_damping",
            "restitution"} <= {k for v in singles for k in v.changes}
    with pytest.raises(ValueError, match="unknown WorldSettings"):
        SimVariant(name="bad", changes={"frictoin_scale": 2.0})
    with pytest.raises(ValueError):
        SimVariant(name="bad", changes={"friction_scale": -1.0})


def test_the_probe_library_is_checked_against_the_scripts():
    text = (LIBRARY_PATH := load_probe_library_path()).read_text()
    assert parse_probe_library(text) == LIBRARY.library
    with pytest.raises(InputError, match="thresholds"):
        parse_probe_library(text.replace("min_lift_m: 0.05", "min_lift_cm: 5"), source=str(LIBRARY_PATH))
    with pytest.raises(InputError, match="no script"):
        parse_probe_library(text.replace("  strike:\n", "  smash:\n", 1).replace("{probe: strike,", "{probe: smash,"))
    with pytest.raises(InputError, match="not in `probes`"):
        parse_probe_library(text.replace("- {probe: nest,", "- {probe: nestle,"))


def load_probe_library_path():
    from datafarm.capability.bundle import BUNDLES_DIR

    return BUNDLES_DIR / LIBRARY.k_version / PROBES_FILE


def test_every_report_field_is_documented():
    def walk(model: type[BaseModel], seen: set[type]) -> None:
        if model in seen:
            return
        seen.add(model)
        for name, info in model.model_fields.items():
            assert info.description, f"{model.__name__}.{name} has no description"
            for arg in _types(info.annotation):
                if isinstance(arg, type) and issubclass(arg, BaseModel):
                    walk(arg, seen)

    for model in (QualificationReport, VariantTrial, ProbeResult, ProbeLibrary):
        walk(model, set())


def _types(annotation):
    from typing import get_args

    yield annotation
    for arg in get_args(annotation):
        yield from _types(arg)
