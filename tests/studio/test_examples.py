"""The shipped examples: each is a request with a studio clip (three cameras, a few seconds) and its
scene; the committed clip.yaml and truth.json are what their scene renders to; the scenes are
physically sensible for the PiPER; the clips are small."""

from __future__ import annotations

import math

import numpy as np
import pytest

from datafarm.intake import check_request, load_request
from datafarm.studio.board import board_footprint
from datafarm.studio.examples import EXAMPLES_DIR, example_names, regenerate
from datafarm.studio.render import clip_files
from datafarm.studio.scene import load_scene
from datafarm.studio.score import extents
from datafarm.studio.truth import load_truth, scene_truth
from tests.studio.scenes import same

EXAMPLES = ["beat_drum", "nest_cups", "use_drawer", "weigh_apple"]
GRIPPER_OPENING = 0.07
"""Widest object the PiPER can grasp across (it opens to 76 mm), metres."""


def test_the_four_examples_are_there():
    assert example_names() == EXAMPLES
    robots = [load_request(EXAMPLES_DIR / name / "request.yaml").robot for name in EXAMPLES]
    assert robots.count("piper-dual") >= 2


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_request_and_clip_pass_intake(name):
    request, report = check_request(EXAMPLES_DIR / name / "request.yaml")
    scene = load_scene(EXAMPLES_DIR / name / "scene.yaml")
    assert request.robot == scene.robot.kind and request.clip == EXAMPLES_DIR / name / "clip"
    assert "Success:" in request.task
    assert [c.name for c in report.cameras] == ["front", "left", "right"]
    assert all(c.codec == "h264" and c.frames == scene.frames for c in report.cameras)
    assert 1.0 <= report.frames / report.spec.fps <= 5.0  # a few seconds


@pytest.mark.parametrize("name", EXAMPLES)
def test_committed_clip_yaml_and_truth_are_what_the_scene_renders(name):
    folder = EXAMPLES_DIR / name
    scene = load_scene(folder / "scene.yaml")
    truth = scene_truth(scene)
    assert same(load_truth(folder / "truth.json"), truth), "truth.json is stale: run `make examples`"
    clip_text, board_text = clip_files(truth, scene.notes)
    assert (folder / "clip" / "clip.yaml").read_text() == clip_text, "clip.yaml is stale: run `make examples`"
    assert ((folder / "clip" / "board.yaml").read_text() if board_text else None) == board_text


def test_the_clips_are_small():
    total = sum(p.stat().st_size for name in EXAMPLES for p in (EXAMPLES_DIR / name / "clip").iterdir())
    assert total < 10_000_000


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_scenes_fit_the_piper(name):
    scene = load_scene(EXAMPLES_DIR / name / "scene.yaml")
    g = scene_truth(scene).grounding
    bases = [np.array(a.base.position[:2]) for a in g.robot.arms]
    table = scene.table
    spots = []  # (centre xy, footprint radius)
    for obj in g.objects:
        xy = np.array(obj.pose.position[:2])
        long, short, _ = extents(obj)
        radius = 0.5 * math.hypot(long, short)
        spots.append((obj.id, xy, radius))
        assert abs(xy[0] - table.center[0]) + radius <= table.size_x / 2 and \
            abs(xy[1] - table.center[1]) + radius <= table.size_y / 2, f"{obj.id} is not on the table"
        reach = min(np.linalg.norm(xy - b) for b in bases)
        if obj.kind in ("box", "cylinder", "sphere", "cup"):
            assert 0.25 <= reach <= 0.5, f"{obj.id} is {reach:.2f} m from the nearest arm base"
        else:  # big fixtures: their near side within reach
            assert reach - radius <= 0.45, f"{obj.id}'s near side is {reach - radius:.2f} m from the nearest arm base"
    graspable = [o.id for o in g.objects if o.kind in ("box", "cylinder", "sphere", "cup") and extents(o)[1] <= GRIPPER_OPENING]
    assert graspable or name == "beat_drum", "nothing the gripper can hold"
    if scene.board is not None:
        spots.append(("board", np.array(scene.board.center), board_footprint(scene.board)))
    for i, (a, pa, ra) in enumerate(spots):
        for b, pb, rb in spots[i + 1:]:
            assert np.linalg.norm(pa - pb) > ra + rb, f"{a} overlaps {b}"


def test_regenerate_refuses_unknown_examples():
    with pytest.raises(SystemExit, match="no example scene for towel"):
        regenerate(["towel"])
