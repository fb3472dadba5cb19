"""The whole intake check of a request: request.yaml, its clip folder, and how the two fit together."""

from __future__ import annotations

from pathlib import Path

from datafarm.artifacts.clip import ClipReport
from datafarm.artifacts.request import BUILTIN_ROBOT_ARMS, Request
from datafarm.errors import InputError, Problem
from datafarm.intake.clip import CLIP_FILE, validate_clip
from datafarm.intake.request import load_request
from datafarm.intake.yaml_source import read_yaml


def _fit_problems(path: Path, request: Request, report: ClipReport) -> list[Problem]:
    """Problems that only show when the request and its clip are read together."""
    problems: list[Problem] = []
    arms = BUILTIN_ROBOT_ARMS.get(request.robot)
    bases = report.spec.robot_base
    if arms is not None and bases is not None and len(bases) != arms:
        clip_yaml = request.clip / CLIP_FILE
        problems.append(
            Problem(
                f"robot_base lists {len(bases)} pose(s) but the request's robot {request.robot} has {arms} arm(s)",
                file=clip_yaml,
                line=read_yaml(clip_yaml).line_of(("robot_base",), key=True),
                field="robot_base",
                expected=f"{arms} base pose(s), one per arm",
                hint=f"fix robot_base in {clip_yaml}, or the robot in {path}",
            )
        )
    if request.clip_sha256 is not None and request.clip_sha256 != report.sha256:
        problems.append(
            Problem(
                "the clip folder changed since this request was recorded",
                file=path,
                field="clip_sha256",
                expected=f"the clip whose sha256 is {request.clip_sha256} (found {report.sha256})",
                hint="restore the recorded clip, or compile a new task from the changed one",
            )
        )
    return problems


def check_request(path: Path | str, allow_unsafe_sandbox: bool = False) -> tuple[Request, ClipReport]:
    """Load a request, validate its clip, and check that they fit (arm count, recorded clip hash).

    What `datafarm compile` and `datafarm validate` run first. Raises InputError naming every
    problem; returns the request (paths absolute) and the clip report (with the clip's sha256).
    """
    path = Path(path).absolute()
    request = load_request(path, allow_unsafe_sandbox=allow_unsafe_sandbox)
    report = validate_clip(request.clip)
    problems = _fit_problems(path, request, report)
    if problems:
        raise InputError(problems)
    return request, report
