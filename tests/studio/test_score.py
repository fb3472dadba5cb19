"""Scoring a grounding against a studio truth: a perfect G scores zero, each kind of mistake shows up
as the error it is, and the `datafarm studio score` command prints and exits accordingly."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.io import save_artifact
from datafarm.sim.world.frames import matrix_to_quat, pose_to_matrix, rotation_x
from datafarm.studio.commands import app
from datafarm.studio.score import score_files, score_grounding
from datafarm.studio.truth import save_truth, scene_truth
from tests.studio.scenes import small_scene

TRUTH = scene_truth(small_scene())


def edited(change) -> Grounding:
    """The truth's exact grounding, edited as a plain dict by `change`."""
    data = TRUTH.grounding.model_dump(mode="json")
    change(data)
    return Grounding.model_validate(data)


def test_a_perfect_grounding_scores_zero():
    report = score_grounding(TRUTH.grounding, TRUTH)
    assert report.passed and report.identities_ok and not report.extra_objects
    assert report.max_position_error_mm == 0 and report.max_size_error_pct == 0
    assert report.max_camera_position_error_mm == 0 and report.max_camera_rotation_error_deg < 1e-4
    assert all(a.position_error_mm == 0 for a in report.arms)


def test_a_shifted_object_scores_its_shift_in_mm():
    def shift(g):
        g["objects"][0]["pose"]["position"][0] += 0.015
        g["objects"][0]["pose"]["position"][1] -= 0.008

    report = score_grounding(edited(shift), TRUTH)
    cup = report.objects[0]
    assert cup.matched_id == "red_cup" and cup.identity_ok
    assert math.isclose(cup.position_error_mm, 17.0, abs_tol=1e-6)
    assert report.passed  # under 20 mm


def test_sizes_are_compared_as_extents_in_percent():
    def grow(g):
        g["objects"][0]["outer_radius"]["value"] = 0.033  # 10 % wider
        g["objects"][1]["size"]["x"]["value"], g["objects"][1]["size"]["y"]["value"] = 0.05, 0.04  # turned, same box

    report = score_grounding(edited(grow), TRUTH)
    cup, box = report.objects[0], report.objects[1]
    assert math.isclose(cup.size_errors_pct["long"], 10.0, abs_tol=1e-6) and cup.size_errors_pct["height"] == 0
    assert box.size_error_pct == 0


def test_wrong_kind_and_swapped_colours_fail_identity():
    def confuse(g):
        cup = g["objects"][0]
        radius, height = cup.pop("outer_radius"), cup["height"]
        cup.pop("wall_thickness")
        cup.update(kind="cylinder", radius=radius, height=height)
        g["objects"][1]["colour"] = g["objects"][0]["colour"]

    report = score_grounding(edited(confuse), TRUTH)
    cup, box = report.objects[0], report.objects[1]
    assert not cup.kind_ok and cup.size_error_pct == 0 and not cup.identity_ok
    assert box.kind_ok and not box.colour_ok and not box.identity_ok
    assert not report.passed


def test_missing_and_extra_objects_are_reported():
    def move_away(g):
        g["objects"][2]["pose"]["position"][0] += 0.3

    report = score_grounding(edited(move_away), TRUTH)
    assert report.objects[2].matched_id is None and report.extra_objects == ["scale"] and not report.passed


def test_camera_pose_errors_in_mm_and_degrees():
    def nudge(g):
        cam = g["cameras"][1]["world_from_camera"]
        m = pose_to_matrix(TRUTH.grounding.cameras[1].world_from_camera)
        m[:3, :3] = m[:3, :3] @ rotation_x(math.radians(3.0))
        cam["quaternion"] = matrix_to_quat(m[:3, :3]).tolist()
        cam["position"][2] += 0.03
        g["cameras"][1]["extrinsics_tag"] = "fitted"

    report = score_grounding(edited(nudge), TRUTH)
    left = report.cameras[1]
    assert math.isclose(left.position_error_mm, 30.0, abs_tol=1e-6)
    assert math.isclose(left.rotation_error_deg, 3.0, abs_tol=1e-4) and left.extrinsics_tag == "fitted"
    assert not report.passed and report.objects[0].identity_ok


@pytest.fixture
def task(tmp_path):
    def shift(g):
        g["objects"][0]["pose"]["position"][0] += 0.012

    save_artifact(edited(shift), tmp_path / "task" / "grounding.json")
    save_truth(TRUTH, tmp_path / "truth.json")
    return tmp_path / "task", tmp_path / "truth.json"


def test_score_reads_a_task_folder(task):
    report = score_files(*task)
    assert math.isclose(report.objects[0].position_error_mm, 12.0, abs_tol=1e-6)


def test_score_command_prints_a_table_and_json(task):
    runner = CliRunner()
    result = runner.invoke(app, ["score", str(task[0]), str(task[1])])
    assert result.exit_code == 0, result.output
    assert "red_cup" in result.output and "12.0" in result.output and "PASS" in result.output
    result = runner.invoke(app, ["score", str(task[0] / "grounding.json"), str(task[1]), "--json"])
    data = json.loads(result.output)
    assert data["passed"] and np.isclose(data["objects"][0]["position_error_mm"], 12.0)


def test_strict_score_exits_1_on_failure_and_2_without_a_grounding(task, tmp_path):
    runner = CliRunner()
    bad = edited(lambda g: g["objects"][0]["pose"]["position"].__setitem__(0, 0.05))
    save_artifact(bad, tmp_path / "bad" / "grounding.json")
    assert runner.invoke(app, ["score", str(tmp_path / "bad"), str(task[1]), "--strict"]).exit_code == 1
    missing = runner.invoke(app, ["score", str(tmp_path / "nothing"), str(task[1])])
    assert missing.exit_code == 2 and "grounding.json" in missing.output
