"""Simulator variants: a variant is a small set of changes to `WorldSettings` from its defaults
(friction scale, restitution, contact offset, solver iterations, drive stiffness and damping).

Qualification tries variants in order of fewest changes: the default (no change), then each single
change K lists, then pairs of them that change different settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from typing import Annotated

from pydantic import Field, StringConstraints, field_validator

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.fields import Name
from datafarm.sim.world.settings import WorldSettings

SettingValue = float | int | bool | None
"""A value of one `WorldSettings` field."""
VariantName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*(\+[a-z][a-z0-9_]*)*$", max_length=200)]
"""A snake_case name, or several joined by `+` (a combined variant)."""


class SimVariant(Artifact):
    """A named set of changes to the simulator's default physics settings."""

    name: VariantName
    """Variant name, e.g. `default`, `friction_up` or `friction_up+drive_damping_up`."""
    changes: dict[Name, SettingValue] = Field(default_factory=dict)
    """WorldSettings field -> value replacing its default; empty for the default variant."""

    @field_validator("changes")
    @classmethod
    def _known_settings(cls, changes: dict[str, SettingValue]) -> dict[str, SettingValue]:
        unknown = sorted(set(changes) - set(WorldSettings.model_fields))
        if unknown:
            raise ValueError(f"unknown WorldSettings field(s) {unknown}; fields: {sorted(WorldSettings.model_fields)}")
        WorldSettings.model_validate(changes)  # every value must be valid for its field
        return changes

    @property
    def size(self) -> int:
        """Number of settings changed."""
        return len(self.changes)

    def settings(self, base: WorldSettings | None = None) -> WorldSettings:
        """`base` (default: `WorldSettings()`) with this variant's changes applied and checked."""
        base = base or WorldSettings()
        return WorldSettings.model_validate({**base.model_dump(), **self.changes})


DEFAULT_VARIANT = SimVariant(name="default")
"""No change: the simulator's default settings."""


def combined(a: SimVariant, b: SimVariant) -> SimVariant:
    """The variant applying both `a`'s and `b`'s changes (they must change different settings)."""
    if set(a.changes) & set(b.changes):
        raise ValueError(f"{a.name} and {b.name} both change {sorted(set(a.changes) & set(b.changes))}")
    return SimVariant(name=f"{a.name}+{b.name}", changes={**a.changes, **b.changes})


def candidate_variants(singles: Sequence[SimVariant], max_changes: int = 2) -> list[SimVariant]:
    """The default, then `singles` in their order, then their pairs (up to `max_changes` changes,
    never two changes of the same setting), in order of fewest changes."""
    out = [DEFAULT_VARIANT]
    seen = {tuple(sorted(DEFAULT_VARIANT.changes.items()))}
    for size in range(1, max_changes + 1):
        for group in combinations(singles, size):
            fields = [f for v in group for f in v.changes]
            if len(set(fields)) != len(fields):
                continue
            variant = group[0]
            for other in group[1:]:
                variant = combined(variant, other)
            key = tuple(sorted(variant.changes.items()))
            if key not in seen:
                seen.add(key)
                out.append(variant)
    return out


def by_fewest_changes(candidates: Sequence[SimVariant]) -> list[SimVariant]:
    """`candidates` ordered by number of changes, keeping the given order among equals."""
    return sorted(candidates, key=lambda v: v.size)
