"""Running the verifier on one episode: stage 8 (`verify_episode`) and the audit's re-run on stored
videos (`reverify`).

Both refuse a spec that is not the task's `verifier/spec.json` or that has not passed calibration
(`verifier/calibration.json` for that very file); their results carry both files' hashes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from datafarm.artifacts.admission import CheckResult, VerifierResults
from datafarm.errors import StateError
from datafarm.hashing import sha256_file
from datafarm.taskdir import TaskDir
from datafarm.verifiers.analysis import analyse, read_obs
from datafarm.verifiers.checks import REGISTRY, CheckContext
from datafarm.verifiers.crops import CROP_DIR, CropWriter
from datafarm.verifiers.evidence import SimEvidence, gather_evidence
from datafarm.verifiers.report import (
    CALIBRATION_FILE,
    CalibrationReport,
    load_calibration,
)
from datafarm.verifiers.spec import SPEC_FILE, VerifierSpec, load_spec


def run_checks(evidence: SimEvidence, obs: dict[str, np.ndarray], spec: VerifierSpec, crops: CropWriter) -> list[CheckResult]:
    """Every check of `spec` on decoded videos (camera -> T x H x W x 3) against `evidence`."""
    analysis = analyse(evidence, obs, spec)
    return [REGISTRY[c.check](CheckContext(evidence, analysis, spec, c, crops)) for c in spec.checks]


def calibrated(task_dir: Path | str, spec: VerifierSpec | None = None) -> tuple[VerifierSpec, str, str, CalibrationReport]:
    """(spec, spec sha256, calibration sha256, calibration) of a task whose spec passed calibration;
    StateError saying what is missing otherwise (no spec, a different spec, no calibration, a failed one)."""
    root = Path(task_dir)
    spec_path, calibration_path = root / SPEC_FILE, root / CALIBRATION_FILE
    if not spec_path.is_file():
        raise StateError(f"{spec_path}: no verifier spec; derive one (derive_spec) and calibrate it first")
    stored = load_spec(root)
    if spec is not None and spec != stored:
        raise StateError(f"{spec_path}: the spec given is not the task's verifier spec; save and calibrate it first")
    if not calibration_path.is_file():
        raise StateError(f"{calibration_path}: the verifier spec has not been calibrated; a spec is used only "
                         "after it passes calibration")
    report = load_calibration(root)
    spec_sha = sha256_file(spec_path)
    if report.spec_sha256 != spec_sha:
        raise StateError(f"{calibration_path}: calibrates spec {report.spec_sha256[:12]}..., but {SPEC_FILE} is "
                         f"{spec_sha[:12]}...; calibrate the current spec")
    if not report.passed:
        raise StateError(f"{calibration_path}: the verifier spec failed calibration and is not used:\n  "
                         + report.summary().replace("\n", "\n  "))
    return stored, spec_sha, sha256_file(calibration_path), report


def verify_episode(task_dir: Path | str, episode_id: str, spec: VerifierSpec | None = None, *,
                   evidence: SimEvidence | None = None, write_crops: bool = True) -> VerifierResults:
    """Run every check of the task's calibrated spec on `episodes/<episode_id>`'s rendered videos.

    Evidence crops go to `episodes/<episode_id>/verifier/` (replacing a previous run's) unless
    `write_crops` is False. `evidence` reuses gathered evidence (it must be this episode's). Raises
    StateError for an uncalibrated or failed spec, InputError for a missing render."""
    root = Path(task_dir)
    spec, spec_sha, calibration_sha, _ = calibrated(root, spec)
    folder = TaskDir(root).episode(episode_id)
    if evidence is None:
        evidence = gather_evidence(root, episode_id, spec)
    elif evidence.episode_id != episode_id:
        raise ValueError(f"the evidence given is episode {evidence.episode_id}'s, not {episode_id}'s")
    crops = CropWriter(folder if write_crops else None)
    crops.clear()
    checks = run_checks(evidence, read_obs(folder, spec.cameras), spec, crops)
    return VerifierResults(spec_sha256=spec_sha, calibration_sha256=calibration_sha, checks=checks)


def verifier_files(task_dir: Path | str, episode_id: str | None = None) -> dict[str, str]:
    """sha256 of the files the verifier wrote, by path relative to the task folder (for the ledger
    entry that records them): an episode's crops (`episodes/<id>/verifier/`), or with no episode the
    task's `verifier/` folder (spec, calibration, corrupted videos and their crops)."""
    root = Path(task_dir)
    folder = TaskDir(root).episode(episode_id) / CROP_DIR if episode_id is not None else root / "verifier"
    if not folder.is_dir():
        return {}
    return {p.relative_to(root).as_posix(): sha256_file(p) for p in sorted(folder.rglob("*")) if p.is_file()}


def reverify(task_dir: Path | str, episode_id: str, stored: VerifierResults) -> VerifierResults:
    """The audit's re-run: the task's calibrated spec on the episode's stored videos, writing nothing
    (no crops). `stored` (q's results) is not consulted; the audit compares the two."""
    return verify_episode(task_dir, episode_id, write_crops=False)
