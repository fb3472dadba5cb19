"""The builtin author's render stage: a minimal render contract R from G and the clip's views.

Per camera of G that has a clip video: three reference frames (first, middle, last: the clip shows
the static scene); the target appearance from G's colours (table and objects); for `ood`, the
request's appearance axes as R's variations; the renderer named by a `Renderer: <name>` line of the
stage's instructions (default `composite`); chunks of 81 frames overlapping by 8; the clip's frame
rate; each camera's resolution scaled to at most 640 pixels wide (even sizes, for H.264).

As a role function (`respond`) it calls `list_views` and `read_artifact` G, then writes R.
"""

from __future__ import annotations

import json
import re
from typing import Any

from datafarm.agents.builtin.common import (
    BuiltinRefusal,
    answer,
    kickoff_text,
    last_result,
    mode_and_axes,
    refused_writes,
)
from datafarm.agents.builtin.linking import colour_name
from datafarm.agents.messages import ModelRequest, ModelResponse
from datafarm.agents.providers.function import FunctionInfo
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.render_contract import RenderContract
from datafarm.artifacts.request import RENDERERS

CHUNK_FRAMES = 81
"""Frames generated per chunk."""
OVERLAP_FRAMES = 8
"""Frames shared by adjacent chunks."""
MAX_WIDTH = 640
"""Widest rendered camera video, pixels."""


def _even(value: float) -> int:
    return max(2, round(value / 2) * 2)


def render_contract_for(grounding: Grounding, views: list[dict[str, Any]], mode: str, axes: dict[str, list[Any]],
                        renderer: str = "composite") -> RenderContract:
    """R for G and the clip's views (what `list_views` returns)."""
    by_view = {v.get("view"): v for v in views}
    cameras, fps = [], 20.0
    for cam in grounding.cameras:
        view = by_view.get(cam.name)
        if cam.video is None or view is None:
            continue
        frames = int(view.get("frames") or 1)
        fps = float(view.get("fps") or fps)
        cameras.append({"camera": cam.name, "frames": sorted({0, frames // 2, max(frames - 1, 0)})})
    if not cameras:
        raise BuiltinRefusal("no camera of G has a clip video to take reference frames from", stage="render",
                             route_to="grounding", kind="needs_input")
    first = grounding.cameras[0].intrinsics
    scale = min(1.0, MAX_WIDTH / first.width)
    table = grounding.table
    things = ", ".join(f"a {colour_name(o.colour)} {o.kind.replace('_', ' ')}" for o in grounding.objects)
    scene = (f"a {colour_name(table.colour)} table top with {things}, as in the calibration clip" if table is not None
             else f"the level's scene with {things}")
    data = {
        "mode": mode,
        "cameras": cameras,
        "appearance": {
            "scene": scene,
            "table_colour": list(table.colour) if table is not None else None,
            "objects": {o.id: {"colour": list(o.colour)} for o in grounding.objects},
        },
        "variations": axes if mode == "ood" else {},
        "renderer": {"name": renderer, "template_variables": {"scene_summary": things}},
        "chunk_frames": CHUNK_FRAMES,
        "overlap_frames": OVERLAP_FRAMES,
        "fps": fps,
        "resolution": [_even(first.width * scale), _even(first.height * scale)],
    }
    return RenderContract.model_validate(data)


def respond(request: ModelRequest, info: FunctionInfo) -> ModelResponse:
    """The builtin author's render stage: list the views, read G, write R."""
    refused = refused_writes(request, ("write_artifact",))
    if refused:
        raise BuiltinRefusal("the builtin render contract was refused:\n" + "\n".join(r.text for r in refused),
                             stage="render", kind="refused")
    views, g = last_result(request, "list_views"), last_result(request, "read_artifact")
    if views is None or g is None:
        return answer(request, "Listing the clip's views and reading G.", ("list_views", {}), ("read_artifact", {"artifact": "G"}))
    try:
        grounding = Grounding.model_validate(json.loads(g.text))
    except (ValueError, TypeError) as e:
        raise BuiltinRefusal(f"the render stage needs a valid grounding G: {g.text[:300]} ({e})", stage="render",
                             route_to="grounding", kind="needs_input") from None
    try:
        listed = json.loads(views.text)
    except ValueError:
        listed = []
    mode, axes = mode_and_axes(request)
    match = re.search(r"^Renderer: *([a-z0-9_-]+)", kickoff_text(request), re.MULTILINE)
    renderer = match.group(1) if match and match.group(1) in RENDERERS else "composite"
    contract = render_contract_for(grounding, listed if isinstance(listed, list) else [], mode, axes, renderer)
    return answer(request, f"R: {len(contract.cameras)} camera(s), renderer {renderer}.",
                  ("write_artifact", {"artifact": "R", "content": contract.model_dump(mode="json", by_alias=True)}))
