"""The qualification report (`qualification.json`): every simulator variant tried, in order, with
every probe result, and the variant chosen (the first on which every probe passed).

The report holds no wall-clock times, so re-running qualification under the same K, G and seed
gives the same report (audit can compare them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.common import FiniteFloat
from datafarm.artifacts.fields import Name
from datafarm.artifacts.io import load_artifact, save_artifact
from datafarm.sim.qualification.library import ProbeCall
from datafarm.sim.qualification.variants import SimVariant
from datafarm.sim.world.settings import WorldSettings

QUALIFICATION_FILE = "qualification.json"
"""The report's file name in a task folder."""

FailureKind = Literal["measured", "unreachable"]
"""Why a probe failed: `measured`, a measured value missed its threshold (a simulator variant may
fix it); `unreachable`, the scripted motion has no inverse-kinematics solution in this scene (no
variant changes that: the geometry in G, or the robot's reach, does not allow the skill)."""


class ProbeResult(Artifact):
    """The outcome of one probe on one variant."""

    probe: Name
    """Probe name (K's probe library)."""
    objects: dict[Name, Name]
    """Probe role -> the G object that played it."""
    arm: Name | None = None
    """The arm the harness used (the one nearest to the object), or null when the probe never moved."""
    passed: bool
    """Whether every measured value met its threshold."""
    failure: FailureKind | None = None
    """Why it failed (null when it passed)."""
    measured: dict[Name, FiniteFloat] = Field(default_factory=dict)
    """What was measured, by name (metres, seconds, grams, counts; names end with their unit)."""
    thresholds: dict[Name, FiniteFloat] = Field(default_factory=dict)
    """The thresholds from K it was held to."""
    reason: str = Field(min_length=1)
    """One sentence: what passed, or which value missed which threshold."""
    sim_seconds: FiniteFloat = Field(default=0.0, ge=0)
    """Simulated time the probe ran, seconds."""

    @model_validator(mode="after")
    def _failure_when_failed(self) -> ProbeResult:
        if self.passed != (self.failure is None):
            raise ValueError("`failure` must be null exactly when the probe passed")
        return self


class VariantTrial(Artifact):
    """One variant tried: its settings and the result of every probe on it."""

    variant: SimVariant
    """The variant (its name and its changes from the default settings)."""
    settings: WorldSettings
    """The full physics settings the probes ran with."""
    passed: bool
    """Whether every probe passed."""
    results: list[ProbeResult]
    """One result per probe call, in plan order."""


class QualificationReport(Artifact):
    """Stage 2's output (`qualification.json`): the chosen simulator variant and the probe report for
    every candidate tried, in the order tried (fewest changes first)."""

    k_version: str = Field(min_length=1)
    """K version whose probe library was used."""
    probe_library_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """sha256 of the probe library file (`probes.yaml`) used."""
    grounding_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """sha256 of G (canonical JSON) the worlds were built from."""
    family: Name | None = None
    """Task family the probes were chosen for, or null when a probe list was given."""
    seed: int = Field(ge=0)
    """Seed of the probes' scripted motions (IK restarts)."""
    probes: list[ProbeCall]
    """The probe calls every variant had to pass, in the order they ran."""
    notes: list[str] = Field(default_factory=list)
    """What was left out and why (e.g. a probe whose optional role no object of G plays)."""
    trials: list[VariantTrial]
    """Every variant tried, in order, with every probe result."""
    chosen: SimVariant | None
    """The first variant on which every probe passed; null when none did."""
    settings: WorldSettings | None
    """The chosen variant's full physics settings (what every later rollout builds its world with)."""
    passed: bool
    """Whether a variant was chosen."""
    reason: str = Field(min_length=1)
    """Why this variant was chosen, or why none was."""

    @model_validator(mode="after")
    def _chosen_is_a_passing_trial(self) -> QualificationReport:
        if self.passed != (self.chosen is not None) or (self.chosen is None) != (self.settings is None):
            raise ValueError("`chosen` and `settings` are set exactly when `passed` is true")
        if self.chosen is not None:
            passing = [t for t in self.trials if t.passed]
            if not passing or passing[0].variant != self.chosen or passing[0].settings != self.settings:
                raise ValueError("`chosen` must be the first trial whose probes all passed, with its settings")
        return self

    def trial(self, name: str) -> VariantTrial:
        """The trial of the variant called `name` (KeyError if it was not tried)."""
        for trial in self.trials:
            if trial.variant.name == name:
                return trial
        raise KeyError(f"variant {name!r} was not tried; tried: {[t.variant.name for t in self.trials]}")


def write_qualification(report: QualificationReport, path: Path | str) -> Path:
    """Write `report` as JSON (atomically); a folder gets `qualification.json` inside it."""
    path = Path(path)
    if path.is_dir():
        path = path / QUALIFICATION_FILE
    return save_artifact(report, path)


def read_qualification(path: Path | str) -> QualificationReport:
    """Read a `qualification.json` (or the one inside a task folder); InputError on any defect."""
    path = Path(path)
    if path.is_dir():
        path = path / QUALIFICATION_FILE
    return load_artifact(QualificationReport, path)
