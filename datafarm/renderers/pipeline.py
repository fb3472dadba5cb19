"""Render one episode: sim render passes by replay -> control signals -> all cameras on one canvas ->
the renderer generates the canvas video in overlapping chunks -> chunks joined where they differ
least -> split into `obs/<camera>.mp4`, with the passes' own images in `sim/<camera>.mp4`.

Frame i of every video is control step i of the episode (stamped at i / R.fps). The videos are
written into a scratch folder and moved into the episode folder only when all of them are complete,
together with `render.json` (datafarm.renderers.record.RenderRecord).

Entry points: `render_episode` (explicit inputs) and `render_task_episode` (reads them from a task
folder).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from datafarm.artifacts.episode import EpisodeRecord
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.io import load_artifact, save_artifact
from datafarm.artifacts.render_contract import RenderContract
from datafarm.artifacts.sampler import Variation
from datafarm.capability.bundle import CapabilityBundle
from datafarm.errors import DatafarmError, InputError, Problem
from datafarm.hashing import sha256_file
from datafarm.renderers.base import FrameInput, Renderer, RenderJob
from datafarm.renderers.chunks import ChunkSpan, Join, choose_join, plan_chunks
from datafarm.renderers.control import control_frame
from datafarm.renderers.layout import CanvasLayout, make_layout
from datafarm.renderers.prompts import TemplateSource, video_prompt
from datafarm.renderers.record import RENDER_RECORD, RenderRecord, RenderTiming
from datafarm.renderers.registry import create_renderer
from datafarm.renderers.scene import ClipFrames, check_cameras, render_camera, segment_classes
from datafarm.renderers.video import BackgroundEncoder, VideoWriter
from datafarm.sim.episode_io import read_episode
from datafarm.sim.recording import replay_states
from datafarm.sim.render_passes import RenderPasses
from datafarm.sim.world import build_world
from datafarm.sim.world.frames import table_top_matrix

OBS_DIR = "obs"
"""Rendered (photoreal) videos, one per camera."""
SIM_DIR = "sim"
"""The sim render passes' RGB, one video per camera."""


_WARM: list[object] = []


def keep_renderer_warm() -> None:
    """Hold one SAPIEN render system for the life of the process. SAPIEN frees its renderer (and the
    shaders it compiled, seconds of work) when the last render system goes away, so without this every
    episode rendered after the previous one's world is freed pays the compilation again (measured:
    0.1 s per episode instead of 4-12 s)."""
    if not _WARM:
        import sapien

        _WARM.append(sapien.render.RenderSystem())


class RenderError(DatafarmError):
    """A renderer broke its contract (wrong frame count or size)."""

    exit_code = 4


def applied_variations(contract: RenderContract, variation: Variation, seed: int) -> dict[str, Any]:
    """The ood value per axis for this episode: z's drawn appearance where it has one (it must be
    among R's values), else a seeded choice among R's values. Empty in sim2real."""
    if contract.mode != "ood":
        return {}
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {}
    for axis, values in contract.variations.items():
        if axis in variation.appearance:
            value = variation.appearance[axis]
            if value not in values:
                raise InputError([Problem(f"z drew {axis}={value!r}, which R does not allow", field=f"variations.{axis}",
                                          expected=", ".join(map(str, values)))])
            out[axis] = value
        else:
            out[axis] = values[int(rng.integers(len(values)))]
    return out


def _load(model: type, value: Any) -> Any:
    return value if isinstance(value, model) else load_artifact(model, value)


def _checked(outputs: Iterable[np.ndarray], renderer: Renderer, chunk: ChunkSpan, layout: CanvasLayout) -> Iterator[np.ndarray]:
    """The renderer's canvases for `chunk`, checked: exactly `chunk.frames` of them, uint8, canvas-sized."""
    produced = 0
    for canvas in outputs:
        if produced == chunk.frames:
            raise RenderError(f"renderer {renderer.name} gave more than {chunk.frames} frames for chunk {chunk.index}")
        if canvas.shape != (layout.height, layout.width, 3) or canvas.dtype != np.uint8:
            raise RenderError(f"renderer {renderer.name} gave a {canvas.dtype} {canvas.shape} canvas in chunk "
                              f"{chunk.index}; expected uint8 ({layout.height}, {layout.width}, 3)")
        produced += 1
        yield canvas
    if produced != chunk.frames:
        raise RenderError(f"renderer {renderer.name} gave {produced} frames for chunk {chunk.index} (frames "
                          f"{chunk.start}-{chunk.stop - 1}); expected {chunk.frames}")


