"""The reviewer's tools: rendered frames of the episode under review, the real reference frames of
the clip, a summary of the sim state, measurements on either, and writing the verdict with its
evidence. The reviewer's path guard opens only episodes' `obs/` videos, the clip, and its own
`review.json`: no transcript (the author's conversation), no judge, no expert."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datafarm.agents.access import RoleAccess
from datafarm.agents.images import read_frame
from datafarm.agents.tools.base import NoArgs, Tool, ToolArgs, ToolContext, ToolError, ToolOutput
from datafarm.agents.tools.frames import ClipViews, frame_tools
from datafarm.agents.tools.writing import ExtraCheck, validate_and_save, write_output
from datafarm.artifacts.admission import ReviewVerdict

REVIEW_FILE = "review.json"
"""The verdict's file name inside the reviewed episode's folder."""

INJECTED_FIELDS = ("provider", "model")
"""ReviewVerdict fields the tool fills from the role's configuration (the model does not write them)."""


@dataclass(frozen=True)
class ReviewMaterial:
    """What one review may look at."""

    episode_dir: Path
    """The episode's folder in the task folder (`episodes/<id>` or `attempts/<id>`); its videos are `obs/<camera>.mp4`."""
    state_summary: str
    """A plain-text summary of the sim state (objects' final poses, contact events, judge stages reached)."""
    reference_frames: Mapping[str, Sequence[int]] | None = None
    """Per camera, the clip frames R names as references; None allows every clip frame."""


def verdict_schema() -> dict[str, Any]:
    """ReviewVerdict's JSON Schema without the fields the tool fills in."""
    schema = copy.deepcopy(ReviewVerdict.model_json_schema())
    for name in INJECTED_FIELDS:
        schema["properties"].pop(name, None)
        if name in schema.get("required", []):
            schema["required"].remove(name)
    return schema


class WriteVerdictArgs(ToolArgs):
    """The verdict to write."""

    content: dict[str, Any]
    """The verdict as a JSON object that validates against its JSON Schema (given in the instructions);
    provider and model are filled in for you."""


def reviewer_tools(access: RoleAccess, material: ReviewMaterial, *, checks: Sequence[ExtraCheck] = ()) -> list[Tool]:
    """The reviewer's tools for one episode; AccessDenied when the episode folder is not one the reviewer may review."""
    clip = ClipViews(access)
    episode_dir = Path(material.episode_dir)
    if not episode_dir.is_absolute():
        episode_dir = Path(access.task_root) / episode_dir
    access.writable(episode_dir / REVIEW_FILE)  # an episode outside episodes/ or attempts/ is the caller's mistake: say so now

    def rendered(view: str, index: int):
        return read_frame(access.readable(episode_dir / "obs" / f"{view}.mp4"), index)

    def reference(view: str, index: int):
        allowed = None if material.reference_frames is None else material.reference_frames.get(view)
        if material.reference_frames is not None and (allowed is None or index not in allowed):
            listed = ", ".join(map(str, allowed)) if allowed else "none"
            raise ToolError(f"clip frame {index} is not a reference frame of {view}; its reference frames are: {listed}")
        return clip.frame(view, index)

    def state(_args: NoArgs, _ctx: ToolContext) -> str:
        return material.state_summary

    def write_verdict(args: WriteVerdictArgs, ctx: ToolContext) -> ToolOutput:
        if "review" not in ctx.task.writes:
            raise ToolError(f"this stage ({ctx.task.stage.value}) does not write a review verdict")
        outcome = validate_and_save(
            "review",
            ReviewVerdict,
            args.content,
            episode_dir / REVIEW_FILE,
            access,
            tool="write_verdict",
            checks=checks,
            inject={"provider": ctx.provider, "model": ctx.model},
        )
        return write_output(outcome, ctx)

    refs = ""
    if material.reference_frames is not None:
        refs = (
            " Reference frames: "
            + "; ".join(f"{cam}: {', '.join(map(str, fr))}" for cam, fr in material.reference_frames.items())
            + "."
        )
    return [
        *frame_tools(
            {
                "rendered": (
                    rendered,
                    "fetch_rendered_frame",
                    "Fetch one frame of the episode's rendered video of a camera, as an image.",
                ),
                "reference": (
                    reference,
                    "fetch_reference_frame",
                    "Fetch one real reference frame of a camera from the calibration clip, as an image." + refs,
                ),
            }
        ),
        Tool(
            "sim_state_summary",
            "Read the summary of the simulated episode: final object poses, contact events, stages reached.",
            NoArgs,
            state,
        ),
        Tool(
            "write_verdict",
            "Write your verdict: accepted or not, the claims you checked each with evidence (camera, frames, note), and for a "
            "rejection the stage responsible (render or expert). Validated against its schema; if invalid you get the problems back.",
            WriteVerdictArgs,
            write_verdict,
            writes=True,
        ),
    ]
