"""Calibration on an object whose colour lies close to its surroundings (a beige drum on a wood table
before a grey wall, as in beat_drum): K's shared colour tolerance would make its background look like
it everywhere, so its deletion, duplication, enlargement and recolouring would go unseen; the
analysis judges it with a tolerance from its measured separation instead, and every one of them is
caught. A slowly moving robot whose frame is repeated at a chunk seam is caught as a stall. Shifting
events (nothing moves but the robot, which touches no object: tests/verifiers/test_robot_events.py
has it strike) and pasting the reference layout (the drum stays at its clip place) cannot apply and
are recorded as not applicable, with their reasons; a calibration where no corruption applies does
not pass.

The scene is drawn with OpenCV (no render device): the clip's view of it is the drum's real
reference, and its clean "render" is that view with a moving grey bar (the robot) and a little
noise per frame, encoded as H.264 like a render.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from datafarm.artifacts.admission import VerifierCheck
from datafarm.artifacts.grounding import Grounding
from datafarm.taskdir import TaskDir
from datafarm.verifiers import CalibrationFailed, VerifierSpec, calibrate
from datafarm.verifiers.analysis import analyse, read_obs
from datafarm.verifiers.checks.geometry import object_region
from datafarm.verifiers.colour import to_lab
from datafarm.verifiers.corruptions import CORRUPTIONS
from datafarm.verifiers.crops import CropWriter
from datafarm.verifiers.evidence import SimEvidence
from datafarm.verifiers.verify import run_checks
from tests.verifiers.drawn import drawn_episode, drawn_spec

EPISODE = "ep_drum"
WIDTH, HEIGHT, STEPS, FPS = 320, 240, 30, 15.0
SEAM = 15
"""The one chunk seam of the episode's render."""
WALL, WOOD, DRUM, ROBOT = (150, 152, 155), (160, 128, 100), (190, 180, 163), (70, 70, 74)
"""sRGB colours of the scene: the drum lies within K's shared tolerance (28) of both wall and table."""
CHECKS = ("objects", "geometry", "events", "appearance", "temporal", "layout")
"""The checks the spec runs (views and background need a real camera geometry and are covered elsewhere)."""
TARGETS = ("delete_object", "duplicate_object", "enlarge_object", "change_colour", "repeat_frame_at_seam")
"""The corruptions that must be caught."""


def _scene() -> tuple[np.ndarray, np.ndarray]:
    """(image, classes) of the clip's view: wall above, wood table below with grain, the drum on it."""
    rng = np.random.default_rng(7)
    image = np.zeros((HEIGHT, WIDTH, 3), np.float32)
    image[:] = WALL
    horizon = 90
    grain = np.sin(np.arange(WIDTH) / 5.0)[None, :] * 6 + rng.normal(0, 3, (HEIGHT - horizon, WIDTH))
    image[horizon:] = np.array(WOOD, np.float32) + grain[..., None] * np.array([1.0, 0.8, 0.6])
    drum = np.zeros((HEIGHT, WIDTH), np.uint8)
    cv2.ellipse(drum, (200, 140), (34, 24), 0, 0, 360, 1, -1)
    shade = np.linspace(1.04, 0.94, HEIGHT)[:, None, None]  # lit from above
    image = np.where(drum[..., None] > 0, np.array(DRUM, np.float32) * shade, image)
    image += rng.normal(0, 1.5, image.shape)
    return np.clip(image, 0, 255).astype(np.uint8), np.where(drum > 0, 2, 0).astype(np.uint8)


def _robot(t: int) -> np.ndarray:
    """bool mask of the robot at frame t: a bar on the wall moving right a pixel per frame (slow)."""
    mask = np.zeros((HEIGHT, WIDTH), bool)
    mask[10:80, 30 + t:48 + t] = True
    return mask


def _episode(root: Path, scene: tuple[np.ndarray, np.ndarray] | None = None) -> SimEvidence:
    """Write the clean rendered video into the task folder; return the evidence it is verified against."""
    return drawn_episode(root, EPISODE, "drum", scene or _scene(), _robot, ROBOT, steps=STEPS, fps=FPS, seams=[SEAM])


def _spec(grounding: Grounding) -> VerifierSpec:
    return drawn_spec(grounding, "drum", "drum", DRUM, CHECKS)


def _corruptions(*names: str) -> tuple:
    return tuple(c for c in CORRUPTIONS if c.name in names)


@pytest.fixture
def task(tmp_path: Path, grounding: Grounding) -> tuple[Path, SimEvidence, VerifierSpec]:
    root = tmp_path / "task"
    return root, _episode(root), _spec(grounding)


def test_the_drum_is_within_the_shared_tolerance_of_its_surroundings(task) -> None:
    """The premise: K's tolerance would call the wall and the table drum-coloured."""
    _, evidence, spec = task
    model = evidence.cameras["front"].colours["drum"]
    for colour in (WALL, WOOD):
        assert model.distance(to_lab(np.array([[colour]], np.uint8))).min() < spec.common.colour_tolerance