class _PassFeed:
    """Control frames by episode frame: new ones rendered by the passes (their sim images written to
    the sim videos, each frame exactly once, in order), overlap frames served again from a cache."""

    def __init__(self, passes: RenderPasses, states: list[dict], sim: dict[str, VideoWriter], timing: dict[str, float],
                 encoder: BackgroundEncoder) -> None:
        self.passes, self.states, self.sim, self.timing, self.encoder = passes, states, sim, timing, encoder
        self.cache: dict[int, FrameInput] = {}
        self.rendered = 0

    def frames(self, start: int, stop: int, keep_from: int | None) -> Iterator[FrameInput]:
        """Frames start..stop-1; those at or after `keep_from` are kept for the next chunk."""
        for i in [i for i in self.cache if i < start]:
            del self.cache[i]
        for i in range(start, stop):
            if i in self.cache:
                yield self.cache[i]
                continue
            if i != self.rendered:
                raise RenderError(f"frame {i} requested out of order (next to render: {self.rendered})")
            t0 = time.perf_counter()
            frames = self.passes.render(self.states[i])
            t1 = time.perf_counter()
            item = FrameInput(step=i, controls={n: control_frame(f) for n, f in frames.items()})
            t2 = time.perf_counter()
            for name, writer in self.sim.items():
                self.encoder.write(writer, frames[name].rgb)
            self.timing["passes"] += t1 - t0
            self.timing["control"] += t2 - t1
            self.timing["encode"] += time.perf_counter() - t2
            self.rendered += 1
            if keep_from is not None and i >= keep_from:
                self.cache[i] = item
            yield item


class Stitcher:
    """Joins chunk outputs at the overlap frame where adjacent chunks differ least and hands every
    episode frame, once and in order, to `write`."""

    def __init__(self, write: Callable[[np.ndarray], None]) -> None:
        self.write = write
        self.pending: list[np.ndarray] = []
        """The previous chunk's frames from the current chunk's start on (its overlap)."""
        self.joins: list[Join] = []
        """The joins made so far."""

    def add(self, chunk: ChunkSpan, outputs: Iterable[np.ndarray], next_start: int | None) -> None:
        """Take one chunk's frames (`next_start`: where the next chunk begins, None for the last)."""
        outputs = iter(outputs)
        frame = chunk.start
        if self.pending:
            head = [next(outputs) for _ in self.pending]
            # the join is searched before the next chunk's overlap, so every later frame is this chunk's
            limit = len(head) if next_start is None else max(1, min(len(head), next_start - chunk.start))
            join = choose_join(self.pending[:limit], head[:limit], chunk.start, chunk.index - 1, chunk.index)
            self.joins.append(join)
            cut = join.frame - chunk.start
            joined = self.pending[:cut] + head[cut:]
            self.pending = []
            for canvas in joined:
                self._place(canvas, frame, next_start)
                frame += 1
        for canvas in outputs:
            self._place(canvas, frame, next_start)
            frame += 1

    def _place(self, canvas: np.ndarray, frame: int, next_start: int | None) -> None:
        if next_start is not None and frame >= next_start:
            self.pending.append(canvas)
        else:
            self.write(canvas)


@dataclass
class PreparedEpisode:
    """An episode ready to render: the job a renderer gets, the render passes and the states to replay."""

    job: RenderJob
    """What the renderer is prepared with."""
    passes: RenderPasses
    """Render passes on the episode's world, cameras at the episode's poses."""
    states: list[dict]
    """Per control step, the state the passes replay."""
    record: EpisodeRecord
    """The episode record."""


