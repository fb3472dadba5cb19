"""The verifier on a rendered demo episode: the clean episode passes every check; each corruption of
DESIGN.md's table is caught by its own check (the calibration matrix in verifier/calibration.json);
a spec with a lax threshold fails calibration naming the corruption that escaped and is then refused;
results validate as VerifierResults carrying the spec's and calibration's file hashes, with evidence
crops saved in the episode folder; the audit's re-run reproduces them and writes nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import cv2
import pytest

from datafarm.artifacts.admission import VerifierCheck, VerifierResults
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.stages import Stage
from datafarm.errors import StateError
from datafarm.hashing import sha256_file
from datafarm.taskdir import TaskDir
from datafarm.verifiers import (
    CALIBRATION_FILE,
    CORRUPTIONS,
    SPEC_FILE,
    CalibrationFailed,
    CalibrationReport,
    SimEvidence,
    calibrate,
    derive_spec,
    gather_evidence,
    load_calibration,
    reverify,
    save_spec,
    verifier_files,
    verify_episode,
)
from tests.renderers.helpers import contract, needs_device
from tests.verifiers.helpers import EPISODE, add_rendered_episode, write_task

pytestmark = [*needs_device, pytest.mark.slow]


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory, demo_clip: Path, grounding: Grounding) -> TaskDir:
    """A task folder holding one rendered demo episode (40 steps, 3 views at 320x240)."""
    task = write_task(tmp_path_factory.mktemp("verify") / "task", demo_clip, grounding, contract())
    add_rendered_episode(task, grounding)
    return task


@pytest.fixture(scope="module")
def evidence(task: TaskDir) -> SimEvidence:
    """The episode's sim projection and references, gathered once for the module."""
    return gather_evidence(task.root, EPISODE, derive_spec(task.root))


@pytest.fixture(scope="module")
def report(task: TaskDir, evidence: SimEvidence) -> CalibrationReport:
    """The task's spec calibrated on the episode (it must pass)."""
    return calibrate(task.root, EPISODE, derive_spec(task.root), evidence=evidence)


def test_calibration_passes_and_is_written(task: TaskDir, report: CalibrationReport) -> None:
    assert report.passed, report.summary()
    assert report.escaped == [] and report.clean_failures == []
    assert load_calibration(task.root) == report
    assert report.spec_sha256 == sha256_file(task.root / SPEC_FILE)
    assert [r.corruption for r in report.rows] == [c.name for c in CORRUPTIONS]
    # the matrix: every check's result on the clean episode and on every corrupted copy
    assert set(report.clean) == {c.check for c in derive_spec(task.root).checks}
    assert all(set(r.results) == set(report.clean) for r in report.rows)


def test_the_clean_episode_passes_every_check(report: CalibrationReport) -> None:
    failed = {c.value: cell.metric for c, cell in report.clean.items() if not cell.passed}
    assert not failed, failed


@pytest.mark.parametrize("corruption", CORRUPTIONS, ids=[c.name for c in CORRUPTIONS])
def test_each_corruption_is_caught_by_its_own_check(corruption, task: TaskDir, report: CalibrationReport) -> None:
    row = next(r for r in report.rows if r.corruption == corruption.name)
    assert row.applied, row.detail
    assert row.caught and corruption.target in row.failed_checks, (row.detail, row.results[corruption.target])
    # the corrupted copy is kept for review, as videos the verifier decoded
    assert row.videos and all((task.root / v).is_file() for v in row.videos)
    assert all((task.root / c).is_file() for c in row.crops)


def test_verifier_results_carry_the_spec_and_calibration_hashes(task: TaskDir, report: CalibrationReport,
                                                                 evidence: SimEvidence) -> None:
    results = verify_episode(task.root, EPISODE, evidence=evidence)
    assert VerifierResults.model_validate_json(results.model_dump_json()) == results
    assert results.passed
    assert results.spec_sha256 == sha256_file(task.root / SPEC_FILE)
    assert results.calibration_sha256 == sha256_file(task.root / CALIBRATION_FILE)
    assert [c.check for c in results.checks] == [c.check for c in derive_spec(task.root).checks]
    for check in results.checks:
        assert check.route_to is None and check.evidence, check.check
        assert check.metric == report.clean[check.check].metric  # the same numbers calibration saw
    # evidence crops are saved in the episode folder, named in the results, and are images
    crops = [c for check in results.checks for e in check.evidence for c in e.crops]
    assert crops and all(c.startswith("verifier/") for c in crops)
    for crop in crops:
        image = cv2.imread(str(task.episode(EPISODE) / crop))
        assert image is not None and min(image.shape[:2]) >= 64
    assert any(e.frames for check in results.checks for e in check.evidence)
    written = verifier_files(task.root, EPISODE)  # what the verify ledger entry records
    assert set(written) == {f"episodes/{EPISODE}/{c}" for c in crops}
    assert f"{CALIBRATION_FILE}" in verifier_files(task.root) and SPEC_FILE in verifier_files(task.root)


