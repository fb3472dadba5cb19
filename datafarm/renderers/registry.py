"""Renderers by name: one interface (`datafarm.renderers.base.Renderer`), chosen by R's
`renderer.name`. The names are exactly the request schema's `Renderer` choices."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import Any

from datafarm.errors import InputError, Problem
from datafarm.renderers.base import Renderer

_RENDERERS: dict[str, str] = {
    "composite": "datafarm.renderers.composite.renderer:CompositeRenderer",
    "minimax": "datafarm.renderers.hosted.minimax:MiniMaxRenderer",
    "seedance": "datafarm.renderers.hosted.seedance:SeedanceRenderer",
}


def renderer_names() -> list[str]:
    """Registered renderer names."""
    return list(_RENDERERS)


def renderer_class(name: str) -> type[Renderer]:
    """The class registered as `name` (InputError naming the known ones)."""
    if name not in _RENDERERS:
        raise InputError([Problem(f"unknown renderer {name!r}", field="renderer.name",
                                  expected=", ".join(_RENDERERS))])
    module, _, attr = _RENDERERS[name].partition(":")
    return getattr(import_module(module), attr)


def create_renderer(name: str, parameters: Mapping[str, Any] | None = None,
                    env: Mapping[str, str] | None = None) -> Renderer:
    """A renderer `name` with R's parameters (validated); hosted ones read keys from `env`
    (default: the process environment)."""
    return renderer_class(name)(parameters or {}, env)


def register_renderer(name: str, target: str) -> None:
    """Register `module:Class` under `name` (a self-hosted model, for instance)."""
    _RENDERERS[name] = target