def prepare_episode(episode_dir: Path | str, *, grounding: Grounding | Path | str, contract: RenderContract | Path | str,
                    clip_dir: Path | str, task: str, work_dir: Path | str,
                    templates: CapabilityBundle | Path | str | None = None, seed: int | None = None) -> PreparedEpisode:
    """Everything before the renderer runs: R and G loaded and checked (a contract that supplies a
    template or prompt is an InputError here), the episode read, the ood values chosen, the prompt
    rendered from K's template, the world built with visuals, the cameras mounted, G's scene rendered
    as the clip shows it, and the segmentation ids classified."""
    contract = _load(RenderContract, contract)
    grounding = _load(Grounding, grounding)
    cameras = check_cameras(contract, grounding)
    stored = read_episode(Path(episode_dir))
    record, recording = stored.record, stored.recording
    variation = record.variation
    seed = variation.seed if seed is None else seed
    variations = applied_variations(contract, variation, seed)
    width, height = contract.resolution
    layout = make_layout(cameras, width, height)
    prompt = video_prompt(contract, grounding, layout, task, variations, TemplateSource(templates))

    world = build_world(grounding, variation, render=True)
    keep_renderer_warm()
    g_cams = {c.name: c for c in grounding.cameras}
    clip_cameras = {name: render_camera(g_cams[name], width, height) for name in cameras}
    episode_cameras = {name: render_camera(g_cams[name], width, height, variation.camera_poses.get(name))
                       for name in cameras}
    passes = RenderPasses(world.scene, [episode_cameras[name] for name in cameras])
    # G's scene as the clip shows it: objects at G's poses, the robot as built, the clip's camera poses
    nominal_bodies = {o.id: (*o.pose.position, *o.pose.quaternion) for o in grounding.objects
                      if not world.object(o.id).fixed}
    nominal = passes.render({"bodies": nominal_bodies,
                             "cameras": {n: c.world_from_camera for n, c in clip_cameras.items()}})
    passes.apply({"cameras": {n: c.world_from_camera for n, c in episode_cameras.items()}})
    table = grounding.table
    clip_table = (table_top_matrix(table.center, 0.0, table.tilt_x.value, table.tilt_y.value)
                  if table is not None else np.eye(4))
    job = RenderJob(
        episode_id=record.episode_id, contract=contract, grounding=world.grounding, variation=variation,
        recording=recording, layout=layout, cameras=episode_cameras, clip_cameras=clip_cameras,
        clip=ClipFrames(clip_dir, width, height), nominal={n: control_frame(f) for n, f in nominal.items()},
        segments=segment_classes(world, passes.segmentation_labels, passes.articulation_labels),
        world_from_table_top=world.world_from_table_top, clip_world_from_table_top=clip_table, prompt=prompt,
        variations=variations, fps=contract.fps, seed=seed, work_dir=Path(work_dir))
    return PreparedEpisode(job, passes, replay_states(world, recording), record)


