"""Seedance (ByteDance; BytePlus ModelArk / Volcengine Ark) video generation as a renderer.

Flow: `POST {base}/contents/generations/tasks` with `{model, content: [...], ...}` -> `{id}`;
`GET {base}/contents/generations/tasks/{id}` -> `{status: queued|running|succeeded|failed|cancelled|
expired, content: {video_url}, usage: {completion_tokens, total_tokens}, error: {code, message}}`;
download `content.video_url`. Errors come as an HTTP status with `{"error": {"code", "message"}}`
(400 InvalidParameter..., 401, 403, 404, 429 RateLimitExceeded...).

Conditioning: the prompt from K's template as the text item; the real reference canvases as
`image_url` items with role `reference_image` (never mixed with first/last-frame roles, which the
service rejects); the control video of edge maps as a `video_url` item with role `reference_video`
(Seedance 2.0 models); seed, ratio (closest to the canvas), resolution, duration, a fixed camera and
no watermark as top-level fields. Cost: `usage.completion_tokens` times the configured price per
million tokens. Key: `ARK_API_KEY`; endpoint: `ARK_BASE_URL` or BytePlus' public one.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from pydantic import Field

from datafarm.renderers.chunks import ChunkSpan
from datafarm.renderers.hosted.base import (
    Conditioning,
    HostedParameters,
    HostedRenderer,
    JobState,
    image_urls,
    video_url,
)
from datafarm.renderers.hosted.http import HostedServiceError
from datafarm.renderers.hosted.media import closest_ratio

RUNNING = ("queued", "running")
"""Statuses of a job still in progress."""
FAILED = ("failed", "cancelled", "expired")
"""Statuses of a job that ended without a video."""


class SeedanceParameters(HostedParameters):
    """R's `renderer.parameters` for Seedance."""

    model: str = Field(default="doubao-seedance-2-0-260128", min_length=1)
    """Model id (2.0 models take a reference video; the default id is from third-party material, unconfirmed)."""
    resolution: str = "480p"
    """Output resolution: 480p, 720p or 1080p."""
    min_duration_s: int = Field(default=4, ge=1)
    """Shortest clip the model generates, seconds."""
    max_duration_s: int = Field(default=15, ge=1)
    """Longest clip the model generates, seconds (chunks longer than this are an error)."""
    send_control_video: bool = True
    """Send the chunk's edge-map video as the reference video (role reference_video)."""
    camera_fixed: bool = True
    """Ask for a static camera (the cameras are fixed rigs)."""
    usd_per_mtok: float = Field(default=1.8, ge=0)
    """Price per million output tokens, US dollars (about $1.2-2.5, unconfirmed)."""


class SeedanceRenderer(HostedRenderer):
    """Seedance reference-to-video (see the module docstring)."""

    name = "seedance"
    service = "seedance"
    parameters_model = SeedanceParameters
    key_env = "ARK_API_KEY"
    base_env = "ARK_BASE_URL"
    default_base_url = "https://ark.ap-southeast.bytepluses.com/api/v3"

    @staticmethod
    def parse_error(status: int, body: Any) -> tuple[str | int | None, str]:
        """error.code and error.message of a failed answer."""
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            error = body["error"]
            return error.get("code"), str(error.get("message") or error.get("code") or f"HTTP {status}")
        return None, f"HTTP {status}"

    @property
    def control_video_sent(self) -> bool:
        """As configured (on by default)."""
        return self.parameters.send_control_video

    def _duration(self, seconds: float) -> int:
        p: SeedanceParameters = self.parameters
        duration = max(p.min_duration_s, math.ceil(seconds - 1e-9))
        if duration > p.max_duration_s:
            raise HostedServiceError("seedance", f"a chunk of {seconds:.2f} s is longer than the model's {p.max_duration_s} s; "
                                                 "lower chunk_frames in render_contract.yaml")
        return duration

    def submit(self, chunk: ChunkSpan, conditioning: Conditioning) -> str:
        """POST contents/generations/tasks."""
        p: SeedanceParameters = self.parameters
        content: list[dict[str, Any]] = [{"type": "text", "text": conditioning.prompt}]
        content += [{"type": "image_url", "image_url": {"url": url}, "role": "reference_image"}
                    for url in image_urls(conditioning.references)]
        if p.send_control_video:
            content.append({"type": "video_url", "video_url": {"url": video_url(conditioning.control_video)},
                            "role": "reference_video"})
        layout = self.job.layout
        body = {"model": p.model, "content": content, "ratio": closest_ratio(layout.width, layout.height),
                "resolution": p.resolution, "duration": self._duration(conditioning.seconds), "seed": conditioning.seed,
                "camera_fixed": p.camera_fixed, "watermark": False}
        answer = self.client.call("POST", "contents/generations/tasks", body=body)
        task_id = answer.body.get("id")
        if not task_id:
            raise HostedServiceError("seedance", "the task was created without an id")
        return str(task_id)

    def poll(self, task_id: str) -> JobState:
        """GET contents/generations/tasks/{id}."""
        body = self.client.call("GET", f"contents/generations/tasks/{task_id}").body
        status = str(body.get("status", ""))
        if status == "succeeded":
            return JobState(done=True, failed=False, status=status, video_url=(body.get("content") or {}).get("video_url"),
                            usage=dict(body.get("usage") or {}))
        if status in FAILED:
            error = body.get("error") or {}
            return JobState(done=False, failed=True, status=status,
                            message=str(error.get("message") or error.get("code") or ""))
        if status not in RUNNING:
            raise HostedServiceError("seedance", f"task {task_id} has unknown status {status!r}")
        return JobState(done=False, failed=False, status=status)

    def cancel(self, task_id: str) -> None:
        """DELETE the task (cancels a queued one; unconfirmed for running ones)."""
        self.client.call("DELETE", f"contents/generations/tasks/{task_id}")

    def cost(self, state: JobState, frames: np.ndarray) -> tuple[float, str]:
        """completion_tokens x price; without usage, the tokens estimated as W x H x frames / 1024."""
        price = self.parameters.usd_per_mtok
        tokens = state.usage.get("completion_tokens")
        if isinstance(tokens, (int, float)):
            basis = f"usage.completion_tokens {int(tokens)} x ${price:g}/Mtok (renderer.parameters.usd_per_mtok)"
            return tokens * price / 1e6, basis
        n, h, w = frames.shape[:3]
        estimate = w * h * n / 1024
        self.notes.append("seedance reported no usage; cost estimated from the returned video's size")
        return estimate * price / 1e6, f"estimated {estimate:.0f} tokens (W x H x frames / 1024) x ${price:g}/Mtok"
