"""Which ood values an episode gets (only R's axes, z's draw when it has one) and what the named
values mean (tablecloths, light colours, intensities); no render device needed."""

from __future__ import annotations

import numpy as np
import pytest

from datafarm.artifacts.grounding import Grounding
from datafarm.errors import InputError
from datafarm.renderers.composite import ood
from datafarm.renderers.demo import example_variation
from datafarm.renderers.pipeline import applied_variations
from tests.renderers.helpers import contract


def test_only_the_axes_the_contract_allows_are_applied(grounding: Grounding) -> None:
    z = example_variation(grounding, seed=4)
    assert applied_variations(contract(), z, 4) == {}
    only_light = contract("ood", variations={"light_colour": ["warm", "cool"]})
    chosen = applied_variations(only_light, z, 4)
    assert set(chosen) == {"light_colour"} and chosen["light_colour"] in ("warm", "cool")
    both = contract("ood", variations={"tablecloth": ["red_check", "white_linen", "green_felt"], "light_colour": ["warm"]})
    picks = {applied_variations(both, z, seed)["tablecloth"] for seed in range(20)}
    assert picks == {"red_check", "white_linen", "green_felt"}  # seeded choice over R's values
    assert applied_variations(both, z, 7) == applied_variations(both, z, 7)


def test_z_s_drawn_appearance_is_used_and_must_be_one_r_allows(grounding: Grounding) -> None:
    r = contract("ood", variations={"tablecloth": ["red_check", "white_linen"]})
    z = example_variation(grounding, appearance={"tablecloth": "white_linen"})
    assert applied_variations(r, z, 0) == {"tablecloth": "white_linen"}
    z_bad = example_variation(grounding, appearance={"tablecloth": "blue_stripe"})
    with pytest.raises(InputError, match="blue_stripe"):
        applied_variations(r, z_bad, 0)


def test_tablecloth_names_and_textures() -> None:
    assert ood.parse_tablecloth("red_check") == ("red", "check")
    assert ood.parse_tablecloth("linen") == ("white", "linen") and ood.parse_tablecloth("navy") == ("navy", "plain")
    with pytest.raises(InputError, match="colours red"):
        ood.parse_tablecloth("plaid_unicorn")
    check = ood.tablecloth_texture("red_check", 0.4, 0.3)
    assert check.shape == (150, 200, 3)
    assert np.array_equal(check, ood.tablecloth_texture("red_check", 0.4, 0.3))  # deterministic
    reds = (check[..., 0] > 150) & (check[..., 1] < 80)
    whites = check.min(axis=2) > 200
    assert 0.15 < reds.mean() < 0.4 and 0.15 < whites.mean() < 0.4  # gingham: both colours, and their mix


def test_light_values() -> None:
    assert ood.light_gains({}) == pytest.approx([1, 1, 1])
    warm = ood.light_colour_gains(3200)
    assert warm[0] > 1.0 > warm[2] and warm[1] == pytest.approx(1.0)
    assert ood.light_colour_gains("3200K") == pytest.approx(warm)
    assert ood.light_gains({"light_colour": "cool", "light_intensity": 0.5}) == pytest.approx(
        np.array(ood.LIGHT_COLOURS["cool"]) * 0.5)
    with pytest.raises(InputError, match="light_colour"):
        ood.light_colour_gains("ultraviolet")
    with pytest.raises(InputError, match="light_intensity"):
        ood.light_intensity_gain(12)