def test_a_low_contrast_object_is_judged_with_a_tighter_tolerance(task) -> None:
    root, evidence, spec = task
    view = analyse(evidence, read_obs(TaskDir(root).episode(EPISODE), spec.cameras), spec).views["front"]
    assert view.separation["drum"] is not None
    assert view.tolerance["drum"] < spec.common.colour_tolerance
    assert view.tolerance["drum"] < view.separation["drum"]  # the table and wall no longer look like the drum
    assert not view.ambiguous["drum"][evidence.cameras["front"].object_mask(0, 0)].any()


def test_deleting_duplicating_enlarging_recolouring_the_drum_and_a_stall_are_caught(task) -> None:
    root, evidence, spec = task
    report = calibrate(root, EPISODE, spec, evidence=evidence,
                       corruptions=_corruptions(*TARGETS, "shift_events", "paste_reference_layout"))
    assert report.passed and not report.clean_failures, report.summary()
    rows = {r.corruption: r for r in report.rows}
    for name in TARGETS:
        row = rows[name]
        assert row.applied and row.caught and row.target in row.failed_checks, (name, row.detail, row.results)
    assert rows["change_colour"].target is VerifierCheck.appearance
    assert rows["repeat_frame_at_seam"].results[VerifierCheck.temporal].metric >= 1


def test_corruptions_that_cannot_apply_are_recorded_as_such(task) -> None:
    root, evidence, spec = task
    report = calibrate(root, EPISODE, spec, evidence=evidence,
                       corruptions=_corruptions("delete_object", "shift_events", "paste_reference_layout", "swap_views"))
    assert report.passed and report.escaped == []
    assert report.not_applicable == ["shift_events", "swap_views", "paste_reference_layout"]
    rows = {r.corruption: r for r in report.rows}
    assert "no object's projection travels" in rows["shift_events"].detail
    assert "no object leaves its reference-frame place" in rows["paste_reference_layout"].detail
    assert "the episode has one camera" in rows["swap_views"].detail
    for name in report.not_applicable:
        assert not rows[name].applied and not rows[name].caught and rows[name].detail.startswith("not applicable: ")


def test_a_calibration_where_no_corruption_applies_fails(task) -> None:
    root, evidence, spec = task
    with pytest.raises(CalibrationFailed, match="no corruption could be applied"):
        calibrate(root, EPISODE, spec, evidence=evidence, corruptions=_corruptions("shift_events", "paste_reference_layout"))


def test_the_spec_records_the_rule_and_a_spec_without_it_keeps_the_shared_tolerance(task) -> None:
    root, evidence, spec = task
    assert spec.colour_contrast is not None and 0 < spec.colour_contrast.share <= 1
    assert VerifierSpec.model_validate_json(spec.model_dump_json()) == spec
    # a spec written before the rule (no field) re-verifies as it was calibrated: the shared tolerance
    data = spec.model_dump(mode="json")
    del data["colour_contrast"]
    before = VerifierSpec.model_validate(data)
    view = analyse(evidence, read_obs(TaskDir(root).episode(EPISODE), spec.cameras), before).views["front"]
    assert view.tolerance["drum"] == before.common.colour_tolerance and view.separation["drum"] is None


def test_a_robot_part_the_objects_colour_touching_it_is_not_read_as_part_of_it(tmp_path: Path,
                                                                              grounding: Grounding) -> None:
    """A gripper the drum's colour resting on the drum (in the clip and in every frame): the robot is
    confusable with the drum, so the geometry check leaves the robot's pixels out of the drum's region
    instead of reading the drum as far too large."""
    image, reference_classes = _scene()
    gripper = np.zeros((HEIGHT, WIDTH), bool)
    gripper[40:120, 180:222] = True  # down onto the drum's top edge, in front of it
    image[gripper] = DRUM
    reference_classes[gripper] = 1
    root = tmp_path / "task"
    evidence = _episode(root, (image, reference_classes))
    spec = _spec(grounding)
    obs = read_obs(TaskDir(root).episode(EPISODE), spec.cameras)
    view = analyse(evidence, obs, spec).views["front"]
    assert view.confusable["drum"] == {1}
    cam, t = evidence.cameras["front"], STEPS // 2
    mask, like = cam.object_mask(0, t), view.likeness["drum"][t]
    radius = cam.tracks["drum"].diameter
    with_gripper = object_region(like, cam, 0, t, radius)
    without = object_region(like, cam, 0, t, radius, view.confusable["drum"], spec.common.mask_margin_px)
    threshold = spec.check(VerifierCheck.geometry).threshold
    assert (with_gripper ^ mask).sum() / mask.sum() > threshold  # the gripper would read as drum
    assert (without ^ mask).sum() / mask.sum() < threshold
    results = {r.check: r for r in run_checks(evidence, obs, spec, CropWriter(None))}
    assert results[VerifierCheck.geometry].passed and results[VerifierCheck.objects].passed
