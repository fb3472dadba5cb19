"""Shared by the builtin grounding tests: running the author's grounding stage on a clip through the
real role loop, the `clip_info` author tool the builtin grounding uses (until the author's toolbox
offers it, the tests add it), and the task texts of the example scenes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import datafarm.agents.builtin  # noqa: F401  (registers the builtin roles)
from datafarm.agents import TaskAgents, author_task
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.io import load_artifact
from datafarm.artifacts.request import Request
from tests.agents.conftest import make_task_dir

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"

TASKS = {
    "nest_cups": "Pick up the red cup and place it inside the blue cup.",
    "weigh_apple": "Weigh the apple on the scale.",
    "beat_drum": "Beat the drum three times.",
    "use_drawer": "Open the drawer, put the red block inside and close it.",
}
"""A task text per example scene (the example's request.yaml wins when it has one)."""


def example_task(name: str) -> str:
    """The example's task text."""
    request = EXAMPLES / name / "request.yaml"
    if request.is_file():
        return str(yaml.safe_load(request.read_text())["task"])
    return TASKS[name]


@pytest.fixture
def with_clip_info() -> None:
    """Kept for the tests that request it: the author's toolbox has clip_info now."""


def ground_clip(tmp_path: Path, clip: Path, task: str, robot: str) -> tuple[Grounding, Any]:
    """Run the builtin author's grounding stage on `clip` through TaskAgents; (G, task folder)."""
    request = Request.model_validate({"task": task, "clip": str(clip), "episodes": 1, "mode": "sim2real", "robot": robot})
    tdir = make_task_dir(tmp_path / "task", request)
    TaskAgents.open(request, tdir).author().run(author_task("grounding"))
    return load_artifact(Grounding, tdir.grounding), tdir
