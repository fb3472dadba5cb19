"""The request ρ: what a lab asks datafarm to make (DESIGN.md, "Words"), as read from `request.yaml`.

The sets of allowed names (modes, ood axes, robots, providers, renderers, sandboxes, executors) each
live in exactly one `Literal` below; later issues turn them into registries.

Path fields (`clip`, a URDF `robot`, `output`) are kept as written unless the model is validated with
a context holding `base_dir` (what `datafarm.intake.load_request` does): then relative paths are
resolved against it, and the clip folder and URDF file must exist. A context holding
`allow_unsafe_sandbox: False` refuses `sandbox: none`.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import Field, StringConstraints, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from datafarm.artifacts.base import Artifact

# --- the allowed names, one place each -------------------------------------------------------------

Mode = Literal["sim2real", "ood"]
"""Data modes: `sim2real` matches the real scene's appearance; `ood` varies it along `ood_axes`."""
MODES: tuple[str, ...] = get_args(Mode)

OodAxis = Literal["tablecloth", "light_colour", "light_intensity"]
"""Appearance axes an `ood` request may vary."""
OOD_AXES: tuple[str, ...] = get_args(OodAxis)

BuiltinRobot = Literal["piper", "piper-dual"]
"""Robots datafarm ships a description for (one AgileX PiPER arm, or two side by side)."""
BUILTIN_ROBOTS: tuple[str, ...] = get_args(BuiltinRobot)
BUILTIN_ROBOT_ARMS: dict[str, int] = {"piper": 1, "piper-dual": 2}
"""Number of arms of each builtin robot (a clip's `robot_base` lists one pose per arm)."""
if set(BUILTIN_ROBOT_ARMS) != set(BUILTIN_ROBOTS):
    raise RuntimeError("BUILTIN_ROBOT_ARMS must list every builtin robot")

Provider = Literal["builtin", "openai", "anthropic"]
"""LLM providers an agent role can use; `builtin` is offline and deterministic."""
PROVIDERS: tuple[str, ...] = get_args(Provider)

Renderer = Literal["composite", "minimax", "seedance"]
"""Renderers that turn sim render passes into photoreal video."""
RENDERERS: tuple[str, ...] = get_args(Renderer)

Sandbox = Literal["bwrap", "docker", "none"]
"""Sandboxes the expert controller runs in; `none` is unsafe and needs an explicit flag."""
SANDBOXES: tuple[str, ...] = get_args(Sandbox)

Executor = Literal["local", "ray"]
"""Where episodes run: a local process pool or a Ray cluster."""
EXECUTORS: tuple[str, ...] = get_args(Executor)

BUILTIN_MODEL = "builtin"
"""The model name of the builtin provider (also every role's default)."""

UNSAFE_SANDBOX_FLAG = "--unsafe-no-sandbox"
"""The CLI flag that allows `sandbox: none`."""

StrictPositiveInt = Annotated[int, Field(strict=True, ge=1)]
StrictNonNegativeInt = Annotated[int, Field(strict=True, ge=0)]
NonEmptyText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
OodValue = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)] | float


def _error(kind: str, message: str, expected: str, hint: str | None = None, **ctx: Any) -> PydanticCustomError:
    """A validation error that carries its own `expected` words (and hint) for the intake layer.

    `message` may use `{name}` placeholders filled from the keyword arguments."""
    ctx["expected_words"] = expected
    if hint:
        ctx["hint"] = hint
    return PydanticCustomError(kind, message, ctx)


def _resolve(value: Path, info: ValidationInfo) -> Path:
    """`value` made absolute against the context's `base_dir`, when the context has one."""
    base = (info.context or {}).get("base_dir")
    if base is None or value.is_absolute():
        return value
    return (Path(base) / value).resolve()


# --- the model ---------------------------------------------------------------------------------------


class RoleConfig(Artifact):
    """Which LLM provider and model one agent role uses."""

    provider: Provider = "builtin"
    """LLM provider: builtin (offline, deterministic), openai or anthropic."""
    model: NonEmptyText = Field(default=BUILTIN_MODEL, validate_default=True)
    """Model name as the provider spells it (e.g. `gpt-5`, `claude-sonnet-4-5`); `builtin` for the builtin provider."""

    @field_validator("model")
    @classmethod
    def _model_matches_provider(cls, model: str, info: ValidationInfo) -> str:
        provider = info.data.get("provider")
        if provider is not None and provider != "builtin" and model == BUILTIN_MODEL:
            raise _error(
                "model_required",
                "provider {provider} needs a model name",
                f"the {provider} model to use, as {provider} spells it",
                provider=provider,
            )
        return model


class Roles(Artifact):
    """Provider and model per agent role; a role left out uses builtin/builtin."""

    author: RoleConfig = Field(default_factory=RoleConfig)
    """Writes grounding, contract, sampler, expert controller and render contract."""
    judge_writer: RoleConfig = Field(default_factory=RoleConfig)
    """Writes the judge from the contract and grounding only (never sees the expert)."""
    reviewer: RoleConfig = Field(default_factory=RoleConfig)
    """Reviews rendered episodes against the real reference frames in its own context."""


class Budget(Artifact):
    """Spending limits for the LLM calls of one compilation."""

    max_usd: Annotated[float, Field(strict=True, ge=0)] = 50.0
    """Most US dollars all LLM calls together may cost (priced by the capability layer's table)."""
    max_tokens: StrictNonNegativeInt = 2_000_000
    """Most tokens (prompt plus completion) all LLM calls together may use."""


