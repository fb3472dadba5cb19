"""K's probe library (`probes.yaml`): the probes, their thresholds, which probes each task family
needs, which of G's objects play each role, and the simulator variants qualification may try.

`load_probe_library` reads and checks it (every probe it names must have a script in
`datafarm.sim.qualification.probes`, with exactly the thresholds that script reads); `plan_probes`
turns a task family (or a list of probe names) and a grounding into concrete `ProbeCall`s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, model_validator

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.common import FiniteFloat
from datafarm.artifacts.fields import Name
from datafarm.artifacts.grounding import Grounding
from datafarm.capability.bundle import CapabilityBundle, latest_with
from datafarm.errors import InputError, Problem
from datafarm.hashing import sha256_bytes
from datafarm.sim.qualification.variants import SimVariant
from datafarm.sim.world.shapes import footprint_radius

PROBES_FILE = "probes.yaml"
"""Where a K version keeps its probe library."""

ObjectKind = Literal["box", "cylinder", "sphere", "cup", "drawer_cabinet", "scale", "drum"]


class RoleRule(Artifact):
    """How to find the object that plays a role in G when the task contract does not say."""

    kinds: list[ObjectKind] = Field(min_length=1)
    """G object kinds that may play the role."""
    pick: Literal["first", "smallest", "largest"] = "first"
    """Among several candidates: the first in G order, or the smallest or largest footprint."""
    graspable: bool = False
    """Only objects whose narrowest side fits between the open fingers (`grasp_max_width_m`)."""
    optional: bool = False
    """When no object of G fits, the probes that need this role are left out instead of failing."""


class ProbeDefinition(Artifact):
    """One probe: what it does, the roles its script needs, the thresholds it must meet."""

    description: str = Field(min_length=1)
    """What the harness does and what counts as a pass, for people reading K."""
    roles: dict[Name, RoleRule] = Field(min_length=1)
    """The script's roles (e.g. `item`) and how to find each in G when called by probe name."""
    thresholds: dict[Name, FiniteFloat]
    """Pass thresholds by name (each probe script reads exactly these)."""


class FamilyProbe(Artifact):
    """One probe a task family needs, with the task roles that fill the probe's roles."""

    probe: Name
    """Probe name (a key of `probes`)."""
    roles: dict[Name, Name] = Field(default_factory=dict)
    """Probe role -> task role (the task contract's role names, e.g. `item`, `container`)."""


class FamilyDefinition(Artifact):
    """A task family: its task roles and the probes qualification runs for it."""

    description: str = Field(min_length=1)
    """What tasks of this family do."""
    roles: dict[Name, RoleRule] = Field(default_factory=dict)
    """Task role -> how to find it in G before the contract exists (the contract's roles override)."""
    probes: list[FamilyProbe] = Field(default_factory=list)
    """The probes every task of the family needs, in the order they run."""

    @model_validator(mode="after")
    def _roles_known(self) -> FamilyDefinition:
        for entry in self.probes:
            unknown = sorted(set(entry.roles.values()) - set(self.roles))
            if unknown:
                raise ValueError(f"probe {entry.probe} uses task roles {unknown} that the family does not declare")
        return self


class ProbeLibrary(Artifact):
    """The whole `probes.yaml`."""

    version: int = Field(ge=1)
    """Format version of this file."""
    grasp_max_width_m: FiniteFloat = Field(gt=0)
    """Widest narrowest-side an object may have to count as graspable, metres."""
    probes: dict[Name, ProbeDefinition]
    """Every probe, by name."""
    families: dict[Name, FamilyDefinition]
    """Every task family, by name (the contract's `family`)."""
    variants: list[SimVariant] = Field(default_factory=list)
    """Single changes from the default settings, in the order qualification tries them."""

    @model_validator(mode="after")
    def _consistent(self) -> ProbeLibrary:
        for family, definition in self.families.items():
            for entry in definition.probes:
                if entry.probe not in self.probes:
                    raise ValueError(f"family {family} needs probe {entry.probe!r}, which is not in `probes`")
                wanted = set(self.probes[entry.probe].roles)
                if set(entry.roles) != wanted:
                    raise ValueError(f"family {family}: probe {entry.probe} has roles {sorted(wanted)}, "
                                     f"the family fills {sorted(entry.roles)}")
        names = [v.name for v in self.variants]
        if len(set(names)) != len(names) or "default" in names:
            raise ValueError(f"variant names must be unique and not `default`, got {names}")
        for variant in self.variants:
            if len(variant.changes) != 1:
                raise ValueError(f"variant {variant.name} changes {len(variant.changes)} settings; list single changes "
                                 "(qualification combines them into pairs itself)")
        return self


