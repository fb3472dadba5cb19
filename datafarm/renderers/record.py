"""What a render wrote down (`episodes/<id>/render.json`): renderer, prompt and its K template, the
canvas layout, the chunks and where they were joined, the ood variation applied, cost and hosted jobs,
the hashes of the videos, and where the time went."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.request import Mode, OodAxis, OodValue
from datafarm.renderers.chunks import ChunkSpan, Join
from datafarm.renderers.layout import CanvasLayout

RENDER_RECORD = "render.json"
"""File name of the render record inside the episode folder."""


class HostedJob(Artifact):
    """One generation job on a hosted video-model service."""

    service: Literal["minimax", "seedance"]
    """Which service ran it."""
    chunk: int = Field(ge=0)
    """Chunk index it generated."""
    task_id: str
    """The service's task id."""
    model: str
    """Model name sent."""
    status: str
    """Final status as the service reported it (e.g. Success, succeeded)."""
    submitted_at: str
    """UTC time the job was submitted (ISO 8601)."""
    seconds: float = Field(ge=0)
    """Wall time from submit to downloaded result."""
    polls: int = Field(ge=0)
    """Status queries made."""
    rate_limited: int = Field(ge=0)
    """Requests answered with a rate-limit error (and retried after waiting)."""
    retries: int = Field(ge=0)
    """Requests retried for any reason (rate limits, server errors, timeouts)."""
    cost_usd: float = Field(ge=0)
    """Charged (or estimated) cost of the job, US dollars."""
    cost_basis: str
    """How the cost was computed (usage tokens x price, or a flat per-video price), with the price's source."""
    video_frames: int = Field(ge=0)
    """Frames in the returned video."""
    video_size: tuple[int, int]
    """(width, height) of the returned video."""
    trace_id: str | None = None
    """The service's trace id for the job's last request, when it sends one."""
    control_video_sent: bool
    """Whether the control video went with the job (a service without a control field gets the first frame and prompt only)."""


class RendererReport(Artifact):
    """What the renderer reports after an episode."""

    cost_usd: float = Field(default=0.0, ge=0)
    """Total cost of the episode's render, US dollars (0 for offline renderers)."""
    jobs: list[HostedJob] = Field(default_factory=list)
    """Hosted jobs, one per chunk."""
    notes: list[str] = Field(default_factory=list)
    """Plain-language notes for reviewers (fallbacks taken, unconfirmed details used)."""
    details: dict[str, JsonValue] = Field(default_factory=dict)
    """Renderer-specific measurements (e.g. the composite's transferred colours)."""


class RenderTiming(Artifact):
    """Where the render's wall time went, seconds."""

    setup_s: float = Field(ge=0)
    """World build, cameras, nominal render, clip decoding, renderer preparation."""
    passes_s: float = Field(ge=0)
    """Sim render passes (RGB, depth, segmentation) of every frame."""
    control_s: float = Field(ge=0)
    """Control signals (edge maps)."""
    renderer_s: float = Field(ge=0)
    """The renderer generating the canvas frames."""
    encode_s: float = Field(ge=0)
    """Joining and splitting canvases, handing frames to the H.264 encoder (which runs on its own
    thread, alongside the passes) and waiting for it to finish the obs and sim videos."""
    total_s: float = Field(ge=0)
    """Everything, end to end."""


class RenderRecord(Artifact):
    """`render.json`: how one episode's videos were made."""

    episode_id: str
    """Episode id."""
    renderer: str
    """Renderer name (composite, minimax, seedance)."""
    parameters: dict[str, JsonValue]
    """R's renderer parameters as used."""
    mode: Mode
    """sim2real or ood."""
    variations: dict[OodAxis, OodValue]
    """The ood value applied per axis (empty in sim2real)."""
    seed: int = Field(ge=0)
    """Render seed (chunk seeds derive from it)."""
    k_version: str
    """K version whose render template made the prompt."""
    template: str
    """The template's path inside K."""
    template_sha256: str
    """sha256 of the template text."""
    prompt: str
    """The prompt rendered from K's template (video models receive it; composite records it only)."""
    unused_template_variables: list[str] = Field(default_factory=list)
    """R's template variables the template does not read."""
    fps: float = Field(gt=0)
    """Frame rate of every video: frame i is control step i, shown at time i / fps."""
    control_hz: float = Field(gt=0)
    """The episode's control rate (playback speed = fps / control_hz)."""
    frames: int = Field(ge=1)
    """Frames in every video (= the episode's control steps)."""
    resolution: tuple[int, int]
    """(width, height) of each camera's video."""
    cameras: list[str]
    """Cameras rendered, in layout order."""
    layout: CanvasLayout
    """How the cameras were tiled on the canvas the renderer generated."""
    chunks: list[ChunkSpan]
    """The chunks generated."""
    joins: list[Join]
    """Where adjacent chunks were joined (one fewer than chunks)."""
    files: dict[str, str]
    """Video path relative to the episode folder -> sha256 (obs/<camera>.mp4, sim/<camera>.mp4)."""
    report: RendererReport
    """The renderer's own report (cost, hosted jobs, notes, measurements)."""
    timing: RenderTiming
    """Where the time went."""
