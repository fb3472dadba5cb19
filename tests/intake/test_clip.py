"""Validating a calibration clip folder: clip.yaml plus one decodable, consistent video per camera."""

from __future__ import annotations

from pathlib import Path

import pytest

from datafarm.errors import InputError, Problem
from datafarm.hashing import sha256_file, sha256_tree
from datafarm.intake import validate_clip
from tests.intake.clips import CLIP_YAML, write_video


def problems_of(folder: Path) -> list[Problem]:
    """The problems validate_clip reports for `folder`; fails the test if the clip passes."""
    with pytest.raises(InputError) as caught:
        validate_clip(folder)
    assert caught.value.exit_code == 2
    return caught.value.problems


def test_good_clip_reports_what_it_measured(make_clip):
    folder = make_clip()
    report = validate_clip(folder)
    assert [c.name for c in report.cameras] == ["front", "left", "right"]
    for cam in report.cameras:
        assert (cam.frames, cam.fps, cam.width, cam.height, cam.codec) == (10, 15.0, 32, 24, "h264")
        assert cam.sha256 == sha256_file(folder / cam.video)
    assert report.frames == 10
    assert report.sha256 == sha256_tree(folder)
    assert report.spec.camera("front").intrinsics.fx == 30
    assert report.spec.camera("right").video == "right.mp4", "video defaults to <name>.mp4"


def test_clip_hash_changes_when_a_video_changes(make_clip):
    folder = make_clip()
    before = validate_clip(folder).sha256
    write_video(folder / "left.mp4", frames=11)
    assert validate_clip(folder).sha256 != before


def test_missing_clip_folder(tmp_path):
    problems = problems_of(tmp_path / "nowhere")
    assert problems[0].file == tmp_path / "nowhere" and "does not exist" in problems[0].message


def test_missing_clip_yaml(make_clip):
    folder = make_clip()
    (folder / "clip.yaml").unlink()
    problems = problems_of(folder)
    assert problems[0].file == folder / "clip.yaml"
    assert "clip.yaml is missing" in problems[0].message
    assert "examples/nest_cups/clip/clip.yaml" in (problems[0].hint or "")


def test_missing_video(make_clip):
    folder = make_clip(videos={"front.mp4": {}, "right.mp4": {}})
    problems = problems_of(folder)
    assert len(problems) == 1
    problem = problems[0]
    assert problem.file == folder / "clip.yaml"
    assert problem.line == 7 and problem.field == "cameras[1].video"
    assert "camera 'left'" in problem.message and str(folder / "left.mp4") in problem.message
    assert "does not exist" in problem.message


def test_extra_video_not_named_in_clip_yaml(make_clip):
    folder = make_clip(videos={"front.mp4": {}, "left.mp4": {}, "right.mp4": {}, "top.MKV": {}})
    (folder / "README.txt").write_text("not a video, so allowed")
    problems = problems_of(folder)
    assert len(problems) == 1
    assert problems[0].file == folder / "top.MKV"
    assert "not named by any camera" in problems[0].message
    assert "front.mp4, left.mp4, right.mp4" in (problems[0].expected or "")


def test_undecodable_video(make_clip):
    folder = make_clip(videos={"front.mp4": {}, "left.mp4": b"\x00garbage" * 100, "right.mp4": {}})
    problems = problems_of(folder)
    assert len(problems) == 1
    assert problems[0].file == folder / "left.mp4"
    assert "camera 'left': cannot read the video" in problems[0].message
    assert "ffmpeg" in (problems[0].hint or "")


def test_file_without_a_video_stream(make_clip):
    import av
    import numpy as np

    folder = make_clip()
    with av.open(str(folder / "left.mp4"), "w") as container:  # audio only
        stream = container.add_stream("aac", rate=8000)
        frame = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
        frame.sample_rate = 8000
        for packet in [*stream.encode(frame), *stream.encode()]:
            container.mux(packet)
    problems = problems_of(folder)
    assert "no video stream" in problems[0].message and "audio" in problems[0].message


def test_frame_counts_differing_by_two_are_rejected(make_clip):
    folder = make_clip(videos={"front.mp4": {}, "left.mp4": {"frames": 12}, "right.mp4": {}})
    problems = problems_of(folder)
    assert len(problems) == 1
    problem = problems[0]
    assert problem.file == folder / "clip.yaml" and problem.line == 2 and problem.field == "cameras"
    assert "differ by 2" in problem.message and "front 10, left 12, right 10" in problem.message


