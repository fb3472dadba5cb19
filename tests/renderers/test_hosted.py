"""The hosted adapters against loopback fakes of MiniMax and Seedance that speak the services'
documented shapes: what each job carries (K's prompt, the real reference frames, the control video,
the first frame), polling until done, the download (without the key, from another host), cost,
rate limits (429 + Retry-After, MiniMax's code 1002), server errors, service errors, slow answers
and jobs that never finish."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from datafarm.artifacts.grounding import Grounding
from datafarm.errors import InputError
from datafarm.renderers.base import FrameInput, RenderJob
from datafarm.renderers.chunks import ChunkSpan
from datafarm.renderers.control import ControlFrame, edge_map
from datafarm.renderers.demo import demo_recording, example_variation
from datafarm.renderers.hosted.http import HostedServiceError, HostedTimeout, retry_after_seconds
from datafarm.renderers.hosted.minimax import MiniMaxRenderer
from datafarm.renderers.hosted.seedance import SeedanceRenderer
from datafarm.renderers.layout import make_layout
from datafarm.renderers.prompts import video_prompt
from datafarm.renderers.registry import create_renderer, renderer_names
from datafarm.renderers.scene import ClipFrames, SegmentClasses, render_camera
from datafarm.renderers.video import read_video
from tests.renderers.fake_services import KEY, FakeMiniMax, FakeSeedance, Reply, decode_mp4, decode_png
from tests.renderers.helpers import CAMERAS, TASK, contract

W, H = 160, 120
FAST = {"poll_initial_s": 0.01, "poll_max_s": 0.05, "backoff_initial_s": 0.01, "backoff_max_s": 0.05,
        "request_timeout_s": 2.0, "timeout_s": 5.0}
CHUNK = ChunkSpan(index=0, start=0, stop=10, seed=1234)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory, grounding: Grounding, demo_clip: Path) -> RenderJob:
    """A render job for the demo scene at 160x120 (no render device: the 'sim' images are clip frames)."""
    g = grounding
    r = contract(resolution=[W, H])
    layout = make_layout(list(CAMERAS), W, H)
    recording = demo_recording(g, steps=12)
    clip = ClipFrames(demo_clip, W, H)
    nominal = {}
    for c in CAMERAS:
        rgb = clip.camera(c, [0]).references[0]
        seg = np.zeros((H, W), dtype=np.uint32)
        nominal[c] = ControlFrame(c, rgb, np.zeros((H, W), np.float32), seg, edge_map(rgb, seg))
    cams = {c.name: render_camera(c, W, H) for c in g.cameras}
    return RenderJob(
        episode_id="ep_000000", contract=r, grounding=g, variation=example_variation(g), recording=recording,
        layout=layout, cameras=cams, clip_cameras=cams, clip=clip, nominal=nominal,
        segments=SegmentClasses(list(recording.object_ids), np.zeros(64, dtype=np.uint8)),
        world_from_table_top=np.eye(4), clip_world_from_table_top=np.eye(4),
        prompt=video_prompt(r, g, layout, TASK, {}), variations={}, fps=20.0, seed=5,
        work_dir=tmp_path_factory.mktemp("work"))


def frames(job: RenderJob, chunk: ChunkSpan = CHUNK) -> Iterator[FrameInput]:
    """Control frames whose edge map is one vertical line at column 10 + step."""
    for i in range(chunk.start, chunk.stop):
        controls = {}
        for c in CAMERAS:
            edges = np.zeros((H, W), dtype=np.uint8)
            edges[:, 10 + i] = 255
            controls[c] = ControlFrame(c, job.nominal[c].rgb, np.zeros((H, W), np.float32),
                                       np.zeros((H, W), np.uint32), edges)
        yield FrameInput(step=i, controls=controls)


@pytest.fixture
def minimax():
    fake = FakeMiniMax(["Queueing", "Processing", "Success"])
    yield fake
    fake.close()


@pytest.fixture
def seedance():
    fake = FakeSeedance(["queued", "running", "succeeded"])
    yield fake
    fake.close()


def _minimax(fake: FakeMiniMax, job: RenderJob, **parameters: Any) -> MiniMaxRenderer:
    renderer = MiniMaxRenderer({**FAST, **parameters}, {"MINIMAX_API_KEY": KEY, "MINIMAX_BASE_URL": fake.url})
    renderer.prepare(job)
    return renderer


def _seedance(fake: FakeSeedance, job: RenderJob, **parameters: Any) -> SeedanceRenderer:
    renderer = SeedanceRenderer({**FAST, "base_url": fake.base_url, **parameters}, {"ARK_API_KEY": KEY})
    renderer.prepare(job)
    return renderer


def _check_output(out: list[np.ndarray], job: RenderJob) -> None:
    """The chunk got exactly its frames, at the canvas size, resampled in time from the returned video
    (whose green channel is 8 x its frame index: 30 frames fitted to 10 -> indices 0, 3, ..., 29)."""
    assert len(out) == CHUNK.frames
    assert all(f.shape == (job.layout.height, job.layout.width, 3) and f.dtype == np.uint8 for f in out)
    green = [int(np.median(f[..., 1])) for f in out]
    expected = [8 * round(k * 29 / 9) for k in range(10)]
    assert np.abs(np.array(green) - expected).max() <= 4


def test_the_registry_offers_exactly_the_request_s_renderers_behind_one_interface() -> None:
    from datafarm.artifacts.request import RENDERERS
    from datafarm.renderers.base import Renderer

    assert renderer_names() == list(RENDERERS)
    for name in RENDERERS:
        renderer = create_renderer(name, {}, {})
        assert isinstance(renderer, Renderer) and renderer.name == name
    with pytest.raises(InputError, match="unknown renderer"):
        create_renderer("sora", {})
    with pytest.raises(InputError, match="renderer.parameters.guidance"):
        create_renderer("seedance", {"guidance": 7})


def test_minimax_job_carries_k_s_prompt_and_a_first_frame_and_its_result_fills_the_chunk(minimax, job) -> None:
    minimax.script["create"] = [Reply(200, {"task_id": "", "base_resp": {"status_code": 1002, "status_msg": "rate limit"}})]
    renderer = _minimax(minimax, job)
    out = list(renderer.render_chunk(CHUNK, frames(job)))
    _check_output(out, job)
    creates = minimax.seen("create")
    assert len(creates) == 2  # the rate-limited answer, then the job
    body = creates[-1].body
    assert body["model"] == "MiniMax-Hailuo-02" and body["prompt"] == job.prompt.text
    assert body["duration"] == 6 and body["resolution"] == "768P" and body["prompt_optimizer"] is False
    first = decode_png(body["first_frame_image"])
    assert first.shape == (job.layout.height, job.layout.width, 3)
    real = job.layout.compose({c: job.nominal[c].rgb for c in CAMERAS})
    assert np.abs(first.astype(int) - real).mean() < 25  # the composite of the real scene, not the edges
    assert not any(k.startswith("control") or "video" in k for k in body)  # the endpoint has no control field
    assert all(s.headers.get("Authorization") == f"Bearer {KEY}" for s in minimax.requests)
    assert len(minimax.storage.requests) == 1 and "Authorization" not in minimax.storage.requests[0].headers
    report = renderer.report()
    (record,) = report.jobs
    assert record.status == "Success" and record.polls == 3 and record.rate_limited == 1 and record.retries == 1
    assert record.cost_usd == pytest.approx(0.49) and report.cost_usd == pytest.approx(0.49)
    assert record.video_frames == 30 and record.video_size == (128, 96) and record.trace_id.startswith("trace-")
    assert record.control_video_sent is False and any("no control-video field" in n for n in report.notes)


def test_minimax_sends_the_control_video_where_a_field_is_configured(minimax, job) -> None:
    renderer = _minimax(minimax, job, control_video_field="control_video", model="I2V-01-Director")
    list(renderer.render_chunk(CHUNK, frames(job)))
    body = minimax.seen("create")[-1].body
    assert "duration" not in body and "resolution" not in body  # only Hailuo models take them
    control = decode_mp4(body["control_video"])
    assert len(control) == CHUNK.frames and control.shape[1:3] == (job.layout.height, job.layout.width)
    for i, frame in enumerate(control):  # frame i shows step i's edge line in every tile
        assert int(np.argmax(frame[:H, :W, 0].mean(axis=0))) == 10 + i
    assert renderer.report().jobs[0].control_video_sent


def test_minimax_honours_retry_after_on_http_429(minimax, job) -> None:
    minimax.script["create"] = [Reply(429, {"base_resp": {"status_code": 1002, "status_msg": "rpm exceeded"}},
                                      {"Retry-After": "1"})]
    renderer = _minimax(minimax, job)
    list(renderer.render_chunk(CHUNK, frames(job)))
    first, second = minimax.seen("create")
    assert second.at - first.at >= 0.95  # waited the server's Retry-After, not the 0.01 s backoff
    assert renderer.report().jobs[0].rate_limited == 1


def test_minimax_failures_are_reported_with_the_service_s_reason(minimax, job) -> None:
    minimax.statuses = ["Processing", "Fail"]
    with pytest.raises(HostedServiceError, match="content moderation"):
        list(_minimax(minimax, job).render_chunk(CHUNK, frames(job)))
    assert len(minimax.seen("create")) == 1  # a failed job is not silently resubmitted


def test_minimax_auth_and_balance_errors_fail_at_once(minimax, job) -> None:
    bad = MiniMaxRenderer(FAST, {"MINIMAX_API_KEY": "wrong", "MINIMAX_BASE_URL": minimax.url})
    bad.prepare(job)
    with pytest.raises(HostedServiceError, match="authorization failed") as caught:
        list(bad.render_chunk(CHUNK, frames(job)))
    assert caught.value.code == 1004 and caught.value.trace_id == "trace-auth"
    assert len(minimax.requests) == 1
    minimax.script["create"] = [Reply(200, {"base_resp": {"status_code": 1008, "status_msg": "insufficient balance"}})]
    with pytest.raises(HostedServiceError, match="insufficient balance"):
        list(_minimax(minimax, job).render_chunk(CHUNK, frames(job)))


def test_a_service_that_does_not_answer_in_time_is_retried_then_reported(minimax, job) -> None:
    minimax.script["query"] = [Reply(200, {}, delay_s=1.0) for _ in range(3)]
    renderer = _minimax(minimax, job, request_timeout_s=0.2, max_retries=2)
    started = time.monotonic()
    with pytest.raises(HostedServiceError, match="no answer to GET /v1/query/video_generation within 0.2 s"):
        list(renderer.render_chunk(CHUNK, frames(job)))
    assert len(minimax.seen("query")) == 3 and time.monotonic() - started < 3


def test_a_job_that_never_finishes_times_out(minimax, job) -> None:
    minimax.statuses = ["Queueing", "Processing"]
    with pytest.raises(HostedTimeout, match="still Processing after 0.3 s"):
        list(_minimax(minimax, job, timeout_s=0.3).render_chunk(CHUNK, frames(job)))


def test_a_missing_key_is_an_input_error_naming_the_variable(job) -> None:
    with pytest.raises(InputError, match="MINIMAX_API_KEY"):
        MiniMaxRenderer(FAST, {}).prepare(job)
    with pytest.raises(InputError, match="ARK_API_KEY"):
        SeedanceRenderer(FAST, {"MINIMAX_API_KEY": KEY}).prepare(job)


def test_seedance_job_carries_prompt_reference_frames_and_control_video(seedance, job) -> None:
    renderer = _seedance(seedance, job)
    out = list(renderer.render_chunk(CHUNK, frames(job)))
    _check_output(out, job)
    (create,) = seedance.seen("create")
    body = create.body
    assert body["model"] == "doubao-seedance-2-0-260128" and body["seed"] == CHUNK.seed
    assert (body["ratio"], body["duration"], body["resolution"], body["camera_fixed"], body["watermark"]) == (
        "4:3", 4, "480p", True, False)
    text = [c for c in body["content"] if c["type"] == "text"]
    images = [c for c in body["content"] if c["type"] == "image_url"]
    videos = [c for c in body["content"] if c["type"] == "video_url"]
    assert [t["text"] for t in text] == [job.prompt.text]
    assert [i["role"] for i in images] == ["reference_image", "reference_image"]  # R names frames 0 and 15
    for position, item in zip((0, 15), images, strict=True):
        sent = decode_png(item["image_url"]["url"])
        real = job.layout.compose({c: job.clip.camera(c, [0, 15]).references[(0, 15).index(position)] for c in CAMERAS})
        assert np.array_equal(sent, real)  # PNG is lossless: exactly the real frames, tiled like the canvas
    (video,) = videos
    assert video["role"] == "reference_video" and len(decode_mp4(video["video_url"]["url"])) == CHUNK.frames
    report = renderer.report()
    tokens = 128 * 96 * 30 // 1024
    assert report.cost_usd == pytest.approx(tokens * 1.8 / 1e6)
    assert "completion_tokens" in report.jobs[0].cost_basis and report.jobs[0].polls == 3
    assert "Authorization" not in seedance.storage.requests[0].headers


def test_seedance_retries_rate_limits_and_server_errors(seedance, job) -> None:
    seedance.script["create"] = [Reply(500, {"error": {"code": "InternalServiceError", "message": "try again"}})]
    seedance.script["get"] = [FakeSeedance.error(429, "RateLimitExceeded.EndpointRPMExceeded", "too many requests")]
    seedance.script["get"][0].headers["Retry-After"] = "0.3"
    renderer = _seedance(seedance, job)
    list(renderer.render_chunk(CHUNK, frames(job)))
    record = renderer.report().jobs[0]
    assert record.retries == 2 and record.rate_limited == 1
    gets = seedance.seen("get")
    assert gets[1].at - gets[0].at >= 0.28


def test_seedance_client_errors_are_not_retried(seedance, job) -> None:
    seedance.script["create"] = [FakeSeedance.error(400, "InvalidParameter", "the parameter duration is invalid")]
    with pytest.raises(HostedServiceError, match="duration is invalid") as caught:
        list(_seedance(seedance, job).render_chunk(CHUNK, frames(job)))
    assert caught.value.code == "InvalidParameter" and caught.value.status == 400
    assert len(seedance.seen("create")) == 1


def test_seedance_failed_and_timed_out_jobs(seedance, job) -> None:
    seedance.statuses = ["running", "failed"]
    with pytest.raises(HostedServiceError, match="may be sensitive"):
        list(_seedance(seedance, job).render_chunk(CHUNK, frames(job)))
    seedance.statuses = ["queued"]
    with pytest.raises(HostedTimeout):
        list(_seedance(seedance, job, timeout_s=0.2).render_chunk(CHUNK, frames(job)))
    assert len(seedance.seen("delete")) == 1  # the stuck job was cancelled


def test_a_chunk_longer_than_the_model_generates_is_refused(seedance, job) -> None:
    long = ChunkSpan(index=0, start=0, stop=30, seed=1)  # 1.5 s at 20 fps
    renderer = _seedance(seedance, job, min_duration_s=1, max_duration_s=1)
    with pytest.raises(HostedServiceError, match="longer than the model's 1 s"):
        list(renderer.render_chunk(long, frames(job, long)))
    assert not seedance.seen("create")


def test_retry_after_reads_seconds_and_http_dates() -> None:
    now = datetime(2025, 5, 1, 12, 0, 0, tzinfo=UTC)
    assert retry_after_seconds("7", now) == 7.0
    assert retry_after_seconds("Thu, 01 May 2025 12:00:30 GMT", now) == pytest.approx(30.0)
    assert retry_after_seconds("soon", now) is None and retry_after_seconds(None) is None


def test_returned_video_of_another_shape_is_cover_fitted(tmp_path: Path) -> None:
    from datafarm.renderers.hosted.media import cover_resize, fit_frames
    from tests.renderers.fake_services import result_video

    returned, _ = read_video(result_video(3, frames=7, width=160, height=90))
    fitted = fit_frames(returned, 20, 64, 48)
    assert len(fitted) == 20 and fitted[0].shape == (48, 64, 3)
    assert cover_resize(np.zeros((90, 160, 3), np.uint8), 64, 48).shape == (48, 64, 3)
