"""The shipped example (examples/nest_cups) loads, its clip validates, and its generator is deterministic."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from datafarm.errors import InputError
from datafarm.hashing import sha256_tree
from datafarm.intake import check_request, load_request, validate_clip

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "nest_cups"


def test_example_request_loads_with_absolute_paths():
    request = load_request(EXAMPLE / "request.yaml")
    assert request.clip == EXAMPLE / "clip" and request.clip.is_absolute()
    assert request.output == EXAMPLE / "runs" and request.output.is_absolute()
    assert (request.robot, request.mode, request.episodes) == ("piper-dual", "sim2real", 4)
    assert request.sandbox == "bwrap"


def test_example_clip_validates():
    report = validate_clip(EXAMPLE / "clip")
    assert [c.name for c in report.cameras] == ["front", "left", "right"]
    for cam in report.cameras:
        assert (cam.width, cam.height, cam.fps, cam.codec) == (320, 240, 15.0, "h264")
        assert cam.frames == 30
    assert all(c.intrinsics and c.extrinsics for c in report.spec.cameras)
    assert len(report.spec.robot_base or []) == 2
    assert "studio" in report.spec.notes


def test_example_clip_is_small():
    total = sum(p.stat().st_size for p in (EXAMPLE / "clip").iterdir())
    assert total < 1_000_000


def _copy_example(tmp_path: Path, request_text: str) -> Path:
    shutil.copytree(EXAMPLE / "clip", tmp_path / "clip")
    path = tmp_path / "request.yaml"
    path.write_text(request_text)
    return path


def test_check_request_on_the_example():
    request, report = check_request(EXAMPLE / "request.yaml")
    assert request.clip == EXAMPLE / "clip"
    assert report.sha256 == sha256_tree(EXAMPLE / "clip")


def test_robot_base_count_must_fit_the_robot(tmp_path):
    text = (EXAMPLE / "request.yaml").read_text().replace("robot: piper-dual", "robot: piper")
    path = _copy_example(tmp_path, text)
    with pytest.raises(InputError) as caught:
        check_request(path)
    (problem,) = caught.value.problems
    assert problem.file == tmp_path / "clip" / "clip.yaml" and problem.field == "robot_base"
    assert problem.line is not None and "2 pose(s)" in problem.message and "1 arm(s)" in problem.message


def test_recorded_clip_hash_must_match(tmp_path):
    text = (EXAMPLE / "request.yaml").read_text()
    path = _copy_example(tmp_path, text + f"clip_sha256: {sha256_tree(EXAMPLE / 'clip')}\n")
    check_request(path)
    (tmp_path / "clip" / "clip.yaml").write_text((tmp_path / "clip" / "clip.yaml").read_text() + "# edited\n")
    with pytest.raises(InputError) as caught:
        check_request(path)
    assert caught.value.problems[0].field == "clip_sha256"
    assert "changed" in caught.value.problems[0].message
