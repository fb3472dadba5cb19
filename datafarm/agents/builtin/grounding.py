"""The builtin author's grounding stage: G from the calibration clip alone, through the author's tools.

    answer 1: list_views (and clip_info, when the author has that tool: clip.yaml's robot_base and
              the clip's calibration board)
    answer 2: fetch_frame for `FRAMES_PER_VIEW` frames of every view, spread over the clip
    answer 3: write_artifact G, computed from the fetched frames by classic vision
              (datafarm.agents.builtin.vision.scene): cameras from clip.yaml (measured) or fitted
              from a ChArUco board, the table plane and edges, objects segmented against the table
              and the robot in each view, matched across views and fitted with primitives, linked
              to the task text's nouns by category and colour words; mass and friction assumed
    a refused write (it should not happen: the builtin writes what the schema takes) ends the stage
    with BuiltinRefusal.

Like every builtin stage it is stateless: each call reads the conversation so far.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np

from datafarm.agents.builtin.common import (
    BuiltinRefusal,
    answer,
    last_result,
    prompt_field,
    task_text,
    tool_results,
)
from datafarm.agents.messages import ImagePart, ModelRequest, ModelResponse, ToolResult
from datafarm.agents.providers.function import FunctionInfo
from datafarm.artifacts.common import Intrinsics, Pose

STAGE = "grounding"
FRAMES_PER_VIEW = 4
"""Frames fetched from each view (spread over the clip; their median hides noise and flicker)."""
CLIP_INFO_TOOL = "clip_info"
"""The author tool that returns clip.yaml's robot_base and the clip's calibration board, when offered."""


def _refuse(message: str, kind: str = "needs_input") -> BuiltinRefusal:
    return BuiltinRefusal(message, stage=STAGE, route_to=STAGE, kind=kind)


def _json(result: ToolResult | None, what: str) -> Any:
    if result is None:
        return None
    if result.is_error:
        raise _refuse(f"{what} failed: {result.text}")
    try:
        return json.loads(result.text)
    except json.JSONDecodeError as e:
        raise _refuse(f"{what} answered something that is not JSON ({e})") from None


def frame_indices(frames: int, count: int = FRAMES_PER_VIEW) -> list[int]:
    """`count` frame indices spread evenly over a clip of `frames` frames."""
    if frames <= 0:
        return [0]
    return sorted({round(v) for v in np.linspace(0, frames - 1, min(count, frames))})


def _has_tool(request: ModelRequest, name: str) -> bool:
    return any(t.name == name for t in request.tools)


def _decode(part: ImagePart) -> np.ndarray:
    data = np.frombuffer(part.data, np.uint8)
    bgr = cv2.imdecode(data, cv2.IMREAD_COLOR)
    if bgr is None:
        raise _refuse(f"a fetched frame ({part.label}) is not a readable image")
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def _fetched(request: ModelRequest) -> dict[tuple[str, int], np.ndarray]:
    """(view, frame index) -> RGB frame, for every fetch_frame result so far."""
    calls = {p.id: p for m in request.messages if m.role == "assistant" for p in m.parts
             if getattr(p, "name", None) == "fetch_frame"}
    out: dict[tuple[str, int], np.ndarray] = {}
    for result in tool_results(request):
        if result.name != "fetch_frame":
            continue
        call = calls.get(result.call_id)
        if result.is_error:
            raise _refuse(f"fetch_frame failed: {result.text}")
        images = [p for p in result.content if isinstance(p, ImagePart)]
        if call is None or not images or call.arguments is None:
            continue
        out[(str(call.arguments["view"]), int(call.arguments["frame"]))] = _decode(images[0])
    return out


def _scene_input(views: Sequence[dict[str, Any]], info: dict[str, Any] | None, frames: dict[tuple[str, int], np.ndarray],
                 robot: str, task: str):
    from datafarm.agents.builtin.vision.scene import CameraInput, SceneInput

    videos = {c.get("name"): c.get("video") for c in (info or {}).get("cameras", []) if isinstance(c, dict)}
    cameras = []
    for v in views:
        name = v["view"]
        indices = frame_indices(int(v.get("frames", 1)))
        images = [frames[(name, i)] for i in indices if (name, i) in frames]
        if not images:
            raise _refuse(f"no frame of view {name} could be fetched")
        intrinsics = Intrinsics.model_validate(v["intrinsics"]) if v.get("intrinsics") else None
        extrinsics = Pose.model_validate(v["world_from_camera"]) if v.get("world_from_camera") else None
        cameras.append(CameraInput(name, videos.get(name) or v.get("video") or f"{name}.mp4", int(v["width"]), int(v["height"]), intrinsics,
                                   extrinsics, images, indices))
    bases = None
    board = None
    if info:
        if info.get("robot_base"):
            bases = [Pose.model_validate(b) for b in info["robot_base"]]
        board = info.get("board") or None
    return SceneInput(cameras, robot, bases, board, task)


def respond(request: ModelRequest, info: FunctionInfo) -> ModelResponse:
    """The builtin author's grounding stage (see the module docstring)."""
    listed = last_result(request, "list_views")
    offers_info = _has_tool(request, CLIP_INFO_TOOL)
    if listed is None:
        calls: list[tuple[str, dict[str, Any]]] = [("list_views", {})]
        if offers_info:
            calls.append((CLIP_INFO_TOOL, {}))
        return answer(request, "Grounding from the clip: first, what the views are and what clip.yaml knows.", *calls)
    views = _json(listed, "list_views")
    for v in views:
        if "error" in v:
            raise _refuse(f"view {v.get('view')}: {v['error']}")
    clip = _json(last_result(request, CLIP_INFO_TOOL), CLIP_INFO_TOOL) if offers_info else None
    frames = _fetched(request)
    wanted = [(v["view"], i) for v in views for i in frame_indices(int(v.get("frames", 1)))]
    missing = [key for key in wanted if key not in frames]
    if missing and last_result(request, "fetch_frame") is None:
        return answer(request, f"Fetching {len(wanted)} frames ({FRAMES_PER_VIEW} per view) to segment and measure.",
                      *[("fetch_frame", {"view": view, "frame": index}) for view, index in missing])
    refused = [r for r in tool_results(request) if r.name == "write_artifact" and r.is_error]
    if refused:
        raise _refuse(f"G was refused: {refused[-1].text}", kind="refused")

    from datafarm.agents.builtin.vision.scene import GroundingError, ground_scene

    robot = (prompt_field(request, "Robot") or "").strip()
    try:
        scene = ground_scene(_scene_input(views, clip, frames, robot, task_text(request)))
    except GroundingError as e:
        raise _refuse(f"builtin grounding: {e}") from None
    g = scene.grounding
    summary = "; ".join(f"{o['id']} ({o['kind']}{', ' + '/'.join(o['nouns']) if o['nouns'] else ''}) at "
                        f"({o['pose']['position'][0]:.3f}, {o['pose']['position'][1]:.3f})" for o in g["objects"])
    return answer(request, f"Found {len(g['objects'])} object(s): {summary}. Writing G.",
                  ("write_artifact", {"artifact": "G", "content": g}))

