"""The studio: synthetic calibration clips of described scenes, with their ground truth kept apart.

- `SceneSpec` / `load_scene`: SCENE.yaml, what to render (robot, table, objects, cameras, a ChArUco
  board, lights, length, noise, seed).
- `render_clip(scene, clip_dir)`: renders the clip with SAPIEN (clip.yaml + one H.264 video per camera)
  and writes `truth.json` next to the clip folder.
- `score_grounding(G, truth)` / `score_files(task_dir, truth.json)`: how far a grounding is from the truth.
- `datafarm.studio.commands.app`: the `datafarm studio render|score` commands.
- `python -m datafarm.studio.examples`: regenerates the example clips under `examples/`.

Everything loads on first use (SAPIEN is heavy; the video encoder's worker process imports only PyAV).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datafarm.studio.render import RenderedClip, render_clip
    from datafarm.studio.scene import SceneSpec, load_scene
    from datafarm.studio.score import ScoreReport, score_files, score_grounding
    from datafarm.studio.truth import (
        StudioTruth,
        load_truth,
        scene_grounding,
        scene_truth,
    )

__all__ = [
    "RenderedClip",
    "SceneSpec",
    "ScoreReport",
    "StudioTruth",
    "load_scene",
    "load_truth",
    "render_clip",
    "scene_grounding",
    "scene_truth",
    "score_files",
    "score_grounding",
]

_LAZY = {"RenderedClip": "render", "render_clip": "render", "SceneSpec": "scene", "load_scene": "scene",
         "ScoreReport": "score", "score_files": "score", "score_grounding": "score", "StudioTruth": "truth",
         "load_truth": "truth", "scene_grounding": "truth", "scene_truth": "truth"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"datafarm.studio.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'datafarm.studio' has no attribute {name!r}")
