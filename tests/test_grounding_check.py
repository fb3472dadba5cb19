"""Stage 1's checker on the example clips: the exact grounding of a clip (its studio truth) passes, and
a grounding that leaves an object out, puts one 10 cm from where it is, turns a camera, or gets the
metric scale wrong fails with a reason that says so. The clip is segmented once per example and the
evidence reused for each variant of G."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from datafarm.artifacts.grounding import Grounding
from datafarm.grounding_check import ClipEvidence, check_grounding, clip_evidence
from datafarm.sim.world.frames import matrix_to_pose, pose_to_matrix, rotation_z
from datafarm.studio.truth import load_truth

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _example(name: str) -> tuple[Grounding, Path]:
    folder = EXAMPLES / name
    if not (folder / "truth.json").is_file() or not (folder / "clip" / "clip.yaml").is_file():
        pytest.skip(f"example {name} has no rendered clip and truth")
    return load_truth(folder / "truth.json").grounding, folder / "clip"


@pytest.fixture(scope="module", params=["nest_cups", "use_drawer"])
def example(request) -> tuple[Grounding, Path, ClipEvidence]:
    g, clip = _example(request.param)
    return g, clip, clip_evidence(g, clip)


def moved(g: Grounding, index: int, dx: float = 0.0, dy: float = 0.0) -> Grounding:
    copy = g.model_copy(deep=True)
    x, y, z = copy.objects[index].pose.position
    copy.objects[index].pose.position = (x + dx, y + dy, z)
    return copy


@pytest.mark.slow
def test_the_exact_grounding_passes(example) -> None:
    g, clip, evidence = example
    report = check_grounding(g, clip, evidence)
    assert report.passed, report.reason
    assert all(v.iou is not None and v.iou >= 0.8 for v in report.views)
    assert all(c.coverage >= 0.8 for v in report.views for c in v.objects)
    assert {v.camera for v in report.views} == {c.name for c in g.cameras}
    assert all(c.position_mm < 1 and c.rotation_deg < 0.1 and c.reference == "clip.yaml" for c in report.cameras)


@pytest.mark.slow
def test_a_grounding_without_one_of_the_objects_fails(example) -> None:
    g, clip, evidence = example
    for i, obj in enumerate(g.objects):
        fewer = g.model_copy(deep=True)
        del fewer.objects[i]
        report = check_grounding(fewer, clip, evidence)
        assert not report.passed, f"removing {obj.id} went unnoticed"
        assert "that G does not have" in report.reason


@pytest.mark.slow
def test_an_object_10_cm_from_where_it_is_fails(example) -> None:
    g, clip, evidence = example
    for i, obj in enumerate(g.objects):
        for dx, dy in ((0.1, 0.0), (0.0, -0.1)):
            report = check_grounding(moved(g, i, dx, dy), clip, evidence)
            assert not report.passed, f"{obj.id} moved by ({dx}, {dy}) went unnoticed"


@pytest.mark.slow
def test_a_camera_turned_away_from_its_calibration_fails(example) -> None:
    g, clip, evidence = example
    turned = g.model_copy(deep=True)
    cam = turned.cameras[0]
    m = pose_to_matrix(cam.world_from_camera)
    m[:3, :3] = rotation_z(math.radians(4.0)) @ m[:3, :3]
    cam.world_from_camera = matrix_to_pose(m)
    report = check_grounding(turned, clip, evidence)
    assert not report.passed
    assert f"camera {cam.name} is" in report.reason and "calibration" in report.reason


@pytest.mark.slow
def test_a_wrong_metric_scale_fails(example) -> None:
    g, clip, evidence = example
    data = g.model_dump(mode="json")
    data["scale_checks"] = [{"reference": "ChArUco square", "expected": 0.06, "estimated": 0.075}]
    for obj in data["objects"]:  # an object twice its size is no tabletop object here either
        obj["pose"]["position"][2] = 0.1
    report = check_grounding(Grounding.model_validate(data), clip, evidence)
    assert not report.passed
    assert "ratio 1.250" in report.reason and "off the table plane" in report.reason
    assert report.scale


@pytest.mark.slow
def test_cameras_fitted_from_the_board_are_checked_against_it() -> None:
    """weigh_apple's clip.yaml gives no extrinsics: the check fits them from the board itself."""
    g, clip = _example("weigh_apple")
    evidence = clip_evidence(g, clip)
    report = check_grounding(g, clip, evidence)
    assert report.passed, report.reason
    assert report.cameras and all(c.reference == "board" and c.position_mm < 20 and c.rotation_deg < 2
                                  for c in report.cameras)
    report = check_grounding(moved(g, [o.id for o in g.objects].index("apple"), dy=0.1), clip, evidence)
    assert not report.passed and "apple" in report.reason
