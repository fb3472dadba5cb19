"""The verifier spec (`verifier/spec.json`): how the shared verifier is configured for one task.

`derive_spec` writes it from the task's T (which objects play roles), G (the objects, their kinds and
colours, the views each was seen in), R (cameras, resolution, frame rate, mode and ood variations,
target colours) and K's verifier defaults (each check's metric, direction, threshold, route and
settings, pixel settings scaled to R's resolution), plus the verifier's own rule for tightening an
object's colour tolerance when it stands close to its surroundings (`ColourContrast`; recorded in the
spec so a re-verification applies the rule the spec was calibrated with). Nothing in it is chosen by
an agent.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, JsonValue, model_validator

from datafarm.artifacts.admission import VerifierCheck
from datafarm.artifacts.base import Artifact
from datafarm.artifacts.clip import CameraName
from datafarm.artifacts.common import FiniteFloat
from datafarm.artifacts.contract import TaskContract
from datafarm.artifacts.fields import Name, Rgb, require_unique
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.io import load_artifact, save_artifact
from datafarm.artifacts.ledger_entry import Sha256Hex
from datafarm.artifacts.render_contract import RenderContract
from datafarm.artifacts.request import Mode, OodAxis, OodValue
from datafarm.artifacts.stages import Stage
from datafarm.capability.bundle import CapabilityBundle
from datafarm.errors import InputError, Problem
from datafarm.hashing import sha256_file, sha256_json
from datafarm.taskdir import TaskDir
from datafarm.verifiers.defaults import (
    CommonSettings,
    Direction,
    LoadedDefaults,
    load_defaults,
)

SPEC_FILE = "verifier/spec.json"
"""The spec, relative to the task folder."""
ARM_TRACK_CHECKS: tuple[VerifierCheck, ...] = tuple(c for c in VerifierCheck if c is not VerifierCheck.actions)
"""The checks this verifier runs on arm-track (rendered) episodes, in DESIGN.md's order."""
FIXED_KINDS = ("drawer_cabinet",)
"""G object kinds the sim builds fixed to the world (their parts may still move)."""
CONTRAST_SHARE = 0.5
"""An object's colour tolerance is this share of its separation from its real surroundings: a pixel
counts as the object's only when it is closer to it than halfway to the nearest of its surroundings."""
CONTRAST_PERCENTILE = 10.0
"""The separation is this percentile of the surroundings' distances to the object (its closest tenth:
the share at which an unknown stretch of background already counts as object-like in the analysis)."""
MIN_COLOUR_TOLERANCE = 4.0
"""The tightest colour tolerance an object gets (about two just-noticeable differences: H.264 and a
renderer's shading move a pixel that much)."""


class ObjectExpectation(Artifact):
    """One object the verifier expects to see."""

    id: Name
    """G object id."""
    kind: str
    """G object kind (cup, box, drawer_cabinet...)."""
    role: Name | None = None
    """The role it plays in T, if any."""
    colour: Rgb
    """Its expected colour (sRGB 0-1) when its real pixels cannot be measured: R's target colour, else G's."""
    colour_source: Literal["render_contract", "grounding"]
    """Where `colour` comes from."""
    cameras: list[CameraName] = Field(min_length=1)
    """Views expected to show it (where G observed it in the clip; every camera when G lists none)."""
    movable: bool
    """Whether the sim lets it move as a whole (a fixed cabinet's drawer still moves)."""


class ColourContrast(Artifact):
    """How each object's colour tolerance follows from how far its colour lies from its real
    surroundings (`datafarm.verifiers.analysis.object_tolerance`, per object, view and episode, from
    the evidence alone): `share` of the `percentile`-th percentile of its surroundings' distances to
    it, between `min_tolerance` and the shared `colour_tolerance`. An object that stands out keeps the
    shared tolerance; one close to its surroundings (a beige drum on a wood table) gets a tighter one,
    else the background itself would look like it and its deletion, duplication or recolouring could
    not be seen."""

    share: FiniteFloat = Field(gt=0, le=1)
    """Share of the separation the tolerance is."""
    percentile: FiniteFloat = Field(ge=0, le=100)
    """Percentile of the surroundings' distances to the object's nearest colour that is its separation."""
    min_tolerance: FiniteFloat = Field(gt=0)
    """The tightest tolerance an object gets."""


class CheckSpec(Artifact):
    """How one check is run and judged."""

    check: VerifierCheck
    """Which check."""
    metric: str = Field(min_length=1)
    """What the metric measures."""
    direction: Direction
    """`max`: pass when metric <= threshold; `min`: pass when metric >= threshold."""
    threshold: FiniteFloat
    """The bound the metric is compared with."""
    route_to: Stage
    """The stage a failure routes back to unless the check names an earlier one."""
    parameters: dict[str, FiniteFloat] = Field(default_factory=dict)
    """The check's settings, pixel ones already scaled to R's resolution."""

    def passes(self, metric: float) -> bool:
        """Whether `metric` meets the threshold in this check's direction."""
        return metric <= self.threshold if self.direction == "max" else metric >= self.threshold


