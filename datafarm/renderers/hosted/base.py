"""What the hosted video-model adapters share: their key and endpoint from the environment, the
conditioning they send (the real reference frames tiled like the canvas, the control video of edge
maps, the prompt from K's template, optionally a first frame), the job loop (submit, poll with
backoff until done, failed or out of time, download), cost accounting, and fitting the returned
video to the chunk.

Each service implements `submit` (-> task id), `poll` (-> JobState) and, optionally, `cancel`.
"""

from __future__ import annotations

import contextlib
import os
import time
from abc import abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from datafarm.artifacts.base import Artifact
from datafarm.errors import InputError, Problem
from datafarm.renderers.base import FrameInput, Renderer, RenderJob
from datafarm.renderers.chunks import ChunkSpan
from datafarm.renderers.hosted.http import HostedServiceError, HostedTimeout, JsonHttpClient
from datafarm.renderers.hosted.media import fit_frames, mp4_data_url, png_data_url
from datafarm.renderers.record import HostedJob, RendererReport
from datafarm.renderers.video import encode_video, read_video


class HostedParameters(Artifact):
    """Settings every hosted adapter takes (R's `renderer.parameters`)."""

    model: str = Field(min_length=1)
    """Model name sent to the service."""
    base_url: str | None = None
    """API base URL; default: the service's environment variable, else its public endpoint."""
    poll_initial_s: float = Field(default=5.0, gt=0)
    """First wait between status queries, seconds (it grows by `poll_growth` up to `poll_max_s`)."""
    poll_growth: float = Field(default=1.5, ge=1.0)
    """Factor by which the wait between status queries grows."""
    poll_max_s: float = Field(default=30.0, gt=0)
    """Longest wait between status queries, seconds."""
    timeout_s: float = Field(default=1800.0, gt=0)
    """Longest time one job may take from submit to result, seconds."""
    request_timeout_s: float = Field(default=60.0, gt=0)
    """Longest wait for one HTTP answer, seconds."""
    max_retries: int = Field(default=5, ge=0)
    """Retries of one request after rate limits, server errors or timeouts."""
    backoff_initial_s: float = Field(default=2.0, ge=0)
    """First backoff before a retry without Retry-After, seconds (doubling up to `backoff_max_s`)."""
    backoff_max_s: float = Field(default=60.0, ge=0)
    """Longest backoff before a retry, seconds."""
    requests_per_minute: float | None = Field(default=None, gt=0)
    """Client-side pace: at most this many requests per minute (the account's RPM limit)."""
    max_reference_images: int = Field(default=4, ge=1, le=9)
    """Reference canvases sent per job (one per reference-frame position of R)."""


@dataclass
class JobState:
    """A job's status as one poll saw it."""

    done: bool
    """Finished successfully; `video_url` is set."""
    failed: bool
    """Finished without a video (failed, cancelled, expired)."""
    status: str
    """The service's own status word."""
    video_url: str | None = None
    """Where to download the result."""
    message: str = ""
    """The service's reason for a failure."""
    usage: dict[str, Any] = field(default_factory=dict)
    """Billing usage the service reported (e.g. completion_tokens)."""


@dataclass
class Conditioning:
    """What goes up with one chunk's job."""

    prompt: str
    """From K's render template."""
    references: list[np.ndarray]
    """Real reference frames tiled like the canvas (one canvas per reference-frame position)."""
    control_video: bytes
    """The chunk's edge maps tiled on the canvas, as H.264 MP4 at R's fps."""
    first_frame: np.ndarray | None
    """The chunk's first canvas frame, when the adapter sends one."""
    last_frame: np.ndarray | None
    """The chunk's last canvas frame (composite), when the adapter sends one."""
    seconds: float
    """The chunk's duration at R's fps."""
    seed: int
    """The chunk's seed."""


