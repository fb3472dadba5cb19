"""The author's tools: look at the clip (list_views, fetch_frame, measurements), read and write its
own artifacts G, T, S, C, R, write the expert controller, and ask for a rollout on a dev seed, of
which it learns only the judge's verdict summary.

Nothing here reaches J (`judge/`), the batch config, the ledger or any transcript: the author's
path guard refuses them whatever path a call spells.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import yaml
from pydantic import Field

from datafarm.agents.access import RoleAccess
from datafarm.agents.tools.base import NoArgs, Tool, ToolArgs, ToolContext, ToolError, ToolOutput
from datafarm.agents.tools.frames import CLIP_ROOT, ClipViews, frame_tools
from datafarm.agents.tools.writing import ExtraCheck, guarded_text, validate_and_save, write_output
from datafarm.artifacts import registry
from datafarm.artifacts.expert import ExpertManifest
from datafarm.artifacts.io import load_artifact
from datafarm.artifacts.judge import VerdictSummary
from datafarm.hashing import sha256_bytes, sha256_file
from datafarm.taskdir import TaskDir

AUTHOR_ARTIFACTS: dict[str, str] = {
    "G": "grounding",
    "T": "contract",
    "S": "sampler",
    "C": "expert",
    "R": "render-contract",
}
"""The artifacts the author writes: DESIGN.md letter -> schema name (datafarm.artifacts.registry)."""

ArtifactLetter = Literal["G", "T", "S", "C", "R"]

RolloutFunction = Callable[[int], VerdictSummary]
"""`rollout(dev_seed) -> verdict summary`: runs the current expert on a dev seed (the harness's job)."""


class ArtifactArg(ToolArgs):
    """Which of the author's artifacts."""

    artifact: ArtifactLetter
    """G grounding, T task contract, S sampler, C expert manifest, R render contract."""


class WriteArtifactArgs(ArtifactArg):
    """An artifact to write."""

    content: dict[str, Any]
    """The complete artifact as a JSON object that validates against its JSON Schema (given in the instructions)."""


class ControllerArgs(ToolArgs):
    """The expert controller's source."""

    code: str = Field(min_length=1)
    """Complete Python source of expert/controller.py (it runs in the sandbox against K's harness API)."""


class RolloutArgs(ToolArgs):
    """A dev-seed rollout request."""

    dev_seed: int = Field(ge=0)
    """One of the task's dev seeds."""


def clip_info_tool(access: RoleAccess) -> Tool:
    """The author tool `clip_info`: what clip.yaml says beyond the per-view calibration list_views gives
    (the robot's base poses, each camera's video), the calibration board the clip describes (clip.yaml's
    `board`, or a board.yaml next to it), and the clip's files."""
    views = ClipViews(access)

    def clip_info(_args: NoArgs, _ctx: ToolContext) -> dict[str, Any]:
        spec = views.spec
        root = access.external_file(CLIP_ROOT, "clip.yaml").parent
        board = getattr(spec, "board", None)
        if board is None and (root / "board.yaml").is_file():
            board = yaml.safe_load(access.external_file(CLIP_ROOT, "board.yaml").read_text())
        elif board is not None and hasattr(board, "model_dump"):
            board = board.model_dump(mode="json")
        return {
            "fps": spec.fps,
            "cameras": [{"name": c.name, "video": c.video} for c in spec.cameras],
            "robot_base": [p.model_dump(mode="json") for p in spec.robot_base] if spec.robot_base else None,
            "board": board,
            "notes": spec.notes,
            "files": sorted(p.name for p in root.iterdir() if p.is_file()),
        }

    return Tool("clip_info", "What clip.yaml says about the rig beyond each view's calibration: the robot's base "
                "poses, each camera's video, the calibration board (pattern and pose) the clip shows, notes, files.",
                NoArgs, clip_info)


def author_tools(
    access: RoleAccess,
    task_dir: TaskDir,
    *,
    k_version: str,
    rollout: RolloutFunction | None = None,
    dev_seeds: Sequence[int] | None = None,
    checks: dict[str, Sequence[ExtraCheck]] | None = None,
) -> list[Tool]:
    """The author's tools for one task folder (`rollout` offered only when given)."""
    clip = ClipViews(access)
    extra = dict(checks or {})

    def list_views(_args: NoArgs, _ctx: ToolContext) -> list:
        return clip.describe()

    def read_artifact(args: ArtifactArg, _ctx: ToolContext) -> str:
        name = AUTHOR_ARTIFACTS[args.artifact]
        return guarded_text(access, task_dir.artifact(name), f"{name} has not been written yet")

    def expert_checks(manifest: Any) -> list[str]:
        problems = []
        code = task_dir.expert_dir / manifest.entry
        if not access.readable(code).is_file():
            problems.append(f"entry: expert/{manifest.entry} does not exist; write it with write_controller first")
        elif sha256_file(code) != manifest.sha256:
            problems.append(f"sha256: does not match expert/{manifest.entry} (its sha256 is {sha256_file(code)})")
        if manifest.k_version != k_version:
            problems.append(f"k_version: must be {k_version!r}, the capability version this task runs under")
        recorded = []
        manifest_path = task_dir.artifact("expert")
        if access.readable(manifest_path).is_file():
            recorded = load_artifact(ExpertManifest, manifest_path).dev_runs
        if manifest.dev_runs != recorded:
            problems.append(
                "dev_runs: the harness records dev runs; copy them unchanged from the current manifest (read_artifact C)"
            )
        return problems

    def write_artifact(args: WriteArtifactArgs, ctx: ToolContext) -> ToolOutput:
        name = AUTHOR_ARTIFACTS[args.artifact]
        if name not in ctx.task.writes:
            raise ToolError(
                f"{args.artifact} ({name}) is not written in this stage ({ctx.task.stage.value}); "
                f"this stage writes: {', '.join(ctx.task.writes)}"
            )
        checks = list(extra.get(name, ()))
        if name == "expert":
            checks.insert(0, expert_checks)
        outcome = validate_and_save(
            name, registry.resolve(name), args.content, task_dir.artifact(name), access, tool="write_artifact", checks=checks
        )
        return write_output(outcome, ctx)

    def write_controller(args: ControllerArgs, _ctx: ToolContext) -> str:
        target = access.writable(task_dir.expert_dir / "controller.py")
        target.parent.mkdir(parents=True, exist_ok=True)
        data = args.code.encode("utf-8")
        target.write_bytes(data)
        return f"expert/controller.py saved (sha256 {sha256_bytes(data)}); put this sha256 in the manifest C"

    def request_rollout(args: RolloutArgs, _ctx: ToolContext) -> dict:
        if dev_seeds is not None and args.dev_seed not in dev_seeds:
            raise ToolError(f"{args.dev_seed} is not a dev seed; the dev seeds are: {', '.join(map(str, dev_seeds))}")
        assert rollout is not None
        verdict = VerdictSummary.model_validate(rollout(args.dev_seed))
        # Only the summary crosses the boundary: pass/fail, how far it got, why.
        return verdict.model_dump(mode="json")

    tools = [
        Tool(
            "list_views",
            "List the calibration clip's camera views: size, frame count, frame rate and any known calibration.",
            NoArgs,
            list_views,
        ),
        clip_info_tool(access),
        *frame_tools(
            {
                "clip": (
                    clip.frame,
                    "fetch_frame",
                    "Fetch one frame of a calibration clip view as an image (PNG) to look at.",
                )
            }
        ),
        Tool(
            "read_artifact",
            "Read one of your own artifacts as written so far (G grounding, T contract, S sampler, C expert manifest, R render contract).",
            ArtifactArg,
            read_artifact,
        ),
        Tool(
            "write_artifact",
            "Write one of your artifacts (G, T, S, C, R) as a complete JSON object. It is validated against its schema; "
            "if invalid, nothing is saved and you get every problem back to fix.",
            WriteArtifactArgs,
            write_artifact,
            writes=True,
        ),
        Tool(
            "write_controller",
            "Write the expert controller's Python source to expert/controller.py; returns its sha256 for manifest C.",
            ControllerArgs,
            write_controller,
        ),
    ]
    if rollout is not None:
        seeds = f" Dev seeds: {', '.join(map(str, dev_seeds))}." if dev_seeds is not None else ""
        tools.append(
            Tool(
                "request_rollout",
                "Run the current expert controller on one dev seed in the sandbox and get the judge's verdict: "
                "passed, the stage reached and the reason." + seeds,
                RolloutArgs,
                request_rollout,
            )
        )
    return tools