class VerifierSpec(Artifact):
    """`verifier/spec.json`: the shared verifier's configuration for one task."""

    format: Literal[1] = 1
    """Spec format version."""
    k_version: str = Field(min_length=1)
    """K version whose verifier defaults the spec was derived from."""
    defaults_sha256: Sha256Hex
    """sha256 of those defaults (`verifier_defaults.yaml`)."""
    inputs: dict[Literal["T", "G", "R"], Sha256Hex]
    """sha256 of the artifacts it was derived from (their files in a task folder, else their canonical JSON)."""
    cameras: list[CameraName] = Field(min_length=1)
    """Cameras verified, in R's order (every camera is rendered)."""
    resolution: tuple[int, int]
    """(width, height) of each camera's video."""
    fps: FiniteFloat = Field(gt=0)
    """Frame rate of the videos (frame i is control step i)."""
    mode: Mode
    """sim2real or ood."""
    variations: dict[OodAxis, list[OodValue]] = Field(default_factory=dict)
    """ood axes and the values R allows (an episode's applied values come from its render record)."""
    objects: list[ObjectExpectation]
    """The objects to expect, in G order."""
    common: CommonSettings
    """Settings every check shares, pixel ones scaled to R's resolution."""
    colour_contrast: ColourContrast | None = None
    """How each object's colour tolerance follows from its contrast with its surroundings; None (a spec
    written before this rule) judges every object with `common.colour_tolerance`, as it was calibrated."""
    checks: list[CheckSpec] = Field(min_length=1)
    """The checks run, in order."""
    notes: list[str] = Field(default_factory=list)
    """How the spec was derived where it is not obvious (e.g. a check left out and why)."""

    @model_validator(mode="after")
    def _unique(self) -> VerifierSpec:
        require_unique([c.check.value for c in self.checks], "checks")
        require_unique([o.id for o in self.objects], "objects")
        unknown = {c for o in self.objects for c in o.cameras} - set(self.cameras)
        if unknown:
            raise ValueError(f"objects name cameras {sorted(unknown)} that the spec does not verify")
        return self

    def check(self, check: VerifierCheck | str) -> CheckSpec:
        """The spec of one check (KeyError when the spec does not run it)."""
        name = check.value if isinstance(check, VerifierCheck) else check
        for c in self.checks:
            if c.check.value == name:
                return c
        raise KeyError(name)

    def object(self, object_id: str) -> ObjectExpectation:
        """The expectation of one object (KeyError when unknown)."""
        for o in self.objects:
            if o.id == object_id:
                return o
        raise KeyError(object_id)


def _scaled(parameters: Mapping[str, float], factor: float) -> dict[str, float]:
    """Pixel settings scaled: `_area_px` names with the square of `factor`, `_px` names with it."""
    out = {}
    for name, value in parameters.items():
        if name.endswith("_area_px"):
            out[name] = float(value) * factor * factor
        elif name.endswith("_px"):
            out[name] = float(value) * factor
        else:
            out[name] = float(value)
    return out


def _overridden(check: str, base: dict[str, Any], changes: Mapping[str, JsonValue]) -> dict[str, Any]:
    """A check's settings with `changes` (threshold, direction, route_to, parameters) applied."""
    out = dict(base)
    for key, value in changes.items():
        if key == "parameters":
            unknown = set(value) - set(base["parameters"])  # type: ignore[arg-type]
            if unknown:
                raise InputError([Problem(f"unknown parameters {sorted(unknown)} for check {check}",
                                          field=f"overrides.{check}.parameters",
                                          expected=", ".join(base["parameters"]) or "none")])
            out["parameters"] = {**base["parameters"], **value}  # type: ignore[dict-item]
        elif key in ("threshold", "direction", "route_to"):
            out[key] = value
        else:
            raise InputError([Problem(f"cannot override {key!r} of check {check}", field=f"overrides.{check}.{key}",
                                      expected="threshold, direction, route_to or parameters")])
    return out


def check_defaults(loaded: LoadedDefaults) -> None:
    """InputError unless every check in K's defaults has exactly the settings its program reads."""
    from datafarm.verifiers.checks import PARAMETERS  # the checks import this module

    problems = []
    for check, settings in loaded.defaults.checks.items():
        wanted = set(PARAMETERS.get(check, ()))
        if check not in PARAMETERS:
            problems.append(Problem(f"K {loaded.k_version} has defaults for check {check.value}, which this verifier "
                                    "does not run", field=f"checks.{check.value}"))
        elif set(settings.parameters) != wanted:
            problems.append(Problem(f"check {check.value}: K {loaded.k_version} gives settings "
                                    f"{sorted(settings.parameters)}, the check reads {sorted(wanted)}",
                                    field=f"checks.{check.value}.parameters", expected=", ".join(sorted(wanted))))
    if problems:
        raise InputError(problems)


