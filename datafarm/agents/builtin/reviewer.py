"""The builtin reviewer (stage 9), and the sim-state summary it reads.

The reviewer sees only what its tools give it: decoded frames of the episode's rendered videos, the
real reference frames of the clip, and the sim-state summary. It never sees the verifier's results,
the author's transcript or J. Its evidence is its own (datafarm.agents.builtin.review_checks):

| claim | how it is checked |
| --- | --- |
| frames | the last frame of every video decodes and the next one does not exist |
| views | each video's background matches its own camera's reference frames better than any other camera's |
| background | outside the regions the summary gives (robot, objects, and where the clip had the objects) every keyframe agrees with the reference frames |
| appearance | each object's colour in the keyframes (median of the pixels that stand out from its surroundings) is its colour in the reference frames |
| motion | each object's real colour is found where the sim puts it in the first and last keyframes, displaced as far as the sim moved it |

The episode is accepted only when every claim holds; a rejection routes to `render` (every claim is
about the video agreeing with the sim and the real scene).

`state_summary` (trusted, for compile) writes the summary: a few lines for a reader and a
`Review facts` JSON block with, per camera and keyframe, the pixel boxes of the objects and the
robot's links, projected from the recorded sim state through the episode's cameras. As a role
function, `respond` reads the summary, fetches the keyframes and reference frames, measures, and
writes the verdict with `write_verdict`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import cv2
import numpy as np
import sapien

from datafarm.agents.builtin.common import (
    BuiltinRefusal,
    answer,
    calls_made,
    last_result,
    refused_writes,
    tool_results,
)
from datafarm.agents.builtin.review_checks import (
    MOVED_M,
    Box,
    CameraFacts,
    FrameSet,
    KeyframeRegions,
    ObjectFacts,
    Regions,
    ReviewFacts,
    facts_text,
    parse_facts,
    resized,
    review_claims,
)
from datafarm.agents.messages import ImagePart, ModelRequest, ModelResponse, ToolResult
from datafarm.agents.providers.function import FunctionInfo
from datafarm.artifacts.episode import ContactEvent
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.io import load_artifact
from datafarm.errors import InputError, Problem
from datafarm.renderers.record import RENDER_RECORD, RenderRecord
from datafarm.renderers.scene import Projector, render_camera
from datafarm.sim.episode_io import read_episode
from datafarm.sim.recording import replay_states
from datafarm.sim.world import World, build_world
from datafarm.sim.world.frames import table_top_matrix

KEYFRAMES = 5
"""Keyframes per camera the summary gives regions for (first and last included)."""
STAGE = "review"
"""The stage this role works."""
_MAX_CONTACTS = 12


# --- the summary (trusted side) ------------------------------------------------------------------------


def _apply(world: World, state: Mapping[str, Mapping]) -> None:
    """Put a physics-only world into a recorded state (poses and joint positions; no stepping)."""
    articulations = {a.name: a for a in world.scene.get_all_articulations()}
    for oid, pose in state.get("bodies", {}).items():
        world.object(oid).entity.set_pose(sapien.Pose(list(pose[:3]), list(pose[3:])))
    for name, joints in state.get("articulations", {}).items():
        art = articulations[name]
        names = [j.name for j in art.active_joints]
        q = np.asarray(art.get_qpos(), dtype=np.float64).copy()
        for joint, value in joints.items():
            q[names.index(joint)] = value
        art.set_qpos(q.astype(np.float32))


def _corners(aabb: np.ndarray) -> np.ndarray:
    lo, hi = np.asarray(aabb[0], dtype=np.float64), np.asarray(aabb[1], dtype=np.float64)
    return np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])


def _project(projector: Projector, points: np.ndarray) -> Box | None:
    """The pixel box of world points in front of the camera, clipped to the image; None when empty."""
    uv, depth = projector.project(points)
    uv = uv[depth > 1e-3]
    if len(uv) == 0:
        return None
    x0, y0 = np.floor(uv.min(axis=0))
    x1, y1 = np.ceil(uv.max(axis=0))
    box = (int(max(0, x0)), int(max(0, y0)), int(min(projector.width, x1)), int(min(projector.height, y1)))
    return box if box[2] - box[0] >= 1 and box[3] - box[1] >= 1 else None


def _aabbs(world: World) -> tuple[dict[str, list[np.ndarray]], list[np.ndarray]]:
    """World AABBs of each object's bodies and of every robot link, as the world stands now."""
    objects: dict[str, list[np.ndarray]] = {}
    for oid, obj in world.objects.items():
        bodies = list(obj.articulation.links) if obj.articulation is not None else [obj.body]
        objects[oid] = [np.asarray(b.compute_global_aabb_tight()) for b in bodies]
    links = [np.asarray(link.compute_global_aabb_tight())
             for arm in world.robot.arms for link in world.robot.articulation(arm).links]
    return objects, links