def render_episode(episode_dir: Path | str, *, grounding: Grounding | Path | str, contract: RenderContract | Path | str,
                   clip_dir: Path | str, task: str, templates: CapabilityBundle | Path | str | None = None,
                   renderer: Renderer | None = None, out_dir: Path | str | None = None, seed: int | None = None,
                   env: Mapping[str, str] | None = None) -> RenderRecord:
    """Render the episode in `episode_dir` (episode.json + data, as `datafarm.sim.episode_io` writes
    it) into `out_dir` (default: the episode folder): obs/<camera>.mp4, sim/<camera>.mp4, render.json.

    `grounding` and `contract` are G and R (objects or file paths; a contract that supplies a template
    or prompt is rejected with an InputError before anything renders), `clip_dir` the calibration
    clip, `task` the request's task text (for the prompt), `templates` the K bundle (or K folder) whose
    render templates make the prompt (default: the draft K folder), `renderer` an already built
    renderer (default: the one R names, with R's parameters; hosted ones read their keys from `env` or
    the environment), `seed` the render seed (default: z's seed). Returns the record it wrote."""
    started = time.perf_counter()
    contract = _load(RenderContract, contract)
    episode_dir = Path(episode_dir)
    out_dir = Path(out_dir) if out_dir is not None else episode_dir
    renderer = renderer or create_renderer(contract.renderer.name, contract.renderer.parameters, env)
    out_dir.mkdir(parents=True, exist_ok=True)
    scratch = out_dir / f".render-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    for sub in (OBS_DIR, SIM_DIR, "work"):
        (scratch / sub).mkdir(parents=True)
    timing = {"passes": 0.0, "control": 0.0, "renderer": 0.0, "encode": 0.0}
    obs: dict[str, VideoWriter] = {}
    sim: dict[str, VideoWriter] = {}
    encoder = BackgroundEncoder()
    try:
        prepared = prepare_episode(episode_dir, grounding=grounding, contract=contract, clip_dir=clip_dir, task=task,
                                   work_dir=scratch / "work", templates=templates, seed=seed)
        job, record = prepared.job, prepared.record
        layout, cameras, steps = job.layout, job.layout.cameras, job.recording.steps
        width, height = contract.resolution
        renderer.prepare(job)
        setup_s = time.perf_counter() - started
        chunks = plan_chunks(steps, contract.chunk_frames, contract.overlap_frames, job.seed)
        obs = {n: VideoWriter(scratch / OBS_DIR / f"{n}.mp4", width, height, contract.fps) for n in cameras}
        sim = {n: VideoWriter(scratch / SIM_DIR / f"{n}.mp4", width, height, contract.fps) for n in cameras}

        def write(canvas: np.ndarray) -> None:
            t0 = time.perf_counter()
            for name, image in layout.split(canvas).items():
                encoder.write(obs[name], np.ascontiguousarray(image))
            timing["encode"] += time.perf_counter() - t0

        feed = _PassFeed(prepared.passes, prepared.states, sim, timing, encoder)
        stitch = Stitcher(write)
        for k, chunk in enumerate(chunks):
            next_start = chunks[k + 1].start if k + 1 < len(chunks) else None
            inputs = feed.frames(chunk.start, chunk.stop, next_start)
            t_chunk, spent_before = time.perf_counter(), sum(timing.values())
            stitch.add(chunk, _checked(renderer.render_chunk(chunk, inputs), renderer, chunk, layout), next_start)
            for _ in inputs:  # a renderer that skipped control frames still gets every sim frame written
                pass
            timing["renderer"] += (time.perf_counter() - t_chunk) - (sum(timing.values()) - spent_before)
        t0 = time.perf_counter()
        encoder.close()
        for writer in [*obs.values(), *sim.values()]:
            writer.close()
        timing["encode"] += time.perf_counter() - t0
        for n in cameras:
            if obs[n].frames != steps or sim[n].frames != steps:
                raise RenderError(f"camera {n}: wrote {obs[n].frames} obs and {sim[n].frames} sim frames for {steps} steps")
        files = {}
        for folder in (OBS_DIR, SIM_DIR):
            target = out_dir / folder
            old = out_dir / f".{folder}-old-{uuid.uuid4().hex[:8]}"
            if target.exists():
                target.rename(old)
            (scratch / folder).rename(target)
            shutil.rmtree(old, ignore_errors=True)
            for n in cameras:
                files[f"{folder}/{n}.mp4"] = sha256_file(target / f"{n}.mp4")
        prompt = job.prompt
        result = RenderRecord(
            episode_id=record.episode_id, renderer=renderer.name, parameters=dict(contract.renderer.parameters),
            mode=contract.mode, variations=job.variations, seed=job.seed, k_version=prompt.k_version,
            template=prompt.template, template_sha256=prompt.template_sha256, prompt=prompt.text,
            unused_template_variables=prompt.unused_variables, fps=contract.fps, control_hz=record.control_hz,
            frames=steps, resolution=(width, height), cameras=cameras, layout=layout, chunks=chunks, joins=stitch.joins,
            files=files, report=renderer.report(),
            timing=RenderTiming(setup_s=setup_s, passes_s=timing["passes"], control_s=timing["control"],
                                renderer_s=max(0.0, timing["renderer"]), encode_s=timing["encode"],
                                total_s=time.perf_counter() - started))
        save_artifact(result, out_dir / RENDER_RECORD)
        return result
    finally:
        # on success these are already closed; on failure the scratch folder goes anyway
        with contextlib.suppress(Exception):
            encoder.close()
        for writer in [*obs.values(), *sim.values()]:
            with contextlib.suppress(Exception):
                writer.close()
        shutil.rmtree(scratch, ignore_errors=True)


def render_task_episode(task_dir: Path | str, episode_id: str, *, renderer: Renderer | None = None,
                        templates: CapabilityBundle | Path | str | None = None,
                        env: Mapping[str, str] | None = None, seed: int | None = None) -> RenderRecord:
    """Render `episodes/<episode_id>` of a task folder with its G, R, request (task text and clip) and,
    unless `templates` says otherwise, the K version its capability.lock pins. `seed` is the render
    seed (default: z's seed); a render routed back for another attempt gets a new one."""
    from datafarm.capability.bundle import load as load_bundle
    from datafarm.capability.models import CapabilityLock
    from datafarm.intake.request import load_request
    from datafarm.taskdir import TaskDir

    tdir = TaskDir(Path(task_dir))
    request = load_request(tdir.request)
    if templates is None and tdir.capability_lock.is_file():
        lock = CapabilityLock.model_validate_json(tdir.capability_lock.read_text(encoding="utf-8"))
        templates = load_bundle(lock.k_version)
    episode = tdir.episode(episode_id)
    if not (episode / "episode.json").is_file():
        raise InputError([Problem(f"no episode {episode_id!r} in this task folder", file=episode)])
    return render_episode(episode, grounding=tdir.grounding, contract=tdir.render_contract, clip_dir=request.clip,
                          task=request.task, templates=templates, renderer=renderer, env=env, seed=seed)