def _artifact_hash(value: Artifact) -> str:
    return sha256_json(value.model_dump(mode="json"))


def derive_spec(source: Path | str | tuple[TaskContract | None, Grounding, RenderContract], *,
                defaults: LoadedDefaults | CapabilityBundle | Path | str | None = None,
                overrides: Mapping[str, Mapping[str, JsonValue]] | None = None) -> VerifierSpec:
    """The verifier spec of a task folder (its contract.yaml, grounding.json, render_contract.yaml and
    the K its capability.lock pins), or of (T, G, R) given as models (T may be None: no roles).

    `defaults` overrides where K's defaults come from (loaded defaults, a K bundle, or a file);
    `overrides` changes single checks, e.g. `{"objects": {"threshold": 0.5}}` (what calibration then
    has to accept or refuse). A check not in K's defaults is left out, and so is `events` when no
    object of G can move."""
    if isinstance(source, (str, Path)):
        paths = TaskDir(Path(source))
        grounding = load_artifact(Grounding, paths.grounding)
        contract = load_artifact(RenderContract, paths.render_contract)
        task = load_artifact(TaskContract, paths.contract) if paths.contract.is_file() else None
        inputs = {"G": sha256_file(paths.grounding), "R": sha256_file(paths.render_contract)}
        if task is not None:
            inputs["T"] = sha256_file(paths.contract)
        if defaults is None and paths.capability_lock.is_file():
            from datafarm.admission.record import load_capability_lock
            from datafarm.capability.bundle import load as load_bundle

            defaults = load_bundle(load_capability_lock(paths).k_version)
    else:
        task, grounding, contract = source
        inputs = {"G": _artifact_hash(grounding), "R": _artifact_hash(contract)}
        if task is not None:
            inputs["T"] = _artifact_hash(task)
    loaded = defaults if isinstance(defaults, LoadedDefaults) else load_defaults(defaults)
    k = loaded.defaults
    check_defaults(loaded)
    width, height = contract.resolution
    factor = width / k.reference_width
    cameras = [c.camera for c in contract.cameras]
    roles = {oid: role for role, oid in (task.roles.items() if task is not None else [])}
    notes: list[str] = []
    objects = []
    for obj in grounding.objects:
        look = contract.appearance.objects.get(obj.id)
        seen = [c for c in dict.fromkeys(o.camera for o in obj.observations) if c in cameras]
        objects.append(ObjectExpectation(
            id=obj.id, kind=obj.kind, role=roles.get(obj.id),
            colour=look.colour if look is not None else obj.colour,
            colour_source="render_contract" if look is not None else "grounding",
            cameras=seen or list(cameras), movable=obj.kind not in FIXED_KINDS))
    checks = []
    unknown = set(overrides or {}) - {c.value for c in ARM_TRACK_CHECKS}
    if unknown:
        raise InputError([Problem(f"overrides name unknown checks {sorted(unknown)}", field="overrides",
                                  expected=", ".join(c.value for c in ARM_TRACK_CHECKS))])
    for check in ARM_TRACK_CHECKS:
        base = k.checks.get(check)
        if base is None:
            notes.append(f"{check.value}: K {loaded.k_version} has no defaults for this check; left out")
            continue
        if check is VerifierCheck.events and not any(o.movable for o in objects):
            notes.append("events: no object of G can move, so no object motion can be timed; left out")
            continue
        settings = _overridden(check.value, base.model_dump(), (overrides or {}).get(check.value, {}))
        checks.append(CheckSpec(check=check, metric=settings["metric"], direction=settings["direction"],
                                threshold=settings["threshold"], route_to=settings["route_to"],
                                parameters=_scaled(settings["parameters"], factor)))
    if not objects:
        notes.append("G has no objects: the object checks judge nothing")
    common = CommonSettings.model_validate(_scaled(k.common.model_dump(), factor))
    contrast = ColourContrast(share=CONTRAST_SHARE, percentile=CONTRAST_PERCENTILE,
                              min_tolerance=min(MIN_COLOUR_TOLERANCE, common.colour_tolerance))
    return VerifierSpec(k_version=loaded.k_version, defaults_sha256=loaded.sha256, inputs=inputs, cameras=cameras,
                        resolution=(width, height), fps=contract.fps, mode=contract.mode,
                        variations={axis: list(values) for axis, values in contract.variations.items()},
                        objects=objects, common=common, colour_contrast=contrast, checks=checks, notes=notes)


def save_spec(task_dir: Path | str, spec: VerifierSpec) -> Path:
    """Write `verifier/spec.json` (atomically); returns its path."""
    return save_artifact(spec, Path(task_dir) / SPEC_FILE)


def load_spec(task_dir: Path | str) -> VerifierSpec:
    """`verifier/spec.json` of a task folder (InputError naming the file when missing or invalid)."""
    return load_artifact(VerifierSpec, Path(task_dir) / SPEC_FILE)
