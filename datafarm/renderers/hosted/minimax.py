"""MiniMax (Hailuo) video generation as a renderer.

Flow (platform.minimax.io docs): `POST /v1/video_generation` -> `{task_id, base_resp}`;
`GET /v1/query/video_generation?task_id=` -> `{status: Preparing|Queueing|Processing|Success|Fail,
file_id, video_width, video_height, base_resp}`; `GET /v1/files/retrieve?file_id=` ->
`{file: {download_url, ...}, base_resp}`; download. Every answer is checked for a non-zero
`base_resp.status_code`: 1002 (rate limit) and 1000/1001/1024 (unknown, timeout, internal) are
retried, anything else (1004 auth, 1008 balance, 2038 verification, ...) fails at once.

Conditioning: the prompt from K's template; the chunk's first canvas frame as `first_frame_image`
(a composite render conditioned on the real frames for the first chunk, the previous chunk's own
frame after that, so chunks continue each other); for the subject-reference model (`S2V-01`) the
real reference canvases as `subject_reference`. The documented endpoint has no control-video
field: `control_video_field` (and `last_frame_field`, seen only in third-party material) can name
one when a deployment accepts it; by default the control reaches the model through the first frame
and the prompt, and the record says so. Key: `MINIMAX_API_KEY`; endpoint: `MINIMAX_BASE_URL` or
the global host.
"""

from __future__ import annotations

from typing import Any, ClassVar

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
from datafarm.renderers.hosted.http import HostedServiceError, Response, RetryableError
from datafarm.renderers.hosted.media import png_data_url

MAX_PROMPT = 2000
"""Longest prompt the endpoint takes, characters."""
RETRYABLE_CODES = {1000: "unknown error", 1001: "timeout", 1002: "rate limit", 1024: "internal error"}
"""base_resp codes worth retrying."""
FATAL_CODES = {1004: "authentication failed", 1008: "insufficient balance", 2038: "real-name verification required"}
"""base_resp codes that end the render (named for the message)."""


class MiniMaxParameters(HostedParameters):
    """R's `renderer.parameters` for MiniMax."""

    model: str = Field(default="MiniMax-Hailuo-02", min_length=1)
    """Model: MiniMax-Hailuo-02, I2V-01, I2V-01-Director, I2V-01-live, or S2V-01 (subject reference)."""
    resolution: str | None = "768P"
    """Output resolution (Hailuo-02: 768P or 1080P); null leaves it to the model."""
    duration: int | None = None
    """Clip length, seconds (Hailuo-02: 6 or 10); null picks the shortest that covers the chunk."""
    prompt_optimizer: bool = False
    """Let the service rewrite the prompt (off: K's prompt is sent as written)."""
    control_video_field: str | None = None
    """Request field that carries the control video, when a deployment has one (the documented endpoint does not)."""
    last_frame_field: str | None = None
    """Request field for the chunk's last frame (e.g. `last_frame_image`, unconfirmed); null sends none."""
    usd_per_video: float = Field(default=0.49, ge=0)
    """Price of one generated video, US dollars (the service reports no usage; about $0.2-0.6, unconfirmed)."""