class Request(Artifact):
    """A request ρ = (clip, task, n, mode) plus how to run it, as written in `request.yaml`."""

    task: NonEmptyText
    """The task in one or more sentences, including its success condition (e.g. "nest the red cup in the blue cup; success: fully nested and stable")."""
    clip: Path
    """Folder of the calibration clip (clip.yaml plus one video per camera); relative to the request file."""
    episodes: StrictPositiveInt
    """Number of episodes n to admit into the dataset."""
    mode: Mode
    """Data mode: `sim2real` (match the real scene) or `ood` (vary appearance along `ood_axes`)."""
    ood_axes: dict[OodAxis, Annotated[list[OodValue], Field(min_length=1)]] | None = Field(
        default=None, validate_default=True
    )
    """For mode `ood` only (required there): appearance axis -> the values it may take, e.g. `tablecloth: [red_check, white_linen]`."""
    robot: NonEmptyText = "piper-dual"
    """`piper` (one arm), `piper-dual` (two arms side by side) or a path to a .urdf file (relative to the request file)."""
    roles: Roles = Field(default_factory=Roles)
    """LLM provider and model per agent role (author, judge_writer, reviewer)."""
    renderer: Renderer = "composite"
    """Renderer for the photoreal video: composite (offline, CPU), minimax or seedance (hosted, need API keys)."""
    sandbox: Sandbox = Field(default="bwrap", validate_default=True)
    """Sandbox for the expert controller: bwrap, docker, or none (unsafe: needs --unsafe-no-sandbox and admission refuses such episodes by default)."""
    executor: Executor = "local"
    """Where episodes run: local (process pool) or ray (a Ray cluster)."""
    seed: StrictNonNegativeInt = 0
    """Master seed from which dev and admission seeds are derived."""
    output: Path = Field(default=Path("runs"), validate_default=True)
    """Folder the task folder is created in; relative to the request file."""
    budget: Budget = Field(default_factory=Budget)
    """LLM spending limits."""
    clip_sha256: str | None = None
    """sha256 of the clip folder, written by `compile` into the task folder's copy; leave it out of a request you write."""

    @field_validator("clip", "output", mode="before")
    @classmethod
    def _path_not_blank(cls, value: Any) -> Any:
        # Path("") silently means "."; an empty entry is far more likely a mistake than a choice.
        if isinstance(value, str) and not value.strip():
            raise _error("path_empty", "the path is empty", "a folder path (use . for the request's own folder)")
        return value

    @field_validator("clip")
    @classmethod
    def _clip_folder(cls, clip: Path, info: ValidationInfo) -> Path:
        clip = _resolve(clip, info)
        if (info.context or {}).get("base_dir") is not None and not clip.is_dir():
            what = "is a file, not a folder" if clip.exists() else "does not exist"
            raise _error(
                "clip_not_found",
                "clip folder {path} " + what,
                "a folder holding clip.yaml and one video per camera",
                "relative paths are read from the request file's folder",
                path=str(clip),
            )
        return clip

    @field_validator("ood_axes")
    @classmethod
    def _axes_match_mode(cls, axes: dict[str, list[Any]] | None, info: ValidationInfo) -> dict[str, list[Any]] | None:
        mode = info.data.get("mode")
        if mode == "ood" and not axes:
            raise _error(
                "ood_axes_required",
                "mode is ood, so ood_axes must name at least one axis",
                f"a mapping from an axis ({', '.join(OOD_AXES)}) to a non-empty list of values",
                "e.g. `ood_axes: {tablecloth: [red_check, white_linen]}`, or use mode: sim2real",
            )
        if mode == "sim2real" and axes is not None:
            raise _error(
                "ood_axes_forbidden",
                "mode is sim2real, which keeps the real appearance, so ood_axes is not allowed",
                "no ood_axes key (it applies to mode: ood only)",
                "remove ood_axes, or set mode: ood",
            )
        return axes

    @field_validator("robot")
    @classmethod
    def _robot_known(cls, robot: str, info: ValidationInfo) -> str:
        if robot in BUILTIN_ROBOTS:
            return robot
        expected = f"one of: {', '.join(BUILTIN_ROBOTS)}, or a path to a .urdf file"
        if not robot.lower().endswith(".urdf"):
            close = difflib.get_close_matches(robot, BUILTIN_ROBOTS, n=1)
            hint = f"did you mean '{close[0]}'?" if close else None
            raise _error("robot_unknown", "unknown robot '{robot}'", expected, hint, robot=robot)
        path = _resolve(Path(robot), info)
        if (info.context or {}).get("base_dir") is not None and not path.is_file():
            raise _error(
                "urdf_not_found",
                "URDF file {path} does not exist",
                expected,
                "relative paths are read from the request file's folder",
                path=str(path),
            )
        return str(path)

    @field_validator("sandbox")
    @classmethod
    def _sandbox_allowed(cls, sandbox: str, info: ValidationInfo) -> str:
        if sandbox == "none" and (info.context or {}).get("allow_unsafe_sandbox") is False:
            raise _error(
                "sandbox_unsafe",
                "sandbox none runs the agent-written expert without isolation",
                f"one of: {', '.join(s for s in SANDBOXES if s != 'none')}",
                f"pass {UNSAFE_SANDBOX_FLAG} to allow it; admission refuses such episodes by default",
            )
        return sandbox

    @field_validator("output")
    @classmethod
    def _output_folder(cls, output: Path, info: ValidationInfo) -> Path:
        return _resolve(output, info)

    @property
    def robot_urdf(self) -> Path | None:
        """The robot's URDF file when `robot` names one, else None (a builtin robot)."""
        return None if self.robot in BUILTIN_ROBOTS else Path(self.robot)