def _depths(projector: Projector, points: np.ndarray) -> tuple[float, float] | None:
    """Nearest and farthest camera depth of world points in front of the camera; None when none is."""
    depth = projector.project(points)[1]
    depth = depth[depth > 1e-3]
    return (round(float(depth.min()), 4), round(float(depth.max()), 4)) if depth.size else None


def _regions(projector: Projector, objects: dict[str, list[np.ndarray]], links: list[np.ndarray]) -> dict:
    corners = {oid: np.vstack([_corners(a) for a in aabbs]) for oid, aabbs in objects.items()}
    boxes = {oid: _project(projector, points) for oid, points in corners.items()}
    depths = {oid: _depths(projector, points) if boxes[oid] is not None else None for oid, points in corners.items()}
    robot = [b for b in (_project(projector, _corners(a)) for a in links) if b is not None]
    # a link box inside another adds nothing to the region they cover
    robot = sorted(set(robot))
    robot = [b for b in robot if not any(o != b and o[0] <= b[0] and o[1] <= b[1] and o[2] >= b[2] and o[3] >= b[3]
                                         for o in robot)]
    return {"objects": boxes, "robot": [list(b) for b in robot], "depths": depths}


def _table_corners(world: World, grounding: Grounding) -> tuple[np.ndarray | None, np.ndarray | None]:
    """World corners of the table top as the episode has it and as the clip has it (G's nominal top)."""
    table = world.grounding.table
    if table is None or grounding.table is None:
        return None, None
    hx, hy = table.size_x.value / 2, table.size_y.value / 2
    local = np.array([[-hx, -hy, 0.0, 1.0], [hx, -hy, 0.0, 1.0], [hx, hy, 0.0, 1.0], [-hx, hy, 0.0, 1.0]])
    nominal = grounding.table
    clip = table_top_matrix(nominal.center, 0.0, nominal.tilt_x.value, nominal.tilt_y.value)
    return (local @ world.world_from_table_top.T)[:, :3], (local @ clip.T)[:, :3]


def _polygon(projector: Projector, corners: np.ndarray | None) -> list[tuple[float, float]]:
    """Pixel corners of a world polygon; empty when it has none or any corner lies behind the camera."""
    if corners is None:
        return []
    uv, depth = projector.project(corners)
    if (depth <= 1e-3).any():
        return []
    return [(round(float(u), 1), round(float(v), 1)) for u, v in uv]


def _keyframes(frames: int, count: int) -> list[int]:
    return sorted({round(float(v)) for v in np.linspace(0, frames - 1, max(2, count))})


def _contacts_line(contacts: Sequence[ContactEvent]) -> str:
    if not contacts:
        return "Contacts: none."
    shown = [f"{c.a} - {c.b} steps {c.start_step}-{'end' if c.end_step is None else c.end_step}"
             for c in contacts[:_MAX_CONTACTS]]
    more = f" (and {len(contacts) - _MAX_CONTACTS} more)" if len(contacts) > _MAX_CONTACTS else ""
    return f"Contacts: {len(contacts)} events: " + "; ".join(shown) + more + "."