def test_reverify_reproduces_the_results_and_writes_nothing(task: TaskDir, report: CalibrationReport,
                                                            evidence: SimEvidence) -> None:
    from datafarm.admission.audit import default_reverifier, verifier_differences

    stored = verify_episode(task.root, EPISODE, evidence=evidence)
    before = {p: sha256_file(p) for p in task.root.rglob("*") if p.is_file()}
    fresh = reverify(task.root, EPISODE, stored)  # gathers its own evidence, as the audit does
    assert verifier_differences(stored, fresh) == []
    assert {p: sha256_file(p) for p in task.root.rglob("*") if p.is_file()} == before
    assert default_reverifier() is reverify  # the audit picks it up


def test_a_lax_threshold_fails_calibration_naming_the_escaped_corruption(task: TaskDir, evidence: SimEvidence,
                                                                         tmp_path: Path) -> None:
    copy = tmp_path / "task"
    shutil.copytree(task.root, copy, ignore=shutil.ignore_patterns("verifier"))
    lax = derive_spec(copy, overrides={"objects": {"threshold": 1.5}})  # no share of frames can exceed 1
    with pytest.raises(CalibrationFailed, match="delete_object escaped") as failure:
        calibrate(copy, EPISODE, lax, evidence=evidence)
    written = load_calibration(copy)
    assert not written.passed and written == failure.value.report
    assert set(written.escaped) == {"delete_object", "duplicate_object"}
    assert "duplicate_object escaped: check objects passed" in str(failure.value)
    # a spec that failed calibration is not used
    with pytest.raises(StateError, match="failed calibration"):
        verify_episode(copy, EPISODE, evidence=evidence)


def test_an_uncalibrated_spec_is_refused(task: TaskDir, report: CalibrationReport, tmp_path: Path) -> None:
    copy = tmp_path / "task"
    shutil.copytree(task.root, copy, ignore=shutil.ignore_patterns("verifier"))
    with pytest.raises(StateError, match="no verifier spec"):
        verify_episode(copy, EPISODE)
    save_spec(copy, derive_spec(copy))
    with pytest.raises(StateError, match="has not been calibrated"):
        verify_episode(copy, EPISODE)
    # a calibration of another spec does not count for this one
    shutil.copy(task.root / CALIBRATION_FILE, copy / CALIBRATION_FILE)
    save_spec(copy, derive_spec(copy, overrides={"layout": {"threshold": 0.2}}))
    with pytest.raises(StateError, match="calibrate the current spec"):
        verify_episode(copy, EPISODE)


def test_a_failed_check_names_the_stage_it_routes_to(report: CalibrationReport) -> None:
    rows = {r.corruption: r for r in report.rows}
    # DESIGN.md's routing: an object missing in every view -> grounding; a geometry defect -> grounding;
    # swapped views, appearance, timing, background and layout defects -> render
    assert rows["delete_object"].results[VerifierCheck.objects].route_to == Stage.grounding
    assert rows["duplicate_object"].results[VerifierCheck.objects].route_to == Stage.render
    assert rows["enlarge_object"].results[VerifierCheck.geometry].route_to == Stage.grounding
    for name, check in (("swap_views", VerifierCheck.views), ("change_colour", VerifierCheck.appearance),
                        ("drop_frame_at_seam", VerifierCheck.temporal), ("move_background", VerifierCheck.background),
                        ("paste_reference_layout", VerifierCheck.layout), ("shift_events", VerifierCheck.events)):
        assert rows[name].results[check].route_to == Stage.render, name
    assert all(cell.route_to is None for cell in report.clean.values())