class MiniMaxRenderer(HostedRenderer):
    """MiniMax reference/image-to-video (see the module docstring)."""

    name = "minimax"
    service = "minimax"
    parameters_model = MiniMaxParameters
    key_env = "MINIMAX_API_KEY"
    base_env = "MINIMAX_BASE_URL"
    default_base_url = "https://api.minimax.io"
    sends_first_frame: ClassVar[bool] = True

    @staticmethod
    def parse_error(status: int, body: Any) -> tuple[str | int | None, str]:
        """base_resp code and message of a failed answer."""
        if isinstance(body, dict) and isinstance(body.get("base_resp"), dict):
            resp = body["base_resp"]
            return resp.get("status_code"), str(resp.get("status_msg") or "")
        return None, f"HTTP {status}"

    @staticmethod
    def check(response: Response) -> None:
        """Raise for a non-zero base_resp.status_code (retryable or not, see the module docstring)."""
        body = response.body
        resp = body.get("base_resp") if isinstance(body, dict) else None
        if not isinstance(resp, dict):
            raise HostedServiceError("minimax", "answer without base_resp", status=response.status)
        code = resp.get("status_code", 0)
        if code in (0, None):
            return
        message = str(resp.get("status_msg") or RETRYABLE_CODES.get(code) or FATAL_CODES.get(code) or "error")
        trace = response.headers.get("Trace-Id")
        if code in RETRYABLE_CODES:
            raise RetryableError("minimax", message, code=code, trace_id=trace, rate_limited=code == 1002,
                                 status=response.status)
        raise HostedServiceError("minimax", message, code=code, trace_id=trace, status=response.status)

    @property
    def control_video_sent(self) -> bool:
        """Only when a control-video field is configured."""
        return self.parameters.control_video_field is not None

    @property
    def wants_last_frame(self) -> bool:
        """Only when a last-frame field is configured."""
        return self.parameters.last_frame_field is not None

    def _duration(self, seconds: float) -> int | None:
        p: MiniMaxParameters = self.parameters
        if p.duration is not None:
            return p.duration
        if not p.model.startswith("MiniMax-Hailuo"):
            return None
        return 6 if seconds <= 6 else 10

    def submit(self, chunk: ChunkSpan, conditioning: Conditioning) -> str:
        """POST /v1/video_generation."""
        p: MiniMaxParameters = self.parameters
        if len(conditioning.prompt) > MAX_PROMPT:
            raise HostedServiceError("minimax", f"the prompt has {len(conditioning.prompt)} characters; "
                                                f"the endpoint takes {MAX_PROMPT}")
        body: dict[str, Any] = {"model": p.model, "prompt": conditioning.prompt, "prompt_optimizer": p.prompt_optimizer}
        if p.model.startswith("S2V"):
            body["subject_reference"] = [{"type": "character", "image": image_urls(conditioning.references)}]
        elif conditioning.first_frame is not None:
            body["first_frame_image"] = png_data_url(conditioning.first_frame)
        duration = self._duration(conditioning.seconds)
        if duration is not None:
            body["duration"] = duration
        if p.resolution is not None and p.model.startswith("MiniMax-Hailuo"):
            body["resolution"] = p.resolution
        if p.last_frame_field and conditioning.last_frame is not None:
            body[p.last_frame_field] = png_data_url(conditioning.last_frame)
        if p.control_video_field:
            body[p.control_video_field] = video_url(conditioning.control_video)
        answer = self.client.call("POST", "/v1/video_generation", body=body)
        task_id = answer.body.get("task_id")
        if not task_id:
            raise HostedServiceError("minimax", "video_generation answered without a task_id",
                                     trace_id=self.client.last_trace_id)
        return str(task_id)

    def poll(self, task_id: str) -> JobState:
        """GET /v1/query/video_generation, then (on Success) /v1/files/retrieve for the download URL."""
        body = self.client.call("GET", "/v1/query/video_generation", query={"task_id": task_id}).body
        status = str(body.get("status", ""))
        if status == "Success":
            file_id = body.get("file_id")
            if not file_id:
                raise HostedServiceError("minimax", f"task {task_id} succeeded without a file_id")
            file = self.client.call("GET", "/v1/files/retrieve", query={"file_id": str(file_id)}).body.get("file") or {}
            return JobState(done=True, failed=False, status=status, video_url=file.get("download_url"))
        if status == "Fail":
            resp = body.get("base_resp") or {}
            return JobState(done=False, failed=True, status=status, message=str(resp.get("status_msg") or ""))
        if status not in ("Preparing", "Queueing", "Processing"):
            raise HostedServiceError("minimax", f"task {task_id} has unknown status {status!r}")
        return JobState(done=False, failed=False, status=status)

    def cost(self, state: JobState, frames: np.ndarray) -> tuple[float, str]:
        """The configured flat price per video."""
        price = self.parameters.usd_per_video
        return price, f"flat ${price:g} per video (renderer.parameters.usd_per_video; the service reports no usage)"
