"""The events check on an episode where no object moves and the robot strikes one (beat the drum):
the events are the robot's contacts, so the robot's strokes around them are timed against the sim.
The clean render passes with a shift of 0; calibration's shift_events draws the robot a quarter of a
second late, and the events check catches it with that shift. Without a contact of the robot with an
object there is nothing to time, and shift_events stays not applicable (tests/verifiers/test_low_contrast.py).

The scene is drawn with OpenCV (no render device): a red drum on a grey table, and a dark bar (the
robot) that comes down onto the drum three times, with a little noise per frame, encoded as H.264
like a render.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from datafarm.artifacts.admission import VerifierCheck
from datafarm.artifacts.episode import ContactEvent
from datafarm.artifacts.grounding import Grounding
from datafarm.taskdir import TaskDir
from datafarm.verifiers import VerifierSpec, calibrate
from datafarm.verifiers.analysis import analyse, read_obs
from datafarm.verifiers.checks.events import robot_shift
from datafarm.verifiers.corruptions import CORRUPTIONS, EVENT_SHIFT_S
from datafarm.verifiers.crops import CropWriter
from datafarm.verifiers.evidence import SimEvidence
from datafarm.verifiers.verify import run_checks
from tests.verifiers.drawn import drawn_episode, drawn_spec

EPISODE = "ep_strikes"
WIDTH, HEIGHT, STEPS, FPS = 320, 240, 72, 15.0
TABLE, DRUM, ROBOT = (150, 150, 150), (200, 50, 45), (60, 60, 66)
STRIKES = (16, 36, 56)
"""Frames where the bar's tip reaches the drum head."""
HEAD_Y = 118
"""Image row of the drum's top edge."""


def _scene() -> tuple[np.ndarray, np.ndarray]:
    """(image, classes) of the clip's view: a grey table with the drum on it."""
    rng = np.random.default_rng(3)
    image = np.zeros((HEIGHT, WIDTH, 3), np.float32)
    image[:] = TABLE
    image += np.sin(np.arange(WIDTH) / 7.0)[None, :, None] * 4
    drum = np.zeros((HEIGHT, WIDTH), np.uint8)
    cv2.ellipse(drum, (190, 140), (40, 22), 0, 0, 360, 1, -1)
    image = np.where(drum[..., None] > 0, np.array(DRUM, np.float32), image)
    image += rng.normal(0, 1.5, image.shape)
    return np.clip(image, 0, 255).astype(np.uint8), np.where(drum > 0, 2, 0).astype(np.uint8)


def _tip(t: int) -> int:
    """Image row of the bar's tip at frame t: on the head at each strike, 60 px above it halfway between."""
    return HEAD_Y - round(60 * abs(np.sin(np.pi * (t - STRIKES[0]) / (STRIKES[1] - STRIKES[0]))))


def _robot(t: int) -> np.ndarray:
    mask = np.zeros((HEIGHT, WIDTH), bool)
    mask[0:_tip(t), 180:200] = True
    return mask


def _episode(root: Path) -> SimEvidence:
    """Write the clean rendered video into the task folder; return the evidence it is verified against."""
    strikes = [ContactEvent(a="left.link7", b="drum.head", start_step=s, end_step=s + 1, start_s=s / FPS,
                            end_s=(s + 1) / FPS, max_impulse=0.1) for s in STRIKES]
    resting = ContactEvent(a="table", b="drum", start_step=0, end_step=None, start_s=0.0, end_s=None, max_impulse=0.1)
    return drawn_episode(root, EPISODE, "drum", _scene(), _robot, ROBOT, steps=STEPS, fps=FPS,
                         contacts=[*strikes, resting])


def _spec(grounding: Grounding) -> VerifierSpec:
    """The spec, narrowed to the checks that judge the drawn scene without a real camera geometry."""
    return drawn_spec(grounding, "drum", "drum", DRUM, ("objects", "events", "appearance"))


@pytest.fixture
def task(tmp_path: Path, grounding: Grounding) -> tuple[Path, SimEvidence, VerifierSpec]:
    root = tmp_path / "task"
    return root, _episode(root), _spec(grounding)


def test_the_clean_strokes_are_timed_at_no_shift(task) -> None:
    root, evidence, spec = task
    obs = read_obs(TaskDir(root).episode(EPISODE), spec.cameras)
    results = {r.check: r for r in run_checks(evidence, obs, spec, CropWriter(None))}
    events = results[VerifierCheck.events]
    assert events.passed and events.metric == 0.0, events
    note = events.evidence[-1].note
    assert "the robot's motion around its 3 contacts" in note and "+0 frames" in note
    assert events.evidence[-1].frames == list(STRIKES)
    timing = robot_shift(evidence, analyse(evidence, obs, spec).views, 8, 0.25)
    assert timing is not None and timing.shift == 0 and timing.agreement[0] > 0.9
    assert timing.agreement[0] > timing.agreement[2] > timing.agreement[4]


def test_the_robot_drawn_late_is_caught_by_the_events_check(task) -> None:
    root, evidence, spec = task
    shift = next(c for c in CORRUPTIONS if c.name == "shift_events")
    report = calibrate(root, EPISODE, spec, evidence=evidence, corruptions=(shift,))
    assert report.passed and not report.clean_failures and report.not_applicable == [], report.summary()
    row = report.rows[0]
    assert row.applied and row.caught and "robot drawn 4 frames" in row.detail, row.detail
    lag = round(EVENT_SHIFT_S * FPS)
    assert row.results[VerifierCheck.events].metric == pytest.approx(lag / FPS, abs=1e-6)


def test_strokes_without_a_contact_are_not_timed(task) -> None:
    root, evidence, spec = task
    evidence.contacts = [c for c in evidence.contacts if c.a == "table"]  # the drum on the table, no strike
    obs = read_obs(TaskDir(root).episode(EPISODE), spec.cameras)
    assert robot_shift(evidence, analyse(evidence, obs, spec).views, 8, 0.25) is None
    events = next(r for r in run_checks(evidence, obs, spec, CropWriter(None)) if r.check is VerifierCheck.events)
    assert events.passed and "no robot contact with an object can be timed" in events.evidence[-1].note