class ProbeCall(Artifact):
    """One probe to run, with the G objects that play its roles."""

    probe: Name
    """Probe name."""
    objects: dict[Name, Name]
    """Probe role -> G object id."""

    def label(self) -> str:
        """`probe(role=id, ...)`, for messages."""
        return f"{self.probe}(" + ", ".join(f"{k}={v}" for k, v in self.objects.items()) + ")"


class LoadedLibrary:
    """A checked probe library with where it came from (K version and the file's sha256)."""

    def __init__(self, library: ProbeLibrary, k_version: str, sha256: str) -> None:
        self.library = library
        self.k_version = k_version
        self.sha256 = sha256

    def thresholds(self, probe: str) -> dict[str, float]:
        """The thresholds of `probe`."""
        return dict(self.library.probes[probe].thresholds)


def parse_probe_library(text: str, *, source: str = PROBES_FILE) -> ProbeLibrary:
    """Parse and check `probes.yaml` text; InputError naming the problem (and `source`)."""
    from datafarm.sim.qualification.probes import (
        PROBES,  # the scripts; imported late (they import this module)
    )

    try:
        data = yaml.safe_load(text)
        library = ProbeLibrary.model_validate(data)
    except (yaml.YAMLError, ValueError) as err:
        raise InputError([Problem(f"probe library {source} is invalid: {err}", file=source)]) from None
    problems = []
    for name, definition in library.probes.items():
        script = PROBES.get(name)
        if script is None:
            problems.append(Problem(f"probe {name!r} has no script in the harness", file=source, field=f"probes.{name}",
                                    expected=", ".join(sorted(PROBES))))
            continue
        if set(definition.thresholds) != set(script.thresholds):
            problems.append(Problem(f"probe {name!r} thresholds {sorted(definition.thresholds)} differ from what its "
                                    f"script reads", file=source, field=f"probes.{name}.thresholds",
                                    expected=", ".join(sorted(script.thresholds))))
        if set(definition.roles) != set(script.roles):
            problems.append(Problem(f"probe {name!r} roles {sorted(definition.roles)} differ from its script's",
                                    file=source, field=f"probes.{name}.roles", expected=", ".join(script.roles)))
    if problems:
        raise InputError(problems)
    return library


def load_probe_library(source: CapabilityBundle | Path | str | None = None) -> LoadedLibrary:
    """The probe library of a released K bundle, of a `probes.yaml` path, or (default) of the newest
    released K bundle that ships one."""
    if source is None:
        source = latest_with(PROBES_FILE)
    if isinstance(source, CapabilityBundle):
        text, version = source.read_text(PROBES_FILE), source.version
    else:
        path = Path(source)
        if not path.is_file():
            raise InputError([Problem("probe library not found", file=path)])
        text, version = path.read_text(encoding="utf-8"), path.parent.name
    library = parse_probe_library(text, source=str(source or PROBES_FILE))
    return LoadedLibrary(library, version, sha256_bytes(text.encode("utf-8")))


# --- roles ----------------------------------------------------------------------------------------


def narrowest_width(obj: object) -> float:
    """The narrowest horizontal extent of an object (what the fingers must close across), metres."""
    kind = getattr(obj, "kind", "")
    if kind == "box":
        return min(obj.size.x.value, obj.size.y.value)  # type: ignore[attr-defined]
    if kind in ("cylinder", "sphere"):
        return 2 * obj.radius.value  # type: ignore[attr-defined]
    if kind == "cup":
        return 2 * obj.outer_radius.value  # type: ignore[attr-defined]
    return 2 * footprint_radius(obj)


