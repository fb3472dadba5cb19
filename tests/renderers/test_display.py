"""The scale's display shows the sim's reading in every rendered frame: drawn seven-segment digits,
read back from the video through the display's own geometry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from datafarm.artifacts.clip import CameraSpec, ClipSpec
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.io import save_artifact
from datafarm.artifacts.judge import JudgeVerdict
from datafarm.artifacts.render_contract import RenderContract
from datafarm.renderers import render_episode
from datafarm.renderers.composite.display import (
    cells_for,
    decode_readout,
    reading_text,
    readout_texture,
    scale_displays,
    unwarp_readout,
)
from datafarm.renderers.composite.renderer import pose_to_matrix_array
from datafarm.renderers.demo import example_variation, look_at
from datafarm.renderers.scene import Projector
from datafarm.renderers.video import VideoWriter, read_video
from datafarm.sim.episode_io import make_record, write_episode
from datafarm.sim.recording import Recorder
from datafarm.sim.render_passes import RenderPasses
from datafarm.sim.world import build_world
from tests.artifacts.test_schemas import weigh_grounding
from tests.renderers.helpers import device

READINGS = [0.0, 3.2, 47.0, 152.4, 880.0, 1234.4, 2500.0, -5.0]
"""Grams the sim reports at each step (the last, a negative load, reads 0 like a tared scale)."""


@pytest.mark.parametrize("grams", [0, 7, 42, 150.4, 999, 1234, 2007.6])
def test_the_readout_texture_reads_back_as_the_reading(grams: float) -> None:
    text = reading_text(grams, "g", 0)
    texture = readout_texture(text, "g", 2.5)
    assert decode_readout(texture, len(text), cells_for(text)) == text
    assert reading_text(-3.0, "g", 0) == "0" and reading_text(1534.0, "kg", 2) == "1.53"


def _weigh_scene() -> Grounding:
    """The weigh task's G with one camera a quarter metre in front of the scale's display."""
    data: dict[str, Any] = weigh_grounding().model_dump(mode="json")
    camera = {"name": "front", "video": "front.mp4",
              "intrinsics": {"width": 640, "height": 480, "fx": 600.0, "fy": 600.0, "cx": 320.0, "cy": 240.0},
              "intrinsics_tag": "measured",
              "world_from_camera": look_at((0.48, 0.1, 0.12), (0.25, 0.1, 0.02)).model_dump(mode="json"),
              "extrinsics_tag": "measured"}
    data["cameras"] = [camera]
    for obj in data["objects"]:
        obj["observations"] = [o for o in obj["observations"] if o["camera"] == "front"]
    return Grounding.model_validate(data)


@pytest.mark.render
@pytest.mark.slow
@device
def test_every_frame_shows_the_sim_s_scale_reading(tmp_path: Path) -> None:
    g = _weigh_scene()
    # the 'real' clip: the sim's own render of the scene (the display is not simulated, so it is blank there)
    world = build_world(g, render=True)
    passes = RenderPasses(world.scene, g.cameras)
    still = passes.render()["front"].rgb
    clip = tmp_path / "clip"
    clip.mkdir()
    with VideoWriter(clip / "front.mp4", 640, 480, 10) as writer:
        for _ in range(3):
            writer.write(still)
    cam = g.cameras[0]
    save_artifact(ClipSpec(fps=10, cameras=[CameraSpec(name="front", video="front.mp4", intrinsics=cam.intrinsics,
                                                       extrinsics=cam.world_from_camera)],
                           robot_base=[a.base for a in g.robot.arms]), clip / "clip.yaml")
    # an episode whose scale reports READINGS, one per step
    recorder = Recorder(build_world(g), control_hz=10)
    for _ in READINGS:
        recorder.step()
    recording = recorder.finish()
    recording.scale_readings[:, recording.scale_ids.index("scale")] = READINGS
    verdict = JudgeVerdict.model_validate({"passed": True, "stage_reached": "weigh", "reason": "test",
                                           "stages": [{"name": "weigh", "start_s": 0.0, "end_s": 0.8}],
                                           "judge_sha256": "0" * 64})
    episode = tmp_path / "episode"
    write_episode(episode, make_record(recording, episode_id="ep_000001", robot="piper-dual",
                                       variation=example_variation(g), verdict=verdict, expert_sha256="0" * 64), recording)
    contract = RenderContract.model_validate({
        "mode": "sim2real", "cameras": [{"camera": "front", "frames": [0]}],
        "appearance": {"scene": "a kitchen scale and an apple on a table"},
        "renderer": {"name": "composite"}, "chunk_frames": 5, "overlap_frames": 2, "fps": 10.0, "resolution": [640, 480]})
    record = render_episode(episode, grounding=g, contract=contract, clip_dir=clip, task="Weigh the apple.")
    assert record.report.details["displays"] == ["scale"]
    obs, _ = read_video(episode / "obs" / "front.mp4")
    (display,) = scale_displays(g)
    projector = Projector.of(g.cameras[0])
    pose = pose_to_matrix_array(recording.object_poses("scale")[0])
    shown = []
    for i, grams in enumerate(READINGS):
        text = reading_text(grams, "g", 0)
        shown.append(decode_readout(unwarp_readout(obs[i], projector, display, pose), len(text), cells_for(text)))
    assert shown == [reading_text(g_, "g", 0) for g_ in READINGS]
    assert np.abs(obs[0].astype(int) - still).mean() < 10  # the rest of the frame is the scene
