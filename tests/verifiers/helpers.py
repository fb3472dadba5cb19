"""Shared pieces of the verifier tests: a demo task folder (the demo clip, its G, R, a nest-cups T and
one rendered scripted episode) and the task contract for it."""

from __future__ import annotations

from pathlib import Path

from datafarm.artifacts.contract import TaskContract
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.io import save_artifact
from datafarm.artifacts.render_contract import RenderContract
from datafarm.renderers.demo import write_demo_episode
from datafarm.taskdir import TaskDir
from tests.renderers.helpers import TASK

EPISODE = "ep_000000"
"""The demo episode's id."""
STEPS = 40
"""Its control steps (three chunks of 16 frames overlapping by 4: seams near frames 12 and 24)."""


def nest_contract() -> TaskContract:
    """T for the demo: put the red cup into the blue cup."""
    return TaskContract.model_validate({
        "task": TASK, "family": "nest", "roles": {"item": "red_cup", "container": "blue_cup"},
        "stages": [{"name": "nest", "description": "put the red cup into the blue cup",
                    "done_when": {"predicate": "inside", "object": "red_cup", "container": "blue_cup"}}],
        "success": {"description": "the red cup rests inside the blue cup",
                    "condition": {"predicate": "inside", "object": "red_cup", "container": "blue_cup"}, "hold_s": 0.5},
        "time_limit_s": 30.0, "control_hz": 20.0,
    })


def write_task(root: Path, clip: Path, grounding: Grounding, contract: RenderContract) -> TaskDir:
    """A task folder with request, capability lock, G, T and R (no episodes)."""
    import datafarm
    from datafarm.capability.bundle import load as load_bundle

    task = TaskDir(root)
    root.mkdir(parents=True, exist_ok=True)
    axes = "".join(f"\n  {axis}: [{', '.join(map(str, values))}]" for axis, values in contract.variations.items())
    task.request.write_text(f"task: {TASK}\nclip: {clip}\nepisodes: 1\nmode: {contract.mode}\n"
                            + (f"ood_axes:{axes}\n" if axes else ""), encoding="utf-8")
    task.capability_lock.write_text(load_bundle("k1").lock(datafarm.__version__).model_dump_json(), encoding="utf-8")
    save_artifact(grounding, task.grounding)
    save_artifact(nest_contract(), task.contract)
    save_artifact(contract, task.render_contract)
    return task


def add_rendered_episode(task: TaskDir, grounding: Grounding, steps: int = STEPS, episode_id: str = EPISODE) -> Path:
    """Record the scripted demo episode into the task folder and render it with the task's R."""
    from datafarm.renderers import render_task_episode

    write_demo_episode(task.episode(episode_id), grounding, steps=steps, episode_id=episode_id)
    render_task_episode(task.root, episode_id)
    return task.episode(episode_id)
