"""The builtin grounding on fresh studio scenes that are not examples: other colours, sizes, positions,
table cloths, robots and camera poses, one with its camera poses left out of clip.yaml so they must
be fitted from a ChArUco board. Each clip is rendered here, grounded through the role loop, scored
against its truth.json (position <= 2 cm, size <= 20 %, fitted camera pose <= 2 cm and 2 degrees,
identities) and checked by stage 1's checker."""

from __future__ import annotations

from pathlib import Path

import pytest

from datafarm.agents.builtin import read_task
from datafarm.grounding_check import check_grounding
from datafarm.sim.sapien_scene import has_render_device
from datafarm.studio.scene import SceneSpec
from datafarm.studio.score import score_grounding
from tests.agents.builtin.test_grounding import assert_within_targets
from tests.agents.builtin.test_grounding_support import ground_clip, with_clip_info  # noqa: F401

device = pytest.mark.skipif(not has_render_device(), reason="studio rendering needs a Vulkan render device "
                            "(lavapipe from Mesa >= 25 on the CPU); none was found")

CHECKED_CLOTH = {
    "name": "fresh_dual", "seed": 11, "seconds": 0.4, "fps": 10, "noise": 1.0,
    "robot": {"kind": "piper-dual", "base": [-0.40, 0.02], "spacing": 0.56},
    "table": {"size_x": 1.0, "size_y": 1.3, "height": 0.72, "colour": [0.30, 0.45, 0.62], "texture": "check"},
    "objects": [
        {"id": "a", "kind": "box", "colour": "orange", "position": [0.10, -0.17], "yaw": 0.5,
         "size": {"x": 0.045, "y": 0.06, "z": 0.04}, "mass": 0.08, "nouns": ["orange cube", "cube"]},
        {"id": "b", "kind": "cup", "colour": "purple", "position": [-0.06, 0.12], "outer_radius": 0.055,
         "height": 0.06, "mass": 0.1, "nouns": ["purple bowl", "bowl"]},
        {"id": "c", "kind": "cylinder", "colour": "yellow", "position": [0.18, 0.25], "radius": 0.025, "height": 0.14},
    ],
    "cameras": [
        {"name": "cam_a", "width": 400, "height": 300, "fx": 330, "position": [0.75, -0.25, 0.70], "look_at": [0.0, 0.0, 0.0]},
        {"name": "cam_b", "width": 400, "height": 300, "fx": 330, "position": [0.05, 0.85, 0.60], "look_at": [0.0, -0.05, 0.0]},
        {"name": "cam_c", "width": 400, "height": 300, "fx": 330, "position": [0.45, -0.75, 0.50], "look_at": [-0.05, 0.05, 0.0]},
    ],
    "known": {"intrinsics": True, "extrinsics": True, "robot_base": True},
}
"""Two arms, a blue checked cloth, three objects, cameras the lab calibrated."""

BOARD_FITTED = {
    "name": "fresh_board", "seed": 5, "seconds": 0.4, "fps": 10, "noise": 1.0,
    "robot": {"kind": "piper", "base": [-0.36, 0.05], "yaw": 0.1},
    "table": {"size_x": 0.85, "size_y": 1.1, "height": 0.78, "colour": "wood", "texture": "wood"},
    "objects": [
        {"id": "p", "kind": "sphere", "colour": "pink", "position": [0.06, 0.2], "radius": 0.032, "mass": 0.12,
         "nouns": ["pink ball", "ball"]},
        {"id": "q", "kind": "scale", "colour": "black", "position": [0.02, -0.16], "yaw": 0.2,
         "plate": {"x": 0.18, "y": 0.14, "z": 0.008}, "body_height": 0.03, "mass": 0.7, "nouns": ["kitchen scale", "scale"]},
        {"id": "r", "kind": "box", "colour": "green", "position": [-0.15, 0.33], "size": {"x": 0.05, "y": 0.05, "z": 0.09}},
    ],
    "board": {"squares": [5, 4], "square_length": 0.06, "marker_length": 0.045, "dictionary": "DICT_4X4_50",
              "center": [0.25, 0.08], "yaw": 0.15},
    "cameras": [
        {"name": "north", "width": 640, "height": 480, "fx": 560, "position": [0.95, 0.15, 0.65], "look_at": [0.0, 0.0, 0.0]},
        {"name": "east", "width": 640, "height": 480, "fx": 560, "position": [0.30, -0.85, 0.70], "look_at": [0.02, 0.05, 0.0]},
        {"name": "west", "width": 640, "height": 480, "fx": 560, "position": [0.40, 0.80, 0.60], "look_at": [0.0, -0.02, 0.0]},
    ],
    "known": {"intrinsics": True, "extrinsics": False, "robot_base": True},
}
"""One arm yawed, a wood table, a flat black scale, a ball and a block; camera poses only from the board."""

SCENES = {"checked_cloth": (CHECKED_CLOTH, "Place the orange cube in the purple bowl."),
          "board_fitted": (BOARD_FITTED, "Weigh the pink ball on the kitchen scale.")}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict[str, tuple[Path, object]]:
    """Each scene rendered once: name -> (clip folder, truth)."""
    if not has_render_device():
        pytest.skip("studio rendering needs a Vulkan render device")
    from datafarm.studio.render import render_clip

    out = {}
    for name, (scene, _) in SCENES.items():
        folder = tmp_path_factory.mktemp(name)
        clip = render_clip(SceneSpec.model_validate(scene), folder / "clip", folder / "truth.json")
        out[name] = (clip.clip_dir, clip.truth)
    return out


@pytest.mark.render
@pytest.mark.slow
@device
@pytest.mark.parametrize("name", list(SCENES))
@pytest.mark.usefixtures("with_clip_info")
def test_the_builtin_grounds_a_fresh_studio_scene(tmp_path: Path, rendered, name: str) -> None:
    clip, truth = rendered[name]
    _, task = SCENES[name]
    g, tdir = ground_clip(tmp_path, clip, task, truth.grounding.robot.kind)
    assert_within_targets(g, truth)
    fitted = not truth.known.extrinsics
    assert all(c.extrinsics_tag.value == ("fitted" if fitted else "measured") for c in g.cameras)
    if fitted:
        report = score_grounding(g, truth)
        assert all(c.position_error_mm <= 20.0 and c.rotation_error_deg <= 2.0 for c in report.cameras), report.cameras
        assert g.scale_checks and abs(g.scale_checks[0].ratio - 1.0) < 0.02
    # the task's roles link to the objects the truth names that way
    reading = read_task(task, g)
    matched = {o.matched_id: o.truth_id for o in score_grounding(g, truth).objects}
    for role, object_id in reading.roles.items():
        real = truth.grounding.object(matched[object_id])
        assert real.nouns and real.nouns[0] in g.object(object_id).nouns, (role, real.id, g.object(object_id).nouns)
    report = check_grounding(tdir.grounding, clip)
    assert report.passed, report.reason