def state_summary(episode_dir: Path | str, grounding: Grounding, *,
                  reference_frames: Mapping[str, Sequence[int]] | None = None, keyframes: int = KEYFRAMES) -> str:
    """The sim-state summary of a rendered episode for its reviewer (ReviewMaterial.state_summary).

    Reads the episode (episode.json and data) and its render record (render.json) in `episode_dir`,
    rebuilds the scene physics-only from `grounding` (G) and the episode's variation, replays the
    recorded states at `keyframes` evenly spaced frames, and projects the objects' and the robot
    links' collision boxes through each camera (at the episode's camera poses; the `reference`
    regions through the clip's poses, objects at G's poses). `reference_frames` are R's reference
    frames per camera (default: clip frame 0). InputError when the episode has not been rendered."""
    episode_dir = Path(episode_dir)
    if not (episode_dir / RENDER_RECORD).is_file():
        raise InputError([Problem("the episode has not been rendered (no render.json)", file=episode_dir / RENDER_RECORD)])
    render = load_artifact(RenderRecord, episode_dir / RENDER_RECORD)
    stored = read_episode(episode_dir)
    record, recording = stored.record, stored.recording
    world = build_world(grounding, record.variation)
    states = replay_states(world, recording)
    width, height = render.resolution
    frames = recording.steps  # one video frame per control step, whatever the render record says
    chosen = _keyframes(frames, keyframes)
    g_cams = {c.name: c for c in grounding.cameras}
    episode_view = {n: Projector.of(render_camera(g_cams[n], width, height, record.variation.camera_poses.get(n)))
                    for n in render.cameras}
    clip_view = {n: Projector.of(render_camera(g_cams[n], width, height)) for n in render.cameras}

    per_camera: dict[str, list[dict]] = {n: [] for n in render.cameras}
    for frame in chosen:
        _apply(world, states[frame])
        objects, links = _aabbs(world)
        for name in render.cameras:
            per_camera[name].append({"frame": frame, **_regions(episode_view[name], objects, links)})
    nominal = {"bodies": {o.id: (*o.pose.position, *o.pose.quaternion) for o in grounding.objects
                          if not world.object(o.id).fixed},
               "articulations": states[0]["articulations"]}
    _apply(world, nominal)
    objects, links = _aabbs(world)
    corners = _table_corners(world, grounding)
    cameras = [CameraFacts(camera=name, reference_frames=list((reference_frames or {}).get(name, [0])),
                           keyframes=[KeyframeRegions.model_validate(r) for r in per_camera[name]],
                           reference=Regions.model_validate(_regions(clip_view[name], objects, links)),
                           table=_polygon(episode_view[name], corners[0]),
                           reference_table=_polygon(clip_view[name], corners[1]))
               for name in render.cameras]

    moved = []
    for oid in recording.object_ids:
        poses = recording.object_poses(oid)
        start, end = poses[0, :3], poses[frames - 1, :3]
        distance = float(np.linalg.norm(end - start))
        moved.append(ObjectFacts(id=oid, kind=world.object(oid).kind, start=tuple(round(float(v), 4) for v in start),
                                 end=tuple(round(float(v), 4) for v in end), moved_m=round(distance, 4),
                                 moved=distance > MOVED_M))
    facts = ReviewFacts(episode_id=record.episode_id, frames=frames, fps=render.fps, resolution=(width, height),
                        mode=render.mode, variations=dict(render.variations), keyframes=chosen, cameras=cameras,
                        objects=moved)

    verdict = record.verdict
    stages = ", ".join(f"{s.name} ({s.start_s:.2f}-{'?' if s.end_s is None else f'{s.end_s:.2f}'} s)"
                       for s in verdict.stages)
    applied = ", ".join(f"{k}={v}" for k, v in render.variations.items())
    lines = [
        (f"Episode {record.episode_id}: {record.steps} control steps at {record.control_hz:g} Hz; every rendered "
         f"video has {frames} frames ({width}x{height}, {render.fps:g} fps): cameras {', '.join(render.cameras)}."),
        f"Mode: {render.mode}" + (f" (variations applied: {applied})" if applied else "") + ".",
        (f"Judge: {'passed' if verdict.passed else 'failed'}; stage reached: {verdict.stage_reached}; "
         f"stages: {stages or 'none'}."),
        "Objects (world metres, z up from the table top):",
        *(f"- {o.id} ({o.kind}): starts at {o.start}, ends at {o.end}; "
          + (f"moved {o.moved_m:.3f} m" if o.moved else "stays in place") for o in moved),
        _contacts_line(recording.contacts),
        facts_text(facts),
    ]
    return "\n".join(lines)


# --- the role function -----------------------------------------------------------------------------------


def _decode(result: ToolResult, width: int, height: int) -> np.ndarray | None:
    image = next((p for p in result.content if isinstance(p, ImagePart)), None)
    if result.is_error or image is None:
        return None
    bgr = cv2.imdecode(np.frombuffer(image.data, dtype=np.uint8), cv2.IMREAD_COLOR)
    if bgr is None:
        return None
    return resized(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), width, height)


_LISTED_REFERENCES = re.compile(r"Reference frames: (.*)\.\s*$")


