"""Calibrating a verifier spec on deliberately corrupted copies of an accepted episode (DESIGN.md:
"every corruption must be caught by its check and the clean episode must pass").

`calibrate` saves the spec as `verifier/spec.json`, gathers the episode's evidence once, runs every
check on the clean videos and on each corruption (`datafarm.verifiers.corruptions`): each corrupted
copy is encoded to H.264 like a render (`verifier/calibration/<corruption>/obs/<camera>.mp4`, kept
for review) and decoded again before it is verified, so the codec cannot hide or invent a defect.
The matrix (corruption x check) goes to `verifier/calibration.json` with its `passed` flag; a failed
calibration raises `CalibrationFailed` naming every corruption that escaped (the spec is not used).

A corruption that cannot produce its defect on the episode (`NotApplicable`: shifting events when no
object moves and the robot touches none, pasting the reference layout when every object stays at its
clip place) is recorded as not applicable, with its reason, in the row and in the report's
`not_applicable`: it is neither caught nor escaped, and the check it targets was not exercised by
this calibration. One that ran but left the videos unchanged escapes, as does one whose check the
spec does not run. A calibration in which no corruption applied at all does not pass (it showed
nothing about the spec).
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from datafarm.artifacts.admission import CheckResult, VerifierCheck
from datafarm.artifacts.io import save_artifact
from datafarm.hashing import sha256_file
from datafarm.renderers.video import VideoWriter, read_video
from datafarm.taskdir import TaskDir
from datafarm.verifiers.analysis import analyse, read_obs
from datafarm.verifiers.corruptions import (
    CORRUPTIONS,
    Corruption,
    NotApplicable,
    Source,
)
from datafarm.verifiers.crops import CropWriter
from datafarm.verifiers.evidence import SimEvidence, gather_evidence
from datafarm.verifiers.report import (
    CALIBRATION_DIR,
    CALIBRATION_FILE,
    CalibrationFailed,
    CalibrationReport,
    CalibrationRow,
    Cell,
)
from datafarm.verifiers.spec import SPEC_FILE, VerifierSpec, save_spec
from datafarm.verifiers.verify import run_checks


def _cells(results: list[CheckResult]) -> dict[VerifierCheck, Cell]:
    return {r.check: Cell(passed=r.passed, metric=r.metric, route_to=r.route_to) for r in results}


def _encoded(videos: dict[str, np.ndarray], folder: Path, fps: float) -> dict[str, np.ndarray]:
    """Write each video as an H.264 MP4 in `folder` and return the frames decoded back."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, frames in videos.items():
        path = folder / f"{name}.mp4"
        with VideoWriter(path, frames.shape[2], frames.shape[1], fps) as writer:
            for frame in frames:
                writer.write(np.ascontiguousarray(frame))
        out[name] = read_video(path)[0]
    return out


def _row(corruption: Corruption, source: Source, evidence: SimEvidence, spec: VerifierSpec,
         root: Path) -> tuple[CalibrationRow, bool]:
    """The corruption's row, and whether it applies to this episode (False only with a reason why not)."""
    base = {"corruption": corruption.name, "description": corruption.description, "target": corruption.target}
    try:
        videos, detail = corruption.apply(source)
    except NotApplicable as reason:
        return CalibrationRow(**base, applied=False, caught=False,
                              detail=f"not applicable: {reason}; check {corruption.target.value} is not "
                                     "exercised by this calibration"), False
    if not any(c.check == corruption.target for c in spec.checks):
        # the defect can be made on this episode and the spec has no check for it: it would go through
        return CalibrationRow(**base, applied=False, caught=False,
                              detail=f"the spec does not run check {corruption.target.value}"), True
    if all(np.array_equal(videos[n], source.obs[n]) for n in source.obs):
        return CalibrationRow(**base, applied=False, caught=False,
                              detail=f"{detail}, which left the videos unchanged (no defect to catch, and no "
                                     "reason why)"), True
    rel = f"{CALIBRATION_DIR}/{corruption.name}"
    decoded = _encoded(videos, root / rel / "obs", evidence.fps)
    crops = CropWriter(root / rel, subdir="crops", checks={corruption.target.value})
    results = run_checks(evidence, decoded, spec, crops)
    failed = [r.check for r in results if not r.passed]
    return CalibrationRow(**base, applied=True, detail=detail, caught=corruption.target in failed, failed_checks=failed,
                          results=_cells(results), videos=[f"{rel}/obs/{n}.mp4" for n in videos],
                          crops=[f"{rel}/{c}" for c in crops.written]), True


def calibrate(task_dir: Path | str, episode_id: str, spec: VerifierSpec, *, evidence: SimEvidence | None = None,
              corruptions: tuple[Corruption, ...] = CORRUPTIONS, now: datetime | None = None) -> CalibrationReport:
    """Calibrate `spec` on the accepted, rendered episode `episodes/<episode_id>` (see the module
    docstring). Writes `verifier/spec.json`, `verifier/calibration/` and `verifier/calibration.json`;
    returns the report when it passed, else raises CalibrationFailed (the report is written either way).
    `evidence` reuses this episode's gathered evidence; `corruptions` narrows the rows (a quick re-check
    of some corruptions on a task folder)."""
    root = Path(task_dir)
    spec_path = save_spec(root, spec)
    spec_sha = sha256_file(spec_path)
    if evidence is None:
        evidence = gather_evidence(root, episode_id, spec)
    elif evidence.episode_id != episode_id:
        raise ValueError(f"the evidence given is episode {evidence.episode_id}'s, not {episode_id}'s")
    folder = TaskDir(root).episode(episode_id)
    shutil.rmtree(root / CALIBRATION_DIR, ignore_errors=True)
    clean_obs = read_obs(folder, spec.cameras)
    clean = run_checks(evidence, clean_obs, spec, CropWriter(None))
    source = Source(obs=clean_obs, analysis=analyse(evidence, clean_obs, spec), evidence=evidence, spec=spec)
    judged = [_row(c, source, evidence, spec, root) for c in corruptions]
    rows = [row for row, _ in judged]
    clean_failures = [r.check for r in clean if not r.passed]
    escaped = [row.corruption for row, applicable in judged if applicable and not row.caught]
    not_applicable = [row.corruption for row, applicable in judged if not applicable]
    passed = not escaped and not clean_failures and any(row.applied for row in rows)
    report = CalibrationReport(spec_sha256=spec_sha, episode_id=episode_id, passed=passed, clean=_cells(clean),
                               rows=rows, escaped=escaped, not_applicable=not_applicable,
                               clean_failures=clean_failures, calibrated_at=now or datetime.now(UTC))
    if sha256_file(spec_path) != spec_sha:
        raise CalibrationFailed(report.model_copy(update={"passed": False}))  # the spec changed under us
    save_artifact(report, root / CALIBRATION_FILE)
    if not report.passed:
        raise CalibrationFailed(report)
    return report


__all__ = ["CALIBRATION_FILE", "SPEC_FILE", "CalibrationFailed", "CalibrationReport", "calibrate"]
