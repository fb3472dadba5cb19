"""A hosted renderer through the whole pipeline (a loopback Seedance): one job per chunk, each with
the chunk's control video; the returned videos joined where adjacent chunks differ least; cost and
jobs in render.json; the API key in no file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from datafarm.artifacts.grounding import Grounding
from datafarm.renderers import render_episode
from datafarm.renderers.demo import write_demo_episode
from datafarm.renderers.video import read_video
from tests.renderers.fake_services import KEY, FakeSeedance, decode_mp4
from tests.renderers.helpers import CAMERAS, TASK, contract, needs_device

pytestmark = [*needs_device, pytest.mark.slow]

STEPS = 30
FAST = {"poll_initial_s": 0.01, "poll_max_s": 0.05, "backoff_initial_s": 0.01, "backoff_max_s": 0.05,
        "request_timeout_s": 5.0, "timeout_s": 20.0}


def test_seedance_renders_an_episode_chunk_by_chunk(tmp_path: Path, grounding: Grounding, demo_clip: Path) -> None:
    write_demo_episode(tmp_path, grounding, steps=STEPS)
    fake = FakeSeedance(["queued", "succeeded"])
    try:
        r = contract(renderer="seedance", parameters={**FAST, "base_url": fake.base_url}, resolution=[160, 120],
                     chunk_frames=12, overlap_frames=4)
        record = render_episode(tmp_path, grounding=grounding, contract=r, clip_dir=demo_clip, task=TASK,
                                env={"ARK_API_KEY": KEY})
    finally:
        fake.close()
    assert [(c.start, c.stop) for c in record.chunks] == [(0, 12), (8, 20), (16, 28), (24, 30)]
    creates = fake.seen("create")
    assert len(creates) == 4 and [j.chunk for j in record.report.jobs] == [0, 1, 2, 3]
    for chunk, create in zip(record.chunks, creates, strict=True):
        (video,) = [c for c in create.body["content"] if c["type"] == "video_url"]
        assert len(decode_mp4(video["video_url"]["url"])) == chunk.frames  # that chunk's control video
        assert create.body["seed"] == chunk.seed and create.body["content"][0]["text"] == record.prompt
    tokens = 128 * 96 * 30 // 1024
    assert record.report.cost_usd == pytest.approx(4 * tokens * 1.8 / 1e6)
    for join in record.joins:
        assert join.frame == join.overlap[0] + int(np.argmin(join.differences)) and join.difference > 0
    for camera in CAMERAS:
        obs, times = read_video(tmp_path / "obs" / f"{camera}.mp4")
        assert len(obs) == STEPS and times[-1] == pytest.approx((STEPS - 1) / 20.0)
        sim, _ = read_video(tmp_path / "sim" / f"{camera}.mp4")
        assert len(sim) == STEPS
    # frames 0..join of chunk 0 come from chunk 0's returned video (green = 8 x its frame index, stretched)
    front, _ = read_video(tmp_path / "obs" / "front.mp4")
    green = [int(np.median(front[i][..., 1])) for i in range(record.joins[0].frame)]
    assert green == sorted(green) and green[0] <= 4
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
