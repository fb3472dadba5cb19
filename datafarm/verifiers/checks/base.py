"""What every check receives and how it reports: the evidence, the measured videos, its spec and
the crop writer in; a `CheckResult` (pass/fail against the spec's threshold, the metric, evidence
with frames and crops, and for a failure the stage it routes to) out."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from datafarm.artifacts.admission import CheckResult, Evidence, VerifierCheck
from datafarm.artifacts.stages import Stage
from datafarm.verifiers.analysis import Analysis
from datafarm.verifiers.crops import CropWriter
from datafarm.verifiers.evidence import SimEvidence
from datafarm.verifiers.spec import CheckSpec, VerifierSpec

METRIC_DECIMALS = 6
"""Metrics are rounded to this many decimals, so a re-run on the same videos reports the same number."""
MAX_EVIDENCE_FRAMES = 12
"""Most frame indices one evidence item lists."""


@dataclass
class CheckContext:
    """One check's inputs."""

    evidence: SimEvidence
    """The sim projection, references and episode facts."""
    analysis: Analysis
    """The rendered videos, measured."""
    spec: VerifierSpec
    """The whole spec (objects, shared settings)."""
    check: CheckSpec
    """This check's spec."""
    crops: CropWriter
    """Where evidence crops go."""

    def param(self, name: str) -> float:
        """One of this check's parameters."""
        return float(self.check.parameters[name])

    def judged_cameras(self, object_id: str) -> list[str]:
        """The views the spec expects an object in (all views for an object the spec does not list)."""
        try:
            return [c for c in self.spec.object(object_id).cameras if c in self.evidence.cameras]
        except KeyError:
            return list(self.evidence.cameras)

    def result(self, metric: float, evidence: list[Evidence], route_to: Stage | None = None) -> CheckResult:
        """The check's result: pass/fail from the metric and the spec's threshold and direction."""
        metric = round(float(metric), METRIC_DECIMALS) + 0.0  # +0.0: no negative zero
        passed = self.check.passes(metric)
        return CheckResult(check=self.check.check, passed=passed, metric=metric, threshold=self.check.threshold,
                           evidence=evidence, route_to=None if passed else (route_to or self.check.route_to))


def frames_list(frames: Iterable[int]) -> list[int]:
    """Sorted unique frame indices, at most MAX_EVIDENCE_FRAMES spread over them."""
    values = sorted({int(f) for f in frames})
    if len(values) <= MAX_EVIDENCE_FRAMES:
        return values
    picks = np.linspace(0, len(values) - 1, MAX_EVIDENCE_FRAMES).round().astype(int)
    return [values[i] for i in picks]


def crops_list(*paths: str | None) -> list[str]:
    """The crop paths that were written."""
    return [p for p in paths if p]


CheckFunction = Callable[[CheckContext], CheckResult]
"""A check: context in, result out."""

REGISTRY: dict[VerifierCheck, CheckFunction] = {}
"""Check -> its function (filled by `datafarm.verifiers.checks`)."""
