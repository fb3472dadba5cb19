"""Renderers that turn sim episodes into multi-view video: the render pipeline (passes by replay,
control signals, one canvas for all cameras, chunked generation joined at the quietest frames, per
camera MP4s), the offline `composite` renderer and adapters for hosted video models (MiniMax,
Seedance), behind one registry.

Entry points: `render_episode` / `render_task_episode` (datafarm.renderers.pipeline)."""

from datafarm.renderers.pipeline import render_episode, render_task_episode
from datafarm.renderers.record import RENDER_RECORD, RenderRecord
from datafarm.renderers.registry import create_renderer, renderer_names

__all__ = ["RENDER_RECORD", "RenderRecord", "create_renderer", "render_episode", "render_task_episode", "renderer_names"]
