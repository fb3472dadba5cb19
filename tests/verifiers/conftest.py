"""Fixtures shared by the verifier tests: the demo calibration clip (drawn once per session) and G for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from datafarm.artifacts.grounding import Grounding
from datafarm.renderers.demo import example_grounding, write_demo_clip


@pytest.fixture(scope="session")
def demo_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo clip at 320x240 (three cameras, 24 frames)."""
    return write_demo_clip(tmp_path_factory.mktemp("demo_clip"))


@pytest.fixture(scope="session")
def grounding(demo_clip: Path) -> Grounding:
    """G for the demo clip."""
    return example_grounding(demo_clip)