def reference_frames(request: ModelRequest, facts: ReviewFacts) -> dict[str, list[int]]:
    """Each camera's reference frames: those the fetch tool says it allows (R's, as the review was
    set up), else those the summary names, else clip frame 0."""
    listed: dict[str, list[int]] = {}
    tool = next((t for t in request.tools if t.name == "fetch_reference_frame"), None)
    match = _LISTED_REFERENCES.search(tool.description) if tool is not None else None
    if match:
        for part in match.group(1).split("; "):
            camera, _, frames = part.partition(": ")
            listed[camera.strip()] = [int(f) for f in re.findall(r"\d+", frames)]
    return {c.camera: listed.get(c.camera) or c.reference_frames or [0] for c in facts.cameras}


def _wanted(facts: ReviewFacts, references: Mapping[str, Sequence[int]]) -> list[tuple[str, dict]]:
    """Every fetch the review needs: each camera's keyframes, the frame just past the end (to check
    the length), and the camera's reference frames."""
    calls: list[tuple[str, dict]] = []
    for cam in facts.cameras:
        for frame in [*facts.keyframes, facts.frames]:
            calls.append(("fetch_rendered_frame", {"view": cam.camera, "frame": frame}))
        for frame in references[cam.camera]:
            calls.append(("fetch_reference_frame", {"view": cam.camera, "frame": frame}))
    return calls


def _fetched(request: ModelRequest) -> dict[tuple[str, str, int], ToolResult]:
    """(tool, view, frame) -> its result, for every fetch made so far."""
    arguments = {c.id: c.arguments or {} for c in calls_made(request)}
    out = {}
    for result in tool_results(request):
        args = arguments.get(result.call_id, {})
        if result.name.startswith("fetch_") and "view" in args and "frame" in args:
            out[(result.name, str(args["view"]), int(args["frame"]))] = result
    return out


def frame_set(facts: ReviewFacts, fetched: Mapping[tuple[str, str, int], ToolResult]) -> FrameSet:
    """The fetched frames decoded (at the rendered resolution), and the refusals by camera and frame."""
    width, height = facts.resolution
    rendered: dict[str, dict[int, np.ndarray]] = {}
    references: dict[str, dict[int, np.ndarray]] = {}
    refusals: dict[str, dict[int, str]] = {}
    for (tool, view, frame), result in fetched.items():
        image = _decode(result, width, height)
        if tool == "fetch_rendered_frame":
            if image is None:
                refusals.setdefault(view, {})[frame] = result.text
            else:
                rendered.setdefault(view, {})[frame] = image
        elif image is not None:
            references.setdefault(view, {})[frame] = image
    return FrameSet(rendered, references, refusals)


def respond(request: ModelRequest, info: FunctionInfo) -> ModelResponse:
    """The builtin reviewer: read the summary, fetch keyframes and reference frames, measure, write the verdict."""
    refused = refused_writes(request, ("write_verdict",))
    if refused:
        raise BuiltinRefusal("the builtin reviewer's verdict was refused:\n" + "\n".join(r.text for r in refused),
                             stage=STAGE, kind="refused")
    summary = last_result(request, "sim_state_summary")
    if summary is None:
        return answer(request, "Reading the sim-state summary.", ("sim_state_summary", {}))
    try:
        facts = parse_facts(summary.text)
    except ValueError as e:
        raise BuiltinRefusal(f"the sim-state summary's review facts are malformed: {e}", stage=STAGE,
                             kind="needs_input") from None
    if facts is None:
        raise BuiltinRefusal("the sim-state summary has no review facts (the regions of objects and robot per camera "
                             "that datafarm.agents.builtin.reviewer.state_summary writes); the builtin reviewer needs "
                             "them to know where to look", stage=STAGE, kind="needs_input")
    fetched = _fetched(request)
    wanted = _wanted(facts, reference_frames(request, facts))
    missing = [(tool, args) for tool, args in wanted if (tool, args["view"], args["frame"]) not in fetched]
    if missing:
        return answer(request, f"Fetching {len(missing)} frames: keyframes {facts.keyframes} of every camera, the frame "
                               f"after the last, and the real reference frames.", *missing)
    claims = review_claims(facts, frame_set(facts, fetched))
    accepted = all(c.holds for c in claims)
    failed = [c.claim for c in claims if not c.holds]
    verdict = {
        "accepted": accepted,
        "claims": [c.model_dump(mode="json") for c in claims],
        "route_to": None if accepted else "render",
    }
    text = ("Every claim holds: the episode is accepted." if accepted
            else f"{len(failed)} claim(s) fail ({'; '.join(failed)}): rejected, back to render.")
    return answer(request, text, ("write_verdict", {"content": verdict}))