def test_frame_counts_differing_by_one_are_accepted(make_clip):
    folder = make_clip(videos={"front.mp4": {}, "left.mp4": {"frames": 11}, "right.mp4": {}})
    report = validate_clip(folder)
    assert report.camera("left").frames == 11
    assert report.frames == 10


def test_video_fps_differing_from_clip_yaml(make_clip):
    folder = make_clip(videos={"front.mp4": {}, "left.mp4": {"fps": 12}, "right.mp4": {}})
    problems = problems_of(folder)
    assert len(problems) == 1
    problem = problems[0]
    assert problem.file == folder / "left.mp4"
    assert "runs at 12 fps" in problem.message and "line 1" in problem.message and "fps: 15" in problem.message


def test_all_views_agree_but_not_with_clip_yaml(make_clip):
    folder = make_clip(yaml_text=CLIP_YAML.replace("fps: 15", "fps: 30"))
    problems = problems_of(folder)
    assert sorted(p.file.name for p in problems) == ["front.mp4", "left.mp4", "right.mp4"]


def test_zero_cameras(make_clip):
    folder = make_clip(yaml_text="fps: 15\ncameras: []\n", videos={})
    problems = problems_of(folder)
    assert len(problems) == 1
    problem = problems[0]
    assert problem.file == folder / "clip.yaml" and problem.line == 2 and problem.field == "cameras"
    assert "empty list" in problem.message and "non-empty list" in (problem.expected or "")


def test_bad_clip_yaml_fields_are_located(make_clip):
    text = "fps: 0\ncameras:\n  - name: Front Cam\n  - name: left\n    intrinsic: {}\n"
    folder = make_clip(yaml_text=text, videos={})
    problems = {p.field: p for p in problems_of(folder)}
    assert problems["fps"].line == 1 and problems["fps"].expected == "a number > 0"
    assert problems["cameras[0].name"].line == 3 and "[a-z0-9_]+" in (problems["cameras[0].name"].expected or "")
    assert problems["cameras[1].intrinsic"].line == 5
    assert problems["cameras[1].intrinsic"].hint == "did you mean 'intrinsics'?"


def test_duplicate_camera_names(make_clip):
    folder = make_clip(yaml_text="fps: 15\ncameras:\n  - name: front\n  - name: front\n    video: other.mp4\n", videos={})
    problems = problems_of(folder)
    assert problems[0].field == "cameras" and "front" in problems[0].message and "more than once" in problems[0].message


def test_odd_frame_size(make_clip):
    text = CLIP_YAML.replace("    video: left.mp4", "    video: left.mkv")
    odd = {"width": 33, "height": 25, "codec": "ffv1"}
    folder = make_clip(yaml_text=text, videos={"front.mp4": {}, "left.mkv": odd, "right.mp4": {}})
    problems = problems_of(folder)
    assert len(problems) == 1
    assert problems[0].file == folder / "left.mkv"
    assert "33x25" in problems[0].message and "odd width and height" in problems[0].message
    assert "even width and height" in (problems[0].expected or "")


def test_intrinsics_size_must_match_the_video(make_clip):
    folder = make_clip(videos={"front.mp4": {"width": 64, "height": 48}, "left.mp4": {}, "right.mp4": {}})
    problems = problems_of(folder)
    assert len(problems) == 1
    problem = problems[0]
    assert problem.file == folder / "clip.yaml" and problem.line == 4 and problem.field == "cameras[0].intrinsics"
    assert "32x24" in problem.message and "64x48" in problem.message


def test_every_problem_is_reported_at_once(make_clip):
    folder = make_clip(
        videos={"front.mp4": {"width": 34, "height": 26}, "right.mp4": b"junk", "side.webm": {"codec": "libvpx-vp9"}}
    )
    problems = problems_of(folder)
    text = "\n".join(p.render() for p in problems)
    assert "camera 'front': intrinsics are for 32x24" in text
    assert "camera 'left': video file" in text
    assert "camera 'right': cannot read" in text
    assert "side.webm" in text
    assert len(problems) == 4