def find_role(grounding: Grounding, rule: RoleRule, grasp_max_width: float, taken: set[str]) -> str | None:
    """The G object id that plays a role under `rule` (None when no object fits)."""
    candidates = [o for o in grounding.objects if o.kind in rule.kinds and o.id not in taken
                  and (not rule.graspable or narrowest_width(o) <= grasp_max_width)]
    if not candidates:
        return None
    if rule.pick == "smallest":
        return min(candidates, key=footprint_radius).id
    if rule.pick == "largest":
        return max(candidates, key=footprint_radius).id
    return candidates[0].id


def _bind(grounding: Grounding, rules: Mapping[str, RoleRule], given: Mapping[str, str], grasp_max_width: float,
          what: str) -> tuple[dict[str, str], list[str]]:
    """Role -> object id for every role (given ones first, then found by rule); the optional roles
    that found nothing are returned apart. InputError when a required role finds nothing."""
    ids = {o.id for o in grounding.objects}
    bound: dict[str, str] = {}
    for role, oid in given.items():
        if role in rules:
            if oid not in ids:
                raise InputError([Problem(f"{what}: role {role} names object {oid!r}, which G does not have",
                                          field=f"roles.{role}", expected=", ".join(sorted(ids)))])
            bound[role] = oid
    missing: list[str] = []
    for role, rule in rules.items():
        if role in bound:
            continue
        found = find_role(grounding, rule, grasp_max_width, set(bound.values()))
        if found is not None:
            bound[role] = found
        elif rule.optional:
            missing.append(role)
        else:
            raise InputError([Problem(f"{what}: no object of G can play role {role!r}",
                                      field=f"roles.{role}",
                                      expected=f"an object of kind {' or '.join(rule.kinds)}"
                                               + (" that fits in the gripper" if rule.graspable else ""))])
    return bound, missing


def plan_probes(grounding: Grounding, needs: str | Sequence[str | ProbeCall], library: LoadedLibrary,
                roles: Mapping[str, str] | None = None) -> tuple[list[ProbeCall], list[str]]:
    """The probe calls a task needs, and notes on what was left out.

    `needs` is a task family (its probes come from the library, its roles from `roles`, T's
    role -> object map when known, else found in G by the family's rules), or a list of probe names
    (roles found in G by each probe's rules) and ready `ProbeCall`s."""
    lib = library.library
    notes: list[str] = []
    if isinstance(needs, str):
        family = lib.families.get(needs)
        if family is None:
            raise InputError([Problem(f"unknown task family {needs!r}", field="family",
                                      expected=", ".join(sorted(lib.families)))])
        bound, missing = _bind(grounding, family.roles, roles or {}, lib.grasp_max_width_m, f"family {needs}")
        calls = []
        for entry in family.probes:
            absent = sorted(r for r in entry.roles.values() if r in missing)
            if absent:
                notes.append(f"{entry.probe} left out: no object of G can play optional role(s) {', '.join(absent)}")
                continue
            calls.append(ProbeCall(probe=entry.probe, objects={p: bound[t] for p, t in entry.roles.items()}))
        return calls, notes
    calls = []
    for item in needs:
        if isinstance(item, ProbeCall):
            if item.probe not in lib.probes:
                raise InputError([Problem(f"unknown probe {item.probe!r}", expected=", ".join(sorted(lib.probes)))])
            calls.append(item)
            continue
        definition = lib.probes.get(item)
        if definition is None:
            raise InputError([Problem(f"unknown probe {item!r}", expected=", ".join(sorted(lib.probes)))])
        bound, _ = _bind(grounding, definition.roles, {}, lib.grasp_max_width_m, f"probe {item}")
        calls.append(ProbeCall(probe=item, objects=bound))
    return calls, notes
