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
from datafarm.renderers.video import VideoWriter
from datafarm.taskdir import TaskDir
from datafarm.verifiers import VerifierSpec, calibrate, derive_spec
from datafarm.verifiers.analysis import analyse, read_obs
from datafarm.verifiers.checks.events import robot_shift
from datafarm.verifiers.colour import model_from_pixels, to_lab
from datafarm.verifiers.corruptions import CORRUPTIONS, EVENT_SHIFT_S
from datafarm.verifiers.crops import CropWriter
from datafarm.verifiers.evidence import CameraEvidence, ObjectTrack, SimEvidence, erode
from datafarm.verifiers.verify import run_checks
from tests.renderers.helpers import contract
from tests.verifiers.helpers import nest_contract

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
    image, reference_classes = _scene()
    rng = np.random.default_rng(5)
    classes = np.repeat(reference_classes[None], STEPS, axis=0)
    folder = TaskDir(root).episode(EPISODE) / "obs"
    folder.mkdir(parents=True)
    with VideoWriter(folder / "front.mp4", WIDTH, HEIGHT, FPS) as writer:
        for t in range(STEPS):
            robot = _robot(t)
            classes[t][robot] = 1
            frame = np.where(robot[..., None], np.array(ROBOT, np.uint8), image).astype(np.float32)
            writer.write(np.clip(frame + rng.normal(0, 1.0, frame.shape), 0, 255).astype(np.uint8))
    areas = (classes == 2).sum(axis=(1, 2))
    ys, xs = np.nonzero(reference_classes == 2)
    track = ObjectTrack(areas=areas.astype(np.int64), centroids=np.tile([xs.mean(), ys.mean()], (STEPS, 1)))
    pixels = image[erode(reference_classes == 2, 1)]
    camera = CameraEvidence(name="front", classes=classes, outline_frames=[], outlines=np.zeros((0, HEIGHT, WIDTH), bool),
                            reference_classes=reference_classes, reference_image=image, clip_median=image,
                            tracks={"drum": track}, colours={"drum": model_from_pixels(pixels, "real pixels")},
                            reference_lab={"drum": to_lab(pixels).reshape(-1, 3)})
    contacts = [ContactEvent(a="left.link7", b="drum.head", start_step=s, end_step=s + 1, start_s=s / FPS,
                             end_s=(s + 1) / FPS, max_impulse=0.1) for s in STRIKES]
    contacts.append(ContactEvent(a="table", b="drum", start_step=0, end_step=None, start_s=0.0, end_s=None,
                                 max_impulse=0.1))
    return SimEvidence(episode_id=EPISODE, frames=STEPS, fps=FPS, width=WIDTH, height=HEIGHT, object_ids=["drum"],
                       cameras={"front": camera}, positions=np.zeros((STEPS, 1, 3)), speeds=np.zeros((STEPS, 1)),
                       contacts=contacts, seams=[], mode="sim2real", variations={}, light_gains=np.ones(3))


def _spec(grounding: Grounding) -> VerifierSpec:
    """The spec derive_spec writes from T, G, R and K, narrowed to this scene's camera, object and the
    checks that judge it without a real camera geometry."""
    data = derive_spec((nest_contract(), grounding, contract())).model_dump(mode="json")
    data["cameras"] = ["front"]
    data["objects"] = [{"id": "drum", "kind": "drum", "role": None, "colour": [c / 255 for c in DRUM],
                        "colour_source": "grounding", "cameras": ["front"], "movable": True}]
    data["checks"] = [c for c in data["checks"] if c["check"] in ("objects", "events", "appearance")]
    return VerifierSpec.model_validate(data)


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
