"""C's manifest (`expert/manifest.json`): which controller file is the expert, what it was written
against, its parameters, and what it did on dev seeds (the only feedback the author gets)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AwareDatetime, Field, JsonValue, StringConstraints

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.common import FiniteFloat
from datafarm.artifacts.judge import VerdictSummary
from datafarm.artifacts.ledger_entry import Sha256Hex
from datafarm.hashing import sha256_json


class DevRun(Artifact):
    """One dev-seed rollout the author requested, and the verdict it got."""

    seed: int = Field(ge=0)
    """The dev seed (one of B's dev_seeds)."""
    verdict: VerdictSummary
    """Pass/fail, stage reached and reason: all the author sees of J."""
    controller_sha256: Sha256Hex
    """Hash of the controller file that ran."""
    parameters_sha256: Sha256Hex
    """`sha256_json` of the parameters it ran with."""
    at: AwareDatetime
    """When the rollout started."""
    duration_s: FiniteFloat = Field(ge=0)
    """Wall-clock length of the rollout, seconds."""


class ExpertManifest(Artifact):
    """`expert/manifest.json`: the expert controller C and its dev-seed record."""

    entry: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*\.py$")] = "controller.py"
    """The controller's file name inside `expert/` (run in the sandbox)."""
    sha256: Sha256Hex
    """Hash of the entry file."""
    k_version: str = Field(min_length=1)
    """Capability-layer version whose harness API and skills it uses, e.g. `k1`."""
    parameters: dict[str, JsonValue] = Field(default_factory=dict)
    """Tunable values the controller reads (approach height, grasp offset, which arm, timing)."""
    skills: list[str] = Field(default_factory=list)
    """K skills it calls, e.g. `approach`, `grasp`, `lift`, `place`, `pull_handle`, `strike`."""
    dev_runs: list[DevRun] = Field(default_factory=list)
    """Every dev-seed rollout so far, oldest first."""
    notes: str = ""
    """Free text from the author: strategy and what was tried."""

    def parameters_sha256(self) -> str:
        """Hash of `parameters`, as DevRun records it."""
        return sha256_json(self.parameters)

    def dev_pass_rate(self) -> float | None:
        """Pass rate of the dev runs of the current controller and parameters; None when there are none."""
        current = [
            r for r in self.dev_runs
            if r.controller_sha256 == self.sha256 and r.parameters_sha256 == self.parameters_sha256()
        ]
        if not current:
            return None
        return sum(r.verdict.passed for r in current) / len(current)
