"""SCENE.yaml: what a user may write and what is refused, and the truth it implies (no rendering)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import BaseModel, ValidationError

from datafarm.errors import InputError
from datafarm.sim.world.frames import look_at, pose_to_matrix, quat_to_matrix
from datafarm.studio import board, render, scene, score, truth
from datafarm.studio.board import world_from_board
from datafarm.studio.render import clip_document
from datafarm.studio.scene import SceneSpec, load_scene
from datafarm.studio.truth import scene_truth
from tests.studio.scenes import small_scene


def test_a_scene_file_loads_with_colour_names_and_defaults(tmp_path):
    path = tmp_path / "scene.yaml"
    path.write_text(
        "cameras:\n  - {name: front, position: [0.8, 0.0, 0.5]}\n"
        "objects:\n  - {id: red_cup, kind: cup, colour: red, position: [0.0, 0.1], outer_radius: 0.03, height: 0.07}\n"
    )
    spec = load_scene(path)
    cup = spec.objects[0]
    assert cup.colour == scene.COLOURS["red"] and cup.dimensions["wall_thickness"] == 0.003
    assert spec.robot.kind == "piper-dual" and spec.frames == 30 and spec.known.extrinsics


def test_dimensions_that_do_not_fit_the_kind_are_refused_with_the_line(tmp_path):
    path = tmp_path / "scene.yaml"
    path.write_text(
        "cameras:\n  - {name: front, position: [0.8, 0.0, 0.5]}\n"
        "objects:\n  - {id: cup, kind: cup, colour: red, position: [0, 0], radius: 0.03}\n"
    )
    with pytest.raises(InputError) as caught:
        load_scene(path)
    (problem,) = caught.value.problems
    assert problem.line == 4 and "outer_radius" in problem.message and "radius" in problem.message


@pytest.mark.parametrize("change, words", [
    ({"cameras": [{"name": "front", "width": 321, "position": [0.8, 0, 0.5]}]}, "odd"),
    ({"known": {"extrinsics": False}}, "board"),
    ({"objects": [{"id": "a", "kind": "box", "colour": "mauve", "position": [0, 0], "size": {"x": 1, "y": 1, "z": 1}}]},
     "unknown colour"),
    ({"board": {"marker_length": 0.07}}, "smaller than square_length"),
    ({"seconds": 0.05}, "at least 2"),
])
def test_impossible_scenes_are_refused(change, words):
    data = {"cameras": [{"name": "front", "position": [0.8, 0.0, 0.5]}], **change}
    with pytest.raises(ValidationError) as caught:
        SceneSpec.model_validate(data)
    assert words in str(caught.value)


def test_truth_holds_the_scene_exactly():
    spec = small_scene()
    t = scene_truth(spec)
    g = t.grounding
    assert [o.id for o in g.objects] == ["red_cup", "blue_box", "scale"]
    cup = g.object("red_cup")
    assert (cup.outer_radius.value, cup.height.value, cup.pose.position) == (0.03, 0.07, (0.0, 0.15, 0.0))
    assert cup.colour == scene.COLOURS["red"] and cup.mass.tag.value == "measured"
    box = g.object("blue_box")
    assert math.isclose(math.atan2(*quat_to_matrix(box.pose.quaternion)[[1, 0], 0]), 0.4, abs_tol=1e-9)
    assert g.robot.arms[0].base.position == (-0.38, 0.0, 0.0)
    # the camera looks at its target (the origin), upright, with the default principal point
    front = g.cameras[0]
    m = pose_to_matrix(front.world_from_camera)
    axis = m[:3, 2]
    assert np.allclose(axis, -np.array([0.9, 0.0, 0.62]) / np.linalg.norm([0.9, 0.0, 0.62]))
    assert abs(m[2, 0]) < 1e-9 and m[2, 1] < 0  # x level, y (image down) pointing down
    assert (front.intrinsics.cx, front.intrinsics.cy, front.intrinsics.fy) == (320, 240, 540)
    # the rolled camera is turned about its optical axis by its roll
    rolled = pose_to_matrix(g.cameras[2].world_from_camera)[:3, :3]
    turn = look_at((0.35, -0.8, 0.65), (0.0, 0.0, 0.0)).T @ rolled
    assert np.allclose(turn, [[math.cos(0.05), -math.sin(0.05), 0], [math.sin(0.05), math.cos(0.05), 0], [0, 0, 1]])
    assert t.board is not None and t.board.squares_x == 5 and t.known.extrinsics is False


def test_dual_arm_bases_sit_spacing_apart_like_the_sim_places_them():
    spec = small_scene(robot={"kind": "piper-dual", "base": [-0.4, 0.05], "spacing": 0.56, "yaw": 0.1})
    left, right = scene_truth(spec).grounding.robot.arms
    assert math.isclose(math.dist(left.base.position, right.base.position), 0.56, abs_tol=1e-9)
    assert np.allclose(np.add(left.base.position, right.base.position) / 2, (-0.4, 0.05, 0.0))
    from datafarm.sim.world import robot_spec

    placed = robot_spec(scene_truth(spec).grounding)  # raises if the sim could not mount them there
    assert math.isclose(placed.spacing, 0.56, abs_tol=1e-6) and math.isclose(placed.base_yaw, 0.1, abs_tol=1e-6)


def test_board_frame_puts_its_squares_where_the_scene_says():
    setup = small_scene().board
    m = world_from_board(setup)
    nx, ny = setup.squares
    centre = m @ np.array([nx * setup.square_length / 2, ny * setup.square_length / 2, 0.0, 1.0])
    assert np.allclose(centre[:2], setup.center) and math.isclose(centre[2], board.BOARD_LIFT)
    assert np.allclose(m[:3, 2], (0, 0, -1))  # OpenCV board z points into the board: down
    image = board.board_image(setup)
    margin = board.margin_pixels(setup)
    assert image.shape == (ny * board.PIXELS_PER_SQUARE + 2 * margin, nx * board.PIXELS_PER_SQUARE + 2 * margin)


def test_clip_yaml_reveals_only_what_the_lab_knows():
    hidden, _ = clip_document(scene_truth(small_scene()))
    assert all("extrinsics" not in c and "intrinsics" in c for c in hidden["cameras"])
    assert hidden["robot_base"] == [{"position": [-0.38, 0.0, 0.0], "quaternion": [1.0, 0.0, 0.0, 0.0]}]
    known, _ = clip_document(scene_truth(small_scene(known={"extrinsics": True, "intrinsics": False, "robot_base": False})))
    assert all("extrinsics" in c and "intrinsics" not in c for c in known["cameras"]) and "robot_base" not in known


def _models() -> list[type[BaseModel]]:
    found = []
    for module in (scene, board, truth, score, render):
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == module.__name__:
                found.append(value)
    return found


@pytest.mark.parametrize("model", _models(), ids=lambda m: m.__name__)
def test_every_field_is_documented(model):
    undocumented = [name for name, field in model.model_fields.items() if not field.description]
    assert not undocumented, f"{model.__name__}: {undocumented}"