class HostedRenderer(Renderer):
    """A hosted video model behind the common job loop (see the module docstring)."""

    service: ClassVar[str]
    """Service name for errors and records."""
    key_env: ClassVar[str]
    """Environment variable holding the API key."""
    base_env: ClassVar[str]
    """Environment variable that may override the base URL."""
    default_base_url: ClassVar[str]
    """The public endpoint."""
    sends_first_frame: ClassVar[bool] = False
    """Whether jobs carry the chunk's first frame (a composite render, or the previous chunk's frame)."""

    def _environment(self) -> dict[str, str]:
        return self.env if self.env is not None else dict(os.environ)

    def prepare(self, job: RenderJob) -> None:
        """Check the key, build the client and the reference canvases (and a composite renderer for first frames)."""
        env = self._environment()
        key = env.get(self.key_env, "").strip()
        if not key:
            raise InputError([Problem(
                f"renderer {self.name} needs an API key in the environment variable {self.key_env}",
                field="renderer.name", hint=f"export {self.key_env}=... (it is never written to a file)")])
        p: HostedParameters = self.parameters
        self.job = job
        self.client = JsonHttpClient(
            self.service, p.base_url or env.get(self.base_env) or self.default_base_url, key,
            request_timeout_s=p.request_timeout_s, max_retries=p.max_retries, backoff_initial_s=p.backoff_initial_s,
            backoff_max_s=p.backoff_max_s, requests_per_minute=p.requests_per_minute,
            parse_error=self.parse_error, check=self.check)
        references = {c.camera: c.frames for c in job.contract.cameras}
        per_camera = {camera: job.clip.camera(camera, references[camera]).references for camera in job.layout.cameras}
        positions = min(p.max_reference_images, max(len(v) for v in per_camera.values()))
        self.references = [job.layout.compose({c: frames[min(r, len(frames) - 1)] for c, frames in per_camera.items()})
                           for r in range(positions)]
        self.jobs: list[HostedJob] = []
        self.notes: list[str] = []
        self._previous: dict[int, np.ndarray] = {}
        self._composite = None
        if self.sends_first_frame:
            from datafarm.renderers.composite.renderer import CompositeRenderer

            self._composite = CompositeRenderer({}, env)
            self._composite.prepare(job)

    # --- per-service pieces ------------------------------------------------------------------------
    @staticmethod
    def parse_error(status: int, body: Any) -> tuple[str | int | None, str]:
        """(code, message) of a failed answer."""
        return None, str(body)[:300] if body is not None else f"HTTP {status}"

    @staticmethod
    def check(response: Any) -> None:
        """Raise for a 2xx answer that reports a failure (default: none do)."""

    @abstractmethod
    def submit(self, chunk: ChunkSpan, conditioning: Conditioning) -> str:
        """Create the job; returns the service's task id."""

    @abstractmethod
    def poll(self, task_id: str) -> JobState:
        """One status query."""

    def cancel(self, task_id: str) -> None:
        """Best-effort cancellation of a job that ran out of time (default: nothing)."""

    @abstractmethod
    def cost(self, state: JobState, frames: np.ndarray) -> tuple[float, str]:
        """(US dollars, how it was computed) of a finished job."""

    @property
    def control_video_sent(self) -> bool:
        """Whether the control video goes with each job."""
        return True

    # --- the job loop -------------------------------------------------------------------------------
    def _wait_for(self, task_id: str) -> tuple[JobState, int]:
        p: HostedParameters = self.parameters
        deadline = time.monotonic() + p.timeout_s
        interval, polls = p.poll_initial_s, 0
        while True:
            state = self.poll(task_id)
            polls += 1
            if state.done:
                if not state.video_url:
                    raise HostedServiceError(self.service, f"task {task_id} succeeded without a video URL",
                                             trace_id=self.client.last_trace_id)
                return state, polls
            if state.failed:
                reason = state.message or "no reason given"
                raise HostedServiceError(self.service, f"task {task_id} ended {state.status}: {reason}",
                                         code=state.status, trace_id=self.client.last_trace_id)
            if time.monotonic() + interval > deadline:
                with contextlib.suppress(HostedServiceError):  # a courtesy; the timeout is what gets reported
                    self.cancel(task_id)
                raise HostedTimeout(self.service, f"task {task_id} still {state.status} after {p.timeout_s:g} s",
                                    trace_id=self.client.last_trace_id)
            self.client.sleep(interval)
            interval = min(interval * p.poll_growth, p.poll_max_s)

    def render_chunk(self, chunk: ChunkSpan, frames: Iterator[FrameInput]) -> Iterator[np.ndarray]:
        """Send the chunk (prompt, references, control video, optional first frame), wait, download,
        and yield the returned video resampled to the chunk's frames at the canvas size."""
        layout, job = self.job.layout, self.job
        edges, first, last_input = [], None, None
        for item in frames:
            edges.append(layout.compose({c: np.repeat(item.controls[c].edges[..., None], 3, axis=2) for c in layout.cameras}))
            if first is None and self.sends_first_frame:
                first = self._previous.get(item.step)
                if first is None and self._composite is not None:
                    first = layout.compose({c: self._composite.render_camera(c, item.step, item.controls[c])
                                            for c in layout.cameras})
            last_input = item
        last = None
        if self.wants_last_frame and self._composite is not None and last_input is not None:
            last = layout.compose({c: self._composite.render_camera(c, last_input.step, last_input.controls[c])
                                   for c in layout.cameras})
        conditioning = Conditioning(prompt=job.prompt.text, references=self.references,
                                    control_video=encode_video(edges, job.fps), first_frame=first, last_frame=last,
                                    seconds=chunk.frames / job.fps, seed=chunk.seed)
        before = (self.client.retries, self.client.rate_limited)
        submitted = datetime.now(UTC)
        started = time.monotonic()
        task_id = self.submit(chunk, conditioning)
        state, polls = self._wait_for(task_id)
        video = self.client.download(state.video_url)  # type: ignore[arg-type]
        try:
            returned, _ = read_video(video)
        except Exception as err:  # noqa: BLE001 - any decoder failure means the service sent no usable video
            raise HostedServiceError(self.service,
                                     f"task {task_id}: the downloaded result is not a readable video ({err})") from None
        if len(returned) == 0:
            raise HostedServiceError(self.service, f"task {task_id}: the downloaded video has no frames")
        cost, basis = self.cost(state, returned)
        self.jobs.append(HostedJob(
            service=self.service, chunk=chunk.index, task_id=task_id, model=self.parameters.model, status=state.status,
            submitted_at=submitted.isoformat(timespec="seconds"), seconds=time.monotonic() - started, polls=polls,
            rate_limited=self.client.rate_limited - before[1], retries=self.client.retries - before[0], cost_usd=cost,
            cost_basis=basis, video_frames=len(returned), video_size=(returned.shape[2], returned.shape[1]),
            trace_id=self.client.last_trace_id, control_video_sent=self.control_video_sent))
        fitted = fit_frames(returned, chunk.frames, layout.width, layout.height)
        self._previous = {chunk.start + i: frame for i, frame in enumerate(fitted)}
        yield from fitted

    @property
    def wants_last_frame(self) -> bool:
        """Whether jobs carry a last frame (composite) too."""
        return False

    def report(self) -> RendererReport:
        """Cost and jobs of the episode."""
        notes = list(self.notes)
        if self.jobs and not self.jobs[0].control_video_sent:
            notes.append(f"{self.service}: the endpoint has no control-video field; "
                         "jobs carried the first frame and the prompt")
        return RendererReport(cost_usd=sum(j.cost_usd for j in self.jobs), jobs=list(self.jobs), notes=notes,
                              details={"requests": self.client.requests, "waited_s": round(self.client.waited_s, 3)})


def image_urls(images: list[np.ndarray]) -> list[str]:
    """PNG data URLs of images."""
    return [png_data_url(i) for i in images]


def video_url(data: bytes) -> str:
    """MP4 data URL."""
    return mp4_data_url(data)
