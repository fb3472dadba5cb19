"""Rendering studio clips (needs a Vulkan device; lavapipe on the CPU is enough): the clip passes
intake, the truth matches the scene and the pixels (objects where the truth projects them, the board
gives back the camera poses), a seed reproduces the bytes, and the noise really changes the frames.

Each render costs a few seconds (SAPIEN compiles pipelines per scene), so the module renders three
clips and shares them."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from datafarm.artifacts.clip import ClipSpec
from datafarm.errors import InputError
from datafarm.hashing import sha256_file
from datafarm.intake import validate_clip
from datafarm.sim.sapien_scene import has_render_device
from datafarm.sim.world.frames import pose_to_matrix
from datafarm.studio.board import opencv_board
from datafarm.studio.commands import app
from datafarm.studio.render import BOARD_FILE, render_clip
from datafarm.studio.scene import SceneSpec
from datafarm.studio.truth import load_truth, scene_truth
from datafarm.studio.video import read_frames
from tests.studio.scenes import same, small_scene

BOARD = [] if "board" in ClipSpec.model_fields else [BOARD_FILE]
"""board.yaml sits in the clip folder until clip.yaml can hold the board itself."""
NO_DEVICE = "no Vulkan render device (install Mesa >= 25 lavapipe: sudo bash scripts/setup-system.sh)"


@pytest.fixture(scope="module")
def device():
    if not has_render_device():
        pytest.skip(NO_DEVICE)


@pytest.fixture(scope="module")
def rendered(device, tmp_path_factory):
    """The small scene rendered through `datafarm studio render` (clip folder, truth path, CLI output)."""
    root = tmp_path_factory.mktemp("studio")
    scene_file = root / "scene.yaml"
    scene_file.write_text(small_scene().model_dump_json())  # JSON is YAML
    result = CliRunner().invoke(app, ["render", str(scene_file), "--out", str(root / "clip")])
    assert result.exit_code == 0, result.output
    return root / "clip", root / "truth.json", result.output


@pytest.fixture(scope="module")
def again(device, tmp_path_factory):
    """The same scene and seed rendered a second time, through the Python function."""
    return render_clip(small_scene(), tmp_path_factory.mktemp("again") / "clip")


@pytest.fixture(scope="module")
def clean(device, tmp_path_factory):
    """The same scene and seed without sensor noise."""
    return render_clip(small_scene(noise=0.0), tmp_path_factory.mktemp("clean") / "clip")


@pytest.mark.render
def test_the_clip_passes_intake_and_keeps_the_truth_outside(rendered):
    clip, truth_path, output = rendered
    report = validate_clip(clip)
    assert [c.name for c in report.cameras] == ["front", "left", "right"]
    assert [(c.width, c.height, c.codec, c.frames) for c in report.cameras] == [
        (640, 480, "h264", 4), (320, 240, "h264", 4), (320, 240, "h264", 4)]
    assert report.spec.fps == 10 and all(c.intrinsics and c.extrinsics is None for c in report.spec.cameras)
    assert sorted(p.name for p in clip.iterdir()) == sorted(["clip.yaml", "front.mp4", "left.mp4", "right.mp4", *BOARD])
    assert truth_path.is_file() and str(truth_path) in output.replace("\n", "")


@pytest.mark.render
def test_truth_json_is_the_scene_truth(rendered):
    assert same(load_truth(rendered[1]), scene_truth(small_scene()))


@pytest.mark.render
def test_a_seed_reproduces_the_clip_byte_for_byte(rendered, again):
    clip = rendered[0]
    for name in ("clip.yaml", "front.mp4", "left.mp4", "right.mp4", *BOARD):
        assert sha256_file(clip / name) == sha256_file(again.clip_dir / name), name
    assert same(again.truth, load_truth(rendered[1]))


@pytest.mark.render
def test_noise_changes_the_pixels_and_the_light_drifts(rendered, clean):
    for cam in ("front", "left"):
        noisy = np.stack(read_frames(rendered[0] / f"{cam}.mp4")).astype(np.float32)
        plain = np.stack(read_frames(clean.clip_dir / f"{cam}.mp4")).astype(np.float32)
        difference = np.abs(noisy - plain)
        assert difference.mean() > 1.5 and np.percentile(difference, 99) > 8, cam
        # the noise is fresh in every frame: consecutive noisy frames differ more than clean ones
        assert np.abs(np.diff(noisy, axis=0)).mean() > 1.5 * np.abs(np.diff(plain, axis=0)).mean(), cam
    brightness = [frame.mean() for frame in read_frames(clean.clip_dir / "front.mp4")]
    assert max(brightness) - min(brightness) > 0.2  # the lights drift even without sensor noise


def _project(camera, point: np.ndarray) -> tuple[int, int]:
    world_from_camera = pose_to_matrix(camera.world_from_camera)
    p = np.linalg.inv(world_from_camera) @ np.append(point, 1.0)
    k = camera.intrinsics
    return round(k.fx * p[0] / p[2] + k.cx), round(k.fy * p[1] / p[2] + k.cy)


@pytest.mark.render
def test_objects_appear_where_the_truth_puts_them(clean):
    truth = clean.truth.grounding
    for camera in truth.cameras:
        frame = read_frames(clean.clip_dir / camera.video)[0].astype(int)
        for object_id, height in (("red_cup", 0.035), ("blue_box", 0.02), ("scale", 0.015)):
            centre = np.array(truth.object(object_id).pose.position) + (0.0, 0.0, height)
            u, v = _project(camera, centre)
            r, g, b = frame[v - 1:v + 2, u - 1:u + 2].reshape(-1, 3).mean(axis=0)
            if object_id == "red_cup":
                assert r > g + 40 and r > b + 40, (camera.name, object_id, (r, g, b))
            elif object_id == "blue_box":
                assert b > r + 25, (camera.name, object_id, (r, g, b))
            else:
                assert max(r, g, b) < 110, (camera.name, object_id, (r, g, b))


@pytest.mark.render
def test_the_board_gives_back_the_front_camera_pose(rendered):
    import cv2

    clip, truth_path, _ = rendered
    truth = load_truth(truth_path)
    board = opencv_board(truth.board)
    camera = truth.grounding.cameras[0]
    frame = read_frames(clip / camera.video)[0]
    corners, ids, _, _ = cv2.aruco.CharucoDetector(board).detectBoard(cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY))
    assert ids is not None and len(ids) >= 8
    object_points, image_points = board.matchImagePoints(corners, ids)
    k = camera.intrinsics
    matrix = np.array([[k.fx, 0, k.cx], [0, k.fy, k.cy], [0, 0, 1]])
    ok, rvec, tvec = cv2.solvePnP(object_points, image_points, matrix, None)
    assert ok
    camera_from_board = np.eye(4)
    camera_from_board[:3, :3] = cv2.Rodrigues(rvec)[0]
    camera_from_board[:3, 3] = tvec.ravel()
    fitted = pose_to_matrix(truth.board.world_from_board) @ np.linalg.inv(camera_from_board)
    real = pose_to_matrix(camera.world_from_camera)
    assert np.linalg.norm(fitted[:3, 3] - real[:3, 3]) < 0.01
    angle = np.degrees(np.arccos(np.clip((np.trace(fitted[:3, :3].T @ real[:3, :3]) - 1) / 2, -1, 1)))
    assert angle < 1.0


def test_the_truth_may_not_land_in_the_clip_folder(tmp_path):
    with pytest.raises(InputError, match="inside the clip folder"):
        render_clip(small_scene(), tmp_path / "clip", tmp_path / "clip" / "truth.json")
    assert not (tmp_path / "clip").exists()


def test_scene_spec_round_trips_through_json():
    spec = small_scene()
    assert SceneSpec.model_validate_json(spec.model_dump_json()) == spec
