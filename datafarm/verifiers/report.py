"""The calibration record (`verifier/calibration.json`): the matrix of corruptions x checks on one
accepted episode, which corruptions were caught by the check that must catch them, and whether the
spec (by file hash) passed."""

from __future__ import annotations

from pathlib import Path

from pydantic import AwareDatetime, Field

from datafarm.artifacts.admission import VerifierCheck
from datafarm.artifacts.base import Artifact
from datafarm.artifacts.common import FiniteFloat
from datafarm.artifacts.io import load_artifact
from datafarm.artifacts.ledger_entry import Sha256Hex
from datafarm.artifacts.stages import Stage
from datafarm.errors import DatafarmError

CALIBRATION_FILE = "verifier/calibration.json"
"""The calibration record, relative to the task folder."""
CALIBRATION_DIR = "verifier/calibration"
"""Corrupted videos and the crops of the checks that judged them, relative to the task folder."""


class Cell(Artifact):
    """One check's result on one version of the episode."""

    passed: bool
    """Whether the check passed."""
    metric: FiniteFloat
    """Its metric."""
    route_to: Stage | None = None
    """For a failure: the stage the check routes it to."""


class CalibrationRow(Artifact):
    """One corrupted copy of the episode and what every check said about it."""

    corruption: str
    """Corruption name, e.g. `delete_object`."""
    description: str
    """What the corruption does, in general."""
    target: VerifierCheck
    """The check that must catch it."""
    applied: bool
    """Whether it could be applied to this episode (e.g. shifting events needs an object that moves)."""
    detail: str
    """What was done to this episode (object, frames, amount), or why it could not be applied."""
    caught: bool
    """Whether the target check failed on the corrupted copy."""
    failed_checks: list[VerifierCheck] = Field(default_factory=list)
    """Every check that failed on it."""
    results: dict[VerifierCheck, Cell] = Field(default_factory=dict)
    """Check -> its result on the corrupted copy."""
    videos: list[str] = Field(default_factory=list)
    """The corrupted videos, relative to the task folder (kept for review)."""
    crops: list[str] = Field(default_factory=list)
    """The target check's evidence crops, relative to the task folder."""


class CalibrationReport(Artifact):
    """`verifier/calibration.json`: the spec calibrated on corrupted copies of an accepted episode."""

    format: int = 1
    """Record format version."""
    spec_sha256: Sha256Hex
    """sha256 of the `verifier/spec.json` calibrated."""
    episode_id: str = Field(min_length=1)
    """The accepted episode the corruptions were made from."""
    passed: bool
    """True when the clean episode passed every check and every corruption was caught by its target
    check or is not applicable to the episode (and at least one applied)."""
    clean: dict[VerifierCheck, Cell]
    """Check -> its result on the clean episode."""
    rows: list[CalibrationRow] = Field(min_length=1)
    """One row per corruption."""
    escaped: list[str] = Field(default_factory=list)
    """Corruptions not caught by their target check (including one that left the videos unchanged)."""
    not_applicable: list[str] = Field(default_factory=list)
    """Corruptions that cannot produce their defect on this episode; each row's `detail` says why. Their
    target checks were not exercised by this calibration."""
    clean_failures: list[VerifierCheck] = Field(default_factory=list)
    """Checks that failed on the clean episode."""
    calibrated_at: AwareDatetime
    """When the calibration ran."""

    def summary(self) -> str:
        """One line per problem (empty when passed)."""
        lines = [f"the clean episode {self.episode_id} fails check {c.value} (metric {self.clean[c].metric:g})"
                 for c in self.clean_failures]
        for row in self.rows:
            if row.corruption not in self.escaped:
                continue
            if not row.applied:
                lines.append(f"{row.corruption} escaped on episode {self.episode_id}: {row.detail}")
            else:
                cell = row.results.get(row.target)
                metric = f" (metric {cell.metric:g})" if cell is not None else ""
                lines.append(f"{row.corruption} escaped: check {row.target.value} passed the corrupted episode{metric}; "
                             f"{row.detail}")
        if not any(row.applied for row in self.rows):
            lines.append(f"no corruption could be applied to episode {self.episode_id}: the calibration shows nothing "
                         "about the spec")
        return "\n".join(lines)


class CalibrationFailed(DatafarmError):
    """The spec failed calibration: a corruption escaped its check (named), or the clean episode failed.
    The spec must not be used. CLI exit code 4."""

    exit_code = 4

    def __init__(self, report: CalibrationReport) -> None:
        self.report = report
        """The calibration record (also written to `verifier/calibration.json`)."""
        super().__init__(f"the verifier spec failed calibration on episode {report.episode_id}:\n  "
                         + report.summary().replace("\n", "\n  "))

    def __reduce__(self):
        return (type(self), (self.report,))


def load_calibration(task_dir: Path | str) -> CalibrationReport:
    """`verifier/calibration.json` of a task folder (InputError naming the file when missing or invalid)."""
    return load_artifact(CalibrationReport, Path(task_dir) / CALIBRATION_FILE)
