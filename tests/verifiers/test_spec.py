"""The verifier spec: derived from T, G, R and K's verifier defaults (nothing an agent chooses), with
each check's threshold from K, pixel settings scaled to R's resolution, the objects to expect in the
views G saw them in, and overrides that name a real check."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from datafarm.artifacts.admission import VerifierCheck
from datafarm.errors import InputError
from datafarm.verifiers import derive_spec, load_spec, save_spec
from datafarm.verifiers.defaults import VerifierDefaults, load_defaults
from datafarm.verifiers.report import CalibrationReport
from datafarm.verifiers.spec import ARM_TRACK_CHECKS, VerifierSpec
from tests.renderers.helpers import contract
from tests.verifiers.helpers import nest_contract, write_task


def test_k_defaults_name_every_arm_track_check_with_a_direction_and_threshold() -> None:
    loaded = load_defaults()
    assert loaded.k_version == "k2" and len(loaded.sha256) == 64
    assert set(loaded.defaults.checks) == set(ARM_TRACK_CHECKS)
    for check, settings in loaded.defaults.checks.items():
        assert settings.direction in ("max", "min") and settings.metric, check


def test_k_defaults_give_each_check_exactly_the_settings_it_reads(tmp_path: Path, grounding) -> None:
    import yaml

    from datafarm.capability.bundle import latest_with
    from datafarm.verifiers.checks import PARAMETERS
    from datafarm.verifiers.defaults import DEFAULTS_FILE

    loaded = load_defaults()
    assert {c: set(d.parameters) for c, d in loaded.defaults.checks.items()} == {c: set(p) for c, p in PARAMETERS.items()}
    data = yaml.safe_load((latest_with(DEFAULTS_FILE).root / DEFAULTS_FILE).read_text())
    del data["checks"]["background"]["parameters"]["search_px"]
    broken = tmp_path / DEFAULTS_FILE
    broken.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match="check background: K .* gives settings"):
        derive_spec((None, grounding, contract()), defaults=broken)


def test_the_spec_comes_from_t_g_r_and_k(grounding) -> None:
    spec = derive_spec((nest_contract(), grounding, contract()))
    k = load_defaults().defaults
    assert spec.cameras == ["front", "left", "right"] and spec.resolution == (320, 240) and spec.fps == 20.0
    assert [c.check for c in spec.checks] == list(ARM_TRACK_CHECKS)
    for c in spec.checks:
        assert (c.threshold, c.direction, c.route_to) == (k.checks[c.check].threshold, k.checks[c.check].direction,
                                                          k.checks[c.check].route_to)
    red = spec.object("red_cup")
    assert red.role == "item" and red.colour_source == "render_contract" and red.movable
    assert red.colour == contract().appearance.objects["red_cup"].colour  # R's target, not G's wrong sim colour
    assert set(red.cameras) == {"front", "left", "right"}  # where G observed it
    assert set(spec.inputs) == {"T", "G", "R"}


def test_pixel_settings_scale_with_the_resolution(grounding) -> None:
    small = derive_spec((None, grounding, contract()))
    large = derive_spec((None, grounding, contract(resolution=[640, 480])))
    assert large.common.mask_margin_px == pytest.approx(2 * small.common.mask_margin_px)
    assert large.common.min_object_area_px == pytest.approx(4 * small.common.min_object_area_px)
    radius = small.check("views").parameters["edge_radius_px"]
    assert large.check("views").parameters["edge_radius_px"] == pytest.approx(2 * radius)
    assert large.check("objects").threshold == small.check("objects").threshold  # shares do not scale
    assert "T" not in small.inputs and small.object("red_cup").role is None


def test_overrides_change_one_check_and_unknown_ones_are_refused(grounding) -> None:
    lax = derive_spec((None, grounding, contract()), overrides={"objects": {"threshold": 1.5}})
    assert lax.check("objects").threshold == 1.5 and lax.check("geometry").threshold == derive_spec(
        (None, grounding, contract())).check("geometry").threshold
    with pytest.raises(InputError, match="unknown checks"):
        derive_spec((None, grounding, contract()), overrides={"colours": {"threshold": 1.0}})
    with pytest.raises(InputError, match="unknown parameters"):
        derive_spec((None, grounding, contract()), overrides={"objects": {"parameters": {"size": 1.0}}})


def test_a_task_folder_spec_hashes_its_files_and_round_trips(tmp_path: Path, demo_clip: Path, grounding) -> None:
    task = write_task(tmp_path / "task", demo_clip, grounding, contract())
    spec = derive_spec(task.root)
    from datafarm.hashing import sha256_file

    assert spec.inputs == {"T": sha256_file(task.contract), "G": sha256_file(task.grounding),
                           "R": sha256_file(task.render_contract)}
    save_spec(task.root, spec)
    assert load_spec(task.root) == spec


def test_every_field_of_the_verifier_models_is_documented() -> None:
    def walk(model: type[BaseModel], seen: set) -> None:
        if model in seen:
            return
        seen.add(model)
        for name, info in model.model_fields.items():
            assert info.description, f"{model.__name__}.{name} has no description"
            for arg in getattr(info.annotation, "__args__", ()) + (info.annotation,):
                if isinstance(arg, type) and issubclass(arg, BaseModel):
                    walk(arg, seen)

    for model in (VerifierSpec, VerifierDefaults, CalibrationReport):
        walk(model, set())


def test_events_is_left_out_when_no_object_can_move(grounding) -> None:
    still = grounding.model_copy(update={"objects": []})
    spec = derive_spec((None, still, contract().model_copy(update={"appearance": contract().appearance.model_copy(
        update={"objects": {}})})))
    assert VerifierCheck.events not in [c.check for c in spec.checks]
    assert any(n.startswith("events:") for n in spec.notes)
