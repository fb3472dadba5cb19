"""q, the admission record (`episodes/<id>/admission.json`): the evidence that admitted one episode.

It carries the judge's verdict with J's hash, the verifier's per-check results with the hashes of
the spec and calibration they ran under, the independent reviewer's verdict with evidence per claim,
the sha256 of every episode file, and what K and sandbox produced it. A record only validates when
every one of those passed. The check and review models also serve rejected attempts, which name the
stage a failure routes back to.
"""

from __future__ import annotations

from enum import Enum

from pydantic import AwareDatetime, Field, model_validator

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.clip import CameraName
from datafarm.artifacts.common import FiniteFloat
from datafarm.artifacts.episode import EpisodePath
from datafarm.artifacts.fields import require_unique
from datafarm.artifacts.judge import JudgeVerdict
from datafarm.artifacts.ledger_entry import Sha256Hex
from datafarm.artifacts.request import Sandbox
from datafarm.artifacts.stages import Stage


class VerifierCheck(str, Enum):
    """The checks of the shared verifier (DESIGN.md, "Verifier and its calibration")."""

    objects = "objects"
    """Every simulated object is visible where the sim projects it, and nothing else."""
    geometry = "geometry"
    """Object size and shape in the video match the sim projection."""
    events = "events"
    """Object motion starts and stops when the sim's contact events say."""
    views = "views"
    """Each camera's video matches that camera's geometry."""
    appearance = "appearance"
    """Colours and textures match the real reference (or the requested ood variant)."""
    temporal = "temporal"
    """No jumps, no lag against the sim motion, continuity across chunk seams."""
    background = "background"
    """The static background stays static."""
    layout = "layout"
    """Objects sit where the sim puts them, not where the reference frame had them."""
    actions = "actions"
    """UE track: action labels agree with the video's motion and the recorded poses."""


class Evidence(Artifact):
    """Where to look to see a result for oneself."""

    camera: CameraName | None = None
    """The camera it concerns; null for all or none."""
    frames: list[int] = Field(default_factory=list)
    """Frame indices of the episode's videos."""
    crops: list[EpisodePath] = Field(default_factory=list)
    """Saved image crops, relative to the episode folder."""
    note: str = ""
    """What is seen there."""


class CheckResult(Artifact):
    """One verifier check on one episode."""

    check: VerifierCheck
    """Which check."""
    passed: bool
    """Whether the metric met the threshold."""
    metric: FiniteFloat
    """Measured value."""
    threshold: FiniteFloat
    """Bound it was compared with (the spec says in which direction)."""
    evidence: list[Evidence] = Field(default_factory=list)
    """Frames and crops backing the result."""
    route_to: Stage | None = None
    """For a failure: the earliest stage responsible; null when passed."""


class VerifierResults(Artifact):
    """All verifier checks of one episode and the configuration they ran under."""

    spec_sha256: Sha256Hex
    """Hash of `verifier/spec.json`."""
    calibration_sha256: Sha256Hex
    """Hash of `verifier/calibration.json` (the spec passed calibration)."""
    checks: list[CheckResult] = Field(min_length=1)
    """One result per check the spec enables."""

    @model_validator(mode="after")
    def _unique(self) -> VerifierResults:
        require_unique([c.check.value for c in self.checks], "checks")
        return self

    @property
    def passed(self) -> bool:
        """True when every check passed."""
        return all(c.passed for c in self.checks)


class ReviewClaim(Artifact):
    """One thing the reviewer asserts about the episode, with its own evidence."""

    claim: str = Field(min_length=1)
    """The assertion, e.g. `the block is inside the drawer in the last frames of every view`."""
    holds: bool
    """Whether the reviewer found it true."""
    evidence: list[Evidence] = Field(min_length=1)
    """What the reviewer looked at (rendered frames, reference frames, sim-state summary)."""


class ReviewVerdict(Artifact):
    """The independent reviewer's verdict on one episode."""

    accepted: bool
    """True when the reviewer accepts the episode."""
    claims: list[ReviewClaim] = Field(min_length=1)
    """Claims checked, each with evidence."""
    provider: str = Field(min_length=1)
    """LLM provider of the reviewer role (`builtin` offline)."""
    model: str = Field(min_length=1)
    """Model of the reviewer role."""
    route_to: Stage | None = None
    """For a rejection: the earliest stage responsible (render or expert); null when accepted."""


class AdmissionRecord(Artifact):
    """q (`episodes/<id>/admission.json`): why this episode is in the dataset."""

    episode_id: str = Field(min_length=1)
    """The admitted episode."""
    seed_index: int = Field(ge=0)
    """Index of its admission seed in the harness's derivation (the seed itself needs the task secret)."""
    judge: JudgeVerdict
    """J's verdict, with J's hash."""
    verifier: VerifierResults
    """Verifier results, with spec and calibration hashes."""
    review: ReviewVerdict
    """The reviewer's verdict and evidence."""
    files: dict[EpisodePath, Sha256Hex] = Field(min_length=1)
    """sha256 of every file of the episode folder but admission.json, by relative path."""
    k_version: str = Field(min_length=1)
    """Capability-layer version, e.g. `k1`."""
    k_sha256: Sha256Hex
    """Capability-layer content hash."""
    sandbox: Sandbox
    """Sandbox provider the expert ran in."""
    admitted_at: AwareDatetime
    """When it was admitted."""

    @model_validator(mode="after")
    def _everything_passed(self) -> AdmissionRecord:
        failed = []
        if not self.judge.passed:
            failed.append("the judge verdict")
        failed += [f"verifier check {c.check.value}" for c in self.verifier.checks if not c.passed]
        if not self.review.accepted:
            failed.append("the review")
        if failed:
            raise ValueError(f"an admitted episode passed everything; failed: {', '.join(failed)}")
        if "admission.json" in self.files:
            raise ValueError("files lists the episode's files other than admission.json itself")
        return self
